# Sourced by setup.sh (bash): makes sure a Rust toolchain new enough for the native addon is on
# PATH, installing one where it can. First match wins:
#   1. rustc and cargo already on PATH (with ~/.cargo/bin put first) at RUST_MIN_VERSION or later;
#   2. rustup present (its default toolchain too old): `rustup toolchain install stable` + default;
#   3. the distribution's rustc and cargo, when apt's candidate is new enough (Debian 12 has 1.63,
#      Debian 13 1.85: neither is, so this is for later releases);
#   4. the official rustup installer (https://sh.rustup.rs: stable, minimal profile, into ~/.cargo).
# When none works (no network, no root), it stops setup with a message naming what to install.
# Idempotent: with a good toolchain it only checks versions. Leaves PATH with ~/.cargo/bin first.

# The workspace's dependencies declare rust-version up to 1.92 (gstreamer-rs 0.25 and glib 0.22;
# whisper-rs-sys 0.15 and napi 3 need 1.88): `cargo metadata` lists them. Raise this with them.
RUST_MIN_VERSION=1.92
RUSTUP_INSTALLER_URL=https://sh.rustup.rs

# version_ge A B: A >= B, both dotted versions.
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]; }
# The running rustc's version (1.95.0), or nothing.
rust_version() { { rustc --version 2>/dev/null || true; } | awk '{print $2}' | sed 's/-.*//'; }
rust_ok() {
  command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 && version_ge "$(rust_version)" "$RUST_MIN_VERSION"
}
cargo_home_on_path() {
  case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) [ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH" ;; esac
  return 0
}

setup_rust() {
  cargo_home_on_path
  rust_ok && return 0
  local found sudo=""
  found="$(rust_version)"
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: the media addon needs Rust $RUST_MIN_VERSION or later (found: ${found:-none}); installing it"

  # 2. A rustup whose default toolchain is old: bring in the current stable and make it the default.
  if command -v rustup >/dev/null 2>&1; then
    echo "setup: rustup toolchain install stable (minimal profile), as the default toolchain"
    rustup toolchain install stable --profile minimal >/tmp/avatar-rustup.log 2>&1 && rustup default stable >>/tmp/avatar-rustup.log 2>&1 || true
    rust_ok && return 0
  fi

  # 3. The distribution's packages, when apt offers a new enough rustc.
  if command -v apt-get >/dev/null 2>&1 && command -v apt-cache >/dev/null 2>&1; then
    $sudo apt-get update -qq >/dev/null 2>&1 || true
    local candidate upstream
    candidate="$({ apt-cache policy rustc 2>/dev/null || true; } | awk '/Candidate:/ {print $2}')"
    upstream="$(printf '%s' "${candidate#*:}" | sed 's/[+~-].*//')" # 1:1.63.0+dfsg1-2 -> 1.63.0
    if [ -n "$upstream" ] && [ "$candidate" != "(none)" ] && version_ge "$upstream" "$RUST_MIN_VERSION"; then
      echo "setup: installing the distribution's rustc and cargo ($candidate)"
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends rustc cargo >/dev/null 2>&1 || true
      rust_ok && return 0
    else
      echo "setup: the distribution's rustc is ${upstream:-not available}, older than $RUST_MIN_VERSION: using rustup"
    fi
  fi

  # 4. rustup's official installer, for this user, into ~/.cargo and ~/.rustup. It also adds
  # ~/.cargo/bin to the shell profile for later shells; this one gets it through PATH below.
  local installer=""
  if command -v curl >/dev/null 2>&1; then
    installer="$(curl --proto '=https' --tlsv1.2 -sSf --max-time 60 "$RUSTUP_INSTALLER_URL" 2>/tmp/avatar-rustup.log)" || installer=""
  elif command -v wget >/dev/null 2>&1; then
    installer="$(wget -q -O - --timeout=60 "$RUSTUP_INSTALLER_URL" 2>/tmp/avatar-rustup.log)" || installer=""
  fi
  if [ -n "$installer" ]; then
    echo "setup: installing Rust stable with rustup (minimal profile) into ~/.cargo"
    printf '%s\n' "$installer" | sh -s -- -y --profile minimal --default-toolchain stable >>/tmp/avatar-rustup.log 2>&1 || true
    cargo_home_on_path
    rust_ok && return 0
  fi

  cat >&2 <<EOF
setup: no Rust toolchain $RUST_MIN_VERSION or later (found: ${found:-none}), and none could be installed
(log: /tmp/avatar-rustup.log). The media addon is Rust. Install it with rustup, which needs network
access to sh.rustup.rs and static.rust-lang.org:
    curl --proto '=https' --tlsv1.2 -sSf $RUSTUP_INSTALLER_URL | sh -s -- -y --profile minimal
or any other way that puts rustc and cargo $RUST_MIN_VERSION or later on PATH, then run setup again.
EOF
  return 1
}
