# Time from spawning `flemmad acp` to its `initialize` answer (docs/benchmarks.md).
# Usage: python3 crates/flemma-acp/benches/initialize_time.py PATH/TO/flemmad
# The runtime directory is a fresh temporary folder, so no daemon is reached (in-process engine).
import json, os, subprocess, sys, tempfile, time, statistics
binary = sys.argv[1]
samples = []
with tempfile.TemporaryDirectory() as home:
    env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(home, "run"), XDG_STATE_HOME=os.path.join(home, "state"))
    for _ in range(20):
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).encode() + b"\n"
        t = time.perf_counter()
        p = subprocess.Popen([binary, "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        p.stdin.write(line); p.stdin.flush()
        reply = json.loads(p.stdout.readline())
        samples.append((time.perf_counter() - t) * 1000)
        assert reply["result"]["protocolVersion"] == 1, reply
        p.stdin.close(); p.wait()
samples.sort()
print(f"spawn → initialize answer: median {statistics.median(samples):.1f} ms, max {samples[-1]:.1f} ms over {len(samples)} runs")
