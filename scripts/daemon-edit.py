#!/usr/bin/env python3
"""The daemon's idle RSS, and a one-character edit to diagnostics on a 10 MB chat through the
daemon's lsp.sock (docs/benchmarks.md, "The daemon").

Usage: scripts/daemon-edit.py target/debug/flemmad [edits]

Starts its own `flemmad serve --config <file>` in a temp dir (XDG dirs inside it), reads the
daemon's VmRSS 0.5 s after its socket answers, opens one LSP session (UTF-16 client), opens a
generated 10.5 MB chat (the language server bench's: prose with CJK and emoji, a `bash` tool use
and its result per turn), then types one character in the middle turn's tool input and deletes it again,
`edits` times (default 60), timing each `didChange` to the `publishDiagnostics` of that version.
Prints p50 / p99 / max and the mean, and the idle RSS."""
import json, os, socket, subprocess, sys, time, tempfile, shutil

bin_ = sys.argv[1]
edits = int(sys.argv[2]) if len(sys.argv) > 2 else 60
root = tempfile.mkdtemp(prefix="daemon-edit-")
os.makedirs(root + "/run")
config = root + "/config.toml"
open(config, "w").write('provider = "anthropic"\nmodel = "claude-sonnet-4-5"\n')
env = dict(os.environ, XDG_RUNTIME_DIR=root + "/run", XDG_STATE_HOME=root + "/state",
           XDG_CONFIG_HOME=root + "/config")
d = subprocess.Popen([bin_, "serve", "--config", config], env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sock = root + "/run/flemma/lsp.sock"
s = None
for _ in range(500):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(sock); break
    except OSError:
        s = None
        time.sleep(0.02)
if s is None:
    sys.exit("the daemon did not answer on lsp.sock")


def rss():
    for line in open(f"/proc/{d.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


def send(msg):
    body = json.dumps(msg).encode()
    s.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)


f = s.makefile("rb")


def read():
    n = 0
    while True:
        line = f.readline().strip()
        if not line:
            break
        if line.startswith(b"Content-Length:"):
            n = int(line.split()[1])
    return json.loads(f.read(n))


def chat(size):
    parts, turn, n = [], 0, 0
    while n < size:
        t = (f"@You:\nplease run the tests of module {turn} and tell me what failed 中文 🙂\n\n"
             f"@Assistant:\nSure, running them now.\n\n**Tool Use:** `bash` (`t{turn}`)\n```json\n"
             f"{{\"command\":\"make test MODULE={turn}\",\"label\":\"running tests\"}}\n```\n\n"
             f"@You:\n**Tool Result:** `t{turn}`\n```\n")
        t += "".join(f"test module_{turn}::case_{line} ... ok (a line of output of some length)\n"
                     for line in range(12))
        t += "```\n\n"
        parts.append(t)
        n += len(t.encode())
        turn += 1
    parts.append("@You:\nthanks, what next?\n")
    return "".join(parts), turn


time.sleep(0.5)
idle = rss()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"processId": None, "rootUri": None,
                 "capabilities": {"general": {"positionEncodings": ["utf-16"]}}}})
while read().get("id") != 1:
    pass
send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
text, turns = chat(10 * 1024 * 1024)
path = root + "/big.chat"
open(path, "w").write(text)
uri = "file://" + path


def diagnostics(version):
    while True:
        m = read()
        if (m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri and m["params"].get("version") == version):
            return m


start = time.perf_counter()
send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
      "params": {"textDocument": {"uri": uri, "languageId": "chat", "version": 0, "text": text}}})
diagnostics(0)
opened = time.perf_counter() - start
# The middle turn's tool input line, `{"command":…}` (line 8 of a turn of 28 lines): a character
# typed before it makes the input invalid JSON (a diagnostic appears) and deleting it mends it
# (the diagnostic goes), so each edit changes the diagnostics and is published (the server sends
# only what differs from what the client has: an edit in prose is never published).
line = (turns // 2) * 28 + 8
version, times = 0, []
for i in range(edits):
    version += 1
    change = ({"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}, "text": "x"}
              if i % 2 == 0 else
              {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}}, "text": ""})
    t0 = time.perf_counter()
    send({"jsonrpc": "2.0", "method": "textDocument/didChange",
          "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})
    diagnostics(version)
    times.append((time.perf_counter() - t0) * 1000)
times.sort()
p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
print(f"chat {len(text.encode())} bytes, {turns} turns; daemon idle RSS {idle / 1024:.1f} MiB; "
      f"didOpen -> diagnostics {opened * 1000:.0f} ms; one-character edit -> diagnostics over "
      f"{edits} edits: p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {times[-1]:.1f} ms, "
      f"mean {sum(times) / len(times):.1f} ms; RSS after {rss() / 1024:.1f} MiB")
d.terminate()
d.wait()
shutil.rmtree(root, ignore_errors=True)
