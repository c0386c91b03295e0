"""A small ACP client on the official Python SDK (PyPI `agent-client-protocol`) that drives
`flemmad acp` through a script of steps and prints what it saw as one JSON object.

Usage: client.py FLEMMAD CWD STEPS_JSON

STEPS_JSON is a list of steps, or {"buffers": {PATH: TEXT}, "steps": [...]}: the client then
advertises fs.readTextFile and fs.writeTextFile, answers fs/read_text_file from its buffers
(else the file on disk, as an editor does), and keeps what fs/write_text_file writes in its
buffers (nothing on disk: an editor's unsaved buffer); the output's "fs" lists the calls and
"buffers" what they hold at the end.

Steps (a JSON list):
  {"op": "new"}                                   session/new in CWD (mcpServers optional)
  {"op": "load", "session": PATH}                 session/load of a chat
  {"op": "prompt", "text": ..., "blocks": [...],  session/prompt; `permission` answers every
   "permission": "allow_once"|"reject_once"|...,  permission request with that optionId
   "cancel_after_chunks": N,                      (or "cancel": a cancelled outcome);
   "cancel_when_seen": TEXT}                      `cancel_after_chunks` sends session/cancel
                                                  after N agent_message_chunks,
                                                  `cancel_request_after_chunks` sends
                                                  $/cancel_request for the prompt instead,
                                                  `cancel_when_seen` once an update holds TEXT;
                                                  "permission": "hold" leaves the request open
                                                  (creating the file `asked_marker` names) until
                                                  the file `release_marker` names exists, then
                                                  rejects it (the SDK reads nothing meanwhile)
  {"op": "list"}                                  session/list in CWD
  {"op": "set_mode", "mode": ID}                  session/set_mode of the current session
  {"op": "set_config_option", "config": ID,       session/set_config_option of the current
   "value": VALUE}                                session
  {"op": "resume", "session": PATH}               session/resume of a chat (no replay)
  {"op": "close"} / {"op": "delete"}              session/close / session/delete of the
                                                  current session
  {"op": "fork", "messages": N}                   session/fork of the current session (the
                                                  first N messages with "messages"); the fork
                                                  becomes the current session
  {"op": "prompt_and_leave", "text": ...,         session/prompt, then the client goes away
   "after_chunks": N}                             (ends the run) after N agent_message_chunks
  {"op": "replace_in_chat", "old": ..., "new": ...}
                                                  another program edits the session's chat
                                                  file (the first `old` becomes `new`)
  {"op": "wait_for_chat", "contains": TEXT}       waits (30 s at most) until the session's
                                                  chat file holds TEXT (another editor's turn)
  {"op": "wait_for_update", "contains": TEXT,     waits (30 s at most) until an update of
   "marker": PATH}                                the step, or its agent_message_chunks joined,
                                                  hold TEXT (another editor's turn streaming
                                                  in), then creates the file `marker`
  {"op": "wait_for_file", "path": PATH}           waits (30 s at most) until the file exists
  {"op": "touch", "path": PATH}                   creates the file (the steps before are done)
The output: {"initialize": ..., "steps": [{"op", "result" | "error", "updates",
"permissions"}], "seen": [...]}; "seen" is every update ("tool_call_update ID STATUS") and
file request ("fs/write_text_file PATH") of the run, in the order they arrived. Updates are the session/update notifications received during the step, in
order, as JSON.
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Recorder:
    def __init__(self):
        self.updates = []
        self.permissions = []
        self.answer = "allow_once"
        self.cancel_after = None
        self.cancel_request_after = None
        self.prompt_request_id = None
        self.cancel_when_seen = None
        self.asked_marker = None
        self.release_marker = None
        self.chunks = 0
        self.conn = None
        self.session_id = None
        self.buffers = None
        self.fs = []
        self.leave = None
        self.leave_after = None
        # Every update and file request of the run, in the order they arrived.
        self.seen = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permissions.append(
            {"toolCall": dump(tool_call), "options": [dump(o) for o in options]}
        )
        if self.answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if self.answer == "hold":
            # Left open (as a user who has not looked yet) until the test releases it.
            open(self.asked_marker, "w").close()
            for _ in range(3000):
                if os.path.exists(self.release_marker):
                    break
                await asyncio.sleep(0.02)
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id="reject_once")
            )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer)
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(dump(update))
        self.seen.append(seen_entry(dump(update)))
        if self.cancel_when_seen is not None and self.cancel_when_seen in json.dumps(dump(update)):
            self.cancel_when_seen = None
            asyncio.get_running_loop().create_task(self.conn.cancel(session_id=session_id))
        if update.session_update == "agent_message_chunk":
            self.chunks += 1
            if self.leave is not None and self.chunks == self.leave_after:
                self.leave.set()
            if self.cancel_after is not None and self.chunks == self.cancel_after:
                asyncio.get_running_loop().create_task(self.conn.cancel(session_id=session_id))
            if self.cancel_request_after is not None and self.chunks == self.cancel_request_after:
                # The SDK has no helper for the protocol-level cancel: sent as the schema says.
                asyncio.get_running_loop().create_task(
                    self.conn._conn.send_notification(
                        "$/cancel_request", {"requestId": self.prompt_request_id}
                    )
                )

    async def write_text_file(self, content, path, session_id, **kwargs):
        if self.buffers is None:
            raise acp.RequestError.method_not_found("fs/write_text_file")
        self.fs.append({"method": "fs/write_text_file", "path": path, "sessionId": session_id})
        self.seen.append(f"fs/write_text_file {path}")
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def read_text_file(self, path, session_id, limit=None, line=None, **kwargs):
        if self.buffers is None:
            raise acp.RequestError.method_not_found("fs/read_text_file")
        self.fs.append({"method": "fs/read_text_file", "path": path, "sessionId": session_id})
        self.seen.append(f"fs/read_text_file {path}")
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        with open(path, encoding="utf-8") as file:
            return ReadTextFileResponse(content=file.read())

    def on_connect(self, conn):
        self.conn = conn


def dump_dict(update):
    return update if isinstance(update, dict) else dump(update)


def seen_entry(update):
    """An update as one line of the run's order: its kind, and its call and status if any."""
    entry = update["sessionUpdate"]
    if "toolCallId" in update:
        entry += " " + update["toolCallId"]
    if "status" in update:
        entry += " " + update["status"]
    return entry


def blocks_of(step):
    if "blocks" in step:
        return step["blocks"]
    return [acp.text_block(step["text"])]


async def main():
    flemmad, cwd, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    recorder = Recorder()
    capabilities = ClientCapabilities()
    if isinstance(steps, dict):
        recorder.buffers = dict(steps.get("buffers", {}))
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
        )
        steps = steps["steps"]
    out = {"steps": []}
    async with acp.spawn_agent_process(
        recorder, flemmad, "acp", env=dict(os.environ), cwd=cwd
    ) as (conn, process):
        recorder.conn = conn
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=capabilities,
            client_info=acp.schema.Implementation(name="flemmad-test", version="1"),
        )
        out["initialize"] = dump(init)
        session_id = None
        leaving = False
        for step in steps:
            recorder.updates, recorder.permissions, recorder.chunks = [], [], 0
            recorder.answer = step.get("permission", "allow_once")
            recorder.cancel_after = step.get("cancel_after_chunks")
            recorder.cancel_request_after = step.get("cancel_request_after_chunks")
            recorder.cancel_when_seen = step.get("cancel_when_seen")
            recorder.asked_marker = step.get("asked_marker")
            recorder.release_marker = step.get("release_marker")
            record = {"op": step["op"]}
            try:
                if step["op"] == "new":
                    response = await conn.new_session(
                        cwd=cwd, mcp_servers=step.get("mcpServers", [])
                    )
                    session_id = response.session_id
                    record["result"] = dump(response)
                elif step["op"] == "load":
                    session_id = step["session"]
                    response = await conn.load_session(
                        cwd=cwd, session_id=session_id, mcp_servers=[]
                    )
                    record["result"] = dump(response) if response is not None else {}
                elif step["op"] == "prompt":
                    # The id the SDK gives the prompt request (for $/cancel_request).
                    recorder.prompt_request_id = conn._conn._next_request_id
                    response = await conn.prompt(
                        session_id=step.get("session", session_id), prompt=blocks_of(step)
                    )
                    record["result"] = dump(response)
                elif step["op"] == "prompt_and_leave":
                    recorder.leave = asyncio.Event()
                    recorder.leave_after = step["after_chunks"]
                    unanswered = asyncio.ensure_future(
                        conn.prompt(session_id=session_id, prompt=blocks_of(step))
                    )
                    await asyncio.wait_for(recorder.leave.wait(), 60)
                    unanswered.cancel()
                    record["result"] = {"left": True}
                    leaving = True
                elif step["op"] == "resume":
                    session_id = step.get("session", session_id)
                    response = await conn.resume_session(cwd=cwd, session_id=session_id)
                    record["result"] = dump(response)
                elif step["op"] == "fork":
                    meta = {}
                    if "messages" in step:
                        meta["flemma"] = {"messages": step["messages"]}
                    response = await conn.fork_session(session_id=session_id, cwd=cwd, **meta)
                    session_id = response.session_id
                    record["result"] = dump(response)
                elif step["op"] == "close":
                    response = await conn.close_session(session_id=session_id)
                    record["result"] = dump(response) if response is not None else {}
                elif step["op"] == "delete":
                    # The SDK has no helper for session/delete: the request as the schema says.
                    record["result"] = await conn._conn.send_request(
                        "session/delete", {"sessionId": session_id}
                    )
                elif step["op"] == "set_mode":
                    response = await conn.set_session_mode(
                        session_id=session_id, mode_id=step["mode"]
                    )
                    record["result"] = dump(response) if response is not None else {}
                elif step["op"] == "set_config_option":
                    response = await conn.set_config_option(
                        config_id=step["config"], session_id=session_id, value=step["value"]
                    )
                    record["result"] = dump(response)
                elif step["op"] == "list":
                    response = await conn.list_sessions(cwd=cwd)
                    record["result"] = dump(response)
                elif step["op"] == "wait_for_chat":
                    # Another editor works on the chat: wait until the file shows it.
                    for _ in range(600):
                        with open(session_id, encoding="utf-8") as file:
                            if step["contains"] in file.read():
                                break
                        await asyncio.sleep(0.05)
                    else:
                        raise AssertionError(f"the chat never held {step['contains']}")
                    record["result"] = {}
                elif step["op"] == "wait_for_update":
                    # Another front end's turn streams in: wait (30 s at most) for an update
                    # holding TEXT, then create the file `marker` names, if any.
                    for _ in range(600):
                        said = "".join(
                            u.get("content", {}).get("text", "")
                            for u in map(dump_dict, recorder.updates)
                            if u["sessionUpdate"] == "agent_message_chunk"
                        )
                        if step["contains"] in said or any(
                            step["contains"] in json.dumps(u) for u in recorder.updates
                        ):
                            break
                        await asyncio.sleep(0.05)
                    else:
                        raise AssertionError(
                            f"no update held {step['contains']}: {recorder.updates}"
                        )
                    if "marker" in step:
                        open(step["marker"], "w").close()
                    record["result"] = {}
                elif step["op"] == "touch":
                    # Tells the test the steps before are done: creates the file `path` names.
                    open(step["path"], "w").close()
                    record["result"] = {}
                elif step["op"] == "wait_for_file":
                    # Waits (30 s at most) until the file `path` names exists.
                    for _ in range(600):
                        if os.path.exists(step["path"]):
                            break
                        await asyncio.sleep(0.05)
                    else:
                        raise AssertionError(f"{step['path']} never appeared")
                    record["result"] = {}
                elif step["op"] == "replace_in_chat":
                    with open(session_id, encoding="utf-8") as file:
                        text = file.read()
                    assert step["old"] in text, text
                    with open(session_id, "w", encoding="utf-8") as file:
                        file.write(text.replace(step["old"], step["new"], 1))
                    record["result"] = {}
                elif step["op"] == "double_prompt":
                    first = asyncio.ensure_future(
                        conn.prompt(session_id=session_id, prompt=blocks_of(step))
                    )
                    await asyncio.sleep(0.3)
                    try:
                        await conn.prompt(session_id=session_id, prompt=[acp.text_block("second")])
                        record["second"] = "accepted"
                    except acp.RequestError as error:
                        record["second"] = {"code": error.code, "message": str(error)}
                    record["result"] = dump(await first)
            except acp.RequestError as error:
                record["error"] = {"code": error.code, "message": str(error), "data": error.data}
            record["updates"] = list(recorder.updates)
            record["permissions"] = list(recorder.permissions)
            out["steps"].append(record)
            if leaving:
                break
    if recorder.buffers is not None:
        out["fs"] = recorder.fs
        out["buffers"] = recorder.buffers
    out["seen"] = recorder.seen
    print(json.dumps(out))


asyncio.run(main())
