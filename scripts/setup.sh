#!/usr/bin/env bash
# Makes a fresh clone ready: npm packages, nats-server (scripts/nats-server.sh), and with
# --test the Debian clients the tests drive (mosquitto-clients, python3-qpid-proton,
# python3-paho-mqtt, chromium, systemd for systemd-analyze).
# Idempotent and quiet when everything is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2
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
      echo "installing test clients: ${missing[*]}" >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    else
      echo "tests need: ${missing[*]} (apt-get install them, or run as root)" >&2
      exit 1
    fi
  fi
fi
