"""A small ACP agent on the official Python SDK (PyPI `agent-client-protocol`): the foreign
agent `ask_agent` asks in the tests. What it does depends on a word in the prompt:

  (default)   thinks, says "Echo: <first line of the task>" in pieces, and makes one tool call
              ("Read notes.txt", completed) in between
  CONTEXT     answers with the whole task it was given (to check `with_context`)
  PERMISSION  asks permission for "Run rm -rf build" and says "allowed" or "rejected"
  SLOW        says "part 1", "part 2", ... every 100 ms until cancelled (then answers
              `cancelled`)
  CRASH       says "about to crash" and exits with status 3
  HANG        says "thinking about it" and then nothing, for ever
  GARBAGE     writes a line that is not JSON-RPC, and nothing else
  BARRIER     logs "ready <pid>" and waits (saying "waiting" every 200 ms) until AGENT_LOG
              holds two "ready" lines, then says "Together: <first line of the task>" (two
              agents asked at once); after 20 s without, "Alone: <first line>"

Every process start appends "start <pid>" to the file named by AGENT_LOG (when set), every
SLOW task "slow <session>", and every session/cancel "cancel <session>".
"""

import asyncio
import os
import sys

import acp
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)


def log(line):
    path = os.environ.get("AGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


class Agent:
    def __init__(self):
        self.conn = None
        self.cancelled = set()
        self.sessions = 0

    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="py-agent", title="The Python test agent", version="1"),
        )

    async def new_session(self, cwd, mcp_servers=None, **kwargs):
        self.sessions += 1
        return NewSessionResponse(session_id=f"py-session-{os.getpid()}-{self.sessions}")

    async def say(self, session_id, text):
        await self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(text))

    async def prompt(self, session_id, prompt, **kwargs):
        task = "".join(block.text for block in prompt if getattr(block, "text", None))
        if "GARBAGE" in task:
            sys.stdout.write("this is not json-rpc\n")
            sys.stdout.flush()
            await asyncio.sleep(3600)
        if "CRASH" in task:
            await self.say(session_id, "about to crash")
            await asyncio.sleep(0.2)
            os._exit(3)
        if "HANG" in task:
            await self.say(session_id, "thinking about it")
            await asyncio.sleep(3600)
        if "BARRIER" in task:
            log(f"ready {os.getpid()}")
            path = os.environ.get("AGENT_LOG", "")
            word = "Alone: "
            for _ in range(100):
                with open(path, encoding="utf-8") as file:
                    if sum(1 for line in file if line.startswith("ready ")) >= 2:
                        word = "Together: "
                        break
                await self.say(session_id, "waiting. ")
                await asyncio.sleep(0.2)
            await self.say(session_id, word + task.strip().splitlines()[0])
            return PromptResponse(stop_reason="end_turn")
        if "SLOW" in task:
            log(f"slow {session_id}")
            n = 0
            while session_id not in self.cancelled:
                n += 1
                await self.say(session_id, f"part {n}. ")
                await asyncio.sleep(0.1)
            return PromptResponse(stop_reason="cancelled")
        if "PERMISSION" in task:
            await self.conn.session_update(
                session_id=session_id,
                update=acp.start_tool_call("rm-1", "Run rm -rf build", kind="execute", status="pending"),
            )
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="rm-1", title="Run rm -rf build", kind="execute"),
                options=[
                    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                ],
            )
            chosen = getattr(answer.outcome, "option_id", None)
            word = "allowed" if chosen == "yes" else "rejected"
            await self.conn.session_update(
                session_id=session_id,
                update=acp.update_tool_call("rm-1", status="completed" if chosen == "yes" else "failed"),
            )
            await self.say(session_id, word)
            return PromptResponse(stop_reason="end_turn")
        if "CONTEXT" in task:
            await self.say(session_id, task)
            return PromptResponse(stop_reason="end_turn")
        first = task.strip().splitlines()[0] if task.strip() else ""
        await self.conn.session_update(session_id=session_id, update=acp.update_agent_thought_text("Let me see."))
        await self.say(session_id, "Echo: ")
        await self.conn.session_update(
            session_id=session_id,
            update=acp.start_tool_call("read-1", "Read notes.txt", kind="read", status="in_progress"),
        )
        await self.conn.session_update(
            session_id=session_id, update=acp.update_tool_call("read-1", status="completed")
        )
        await self.say(session_id, first)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id, **kwargs):
        log(f"cancel {session_id}")
        self.cancelled.add(session_id)


async def main():
    log(f"start {os.getpid()}")
    await acp.run_agent(Agent())


if __name__ == "__main__":
    asyncio.run(main())
