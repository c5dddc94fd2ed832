#!/usr/bin/env bash
# Finds a nats-server >= 2.10 or fetches one from Debian's archive into .tools/
# (project-local, git-ignored) without touching the machine's apt sources.
# Prints the binary's path on stdout. Order: $NATS_SERVER_BIN, .tools/, PATH, fetch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
local_bin="$tools/nats-server/usr/sbin/nats-server"

recent_enough() { # 2.10 or newer
  local v
  v=$("$1" --version 2>/dev/null | sed -n 's/.*v\([0-9]*\)\.\([0-9]*\).*/\1 \2/p') || return 1
  [ -n "$v" ] || return 1
  set -- $v
  [ "$1" -gt 2 ] || { [ "$1" -eq 2 ] && [ "$2" -ge 10 ]; }
}

for candidate in "${NATS_SERVER_BIN:-}" "$local_bin" "$(command -v nats-server || true)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && recent_enough "$candidate"; then
    echo "$candidate"; exit 0
  fi
done

# Fetch: a private apt state so the machine's sources and lists stay as they are.
echo "mq-gateway setup: no nats-server >= 2.10 found (NATS_SERVER_BIN, .tools/, PATH): fetching Debian's package into $tools/nats-server" >&2
apt_dir="$tools/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$tools/download"
for suite in sid trixie; do
  cat > "$apt_dir/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main
SRC
  opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
        -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
  if apt-get "${opts[@]}" update >&2 && (cd "$tools/download" && rm -f nats-server_*.deb && apt-get "${opts[@]}" download nats-server >&2); then
    deb=$(ls "$tools/download"/nats-server_*.deb | head -1)
    rm -rf "$tools/nats-server"
    dpkg -x "$deb" "$tools/nats-server"
    if [ -x "$local_bin" ] && recent_enough "$local_bin"; then
      echo "mq-gateway setup: nats-server $("$local_bin" --version 2>/dev/null | sed -n 's/.*v\([0-9.]*\).*/\1/p') ready in $tools/nats-server" >&2
      echo "$local_bin"; exit 0
    fi
  fi
  echo "nats-server from $suite did not work, trying the next suite" >&2
done
echo "could not find or fetch nats-server >= 2.10; set NATS_SERVER_BIN" >&2
exit 1
