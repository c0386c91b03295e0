#!/usr/bin/env bash
# A real Helix (`hx` on PATH) in tmux, set up as docs/editors/helix.md says (languages.toml,
# config.toml and the queries under $XDG_CONFIG_HOME/helix), against the real `flemmad lsp
# --no-daemon` and flemma-mock-provider, driven with `tmux send-keys` and read with
# `tmux capture-pane` and the saved file:
#   1. started from a subdirectory of a git repository (`cd repo/notes && hx talk.chat`), Ctrl-]
#      sends the buffer's chat and the reply streams into the buffer;
#   2. a command that fails (`\ a` with no tool id selected) says why in the status line;
#   3. typing below the reply while a long reply streams: every key and the whole reply land,
#      once each;
#   4. a bash call approved through the code-action menu (space a) runs, the next reply lands;
#   5. a bash call rejected through the code-action menu is sent as an error, the next reply
#      lands;
#   6. a chat outside the working directory (`:open ~/chats/home.chat`, sent as `~/…`) sends too;
#   7. :w writes what the buffer shows.
# Skipped, saying so, where `hx` or tmux is missing (CI cannot build Helix: it is not in the
# registries). The binaries: $FLEMMAD and $FLEMMA_MOCK_PROVIDER when set, else the debug builds
# in ${CARGO_TARGET_DIR:-target}/debug. $HELIX_RUNTIME is passed on when set (a Helix built from
# source finds its runtime there).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
if ! command -v hx >/dev/null 2>&1; then
  echo "skip - helix tmux test: hx is not on PATH (Helix is not in the package registries; build it from source, see docs/editors/helix.md)"
  exit 0
fi
if ! command -v tmux >/dev/null 2>&1; then
  echo "skip - helix tmux test: tmux is not installed (apt-get install -y tmux)"
  exit 0
fi
. "$repo_root/clients/test-lib.sh"
flemma_binaries "$repo_root"

work="$(mktemp -d)"
session="flemma-helix-$$"
mock_pid=""
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; fi
  [ -n "${KEEP_WORK:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

failures=0 checks=0
ok() { checks=$((checks + 1)); echo "ok - $1"; }
not_ok() {
  checks=$((checks + 1)) failures=$((failures + 1))
  echo "not ok - $1"
  if [ -n "${2:-}" ]; then printf '%s\n' "$2" | sed 's/^/  | /'; fi
}
pane() { tmux capture-pane -p -t "$session" 2>/dev/null || true; }
# Waits up to $2 seconds (default 30) for the pane to show $1 (a fixed string).
wait_pane() {
  local deadline=$((SECONDS + ${2:-30}))
  while [ "$SECONDS" -lt "$deadline" ]; do
    pane | grep -qF -- "$1" && return 0
    sleep 0.2
  done
  return 1
}
# Waits up to $3 seconds for the pane to show a line with $2 below a line with $1: the end of
# a reply (its text, then the empty @You: written after it).
wait_pane_below() {
  local deadline=$((SECONDS + ${3:-30}))
  while [ "$SECONDS" -lt "$deadline" ]; do
    pane | awk -v a="$1" -v b="$2" 'index($0, a) { seen = 1; next } seen && index($0, b) { found = 1 } END { exit !found }' \
      && return 0
    sleep 0.2
  done
  return 1
}
keys() { tmux send-keys -t "$session" "$@"; }
# Escape on its own: Escape and a key read together are Alt+key to Helix.
escape() { keys Escape; sleep 0.3; }
# Types $1 one key at a time, $2 seconds apart.
type_slowly() {
  local text="$1" i
  for ((i = 0; i < ${#text}; i++)); do
    keys -l -- "${text:i:1}"
    sleep "${2:-0.1}"
  done
}
# A command on Helix's command line (Escape first: normal mode).
command_line() { escape; keys -l -- ":$1"; keys Enter; }

# The scripted replies, in the order the steps send.
cat > "$work/turns.json" <<'JSON'
[{"steps": [{"text": "Hello from the mock, in the notes directory."}], "bytes_per_sec": 400},
 {"steps": [{"text": "A long reply, streaming slowly while you type below it. One, two, three, four, five, six, seven, eight, nine, ten. The end of the long reply."}], "bytes_per_sec": 300},
 {"steps": [{"text": "I will say hello with bash."},
            {"tool_call": {"name": "bash", "id": "toolu_01HELIXAPPROVEHELIXAPPRV", "input": {"label": "say hello", "command": "echo approved-and-ran"}}}]},
 {"steps": [{"text": "It printed approved-and-ran."}]},
 {"steps": [{"text": "I will clean the build."},
            {"tool_call": {"name": "bash", "id": "toolu_01HELIXREJECTHELIXREJECT", "input": {"label": "clean", "command": "rm -rf build"}}}]},
 {"steps": [{"text": "Understood, the build stays."}]},
 {"steps": [{"text": "Hello from your home directory."}]}]
JSON
flemma_start_mock "$work" --script "$work/turns.json"

# What a user has after docs/editors/helix.md: flemmad on PATH, languages.toml, config.toml and
# the queries in ~/.config/helix.
mkdir -p "$work/bin" "$work/home/chats" "$work/config/helix/runtime/queries/chat" "$work/repo/notes"
cat > "$work/bin/flemmad" <<WRAP
#!/bin/sh
[ "\$1" = lsp ] || exec "$flemmad" "\$@"
shift
exec "$flemmad" lsp --no-daemon "\$@"
WRAP
chmod 755 "$work/bin/flemmad"
cp "$here/languages.toml" "$here/config.toml" "$work/config/helix/"
cp "$here/runtime/queries/chat/"*.scm "$work/config/helix/runtime/queries/chat/"
frontmatter='```json
{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5",
  "parameters": { "thinking": false }, "tools": { "auto_approve_sandboxed": false } } }
```'
printf '%s\n@You:\nSay hello from the notes directory.\n' "$frontmatter" > "$work/repo/notes/talk.chat"
printf '%s\n@You:\nSay hello from home.\n' "$frontmatter" > "$work/home/chats/home.chat"
git -C "$work/repo" init -q

tmux new-session -d -s "$session" -x 160 -y 150 -c "$work/repo/notes" \
  env HOME="$work/home" XDG_CONFIG_HOME="$work/config" XDG_CACHE_HOME="$work/cache" \
  XDG_STATE_HOME="$work/home/state" XDG_DATA_HOME="$work/home/data" XDG_RUNTIME_DIR="$work/home/run" \
  PATH="$work/bin:$PATH" FLEMMA_CONFIG= ANTHROPIC_BASE_URL="$mock_url" ANTHROPIC_API_KEY=helix-test-key \
  ${HELIX_RUNTIME:+HELIX_RUNTIME="$HELIX_RUNTIME"} TERM=xterm-256color \
  hx -v talk.chat
echo "-- $(hx --version | head -1) in tmux, from repo/notes (the git root is repo), against $("$flemmad" --version)"
helix_log="$work/cache/helix/helix.log"
saved() { cat "$work/repo/notes/talk.chat"; }
# Whether the saved chat holds $1 (several lines, as they are).
saved_has() {
  local text
  text="$(saved; echo .)" # the . keeps the trailing line breaks
  [[ "${text%.}" == *"$1"* ]]
}
save() { command_line w; sleep 0.5; }

if ! wait_pane "Say hello from the notes directory." 20; then
  not_ok "Helix shows the chat" "$(pane)"
  exit 1
fi
# The language server attached: its first diagnostics came (none here), or simply give it time.
sleep 2

# 1. Ctrl-] from a subdirectory.
keys C-]
if wait_pane_below "Hello from the mock, in the notes directory." "@You:" 30; then
  save
  if saved_has $'@Assistant:\nHello from the mock, in the notes directory.\n\n@You:\n'; then
    ok "Ctrl-] from repo/notes sends talk.chat (sent as \`talk.chat\`, the root being repo): the reply streams in"
  else
    not_ok "the reply and an empty @You: are in the file after :w" "$(saved)"
  fi
else
  not_ok "Ctrl-] from repo/notes sends talk.chat and the reply streams in" "$(pane)
$(grep -i 'flemma\|error' "$helix_log" 2>/dev/null | tail -5)"
fi

# 2. A failing command says why (Helix only logs the error answer of a command).
escape
keys g g
keys -l '\'
sleep 0.3
keys a
if wait_pane "failed:" 10; then
  ok "a failing command (\\ a with no tool id selected) says why in the status line: $(pane | grep -F 'failed:' | head -1 | sed 's/^ *//')"
else
  not_ok "a failing command says why in the status line" "$(pane | tail -3)"
fi

# 3. Typing below a reply while it streams.
escape
keys g e o
type_slowly "Now a long one, please."
escape
keys C-]
wait_pane "A long reply" 20 || true
keys g e o
typed="typed while it streams"
type_slowly "$typed" 0.15
escape
wait_pane_below "The end of the long reply." "@You:" 60 || true
sleep 1
save
long="A long reply, streaming slowly while you type below it. One, two, three, four, five, six, seven, eight, nine, ten. The end of the long reply."
text="$(saved)"
if [ "$(grep -cF "$long" <<<"$text")" = 1 ] && [ "$(grep -cF "$typed" <<<"$text")" = 1 ]; then
  ok "typing below a streaming reply: every key and the whole reply land, once each"
else
  not_ok "typing below a streaming reply keeps every key and the whole reply, once each" "$text"
fi

# The rest of the conversation continues under the last @You: (the typed line is below the
# reply's @You:, so write the next message after it).
# 4. Approve through the code-action menu.
escape
keys g e o
type_slowly "Say hello with bash."
escape
keys C-]
if wait_pane "(pending)" 30; then
  escape
  keys -l -- "/(pending)"
  keys Enter
  keys Space a
  sleep 1
  menu="$(pane)"
  if grep -qF "Approve \`toolu_01HELIXAPPROVEHELIXAPPRV\`" <<<"$menu"; then
    # Helix pre-selects the first item: Approve (then Reject, in the server's order).
    keys Enter
    if wait_pane_below "It printed approved-and-ran." "@You:" 30; then
      save
      if saved_has $'**Tool Result:** `toolu_01HELIXAPPROVEHELIXAPPRV`\n```\napproved-and-ran\n```'; then
        ok "Approve from the code-action menu (space a) runs bash; its output and the next reply land"
      else
        not_ok "the approved tool's output is in the file" "$(saved)"
      fi
    else
      not_ok "after Approve, the tool runs and the next reply lands" "$(pane)"
    fi
  else
    not_ok "space a on the pending placeholder offers Approve" "$menu"
  fi
else
  not_ok "a reply calling bash leaves a pending placeholder" "$(pane)"
fi

# Hover on the pending call of step 5 shows the approval decision (space k).
# 5. Reject through the code-action menu.
escape
keys g e o
type_slowly "Clean the build."
escape
keys C-]
if wait_pane "toolu_01HELIXREJECTHELIXREJECT\` (pending)" 30; then
  escape
  # From the end, the search wraps to the first HELIXREJECT: the tool use.
  keys -l -- "/HELIXREJECT"
  keys Enter
  keys Space k
  sleep 1
  if pane | grep -qE "Approval: (asks the user|approved) by urn:flemma:approval:"; then
    ok "hover (space k) on the pending tool use shows the approval decision: $(pane | grep -oE 'Approval: [^│]*urn:flemma:approval:[a-z-]*' | head -1)"
  else
    not_ok "hover on the pending tool use shows the approval decision" "$(pane)"
  fi
  escape
  keys -l -- "/HELIXREJECT. .pending"
  keys Enter
  keys Space a
  sleep 1
  menu="$(pane)"
  grep -qF "Reject \`toolu_01HELIXREJECTHELIXREJECT\`" <<<"$menu" || not_ok "space a on the placeholder offers Reject" "$menu"
  keys Down # the second item: Reject
  keys Enter
  if wait_pane_below "Understood, the build stays." "@You:" 30; then
    save
    if saved_has $'**Tool Result:** `toolu_01HELIXREJECTHELIXREJECT` (error)\n```\nThis tool has been rejected by the user.\n```'; then
      ok "Reject from the code-action menu sends the call as an error; the next reply lands"
    else
      not_ok "the rejected call is an error result in the file" "$(saved)"
    fi
  else
    not_ok "after Reject, the next reply lands" "$(pane)"
  fi
else
  not_ok "a reply calling bash to clean leaves a pending placeholder" "$(pane)"
fi

# 6. A chat under ~ (outside the working directory): Helix names it `~/chats/home.chat`.
command_line "open ~/chats/home.chat"
if wait_pane "Say hello from home." 10; then
  sleep 1
  keys C-]
  if wait_pane "Hello from your home directory." 30; then
    ok "Ctrl-] in ~/chats/home.chat (sent as \`~/chats/home.chat\`) sends it"
  else
    not_ok "Ctrl-] in a chat under ~ sends it" "$(pane)"
  fi
else
  not_ok ":open ~/chats/home.chat shows it" "$(pane)"
fi
command_line "write-all"
sleep 0.5

echo "-- the commands Helix sent (helix.log):"
grep -oE '"method":"workspace/executeCommand","params":\{"arguments":\[[^]]*\],"command":"[^"]*"' "$helix_log" 2>/dev/null \
  | sed -E 's/.*"arguments":\[([^]]*)\],"command":"([^"]*)"/   \2 [\1]/; s#file://[^"]*/#file://…/#g' || true
command_line "quit-all!"
echo "$((checks - failures)) passed, $failures failed"
[ "$failures" = 0 ]
