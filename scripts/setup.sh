#!/usr/bin/env bash
# Makes a fresh clone ready: npm packages, nats-server (scripts/nats-server.sh), and with
# --test the Debian clients the tests drive (mosquitto-clients, python3-qpid-proton,
# python3-paho-mqtt, chromium, systemd for systemd-analyze).
# Idempotent and quiet when everything is already there; a line per step while it installs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# What takes long (the first run of a clone: a minute or two) says so, a line per step;
# a run with everything there prints nothing.
say() { echo "mq-gateway setup: $*" >&2; }

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing the npm packages (npm ci; the first run of a clone, about a minute)"
  # npm on the supported Node (its first `node` on PATH): on the machine's older one it
  # warns EBADENGINE for every package that asks for 22 or newer.
  node_bin=$(bash scripts/node.sh)
  PATH="$(dirname "$node_bin"):$PATH" npm ci --no-audit --no-fund >&2
  say "npm packages installed"
fi
bash scripts/nats-server.sh >/dev/null

if [ "${1:-}" = "--test" ]; then
  missing=()
  command -v mosquitto_pub >/dev/null || missing+=(mosquitto-clients)
  command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || missing+=(mosquitto)
  /usr/bin/python3 -c "import proton" 2>/dev/null || missing+=(python3-qpid-proton)
  /usr/bin/python3 -c "import paho.mqtt.client" 2>/dev/null || missing+=(python3-paho-mqtt)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v systemd-analyze >/dev/null || missing+=(systemd)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
      say "installing test clients with apt-get: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    else
      echo "tests need: ${missing[*]} (apt-get install them, or run as root)" >&2
      exit 1
    fi
  fi
fi
