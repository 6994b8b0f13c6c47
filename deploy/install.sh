#!/bin/sh
# The image's build, step for step: the Dockerfile runs this script, and CI runs it on a fresh checkout
# (tests/deploy/image.test.ts). It copies what the service runs into DEST and installs the production
# dependencies only; OWNER, when given, owns DEST/.data (the embedded PostgreSQL's data, when DATABASE_URL
# is unset), the one place the service writes.
set -eu
usage='usage: deploy/install.sh DEST [OWNER]'
dest="${1:?$usage}"
owner="${2:-}"
src="$(cd "$(dirname "$0")/.." && pwd)"

mkdir -p "$dest"
# The entry point, the product (lib, db and its migrations, the demo), the lock file and the dependency patches.
cp -R "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$src/server.ts" "$src/patches" "$src/db" "$src/demo" "$src/lib" "$dest/"
cd "$dest"
# Exactly the lock file's versions; no devDependencies; postinstall applies patches/ (patch-package).
npm ci --omit=dev --no-audit --no-fund
mkdir -p .data
if [ -n "$owner" ]; then chown "$owner" .data; fi
