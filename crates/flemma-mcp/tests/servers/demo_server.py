"""An MCP server for flemmad's tests, written with the official Python SDK (PyPI `mcp`).

    python demo_server.py                 # stdio
    python demo_server.py --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp
    python demo_server.py --crash         # fails at start (a message on stderr, exit 1)

Environment: DEMO_MARKERS, a directory where `hang` writes `cancelled-<tag>` when its call is
cancelled and `started-<tag>` when it starts.
"""

import argparse
import asyncio
import base64
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import EmbeddedResource, TextContent, TextResourceContents

server = MCPServer("flemma-demo")

# A 1×1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def marker(name: str) -> None:
    directory = os.environ.get("DEMO_MARKERS")
    if directory:
        Path(directory, name).write_text(str(os.getpid()))


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given, exactly."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message (an isError result)."""
    raise ToolError(message)


@server.tool()
async def hang(tag: str = "hang") -> str:
    """Never answers (until cancelled)."""
    marker(f"started-{tag}")
    try:
        await asyncio.sleep(3600)
    except BaseException:
        marker(f"cancelled-{tag}")
        raise
    return "woke up"


@server.tool()
def die() -> str:
    """Kills its own server process mid-call."""
    os._exit(3)


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def cwd() -> str:
    """The server's working directory."""
    return os.getcwd()


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of the server (empty when unset)."""
    return os.environ.get(name, "")


@server.tool()
def write(path: str, text: str) -> str:
    """Writes text to a file (to see what the server's sandbox lets it write)."""
    try:
        Path(path).write_text(text)
    except OSError as error:
        raise ToolError(f"cannot write {path}: {error}")
    return f"wrote {path}"


@server.tool()
def image() -> Image:
    """A 1×1 PNG image."""
    return Image(data=PNG, format="png")


@server.tool()
def note() -> list:
    """Text followed by an embedded text resource."""
    return [
        TextContent(type="text", text="see the note:"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="test://notes/1", mimeType="text/plain", text="remember the milk"),
        ),
    ]


@server.tool(name="get__x")
def get_double_underscore() -> str:
    """A tool whose name holds a double underscore."""
    return "get__x"


@server.tool(name="a_tool_with_a_rather_long_name_that_goes_past_the_provider_limit")
def long_name() -> str:
    """A tool whose full name is longer than 64 characters."""
    return "long"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `late` and tells the client its tool list changed."""

    def late() -> str:
        """Appeared after `grow`."""
        return "late"

    server.add_tool(late)
    # Protocol 2026-07-28 clients hear it on their `subscriptions/listen` stream; older ones
    # get the plain notification.
    await ctx.notify_tools_changed()
    try:
        await ctx.request_context.session.send_tool_list_changed()
    except Exception as error:  # a session without legacy notifications
        print(f"demo_server: no legacy list_changed: {error}", file=sys.stderr)
    return "grown"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--crash", action="store_true", help="fail at start")
    args = parser.parse_args()
    if args.crash:
        print("demo_server: cannot start: the DEMO_TOKEN credential is missing", file=sys.stderr)
        sys.exit(1)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
