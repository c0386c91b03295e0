#!/usr/bin/env bash
# Loads clients/neovim/init.lua in a headless Neovim against a stand-in LSP server and drives the
# key maps. Skipped (saying so) where nvim is not installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v nvim >/dev/null 2>&1; then
  echo "skip - neovim smoke test: nvim is not installed (apt-get install -y neovim)"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/flemmad" <<SH
#!/bin/sh
[ "\$1" = lsp ] || { echo "expected: flemmad lsp" >&2; exit 2; }
exec python3 "$here/fake_lsp.py"
SH
chmod 755 "$work/flemmad"
cat > "$work/t.chat" <<'CHAT'
@You:
Run the tests.

@Assistant:
I'll write the snippet and run the tests.

**Tool Use:** `write` (`toolu_01AAA`)
```json
{"content":"hi","path":"hello.md"}
```

**Tool Use:** `bash` (`toolu_01BBB`)
```json
{"command":"make test"}
```

@You:
**Tool Result:** `toolu_01BBB` (pending)
```
```
CHAT
echo "-- $(nvim --version | head -1), headless"
cd "$work"
FLEMMAD="$work/flemmad" FAKE_LSP_LOG="$work/lsp.log" CHAT_FILE="$work/t.chat" HOME="$work" \
  timeout 60 nvim --headless -u "$here/../init.lua" -c "luafile $here/smoke.lua"
