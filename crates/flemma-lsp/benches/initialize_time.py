# Time from spawning `flemmad lsp` to its `initialize` response (docs/benchmarks.md).
# Usage: python3 crates/flemma-lsp/benches/initialize_time.py PATH/TO/flemmad
import json, subprocess, sys, time, statistics
binary = sys.argv[1]
samples = []
for _ in range(20):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}).encode()
    t = time.perf_counter()
    p = subprocess.Popen([binary, "lsp", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body); p.stdin.flush()
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        header += p.stdout.read(1)
    length = int(header.split(b":")[1].strip().split(b"\r\n")[0])
    reply = json.loads(p.stdout.read(length))
    samples.append((time.perf_counter() - t) * 1000)
    assert "capabilities" in reply["result"]
    p.stdin.close(); p.kill(); p.wait()
samples.sort()
print(f"spawn → initialize response: median {statistics.median(samples):.1f} ms, max {samples[-1]:.1f} ms over {len(samples)} runs")
