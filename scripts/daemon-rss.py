#!/usr/bin/env python3
"""Daemon RSS idle and with 100 open 1 MB chats in one lsp.sock session (docs/benchmarks.md).

Usage: scripts/daemon-rss.py target/debug/flemmad   (starts its own daemon in a temp dir)."""
import json, os, socket, subprocess, sys, time, tempfile
bin_ = sys.argv[1]
root = tempfile.mkdtemp(prefix="rpc-rss-")
os.makedirs(root + "/run")
env = dict(os.environ, XDG_RUNTIME_DIR=root + "/run", XDG_STATE_HOME=root + "/state", XDG_CONFIG_HOME=root + "/config")
d = subprocess.Popen([bin_, "serve"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sock = root + "/run/flemma/lsp.sock"
for _ in range(500):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(sock); break
    except OSError:
        time.sleep(0.02)
def rss():
    for line in open(f"/proc/{d.pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
def send(msg):
    body = json.dumps(msg).encode()
    s.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
f = s.makefile("rb")
def read():
    n = 0
    while True:
        line = f.readline().strip()
        if not line: break
        if line.startswith(b"Content-Length:"): n = int(line.split()[1])
    return json.loads(f.read(n))
time.sleep(0.5)
idle = rss()
send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":None,"rootUri":None,"capabilities":{}}})
while read().get("id") != 1: pass
send({"jsonrpc":"2.0","method":"initialized","params":{}})
para = "@You:\n" + ("Some words of a long conversation, with `code` and more. " * 17 + "\n") * 10 + "\n@Assistant:\n" + ("A reply that goes on for a while, explaining things. " * 19 + "\n") * 10 + "\n"
doc = "```json\n{\"flemma\": {\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\"}}\n```\n"
while len(doc) < 1_000_000: doc += para
doc += "@You:\nthe end\n"
for i in range(100):
    path = f"{root}/doc{i:03}.chat"
    open(path, "w").write(doc)
    send({"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file://"+path,"languageId":"chat","version":1,"text":doc}}})
# wait for diagnostics of all 100
seen = set(); deadline = time.time() + 300
while len(seen) < 100 and time.time() < deadline:
    m = read()
    if m.get("method") == "textDocument/publishDiagnostics": seen.add(m["params"]["uri"])
peak = rss()
time.sleep(1)
print(f"doc size {len(doc)} bytes; idle {idle} KiB; 100 open 1 MB documents (one session, diagnostics published for {len(seen)}): {rss()} KiB (right after: {peak} KiB)")
d.terminate(); d.wait()
