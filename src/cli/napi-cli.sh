#!/usr/bin/env bash
# Runs the pinned @napi-rs/cli, installed on first use into target/napi-cli (build output, not in
# git). It is kept out of package.json on purpose: the registry lacks some platform packages of its
# dependencies (@napi-rs/lzma, @napi-rs/tar, @napi-rs/wasm-tools) at their latest versions, so npm
# records an incomplete lock that `npm ci` then refuses. A private prefix without a lock avoids that.
set -euo pipefail
cd "$(dirname "$0")/../.."
NAPI_CLI_VERSION=3.10.12
dir=target/napi-cli
have="$(node -p "try { require('./$dir/node_modules/@napi-rs/cli/package.json').version } catch { '' }")"
if [ "$have" != "$NAPI_CLI_VERSION" ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    "@napi-rs/cli@$NAPI_CLI_VERSION" >&2
fi
exec "$dir/node_modules/.bin/napi" "$@"
