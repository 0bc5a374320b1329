#!/usr/bin/env bash
# Starts PostgreSQL and NATS (JetStream) on this machine when they do not answer.
# Debian/Ubuntu packages: postgresql and nats-server. Elsewhere: docker compose -f infra/docker-compose.yml up -d postgres nats
set -euo pipefail

answers() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

if ! answers 127.0.0.1 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
  else
    echo "PostgreSQL is not running and pg_ctlcluster is missing: apt-get install postgresql, or docker compose -f infra/docker-compose.yml up -d postgres nats" >&2
    exit 1
  fi
fi

if ! answers 127.0.0.1 4222; then
  if [ -x /usr/sbin/nats-server ]; then
    echo "starting NATS with JetStream"
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server
  else
    echo "NATS is not running and nats-server is missing: apt-get install nats-server, or docker compose -f infra/docker-compose.yml up -d postgres nats" >&2
    exit 1
  fi
fi

for i in $(seq 1 60); do
  if answers 127.0.0.1 5432 && answers 127.0.0.1 4222; then
    echo "PostgreSQL and NATS answer"
    exit 0
  fi
  sleep 0.5
done
echo "PostgreSQL or NATS still not answering after 30 s" >&2
exit 1
