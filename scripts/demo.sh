#!/usr/bin/env bash
# Try flemmad's main job without an API key: an agentic conversation against the bundled mock
# provider, scripted by examples/agentic-script.json. The model lists and reads files
# (auto-approved), asks to run `bash` (the send stops for approval: exit 3), the script
# approves with `flemmad approve`, and the next send runs the tests and a background job and
# lets the model answer (exit 0). The chat is printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p flemma-mock-provider -p flemmad
bin="${CARGO_TARGET_DIR:-target}/debug"
work=$(mktemp -d)
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin/flemma-mock-provider" --no-echo --script examples/agentic-script.json \
  > "$work/url" 2> "$work/mock.log" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(head -1 "$work/url")
mkdir "$work/project"
cp examples/agentic.chat "$work/project/project.chat"
cp examples/agentic/* "$work/project/"
export ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=demo-key
# An empty user configuration, so the demo does the same everywhere.
export XDG_CONFIG_HOME="$work/config"
flemmad="$bin/flemmad"
echo "---- before ($work/project/project.chat)"; cat "$work/project/project.chat"
echo; echo "---- flemmad send (lifecycle events on stdout with --events)"
status=0
"$flemmad" send "$work/project/project.chat" --events > "$work/events.jsonl" || status=$?
echo "(exit $status: 3 means a tool call waits for approval)"
[ "$status" -eq 3 ] || { echo "expected exit 3"; exit 1; }
echo; echo "---- flemmad approve --all"
"$flemmad" approve "$work/project/project.chat" --all
echo; echo "---- flemmad send (resumes: runs bash, waits for the background job, answers)"
"$flemmad" send "$work/project/project.chat" --events >> "$work/events.jsonl"
echo; echo "---- events"; cut -c1-160 "$work/events.jsonl"
echo; echo "---- after"; cat "$work/project/project.chat"
