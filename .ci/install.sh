#!/usr/bin/env bash
# Idempotent installer for everything torchlet's test suite needs on a fresh
# Debian bookworm x86_64 machine with rustup, node/npm and python3.
#
#   bash .ci/install.sh [rust|qemu|defmt|wasm|browser|all|env]...
#
#   rust     rustup targets thumbv7em-none-eabihf thumbv6m-none-eabi
#            wasm32-unknown-unknown; components llvm-tools rustfmt clippy
#   qemu     apt qemu-system-arm
#   defmt    cargo install defmt-print
#   wasm     cargo install wasm-bindgen-cli + wasm-pack; npm binaryen (wasm-opt)
#   browser  apt chromium chromium-driver; npm playwright-core (no browser download)
#   all      all of the above (default)
#   env      print the `export PATH=...` line only (eval "$(bash .ci/install.sh env)")
#
# Each step checks first and is skipped when already present, so a run on a
# provisioned machine takes a few seconds. Several sub-commands may be given.
set -euo pipefail

# ---- pinned versions -------------------------------------------------------
# Cargo.toml must pin the crate to the same version: wasm-bindgen = "=0.2.130"
WASM_BINDGEN_VERSION=0.2.130
WASM_PACK_VERSION=0.15.1
DEFMT_PRINT_VERSION=1.2.0
BINARYEN_NPM_VERSION=132.0.0          # wasm-opt 132 (Debian's 108 is too old)
PLAYWRIGHT_CORE_VERSION=1.65.1

RUST_TARGETS=(thumbv7em-none-eabihf thumbv6m-none-eabi wasm32-unknown-unknown)
RUST_COMPONENTS=(llvm-tools rustfmt clippy)

# npm tools live outside the repo
TOOLS_DIR="${TORCHLET_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/torchlet-tools}"
NODE_BIN="$TOOLS_DIR/node_modules/.bin"

CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"

# Run from the repo root so a rust-toolchain.toml there selects the toolchain.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[install] %-16s %s\n' "$1" "$2"; }
die() { printf '[install] ERROR: %s\n' "$*" >&2; exit 1; }

# step NAME CHECK_FN INSTALL_FN: skip if CHECK_FN succeeds, else install + verify.
step() {
    local name=$1 check=$2 install=$3 t0
    if "$check"; then log "$name" "already present"; return 0; fi
    t0=$SECONDS
    "$install"
    "$check" || die "$name: still missing after install"
    log "$name" "installed in $((SECONDS - t0)) s"
}

# ---- helpers ---------------------------------------------------------------
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
APT_UPDATED=0
dpkg_installed() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || return 1
    done
}
apt_install() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        $SUDO apt-get update -qq
        APT_UPDATED=1
    fi
    $SUDO env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# tool_version BIN -> prints the first x.y.z in `BIN --version`, empty if absent
tool_version() {
    command -v "$1" >/dev/null 2>&1 || return 0
    "$1" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n1 || true
}

# cargo_install CRATE VERSION: --locked first, then without (mirror may lag).
cargo_install() {
    local crate=$1 version=$2
    command -v cargo >/dev/null 2>&1 || die "cargo not found (install rustup first)"
    if ! cargo install -q "$crate" --version "$version" --locked; then
        log "$crate" "--locked failed, retrying without --locked"
        cargo install -q "$crate" --version "$version"
    fi
}

# npm package version under $TOOLS_DIR, empty if absent (no node startup)
npm_version() {
    local pj="$TOOLS_DIR/node_modules/$1/package.json"
    [ -f "$pj" ] || return 0
    sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$pj" | head -n1
}
npm_install() {
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    mkdir -p "$TOOLS_DIR"
    [ -f "$TOOLS_DIR/package.json" ] ||
        printf '{ "name": "torchlet-tools", "private": true }\n' >"$TOOLS_DIR/package.json"
    npm install --prefix "$TOOLS_DIR" --no-audit --no-fund --loglevel=error \
        --save-exact "$@" >/dev/null
}

# ---- rust ------------------------------------------------------------------
missing_targets() {
    local installed t
    installed=$(rustup target list --installed)
    for t in "${RUST_TARGETS[@]}"; do
        grep -qx "$t" <<<"$installed" || printf '%s ' "$t"
    done
}
missing_components() {
    local installed c
    installed=$(rustup component list --installed)
    for c in "${RUST_COMPONENTS[@]}"; do
        # installed names carry the host triple, e.g. llvm-tools-x86_64-unknown-linux-gnu
        grep -qE "^${c}(-preview)?(-[a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+(-[a-z0-9_]+)?)?$" \
            <<<"$installed" || printf '%s ' "$c"
    done
}
have_rust_targets()    { [ -z "$(missing_targets)" ]; }
have_rust_components() { [ -z "$(missing_components)" ]; }
# shellcheck disable=SC2046
add_rust_targets()     { rustup target add $(missing_targets) >/dev/null; }
# shellcheck disable=SC2046
add_rust_components()  { rustup component add $(missing_components) >/dev/null; }

do_rust() {
    command -v rustup >/dev/null 2>&1 || die "rustup not found"
    step "rust-targets" have_rust_targets add_rust_targets
    step "rust-components" have_rust_components add_rust_components
}

# ---- qemu ------------------------------------------------------------------
have_qemu()    { command -v qemu-system-arm >/dev/null 2>&1 && dpkg_installed qemu-system-arm; }
install_qemu() { apt_install qemu-system-arm; }
do_qemu()      { step "qemu-system-arm" have_qemu install_qemu; }

# ---- defmt -----------------------------------------------------------------
have_defmt_print()    { [ "$(tool_version defmt-print)" = "$DEFMT_PRINT_VERSION" ]; }
install_defmt_print() { cargo_install defmt-print "$DEFMT_PRINT_VERSION"; }
do_defmt()            { step "defmt-print" have_defmt_print install_defmt_print; }

# ---- wasm ------------------------------------------------------------------
have_wasm_bindgen() {
    [ "$(tool_version wasm-bindgen)" = "$WASM_BINDGEN_VERSION" ] &&
        [ "$(tool_version wasm-bindgen-test-runner)" = "$WASM_BINDGEN_VERSION" ]
}
install_wasm_bindgen() { cargo_install wasm-bindgen-cli "$WASM_BINDGEN_VERSION"; }
have_wasm_pack()       { [ "$(tool_version wasm-pack)" = "$WASM_PACK_VERSION" ]; }
install_wasm_pack()    { cargo_install wasm-pack "$WASM_PACK_VERSION"; }
have_binaryen()        { [ "$(npm_version binaryen)" = "$BINARYEN_NPM_VERSION" ] && [ -x "$NODE_BIN/wasm-opt" ]; }
install_binaryen()     { npm_install "binaryen@$BINARYEN_NPM_VERSION"; }

do_wasm() {
    step "wasm-bindgen-cli" have_wasm_bindgen install_wasm_bindgen
    step "wasm-pack" have_wasm_pack install_wasm_pack
    step "binaryen(npm)" have_binaryen install_binaryen
    log "PATH" "export PATH=\"$NODE_BIN:$CARGO_BIN:\$PATH\""
}

# ---- browser ---------------------------------------------------------------
have_chromium() {
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 &&
        dpkg_installed chromium chromium-driver
}
install_chromium()   { apt_install chromium chromium-driver; }
have_playwright()    { [ "$(npm_version playwright-core)" = "$PLAYWRIGHT_CORE_VERSION" ]; }
# playwright-core downloads no browser; never run `npx playwright install`.
install_playwright() { npm_install "playwright-core@$PLAYWRIGHT_CORE_VERSION"; }

do_browser() {
    step "chromium" have_chromium install_chromium
    step "playwright-core" have_playwright install_playwright
    log "NODE_PATH" "export NODE_PATH=\"$TOOLS_DIR/node_modules\""
}

# ---- main ------------------------------------------------------------------
[ $# -gt 0 ] || set -- all
if [ "$*" = env ]; then
    printf 'export PATH="%s:%s:$PATH"\n' "$NODE_BIN" "$CARGO_BIN"
    printf 'export NODE_PATH="%s/node_modules"\n' "$TOOLS_DIR"
    exit 0
fi

# Serialise concurrent runs (parallel CI stages would race on apt / cargo install).
mkdir -p "$TOOLS_DIR"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$TOOLS_DIR/.install.lock"
    flock 9
fi

T_START=$SECONDS
for cmd in "$@"; do
    case "$cmd" in
        rust) do_rust ;;
        qemu) do_qemu ;;
        defmt) do_defmt ;;
        wasm) do_wasm ;;
        browser) do_browser ;;
        all) do_rust; do_qemu; do_defmt; do_wasm; do_browser ;;
        -h|--help|help) sed -n '2,17p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown sub-command '$cmd' (rust|qemu|defmt|wasm|browser|all|env)" ;;
    esac
done
log "done" "in $((SECONDS - T_START)) s"
