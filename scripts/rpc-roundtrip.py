#!/usr/bin/env python3
"""The round trip of one `rpc.sock` request (docs/benchmarks.md, "rpc.sock round trip").

Usage: scripts/rpc-roundtrip.py target/debug/flemmad [requests]

Starts its own `flemmad serve --config <file>` in a temp dir (XDG dirs inside it), connects to
its rpc.sock and sends, one after the other, `requests` times each (default 1000):
`flemma/status` without params (the daemon's own status) and `flemma/status` of a chat
(`{"uri": ...}`: decoded as a typed `FlemmaRequest` and answered by the engine host). Each
request waits for its answer before the next is sent. Prints p50 / p90 / max and the mean per
kind, in microseconds."""
import json, os, socket, subprocess, sys, time, tempfile, shutil, statistics

bin_ = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
root = tempfile.mkdtemp(prefix="rpc-roundtrip-")
os.makedirs(root + "/run")
config = root + "/config.toml"
open(config, "w").write('provider = "anthropic"\nmodel = "claude-sonnet-4-5"\n')
chat = root + "/c.chat"
open(chat, "w").write("@You:\nhi\n")
env = dict(os.environ, XDG_RUNTIME_DIR=root + "/run", XDG_STATE_HOME=root + "/state",
           XDG_CONFIG_HOME=root + "/config", HOME=root)
d = subprocess.Popen([bin_, "serve", "--config", config], env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    sock = root + "/run/flemma/rpc.sock"
    s = None
    for _ in range(500):
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); break
        except OSError:
            s = None
            time.sleep(0.02)
    if s is None:
        sys.exit("the daemon did not answer on rpc.sock")
    f = s.makefile("rb")
    kinds = {
        "flemma/status (daemon)": {"method": "flemma/status"},
        "flemma/status {uri}": {"method": "flemma/status", "params": {"uri": chat}},
    }
    next_id = 0
    for name, call in kinds.items():
        times = []
        for i in range(count + 20):
            next_id += 1
            line = json.dumps(dict(call, jsonrpc="2.0", id=next_id)).encode() + b"\n"
            start = time.perf_counter()
            s.sendall(line)
            answer = json.loads(f.readline())
            elapsed = time.perf_counter() - start
            if answer.get("id") != next_id or "result" not in answer:
                sys.exit(f"unexpected answer: {answer}")
            if i >= 20:  # the first ones warm up
                times.append(elapsed * 1e6)
        times.sort()
        p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
        print(f"{name}: n={len(times)} p50={p(0.5):.0f} µs p90={p(0.9):.0f} µs "
              f"max={times[-1]:.0f} µs mean={statistics.mean(times):.0f} µs")
finally:
    d.terminate()
    d.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)
