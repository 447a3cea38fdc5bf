#!/usr/bin/env bash
# One-time (idempotent) set-up on a Debian 12 machine with Node 20 and npm: system packages,
# npm dependencies, and the standard asset files. Called by `npm start` and `npm test`; safe to run
# again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Build tools for better-sqlite3 (compiled here: its prebuilt-binary host is unreachable offline),
# and the offline voices the standard voice samples are spoken with.
APT_PACKAGES=(build-essential python3 flite espeak-ng)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# node-gyp must find Node's headers locally instead of downloading them.
node_prefix="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
if [ -f "$node_prefix/include/node/node_api.h" ]; then
  export npm_config_nodedir="$node_prefix"
fi
export npm_config_build_from_source=better-sqlite3   # compile it; do not try its download host
export ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip

# npm ci only when package-lock.json changed since the last install (or nothing is installed).
stamp=node_modules/.setup-lock-sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)-$(node --version)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error --foreground-scripts >/tmp/avatar-npm-ci.log 2>&1 || {
    tail -40 /tmp/avatar-npm-ci.log
    exit 1
  }
  echo "$want" >"$stamp"
fi

node --import tsx src/cli/setup-assets.ts
