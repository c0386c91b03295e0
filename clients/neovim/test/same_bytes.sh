#!/usr/bin/env bash
# One scripted conversation (a reply; the user's next message; a reply calling bash, approved;
# the last reply) through `flemmad send` and through a real Neovim (same_bytes.lua: <C-]>, typing,
# <M-a>, :w), each against its own flemma-mock-provider replaying the same turns: the two
# files must be the same bytes. Run by smoke.sh:
#   same_bytes.sh WORK FLEMMAD MOCK NVIM INIT
# (WORK holds smoke.sh's `flemmad-lsp` wrapper; INIT is the Neovim set-up to use).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$1" flemmad="$2" mock="$3" nvim="$4" init="$5"
dir="$work/same-bytes"
rm -rf "$dir"
mkdir -p "$dir/cli" "$dir/nvim" "$dir/home"
tool_id=toolu_01SAMEBYTESSAMEBYTES0001
cat > "$dir/turns.json" <<JSON
[{"steps": [{"text": "Hello there. A reply in two lines,\nstreamed in pieces."}], "bytes_per_sec": 1500},
 {"steps": [{"text": "I'll run it."},
            {"tool_call": {"name": "bash", "id": "$tool_id",
                           "input": {"label": "say hi", "command": "echo hi"}}}], "bytes_per_sec": 1500},
 {"steps": [{"text": "It said hi."}], "bytes_per_sec": 1500}]
JSON
chat='```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5",
  "parameters": { "thinking": false }, "tools": { "auto_approve_sandboxed": false } } }
```
@You:
Say hello.'
printf '%s\n' "$chat" > "$dir/cli/talk.chat"
printf '%s\n' "$chat" > "$dir/nvim/talk.chat"

. "$here/../../test-lib.sh"
mock_pid=""
start_mock() { flemma_start_mock "$dir" --script "$dir/turns.json"; }
stop_mock() { kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; }
trap stop_mock EXIT
in_env() {
  env HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/config" XDG_STATE_HOME="$dir/home/state" \
    XDG_DATA_HOME="$dir/home/data" XDG_RUNTIME_DIR="$dir/home/run" FLEMMA_CONFIG= \
    ANTHROPIC_BASE_URL="$mock_url" ANTHROPIC_API_KEY=neovim-test-key "$@"
}

# The command line: send; the user writes on the line under the last @You: (what the Neovim
# user does); send (stops for approval); approve; send.
start_mock
cd "$dir/cli"
cli_log="$dir/cli.log"
fail_cli() { echo "not ok - $1; flemmad said:" >&2; cat "$cli_log" >&2; exit 1; }
in_env "$flemmad" send --no-daemon --quiet talk.chat 2>> "$cli_log" || fail_cli "the first send failed"
awk -v msg="Run echo hi." 'NR == FNR { if ($0 == "@You:") last = FNR; next } FNR == last + 1 { $0 = msg } { print }' \
  talk.chat talk.chat > talk.chat.typed && mv talk.chat.typed talk.chat
status=0
in_env "$flemmad" send --no-daemon --quiet talk.chat 2>> "$cli_log" || status=$?
[ "$status" = 3 ] || fail_cli "the second send should stop for approval (exit 3), not exit $status"
in_env "$flemmad" approve --no-daemon talk.chat "$tool_id" 2>> "$cli_log" || fail_cli "approve failed"
in_env "$flemmad" send --no-daemon --quiet talk.chat 2>> "$cli_log" || fail_cli "the last send failed"
stop_mock

# Neovim, as its user does it.
start_mock
cd "$dir/nvim"
in_env FLEMMAD="$work/flemmad-lsp" CHAT="$dir/nvim/talk.chat" TOOL_ID="$tool_id" \
  timeout 120 "$nvim" --headless -n -u "$init" \
  -c "lua local ok, err = pcall(dofile, '$here/same_bytes.lua'); if not ok then io.stdout:write('not ok - same_bytes.lua stopped: ' .. tostring(err) .. '\\n'); vim.cmd('cquit 1') end"
stop_mock

if cmp -s "$dir/cli/talk.chat" "$dir/nvim/talk.chat"; then
  echo "ok - flemmad send and Neovim wrote the same $(wc -c < "$dir/cli/talk.chat") bytes"
else
  echo "not ok - flemmad send and Neovim wrote different files (--- flemmad send, +++ Neovim):"
  diff -u "$dir/cli/talk.chat" "$dir/nvim/talk.chat" | cat -A | head -60
  exit 1
fi
