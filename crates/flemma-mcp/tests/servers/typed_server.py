"""An MCP server for flemmad's tests whose tools take typed parameters, written with the official
Python SDK (PyPI `mcp`): pydantic writes their input schemas, with `anyOf` for optional and union
parameters, `$ref` into `$defs` for nested models and enums, arrays, and `pattern`/`minLength`.

    python typed_server.py                # stdio

Each tool answers with what it received (as JSON), so a test sees the call reach the server.
"""

import json
from enum import Enum
from typing import Literal, Optional, Union

from pydantic import BaseModel, Field

from mcp.server.mcpserver import MCPServer

server = MCPServer("flemma-typed")


class Point(BaseModel):
    x: int
    y: int


class Color(str, Enum):
    red = "red"
    green = "green"


@server.tool()
def count(n: Optional[int] = None) -> str:
    """Counts to n (an optional integer)."""
    return json.dumps({"n": n})


@server.tool()
def plot(p: Point, maybe: Optional[Point] = None) -> str:
    """Plots a point (a nested model) and an optional second one."""
    return json.dumps({"p": p.model_dump(), "maybe": maybe.model_dump() if maybe else None})


@server.tool()
def paint(color: Color, mode: Literal["fill", "stroke"] = "fill") -> str:
    """Paints in a color (an enum model) with a mode (a literal)."""
    return json.dumps({"color": color.value, "mode": mode})


@server.tool()
def tag(tags: list[str], points: list[Point] = []) -> str:
    """Tags with a list of strings and an optional list of points."""
    return json.dumps({"tags": tags, "points": [p.model_dump() for p in points]})


@server.tool()
def pick(value: Union[int, str], word: str = Field(default="abc", min_length=2, pattern="^[a-z]+$")) -> str:
    """Picks a value (an integer or a string) and a lower-case word."""
    return json.dumps({"value": value, "word": word})


@server.tool()
def secret() -> str:
    """A tool the tests exclude."""
    return "should never run"


if __name__ == "__main__":
    server.run()
