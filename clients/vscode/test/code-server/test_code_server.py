#!/usr/bin/env python3
"""A real VS Code (code-server) with the extension installed from our .vsix, driven like a user
in a headless Chromium through Playwright: activation, diagnostics, send, typing while a reply
streams, approve through the code lens, a code fence typed by hand, review before approval, and
the change lenses (Diff, Rewind) after it.

Run by run.sh, which installs code-server, Node 24, Chromium and Playwright and passes:
  CODE_SERVER   the code-server launcher        VSIX       the extension package
  FLEMMAD       the flemmad binary              MOCK       flemma-mock-provider
  CHROMIUM      the browser (/usr/bin/chromium) WORK       an empty directory for this run
Prints TAP-like `ok` / `not ok` lines and exits 1 on any failure.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

WORK = os.environ["WORK"]
TOOL_ID = "toolu_01VSCODEAPPROVEVSCODEAPP"
LONG_REPLY = (
    "A long reply, streaming slowly while you type below it. One, two, three, four, five, six, "
    "seven, eight, nine, ten. The end of the long reply."
)
TURNS = [
    {"steps": [{"text": "Hello from the mock, in VS Code."}], "bytes_per_sec": 400},
    {"steps": [{"text": LONG_REPLY}], "bytes_per_sec": 250},
    {
        "steps": [
            {"text": "I will say hello with bash."},
            {"tool_call": {"name": "bash", "id": TOOL_ID,
                           "input": {"label": "say hello", "command": "echo approved-and-ran"}}},
        ]
    },
    {"steps": [{"text": "It printed approved-and-ran."}]},
]
FRONTMATTER = (
    '```json\n{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5",\n'
    '  "parameters": { "thinking": false }, "tools": { "auto_approve_sandboxed": false } } }\n```\n'
)

failures = 0
checks = 0


REVIEWED_BEFORE = "".join(f"{n}\n" for n in range(1, 13))
REVIEW_CHAT = (
    "@You:\nNumber the lines in words.\n\n@Assistant:\n"
    "**Tool Use:** `write` (`toolu_01REV`)\n```json\n"
    + json.dumps({"label": "words", "path": "notes.md",
                  "content": REVIEWED_BEFORE.replace("1\n2\n", "one\n2\n", 1).replace("12\n", "twelve\n")})
    + "\n```\n\n@You:\n**Tool Result:** `toolu_01REV` (pending)\n```\n```\n"
)


def check(ok, what, detail=None):
    global failures, checks
    checks += 1
    if ok:
        print(f"ok - {what}", flush=True)
    else:
        failures += 1
        print(f"not ok - {what}", flush=True)
        if detail:
            for line in str(detail).splitlines()[-40:]:
                print(f"  | {line}", flush=True)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def main():
    workspace = os.path.join(WORK, "workspace")
    home = os.path.join(WORK, "home")
    user_data = os.path.join(WORK, "user-data")
    extensions = os.path.join(WORK, "extensions")
    bin_dir = os.path.join(WORK, "bin")
    for d in (workspace, home, user_data, extensions, bin_dir, os.path.join(user_data, "User")):
        os.makedirs(d, exist_ok=True)
    chat = os.path.join(workspace, "talk.chat")
    with open(chat, "w") as f:
        f.write(FRONTMATTER + "@You:\nSay hello to VS Code.\n")
    # Review before approval: a pending write of notes.md (two hunks).
    with open(os.path.join(workspace, "notes.md"), "w") as f:
        f.write(REVIEWED_BEFORE)
    with open(os.path.join(workspace, "review.chat"), "w") as f:
        f.write(REVIEW_CHAT)
    with open(os.path.join(workspace, "broken.chat"), "w") as f:
        f.write("@You:\nlook:\n```\nnever closed\n")
    # What the extension starts: `flemmad lsp`, in process (no daemon here).
    wrapper = os.path.join(bin_dir, "flemmad")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\n[ "$1" = lsp ] || exec "{os.environ["FLEMMAD"]}" "$@"\nshift\n'
                f'exec "{os.environ["FLEMMAD"]}" lsp --no-daemon "$@"\n')
    os.chmod(wrapper, 0o755)
    # flemmad on the PATH of the user's login shell, as `cargo install` leaves it: VS Code's
    # server gives the extension host the environment of a login shell, not its own.
    with open(os.path.join(home, ".profile"), "w") as f:
        f.write(f'PATH="{bin_dir}:$PATH"\nexport PATH\n')
    # The user's settings: nothing about flemma (the defaults), no welcome page, trust on.
    with open(os.path.join(user_data, "User", "settings.json"), "w") as f:
        json.dump({
            "workbench.startupEditor": "none",
            "security.workspace.trust.enabled": False,
            "extensions.autoCheckUpdates": False,
            "extensions.autoUpdate": False,
            "workbench.tips.enabled": False,
            "editor.minimap.enabled": False,
        }, f)

    turns_file = os.path.join(WORK, "turns.json")
    with open(turns_file, "w") as f:
        json.dump(TURNS, f)
    mock_log = open(os.path.join(WORK, "mock.log"), "w")
    mock = subprocess.Popen([os.environ["MOCK"], "--script", turns_file], stdout=subprocess.PIPE,
                            stderr=mock_log, text=True)
    mock_url = mock.stdout.readline().strip()

    env = dict(os.environ)
    env.update(
        HOME=home,
        XDG_CONFIG_HOME=os.path.join(home, ".config"),
        XDG_DATA_HOME=os.path.join(home, ".local/share"),
        XDG_STATE_HOME=os.path.join(home, ".local/state"),
        XDG_CACHE_HOME=os.path.join(home, ".cache"),
        XDG_RUNTIME_DIR=os.path.join(home, "run"),
        PATH=bin_dir + os.pathsep + env["PATH"],
        FLEMMA_CONFIG="",
        ANTHROPIC_BASE_URL=mock_url,
        ANTHROPIC_API_KEY="vscode-test-key",
    )
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    code_server = os.environ["CODE_SERVER"]
    common = ["--user-data-dir", user_data, "--extensions-dir", extensions]
    installed = subprocess.run([code_server, *common, "--install-extension", os.environ["VSIX"]],
                               env=env, capture_output=True, text=True, timeout=300)
    check(installed.returncode == 0 and "flemmad.flemma" in subprocess.run(
        [code_server, *common, "--list-extensions"], env=env, capture_output=True, text=True).stdout,
        "code-server --install-extension flemma.vsix installs the extension",
        installed.stdout + installed.stderr)

    port = free_port()
    server_log = open(os.path.join(WORK, "code-server.log"), "w")
    server = subprocess.Popen(
        [code_server, *common, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
         "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", workspace],
        env=env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/?folder={workspace}"
        up = wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 120, 0.5)
        if not check(up, "code-server answers on 127.0.0.1"):
            return
        drive(url)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        mock.terminate()
        mock.wait(timeout=10)
    if failures:
        for name in ("code-server.log", "mock.log"):
            path = os.path.join(WORK, name)
            print(f"-- {name} (tail):")
            with open(path, errors="replace") as f:
                for line in f.read().splitlines()[-25:]:
                    print(f"  | {line}")
        for root, _, files in os.walk(user_data):
            for name in files:
                if "Flemma" in name and name.endswith(".log"):
                    print(f"-- {name}:")
                    with open(os.path.join(root, name), errors="replace") as f:
                        for line in f.read().splitlines()[-25:]:
                            print(f"  | {line}")


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def drive(url):
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".monaco-workbench", timeout=120_000)
        try:
            steps(page)
        except Exception as error:  # noqa: BLE001 - any failure: keep what the page showed
            page.screenshot(path=os.path.join(WORK, "failure.png"))
            check(False, f"the test stopped: {error}", page.locator("body").inner_text()[-3000:])
        browser.close()


def steps(page):
    chat = os.path.join(WORK, "workspace", "talk.chat")

    def saved():
        with open(chat) as f:
            return f.read()

    status_bar = page.locator("#workbench\\.parts\\.statusbar")

    def open_file(name):
        # Quick Open (Ctrl+P), as a user does; the first window may take a while to load.
        for _ in range(3):
            page.keyboard.press("Control+P")
            try:
                page.wait_for_selector(".quick-input-widget input", timeout=20_000)
            except PlaywrightTimeout:
                continue
            page.keyboard.type(name, delay=50)
            time.sleep(1)
            page.keyboard.press("Enter")
            try:
                page.wait_for_selector(f".tab.active[aria-label^='{name}']", timeout=20_000)
                return
            except PlaywrightTimeout:
                page.keyboard.press("Escape")
        raise RuntimeError(f"could not open {name} with Quick Open")

    def editor_text():
        return page.locator(".editor-instance .view-lines").first.inner_text().replace("\u00a0", " ")

    def focus_end():
        page.locator(".editor-instance .view-lines").first.click()
        page.keyboard.press("Control+End")

    def save():
        page.keyboard.press("Control+S")
        time.sleep(0.5)

    # Activation: opening a .chat file activates the extension (language `chat`), which
    # starts `flemmad lsp` and shows its status bar item.
    open_file("talk.chat")
    active = wait_until(lambda: "flemma" in status_bar.inner_text(), 120, 0.5)
    check(active, "opening talk.chat activates the extension: the status bar shows flemma",
          status_bar.inner_text())
    mode = page.locator("#status\\.editor\\.mode, [id='status.editor.mode']").first
    check(wait_until(lambda: "Flemma chat" in mode.inner_text(), 30),
          "the editor's language is Flemma chat", mode.inner_text() if mode.count() else "no language item")

    # Diagnostics: an unclosed fence in another chat is an error in the Problems panel.
    open_file("broken.chat")
    page.keyboard.press("Control+Shift+M")
    problems = page.locator(".markers-panel")
    found = wait_until(lambda: "close the fence" in problems.inner_text(), 60, 0.5)
    check(found, "diagnostics: broken.chat's unclosed fence is in the Problems panel, with the fix",
          problems.inner_text() if problems.count() else "no Problems panel")
    page.keyboard.press("Control+Shift+M")
    open_file("talk.chat")

    # Send: Ctrl+] streams the reply into the editor.
    focus_end()
    page.keyboard.press("Control+BracketRight")
    seen_in_status = set()

    def note_status():
        seen_in_status.add(status_bar.inner_text())
        return "Hello from the mock, in VS Code." in editor_text()

    replied = wait_until(note_status, 60, 0.3)
    check(replied, "Ctrl+] sends: the reply streams into the editor", editor_text())
    check(any("anthropic/claude-sonnet-4-5" in t for t in seen_in_status),
          "the status bar names the model (anthropic/claude-sonnet-4-5)", "\n".join(seen_in_status))
    # VS Code for the web saves a second after the last change (files.autoSave afterDelay by
    # default): the reply reaches the disk without Ctrl+S.
    reply_on_disk = "@Assistant:\nHello from the mock, in VS Code.\n\n@You:\n"
    check(wait_until(lambda: reply_on_disk in saved(), 15),
          "code-server saves the reply by itself a moment after it ends (autosave)", saved())

    # Typing below a reply while it streams.
    focus_end()
    page.keyboard.type("Now a long one, please.")
    page.keyboard.press("Control+BracketRight")
    wait_until(lambda: "A long reply" in editor_text(), 30, 0.2)
    focus_end()
    typed = "typed while it streams"
    page.keyboard.press("Enter")
    page.keyboard.type(typed, delay=120)
    wait_until(lambda: "The end of the long reply." in editor_text(), 90, 0.3)
    time.sleep(1.5)
    save()
    text = saved()
    check(text.count(LONG_REPLY) == 1 and text.count(typed) == 1,
          "typing below a streaming reply: every key and the whole reply land, once each", text)

    # Approve through the code lens.
    focus_end()
    page.keyboard.press("Enter")
    page.keyboard.type("Say hello with bash.")
    page.keyboard.press("Control+BracketRight")
    lens = page.locator(".codelens-decoration a", has_text="Approve")
    shown = wait_until(lambda: lens.count() > 0, 60, 0.3)
    check(shown, "a reply calling bash leaves a pending placeholder with Approve / Reject code lenses",
          editor_text())
    if shown:
        # The lenses are drawn again when the text or the server's state changes: click the one
        # on screen once it stands still.
        for _ in range(10):
            try:
                lens.first.click(timeout=5_000)
                break
            except PlaywrightTimeout:
                page.keyboard.press("Control+End")
                time.sleep(0.5)
        ran = wait_until(lambda: "It printed approved-and-ran." in editor_text(), 60, 0.3)
        time.sleep(1.5)
        save()
        check(ran and f"**Tool Result:** `{TOOL_ID}`\n```\napproved-and-ran\n```" in saved(),
              "clicking Approve runs bash: its output and the next reply land", saved())

    # Code fences typed by hand: three backticks stay three (a closing fence typed under an
    # empty line got an auto-closed fourth).
    focus_end()
    page.keyboard.press("Enter")
    for line in ["Here:", "```rust", "fn main() {}", "", "```", "and:", "```", "", "```"]:
        page.keyboard.type(line, delay=80)
        time.sleep(0.3)  # as fast as a person: the tokenizer has seen the line
        page.keyboard.press("Escape")  # no word suggestion taken by Enter
        page.keyboard.press("Enter")
    time.sleep(1.5)
    save()
    text = saved()
    check(text.endswith("Here:\n```rust\nfn main() {}\n\n```\nand:\n```\n\n```\n") and "````" not in text,
          "code fences typed by hand keep three backticks", text[-200:])

    # Review before approval: "Review changes" (a code action on the pending write, Ctrl+.)
    # opens VS Code's diff editor between notes.md and the proposed content.
    open_file("review.chat")
    line = REVIEW_CHAT.splitlines().index("**Tool Result:** `toolu_01REV` (pending)") + 1
    page.locator(".editor-instance .view-lines").first.click()
    page.keyboard.press("Control+G")
    page.wait_for_selector(".quick-input-widget input", timeout=20_000)
    page.keyboard.type(str(line), delay=50)
    page.keyboard.press("Enter")
    review = page.locator(".action-widget .monaco-list-row", has_text="Review changes")
    for _ in range(5):
        page.keyboard.press("Control+Period")
        if wait_until(lambda: review.count() > 0, 10, 0.3):
            break
        page.keyboard.press("Escape")
    offered = review.count() > 0
    check(offered, "a pending write offers the code action Review changes (Ctrl+.)",
          page.locator("body").inner_text()[-1500:])
    if offered:
        review.first.click()
        diff = page.locator(".monaco-diff-editor")
        opened = wait_until(lambda: diff.count() > 0 and "twelve" in diff.first.inner_text(), 30, 0.3)
        check(opened and "proposed by toolu_01REV" in page.locator(".tab.active").first.inner_text(),
              "Review changes opens the diff editor between notes.md and the proposal",
              diff.first.inner_text() if diff.count() else "no diff editor")

    # Rewind after: approved, the write changes notes.md; the answer that made it gets the code
    # lenses "1 file changed · Diff · Rewind"; Diff opens what it changed, Rewind (after a
    # modal question) puts notes.md back and cuts the chat back to before the answer.
    open_file("review.chat")
    review_chat = os.path.join(WORK, "workspace", "review.chat")
    notes = os.path.join(WORK, "workspace", "notes.md")
    approve = page.locator(".codelens-decoration a", has_text="Approve")
    if not check(wait_until(lambda: approve.count() > 0, 30, 0.3),
                 "review.chat's pending write has an Approve code lens", editor_text()):
        return
    approve.first.click()
    with open(notes) as f:
        before = f.read()
    check(before == REVIEWED_BEFORE, "notes.md is as it was before the approval", before)
    changed = page.locator(".codelens-decoration a", has_text="1 file changed")
    check(wait_until(lambda: changed.count() > 0, 60, 0.3),
          "after the write runs, its answer has the code lens \"1 file changed\"", editor_text())
    with open(notes) as f:
        written = f.read()
    check(written != REVIEWED_BEFORE and "twelve" in written, "the approved write changed notes.md", written)
    diff_lens = page.locator(".codelens-decoration a", has_text="Diff")
    if check(diff_lens.count() > 0, "beside it, the lens Diff"):
        diff_lens.first.click()
        changes_tab = page.locator(".tab.active[aria-label^='toolu_01REV.diff']")
        active = page.locator(".editor-group-container.active .view-lines")

        def active_text():
            return active.first.inner_text().replace("\u00a0", " ") if active.count() else ""
        shown = wait_until(lambda: changes_tab.count() > 0 and "+twelve" in active_text(), 30, 0.3)
        check(shown, "Diff opens what the call changed (a read-only toolu_01REV.diff beside the chat)",
              active_text())
        open_file("review.chat")
    rewind_lens = page.locator(".codelens-decoration a", has_text="Rewind")
    if check(rewind_lens.count() > 0, "and the lens Rewind"):
        rewind_lens.first.click()
        button = page.locator(".monaco-dialog-box .monaco-button", has_text="Rewind")
        asked = wait_until(lambda: button.count() > 0, 20, 0.3)
        check(asked, "Rewind asks first, in a modal dialog", page.locator("body").inner_text()[-800:])
        if asked:
            button.first.click()

            def notes_back():
                with open(notes) as f:
                    return f.read() == REVIEWED_BEFORE
            check(wait_until(notes_back, 30, 0.3), "Rewind puts notes.md back as it was")
            cut = wait_until(lambda: "@Assistant:" not in editor_text()
                             and "Number the lines in words." in editor_text(), 30, 0.3)
            time.sleep(1.5)
            save()
            with open(review_chat) as f:
                on_disk = f.read()
            check(cut and "@Assistant:" not in on_disk and "Number the lines in words." in on_disk,
                  "and cuts the chat back to before the answer, in the editor (saved: on disk)", on_disk)


if __name__ == "__main__":
    main()
    print(f"{checks - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)
