#!/usr/bin/env bash
# Try flemmad without an API key: start the bundled mock provider, send a copy of
# examples/hello.chat through it, print the file before and after, stop the mock.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p flemma-mock-provider -p flemmad
work=$(mktemp -d)
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
target/debug/flemma-mock-provider > "$work/url" 2> "$work/mock.log" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(head -1 "$work/url")
cp examples/hello.chat "$work/hello.chat"
echo "---- before ($work/hello.chat)"; cat "$work/hello.chat"
ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=demo-key target/debug/flemmad send "$work/hello.chat"
echo "---- after"; cat "$work/hello.chat"
