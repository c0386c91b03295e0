"""The official Python SDK's own client calling `echo` of the demo server over stdio, for
comparison with `benches/call.rs` (docs/benchmarks.md).

    $FLEMMA_TEST_MCP_PYTHON benches/sdk_client_call.py [CALLS]
"""

import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = Path(__file__).resolve().parent.parent / "tests" / "servers" / "demo_server.py"


async def main(calls: int) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(50):  # warm up
                await session.call_tool("echo", {"text": "hello"})
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                result = await session.call_tool("echo", {"text": "hello"})
                samples.append(time.perf_counter() - start)
                assert result.content[0].text == "hello"
    samples.sort()
    print(
        f"SDK client, stdio echo call: median {statistics.median(samples) * 1e6:.0f} µs, "
        f"mean {statistics.fmean(samples) * 1e6:.0f} µs, p90 {samples[int(len(samples) * 0.9)] * 1e6:.0f} µs "
        f"over {calls} calls"
    )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
