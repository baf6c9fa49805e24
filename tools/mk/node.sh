#!/usr/bin/env bash
# Makes sure node and npm are installed (the end-to-end suite drives the
# official SDKs with them; the price catalog's generator reads its database
# with them), installing them with the system's package manager when they
# are missing, then installs the npm packages pinned in
# tools/e2e/sdk/package-lock.json and tools/pricecatalog/package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null; then
    $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
  elif command -v dnf >/dev/null; then
    $sudo dnf install -y nodejs npm
  elif command -v brew >/dev/null; then
    brew install node
  else
    echo "node and npm are missing: install Node.js 20 or later (https://nodejs.org)" >&2
    exit 1
  fi
fi

major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "node $(node --version) is too old for the SDKs: Node.js 20 or later (the pinned SDKs' engines)" >&2; exit 1; }

for dir in tools/e2e/sdk tools/pricecatalog; do
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
    touch "$dir/node_modules"
  fi
done
