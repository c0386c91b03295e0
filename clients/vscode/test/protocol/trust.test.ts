// Workspace Trust against the real `flemmad lsp --no-daemon`: in a folder trusted with
// `flemmad trust`, a chat's frontmatter may turn approvals off; the settings the extension sends
// in Restricted Mode (`serverSettings(config, false)`) make that chat untrusted (a warning on its
// frontmatter line), and the settings it sends once the user trusts the workspace lift it.
// Runs when FLEMMAD names the binary (as .ci/run does).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import {
  DidChangeConfigurationNotification,
  DidOpenTextDocumentNotification,
  InitializedNotification,
  InitializeRequest,
  PublishDiagnosticsNotification,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  createProtocolConnection,
  type Diagnostic,
} from 'vscode-languageserver-protocol/node';
import { configurationChange, serverSettings } from '../../src/trust';

const flemmad = process.env.FLEMMAD;

test(
  'Restricted Mode makes the chats of a trusted folder untrusted, and trusting the workspace lifts it',
  { skip: flemmad === undefined ? 'FLEMMAD is not set (run with FLEMMAD=target/debug/flemmad)' : false, timeout: 30000 },
  async () => {
    const work = mkdtempSync(join(tmpdir(), 'flemma-vscode-trust-'));
    const env = {
      ...process.env,
      HOME: join(work, 'home'),
      XDG_CONFIG_HOME: join(work, 'config'),
      XDG_STATE_HOME: join(work, 'state'),
      XDG_RUNTIME_DIR: join(work, 'run'),
      FLEMMA_CONFIG: '',
    };
    const server = spawn(flemmad as string, ['lsp', '--no-daemon'], { cwd: work, stdio: ['pipe', 'pipe', 'ignore'], env });
    const lsp = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
    try {
      const chats = join(work, 'chats');
      mkdirSync(chats);
      const trusted = spawnSync(flemmad as string, ['trust', chats], { env, encoding: 'utf8' });
      assert.equal(trusted.status, 0, trusted.stderr);
      const chatPath = join(chats, 'talk.chat');
      const text =
        '```json\n{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",\n' +
        '  "tools": {"require_approval": false}}}\n```\n@You:\nhello\n';
      writeFileSync(chatPath, text);
      const uri = pathToFileURL(chatPath).href;
      const published: Diagnostic[][] = [];
      lsp.onNotification(PublishDiagnosticsNotification.type, (p) => {
        if (p.uri === uri) published.push(p.diagnostics);
      });
      lsp.listen();
      const untrustedWarnings = async (count: number) => {
        const deadline = Date.now() + 20000;
        while (published.length < count) {
          if (Date.now() > deadline) assert.fail(`no diagnostics #${count} for ${uri}`);
          await new Promise((r) => setTimeout(r, 20));
        }
        return published[count - 1].filter((d) => d.code === 'untrusted-option');
      };

      // VS Code in Restricted Mode: the extension's initializationOptions.
      await lsp.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        rootUri: pathToFileURL(work).href,
        capabilities: { general: { positionEncodings: ['utf-16'] } },
        clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
        initializationOptions: serverSettings({}, false),
      });
      await lsp.sendNotification(InitializedNotification.type, {});
      await lsp.sendNotification(DidOpenTextDocumentNotification.type, {
        textDocument: { uri, languageId: 'chat', version: 1, text },
      });
      const restricted = await untrustedWarnings(1);
      assert.equal(restricted.length, 1, JSON.stringify(published[0]));
      assert.equal(restricted[0].range.start.line, 2, 'on the frontmatter line');
      assert.match(String(restricted[0].message), /^ignored in an untrusted chat: `tools\.require_approval = false`/);

      // The user trusts the workspace: the extension sends the settings without the flag.
      await lsp.sendNotification(DidChangeConfigurationNotification.type, configurationChange(serverSettings({}, true)));
      assert.deepEqual(await untrustedWarnings(2), [], 'the folder is trusted again');
      await lsp.sendRequest(ShutdownRequest.type);
    } finally {
      lsp.dispose();
      server.kill();
      rmSync(work, { recursive: true, force: true });
    }
  },
);
