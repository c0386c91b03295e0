#!/usr/bin/env bash
# Checks the systemd user units: `systemd-analyze --user verify` where it exists (skipped with
# the reason printed where not), plus the settings docs/daemon.md relies on. The ExecStart binary
# must exist for verify, so a stand-in executable replaces the installer's placeholder path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }

grep -qx 'Type=notify' "$here/flemmad.service" || fail "flemmad.service must be Type=notify"
grep -qx 'ExecStart=%h/.cargo/bin/flemmad serve' "$here/flemmad.service" \
  || fail "flemmad.service: the ExecStart placeholder the installer replaces has changed"
grep -qx 'ListenStream=%t/flemma/lsp.sock' "$here/flemmad.socket" || fail "lsp.sock missing"
grep -qx 'ListenStream=%t/flemma/rpc.sock' "$here/flemmad.socket" || fail "rpc.sock missing"
grep -qx 'SocketMode=0600' "$here/flemmad.socket" || fail "sockets must be 0600"
grep -qx 'DirectoryMode=0700' "$here/flemmad.socket" || fail "the socket directory must be 0700"
echo "ok - unit settings"

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "skip - systemd-analyze verify: systemd-analyze is not installed"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/units"
printf '#!/bin/sh\nexit 0\n' > "$work/bin/flemmad"
chmod 755 "$work/bin/flemmad"
cp "$here/flemmad.socket" "$work/units/"
sed "s|^ExecStart=%h/.cargo/bin/flemmad |ExecStart=$work/bin/flemmad |" "$here/flemmad.service" > "$work/units/flemmad.service"

# --man=no: no man pages here; the Documentation= links are not checked.
mkdir -p "$work/runtime" && chmod 700 "$work/runtime"
if out="$(cd "$work/units" && XDG_RUNTIME_DIR="$work/runtime" systemd-analyze --user --man=no verify flemmad.socket flemmad.service 2>&1)"; then
  # verify exits 0 on warnings too: treat any complaint about our units as a failure.
  if printf '%s\n' "$out" | grep -E 'flemmad\.(service|socket)' >/dev/null; then
    printf '%s\n' "$out" >&2
    fail "systemd-analyze verify complained about the units"
  fi
  echo "ok - systemd-analyze verify ($(systemd-analyze --version | head -1))"
else
  case "$out" in
    *"Failed to connect"*|*"No such file or directory"*bus*|*"XDG_RUNTIME_DIR"*)
      printf '%s\n' "$out" >&2
      echo "skip - systemd-analyze --user verify: no user manager here (above)";;
    *)
      printf '%s\n' "$out" >&2
      fail "systemd-analyze verify failed";;
  esac
fi
