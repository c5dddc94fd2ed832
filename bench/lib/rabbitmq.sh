#!/usr/bin/env bash
# Finds Debian's rabbitmq-server (the AMQP rows' reference, RabbitMQ 3.10 with its AMQP 1.0
# plugin) or installs it from the machine's apt sources when run as root. Prints the path
# of the rabbitmq-server script on stdout. The package's own service is never started:
# the bench runs the broker itself, in the foreground with its own data dir.
# Only the bench needs this; `npm test` does not.
set -euo pipefail
for dir in "${RABBITMQ_SBIN:-}" /usr/lib/rabbitmq/bin /usr/sbin; do
  if [ -n "$dir" ] && [ -x "$dir/rabbitmq-server" ]; then echo "$dir/rabbitmq-server"; exit 0; fi
done
if [ "$(id -u)" != 0 ]; then
  echo "rabbitmq-server is not installed and this is not root: apt-get install rabbitmq-server" >&2
  exit 1
fi
# policy-rc.d 101: the package's post-install does not start a system broker.
policy=/usr/sbin/policy-rc.d
made_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; made_policy=1
fi
trap '[ -n "$made_policy" ] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends rabbitmq-server >&2; then
  apt-get update >&2 && apt-get install -y --no-install-recommends rabbitmq-server >&2
fi
for dir in /usr/lib/rabbitmq/bin /usr/sbin; do
  if [ -x "$dir/rabbitmq-server" ]; then echo "$dir/rabbitmq-server"; exit 0; fi
done
echo "rabbitmq-server installed but not found" >&2
exit 1
