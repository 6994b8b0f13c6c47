#!/usr/bin/env bash
# The Debian packages `npm test` drives, installed when missing (as root), so that every test runs on a fresh
# machine: chromium for the browser checks (tests/http/browser-cors.test.ts, tests/openapi/docs-browser.test.ts,
# tests/client/browser.test.ts), curl for the pasted links (tests/http/paste-links.test.ts), httpie for its
# recipe (docs/how-to/walk-a-collection.md), pgbouncer for tests/db/pgbouncer.test.ts (the read-replica test uses PostgreSQL's
# own pg_basebackup), haproxy for tests/deploy/haproxy-rolling-restart.test.ts and tests/deploy/compose.test.ts,
# util-linux's script(1) for a terminal in tests/http/request-log.test.ts, redis-server for the bench's Fastify
# peer (tests/bench/peer-fastify.test.ts), psql and openssl for the walkthrough's lines (tests/docs/pagila.test.ts),
# pg_auto_failover for the newest PostgreSQL installed the Debian way (postgresql-15-auto-failover on bookworm, with
# pg_autoctl) for tests/db/ha-failover.test.ts. Deno and Bun come from npm.
# Only what is missing is installed, so a rerun starts at once; not as root, it names what to install.
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v curl >/dev/null || missing+=(curl)
command -v http >/dev/null || missing+=(httpie)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
[ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v script >/dev/null || missing+=(util-linux)
command -v redis-server >/dev/null || missing+=(redis-server)
pg_version=$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/initdb' 2>/dev/null | cut -d/ -f5 | sort -n | tail -1)
if [ -n "$pg_version" ] && { [ ! -e "/usr/lib/postgresql/$pg_version/lib/pgautofailover.so" ] || ! command -v pg_autoctl >/dev/null; }; then
  missing+=("postgresql-$pg_version-auto-failover")
fi
command -v psql >/dev/null || missing+=(postgresql-client)
command -v openssl >/dev/null || missing+=(openssl)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "npm test needs Debian's ${missing[*]}: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "Installing the Debian packages the tests drive: ${missing[*]}"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
