"""A stand-in LSP server for the Neovim smoke test (flemmad lsp is not on this branch yet): it
answers `initialize` with flemmad's command list, answers every request with null, and appends
each message it receives to $FAKE_LSP_LOG as a JSON line."""

import json
import os
import sys

COMMANDS = ["flemma.send", "flemma.cancel", "flemma.approve", "flemma.reject", "flemma.approveAll",
            "flemma.background", "flemma.execute", "flemma.status"]


def read_message(stream):
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(stream.read(length))


def send(message):
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def main():
    log = open(os.environ["FAKE_LSP_LOG"], "a", buffering=1)
    while True:
        message = read_message(sys.stdin.buffer)
        if message is None:
            return
        log.write(json.dumps({"method": message.get("method"), "params": message.get("params")}) + "\n")
        if message.get("method") == "exit":
            return
        if "id" in message and "method" in message:
            result = None
            if message["method"] == "initialize":
                result = {"capabilities": {"textDocumentSync": 2,
                                           "executeCommandProvider": {"commands": COMMANDS}},
                          "serverInfo": {"name": "fake-flemmad"}}
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
