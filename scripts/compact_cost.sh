#!/usr/bin/env bash
# The cost of a compaction (docs/benchmarks.md, "Compaction"), run by hand: `flemmad compact
# --no-daemon` and `flemmad compact --undo --no-daemon` on a generated chat of SIZE MB (default
# 10; the same chat as clients/neovim/test/typing_cost.py), against flemma-mock-provider, which
# answers the summary request at once (the model's time is left out: what is measured is
# flemmad's own work, the load of the chat, the plan, the request's body, the archive and the
# writes). RUNS runs (default 3); prints the wall time of each.
#
# The binaries: $FLEMMAD and $FLEMMA_MOCK_PROVIDER when set, else the debug builds in
# ${CARGO_TARGET_DIR:-target}/debug.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
flemmad="${FLEMMAD:-$target/debug/flemmad}"
mock="${FLEMMA_MOCK_PROVIDER:-$target/debug/flemma-mock-provider}"
size="${SIZE:-10}"
runs="${RUNS:-3}"
work="$(mktemp -d)"
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# Every run's summary, queued up front.
python3 - "$work/turns.json" "$runs" <<'PY'
import json, sys
turns = [{"steps": [{"text": "The session so far: the build failed on `net::resolve` behind the `dns` feature; enabling it in `default` fixed it."}]}]
json.dump(turns * int(sys.argv[2]), open(sys.argv[1], "w"))
PY
"$mock" --script "$work/turns.json" > "$work/mock.out" 2> "$work/mock.log" &
mock_pid=$!
for _ in $(seq 100); do
  base="$(head -n1 "$work/mock.out" 2>/dev/null || true)"
  [[ "$base" == http* ]] && break
  sleep 0.05
done
export ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY=sk-ant-bench
export HOME="$work" XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/state" \
  XDG_RUNTIME_DIR="$work/run" FLEMMA_CONFIG=""
mkdir -p "$work/run"

python3 - "$work/big.chat" "$size" <<PY
import sys
sys.path.insert(0, "$here/clients/neovim/test")
from typing_cost import chat_of
open(sys.argv[1], "w").write(chat_of(float(sys.argv[2])))
PY
cp "$work/big.chat" "$work/original.chat"
echo "chat: $(wc -c < "$work/big.chat") bytes, $(grep -c '^@' "$work/big.chat") messages; load $(cut -d' ' -f1-3 /proc/loadavg)"

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for run in $(seq "$runs"); do
  start=$(date +%s%N)
  "$flemmad" compact --no-daemon --keep 1 "$work/big.chat" > /dev/null
  compact_ms=$(ms "$start")
  start=$(date +%s%N)
  "$flemmad" compact --no-daemon --undo "$work/big.chat" > /dev/null
  undo_ms=$(ms "$start")
  cmp -s "$work/big.chat" "$work/original.chat" || { echo "the undo did not give the original bytes" >&2; exit 1; }
  echo "run $run: compact ${compact_ms} ms, undo ${undo_ms} ms"
done
