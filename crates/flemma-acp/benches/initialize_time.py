# Time from spawning `flemmad acp` to its `initialize` answer (docs/benchmarks.md).
# Usage: python3 crates/flemma-acp/benches/initialize_time.py PATH/TO/flemmad [--daemon]
# The runtime directory is a fresh temporary folder. Without --daemon no daemon is reached (the
# engine host starts in the `flemmad acp` process); with --daemon a `flemmad serve` runs there
# first, and `flemmad acp` is a pipe to its acp.sock.
import json, os, subprocess, sys, tempfile, time, statistics
binary = sys.argv[1]
through_daemon = "--daemon" in sys.argv[2:]
samples = []
with tempfile.TemporaryDirectory() as home:
    env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(home, "run"), XDG_STATE_HOME=os.path.join(home, "state"))
    daemon = None
    if through_daemon:
        os.makedirs(os.path.join(home, "run"), mode=0o700)
        daemon = subprocess.Popen([binary, "serve"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        socket = os.path.join(home, "run", "flemma", "acp.sock")
        for _ in range(300):
            if os.path.exists(socket):
                break
            time.sleep(0.05)
        time.sleep(0.2)
    try:
        for _ in range(20):
            line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).encode() + b"\n"
            t = time.perf_counter()
            p = subprocess.Popen([binary, "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            p.stdin.write(line); p.stdin.flush()
            reply = json.loads(p.stdout.readline())
            samples.append((time.perf_counter() - t) * 1000)
            assert reply["result"]["protocolVersion"] == 1, reply
            p.stdin.close(); p.wait()
    finally:
        if daemon is not None:
            daemon.terminate(); daemon.wait()
    if through_daemon:
        log = open(os.path.join(home, "state", "flemma", "flemmad.log")).read()
        assert "ACP connection opened" in log, "the daemon did not serve the connections"
samples.sort()
where = "through the daemon" if through_daemon else "in-process"
print(f"spawn → initialize answer ({where}): median {statistics.median(samples):.1f} ms, max {samples[-1]:.1f} ms over {len(samples)} runs")
