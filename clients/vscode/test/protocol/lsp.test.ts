// Protocol test against the real `flemmad lsp` (VS Code-like capabilities). Runs when FLEMMAD
// names the binary (.ci/run sets it to the debug build), and is skipped (saying so) otherwise.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import {
  createProtocolConnection,
  ExecuteCommandRequest,
  InitializeRequest,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import { COMMANDS } from '../../src/commands';

const flemmad = process.env.FLEMMAD;

test(
  'flemmad lsp advertises every flemma.* command the extension sends',
  { skip: flemmad === undefined ? 'FLEMMAD is not set (run with FLEMMAD=target/debug/flemmad)' : false },
  async () => {
    const child = spawn(flemmad as string, ['lsp'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const connection = createProtocolConnection(
      new StreamMessageReader(child.stdout),
      new StreamMessageWriter(child.stdin),
    );
    connection.listen();
    try {
      const result = await connection.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        rootUri: null,
        capabilities: {
          general: { positionEncodings: ['utf-16'] },
          workspace: { applyEdit: true, workspaceEdit: { documentChanges: true, failureHandling: 'textOnlyTransactional' } },
          textDocument: { codeLens: {} },
          window: { workDoneProgress: true },
        },
        clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
        initializationOptions: {},
      });
      const advertised = result.capabilities.executeCommandProvider?.commands ?? [];
      for (const c of COMMANDS) assert.ok(advertised.includes(c.lspCommand), `${c.lspCommand} is advertised`);
      await assert.rejects(
        connection.sendRequest(ExecuteCommandRequest.type, { command: 'flemma.approve', arguments: [] }),
        'a command without its arguments is an error, not a crash',
      );
      await connection.sendRequest(ShutdownRequest.type);
    } finally {
      connection.dispose();
      child.kill();
    }
  },
);
