// Real sockets and real processes in a temporary directory.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ServerNotFoundError, connectOrSpawn, daemonSocketPath, findExecutable } from '../src/server';

const dir = mkdtempSync(join(tmpdir(), 'flemma-vscode-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function fakeFlemmad(): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  const path = join(bin, 'flemmad');
  writeFileSync(path, '#!/bin/sh\necho "args: $*"\n');
  chmodSync(path, 0o755);
  return path;
}

test('the daemon socket lives under XDG_RUNTIME_DIR', () => {
  assert.equal(daemonSocketPath({ XDG_RUNTIME_DIR: '/run/user/1000' }), '/run/user/1000/flemma/lsp.sock');
  assert.equal(daemonSocketPath({}), undefined);
});

test('connects to a listening daemon socket', async () => {
  const runtime = join(dir, 'run-live');
  mkdirSync(join(runtime, 'flemma'), { recursive: true });
  const received: string[] = [];
  const server = createServer((s) => s.on('data', (d) => received.push(d.toString())));
  await new Promise<void>((resolve) => server.listen(join(runtime, 'flemma', 'lsp.sock'), resolve));
  try {
    const c = await connectOrSpawn('flemmad-that-does-not-exist', { XDG_RUNTIME_DIR: runtime, PATH: '' });
    assert.equal(c.kind, 'daemon');
    if (c.kind !== 'daemon') return;
    c.socket.write('Content-Length: 2\r\n\r\n{}');
    await new Promise((r) => setTimeout(r, 50));
    c.socket.destroy();
    assert.deepEqual(received, ['Content-Length: 2\r\n\r\n{}']);
  } finally {
    server.close();
  }
});

test('a stale socket file falls back to spawning `flemmad lsp`', async () => {
  const runtime = join(dir, 'run-stale');
  mkdirSync(join(runtime, 'flemma'), { recursive: true });
  writeFileSync(join(runtime, 'flemma', 'lsp.sock'), ''); // a plain file: nothing listens
  const exe = fakeFlemmad();
  const c = await connectOrSpawn('flemmad', { XDG_RUNTIME_DIR: runtime, PATH: join(dir, 'bin') });
  assert.equal(c.kind, 'spawned');
  if (c.kind !== 'spawned') return;
  assert.equal(c.executable, exe);
  let out = '';
  c.process.stdout?.on('data', (d) => (out += d.toString()));
  await new Promise((r) => c.process.on('close', r));
  assert.equal(out, 'args: lsp\n');
});

test('a missing binary is a clear error naming the setting', async () => {
  await assert.rejects(connectOrSpawn('flemmad', { PATH: join(dir, 'empty') }), (e: unknown) => {
    assert.ok(e instanceof ServerNotFoundError);
    assert.match((e as Error).message, /'flemmad' was not found.*flemma\.path/);
    return true;
  });
  assert.equal(findExecutable(join(dir, 'nope'), {}), undefined);
});
