# First streamed chunk latency of `flemmad acp` (docs/benchmarks.md): from the read that brings
# the provider's first text delta (at a TCP tap between flemmad and the mock provider) to the
# ACP client receiving the first agent_message_chunk; both stamped in this process, one clock.
# Usage (a Python with PyPI agent-client-protocol):
#   python crates/flemma-acp/benches/first_chunk.py target/debug/flemmad target/debug/flemma-mock-provider [--daemon]
# With --daemon a `flemmad serve` runs first, and `flemmad acp` is a pipe to its acp.sock.
import asyncio, json, os, subprocess, sys, tempfile, time, statistics
import acp
from acp.schema import ClientCapabilities

RUNS = 20
flemmad, mock_binary = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
THROUGH_DAEMON = "--daemon" in sys.argv[3:]
state = {"armed": False, "delta_at": None, "chunk_at": None}


async def pipe(reader, writer, watch):
    try:
        while data := await reader.read(65536):
            if watch and state["armed"] and state["delta_at"] is None and b"text_delta" in data:
                state["delta_at"] = time.perf_counter()
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


class Client:
    async def session_update(self, session_id, update, **kwargs):
        if update.session_update == "agent_message_chunk" and state["chunk_at"] is None:
            state["chunk_at"] = time.perf_counter()

    async def request_permission(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("session/request_permission")


async def main():
    with tempfile.TemporaryDirectory() as home:
        script = os.path.join(home, "script.json")
        with open(script, "w") as f:
            json.dump([{"steps": [{"text": "Hello there. " * 50}], "bytes_per_sec": 50000}] * RUNS, f)
        mock = subprocess.Popen([mock_binary, "--no-echo", "--script", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        mock_url = mock.stdout.readline().decode().strip()
        host, port = mock_url.rsplit("//", 1)[1].split(":")

        async def tap(client_reader, client_writer):
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            await asyncio.gather(pipe(client_reader, up_writer, False), pipe(up_reader, client_writer, True))

        server = await asyncio.start_server(tap, "127.0.0.1", 0)
        tap_port = server.sockets[0].getsockname()[1]
        os.makedirs(os.path.join(home, "config/flemma"))
        with open(os.path.join(home, "config/flemma/config.toml"), "w") as f:
            f.write('provider = "anthropic"\nmodel = "claude-sonnet-4-5"\n')
        project = os.path.join(home, "project")
        os.makedirs(project)
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"), XDG_RUNTIME_DIR=os.path.join(home, "run"),
                   XDG_STATE_HOME=os.path.join(home, "state"), ANTHROPIC_BASE_URL=f"http://127.0.0.1:{tap_port}",
                   ANTHROPIC_API_KEY="bench")
        daemon = None
        if THROUGH_DAEMON:
            os.makedirs(os.path.join(home, "run"), mode=0o700)
            daemon = subprocess.Popen([flemmad, "serve"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, env=env)
            for _ in range(300):
                if os.path.exists(os.path.join(home, "run", "flemma", "acp.sock")):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)
        samples = []
        async with acp.spawn_agent_process(Client(), flemmad, "acp", env=env, cwd=project) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            session = await conn.new_session(cwd=project, mcp_servers=[])
            for _ in range(RUNS):
                state.update(armed=True, delta_at=None, chunk_at=None)
                response = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Say hello.")])
                assert response.stop_reason == "end_turn", response
                samples.append((state["chunk_at"] - state["delta_at"]) * 1000)
        server.close()
        mock.kill()
        if daemon is not None:
            daemon.terminate()
            daemon.wait()
            with open(os.path.join(home, "state", "flemma", "flemmad.log")) as f:
                assert "ACP connection opened" in f.read(), "the daemon did not serve the connection"
        samples.sort()
        where = "through the daemon" if THROUGH_DAEMON else "in-process"
        print(f"provider's first text delta → first agent_message_chunk ({where}): median {statistics.median(samples):.1f} ms, "
              f"p90 {samples[int(len(samples) * 0.9) - 1]:.1f} ms, max {samples[-1]:.1f} ms over {len(samples)} prompts")


asyncio.run(main())
