#!/usr/bin/env bash
# Loads clients/neovim/init.lua in a headless Neovim attached to the real `flemmad lsp
# --no-daemon` and drives it as a user would: diagnostics, hover, definition, approval through a
# code action and through the key maps (the cycle goes on: the tools run, the next reply
# lands), and `flemma.send` against flemma-mock-provider (a streamed reply, then a tool call
# approved through the code action). smoke.lua queues the mock's answers before each step
# (POST /_mock/turns), so every reply is known; a request it did not queue gets the echo.
#
# The binaries: $FLEMMAD and $FLEMMA_MOCK_PROVIDER when set, else the debug builds in
# ${CARGO_TARGET_DIR:-target}/debug (what `cargo test --workspace` leaves there).
# Skipped (saying so) where nvim is not installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
if ! command -v nvim >/dev/null 2>&1; then
  echo "skip - neovim smoke test: nvim is not installed (apt-get install -y neovim)"
  exit 0
fi
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in /*) ;; *) target="$repo/$target" ;; esac
flemmad="${FLEMMAD:-$target/debug/flemmad}"
mock="${FLEMMA_MOCK_PROVIDER:-$target/debug/flemma-mock-provider}"
for bin in "$flemmad" "$mock"; do
  if [ ! -x "$bin" ]; then
    echo "not ok - $bin is not built: run \`cargo build -p flemmad -p flemma-mock-provider\` first" >&2
    exit 1
  fi
done

work="$(mktemp -d)"
mock_pid=""
cleanup() {
  if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The mock answers from the turns smoke.lua queues; with none queued, "You said: <last message>".
"$mock" > "$work/mock.url" 2> "$work/mock.log" &
mock_pid=$!
for _ in $(seq 100); do [ -s "$work/mock.url" ] && break; sleep 0.05; done
mock_url="$(head -1 "$work/mock.url")"
case "$mock_url" in http://127.0.0.1:*) ;; *)
  echo "not ok - flemma-mock-provider did not print its URL:" >&2; cat "$work/mock.log" >&2; exit 1 ;;
esac

# What the editor launches: `flemmad lsp` (init.lua runs "$FLEMMAD lsp"), in process.
cat > "$work/flemmad-lsp" <<WRAP
#!/bin/sh
[ "\$1" = lsp ] || { echo "expected: flemmad lsp" >&2; exit 2; }
shift
exec "$flemmad" lsp --no-daemon "\$@"
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

# smoke.lua, ending Neovim at once (not at the timeout) when the script itself fails.
run_smoke="local ok, err = pcall(dofile, '$here/smoke.lua')
if not ok then io.stdout:write('not ok - smoke.lua stopped: ' .. tostring(err) .. '\\n'); vim.cmd('cquit 1') end"
# One headless Neovim run of smoke.lua; extra environment as arguments (NAME=value).
run_nvim() {
  env HOME="$work/home" XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/home/state" \
    XDG_RUNTIME_DIR="$work/home/run" FLEMMA_CONFIG= \
    ANTHROPIC_BASE_URL="$mock_url" ANTHROPIC_API_KEY=neovim-test-key \
    FLEMMAD="$work/flemmad-lsp" CHATS="$work/chats" MOCK_URL="$mock_url" "$@" \
    timeout 120 nvim --headless -u "$here/../init.lua" -c "lua $run_smoke" \
    | tee "$work/nvim.out"
}
server_log() {
  echo "-- the server's log:"; tail -40 "$work/home/state/flemma/flemmad.log" 2>/dev/null || true
}

echo "-- $(nvim --version | head -1), headless, against $("$flemmad" --version)"
write_chats
cd "$work/chats"
run_nvim || { server_log; exit 1; }

echo "-- attach and send again, set up as on Neovim 0.11 (the client started from lsp/flemmad.lua)"
cd "$work"
write_chats
cd "$work/chats"
run_nvim SMOKE_SEND_ONLY=1 || { server_log; exit 1; }
