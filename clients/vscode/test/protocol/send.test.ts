// Sending from VS Code, against the real `flemmad lsp --no-daemon` and flemma-mock-provider:
// a UTF-16 client whose `workspace/applyEdit` goes through the extension's own middleware
// (`applyEditMiddleware`: one undo stop per streamed reply) into a fake editor, whose
// `flemma/event` notifications go through the extension's own glue (`registerFeatures`: the
// status bar and the undo grouping), and whose Approve is the code lens's command. Runs when
// FLEMMAD names the binary (as .ci/run does); the mock is FLEMMA_MOCK_PROVIDER or the
// `flemma-mock-provider` beside it.
import '../support/fakeVscode';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import {
  ApplyWorkspaceEditRequest,
  DidChangeTextDocumentNotification,
  DidOpenTextDocumentNotification,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgressCreateRequest,
  createProtocolConnection,
  type ApplyWorkspaceEditParams,
  type ProtocolConnection,
  type TextDocumentContentChangeEvent,
} from 'vscode-languageserver-protocol/node';
import { FakeDocument, FakeEditor, commands, state, window } from '../support/fakeVscode';
import { applyEditMiddleware, registerFeatures, type ApplyEditResult } from '../../src/features';
import { ReplyUndoGroups, singleDocumentEdit, type LspApplyEditParams } from '../../src/undo';

const flemmad = process.env.FLEMMAD;
const mockBinary =
  process.env.FLEMMA_MOCK_PROVIDER ?? (flemmad === undefined ? undefined : join(dirname(flemmad), 'flemma-mock-provider'));

/** Starts the mock provider; resolves with its base URL (the first line it prints). */
function startMock(binary: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(binary, [], { stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`flemma-mock-provider exited (${code}) before printing its URL`)));
    createInterface({ input: child.stdout! }).once('line', (url) => resolve({ url, child }));
  });
}

async function queueTurns(mockUrl: string, turns: unknown[]): Promise<void> {
  const response = await fetch(`${mockUrl}/_mock/turns`, { method: 'POST', body: JSON.stringify(turns) });
  assert.equal(response.status, 200, `queueing the mock's turns: ${await response.text()}`);
}

/** Waits until `predicate` holds (checked every 20 ms), or fails saying what it waited for. */
async function until(what: string, predicate: () => boolean, ms = 20000, detail: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}\n${detail()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The LSP position (UTF-16) of a JS string offset, which is what the fake document holds. */
function positionAt(text: string, offset: number): { line: number; character: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length - 1, character: before[before.length - 1].length };
}

test(
  'VS Code sends: the reply streams in as one undo stop, the status bar follows, Approve continues the cycle',
  {
    skip:
      flemmad === undefined
        ? 'FLEMMAD is not set (run with FLEMMAD=target/debug/flemmad)'
        : mockBinary === undefined || !existsSync(mockBinary)
          ? `flemma-mock-provider is not built (${mockBinary}): cargo build -p flemma-mock-provider`
          : false,
    timeout: 60000,
  },
  async () => {
    state.reset();
    const work = mkdtempSync(join(tmpdir(), 'flemma-vscode-send-'));
    const mock = await startMock(mockBinary as string);
    let server: ChildProcess | undefined;
    let connection: ProtocolConnection | undefined;
    try {
      // The chat's folder is not above HOME (`work/home`): a sandbox never makes the home
      // directory or a folder above it writable.
      const project = join(work, 'project');
      mkdirSync(project);
      const chatPath = join(project, 'talk.chat');
      // Non-ASCII before the reply (é, ✓ and an emoji of two UTF-16 units) so that positions are
      // only right when both sides count UTF-16.
      const original =
        '```json\n{ "flemma": { "provider": "anthropic", "model": "claude-sonnet-4-5",\n' +
        '  "parameters": { "thinking": false }, "tools": { "auto_approve_sandboxed": false } } }\n```\n' +
        '@You:\nSay hi — café ✓ 😀.\n';
      writeFileSync(chatPath, original);
      const uri = pathToFileURL(chatPath).href;
      for (const dir of ['home', 'config', 'state', 'run']) rmSync(join(work, dir), { recursive: true, force: true });
      server = spawn(flemmad as string, ['lsp', '--no-daemon'], {
        cwd: work,
        stdio: ['pipe', 'pipe', 'ignore'],
        env: {
          ...process.env,
          HOME: join(work, 'home'),
          XDG_CONFIG_HOME: join(work, 'config'),
          XDG_STATE_HOME: join(work, 'state'),
          XDG_RUNTIME_DIR: join(work, 'run'),
          FLEMMA_CONFIG: '',
          ANTHROPIC_BASE_URL: mock.url,
          ANTHROPIC_API_KEY: 'vscode-test-key',
        },
      });
      const lsp = createProtocolConnection(new StreamMessageReader(server.stdout!), new StreamMessageWriter(server.stdin!));
      connection = lsp;

      // The editor: one visible, active chat editor.
      const document = new FakeDocument(uri, original);
      const editor = new FakeEditor(document);
      window.visibleTextEditors = [editor];
      window.activeTextEditor = editor as never;

      // The client side of edits: VS Code applies an edit, then reports it in didChange.
      const reportChange = (changes: TextDocumentContentChangeEvent[]) =>
        lsp.sendNotification(DidChangeTextDocumentNotification.type, {
          textDocument: { uri, version: document.version },
          contentChanges: changes,
        });
      const applyThroughEditor = async (apply: () => Promise<ApplyEditResult>, params: LspApplyEditParams) => {
        const edit = singleDocumentEdit(params);
        const before = document.text;
        const result = await apply();
        if (result.applied && edit !== undefined) {
          // The edits in the order the editor applied them (last first), each as a ranged change.
          const changes = [...edit.edits].reverse().map((e) => ({ range: e.range, text: e.newText }));
          assert.notEqual(before, document.text, 'an applied edit changes the text');
          void reportChange(changes);
        }
        return result;
      };
      const undo = new ReplyUndoGroups();
      const middleware = applyEditMiddleware(undo);
      const outsideStream: LspApplyEditParams[] = [];
      // `next`: the language client's own handler, for edits outside a streamed reply (one undo
      // stop each, as workspace.applyEdit makes).
      const next = async (params: LspApplyEditParams): Promise<ApplyEditResult> => {
        outsideStream.push(params);
        const edit = singleDocumentEdit(params);
        if (edit === undefined) return { applied: false, failureReason: 'the test handles plain text edits only' };
        if (edit.textDocument.version !== null && edit.textDocument.version !== document.version) {
          return { applied: false, failureReason: `version ${edit.textDocument.version}, the editor has ${document.version}` };
        }
        const ok = await editor.edit((builder) => {
          for (const e of edit.edits) {
            const r = e.range;
            builder.replace(
              { start: r.start, end: r.end } as never,
              e.newText,
            );
          }
        }, { undoStopBefore: true, undoStopAfter: true });
        return { applied: ok };
      };
      lsp.onRequest(ApplyWorkspaceEditRequest.type, (params: ApplyWorkspaceEditParams) =>
        applyThroughEditor(() => middleware(params as LspApplyEditParams, next), params as LspApplyEditParams),
      );
      const progress: unknown[] = [];
      lsp.onRequest(WorkDoneProgressCreateRequest.method, () => null);
      lsp.onNotification('$/progress', (p: unknown) => {
        progress.push(p);
      });
      const shown: string[] = [];
      lsp.onNotification('window/showMessage', (p: { message: string }) => {
        shown.push(p.message);
      });
      const events: { name: string; data?: unknown }[] = [];
      const statusTexts: string[] = [];
      registerFeatures(
        [],
        {
          sendRequest: (method, params) => lsp.sendRequest(method, params),
          onNotification: (method, handler) =>
            lsp.onNotification(method, (params: unknown) => {
              handler(params);
              if (method === 'flemma/event') {
                events.push(params as { name: string });
                statusTexts.push(state.statusBarItems[0]?.text ?? '');
              }
            }),
        },
        undo,
      );
      lsp.listen();

      await lsp.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        rootUri: pathToFileURL(work).href,
        capabilities: {
          general: { positionEncodings: ['utf-16'] },
          workspace: { applyEdit: true, workspaceEdit: { documentChanges: true, failureHandling: 'textOnlyTransactional' } },
          textDocument: { codeLens: {}, synchronization: { didSave: true } },
          window: { workDoneProgress: true, showMessage: {} },
        },
        clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
        initializationOptions: {},
      });
      await lsp.sendNotification(InitializedNotification.type, {});
      await lsp.sendNotification(DidOpenTextDocumentNotification.type, {
        textDocument: { uri, languageId: 'chat', version: document.version, text: document.text },
      });

      // 1. Send (the command the keybinding runs): the reply streams in, slowly enough to come
      // in many edits, and all of them are one undo stop.
      const reply = 'Hi! Café, ✓ and 😀 came through; this reply streams in a few bytes at a time.';
      await queueTurns(mock.url, [{ steps: [{ text: reply }], bytes_per_sec: 1500, usage: { input_tokens: 1000, output_tokens: 200 } }]);
      await commands.executeCommand('flemma.chat.send');
      const detail = () => `text:\n${document.text}\nevents: ${JSON.stringify(events)}\nshown: ${JSON.stringify(shown)}`;
      await until('the reply and an empty @You:', () => document.text.includes(`@Assistant:\n${reply}\n\n@You:\n`) && /\n@You:\n+$/.test(document.text), 20000, detail);
      await until('the end of the request', () => events.some((e) => e.name === 'request:finished'), 5000, detail);
      assert.match(document.text.slice(original.length), new RegExp(`^\\n@Assistant:\\n${reply.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n\\n@You:\\n+$`), 'the reply lands after the message');
      assert.ok(document.text.startsWith(original), 'nothing before the reply changes');
      const streamedEdits = editor.edits.length;
      assert.ok(streamedEdits >= 3, `the reply came in several edits (${streamedEdits})`);
      assert.equal(editor.edits.filter((e) => e.undoStopBefore).length, 1, `one undo stop for the reply: ${JSON.stringify(editor.edits)}`);
      assert.equal(editor.edits.filter((e) => e.undoStopAfter).length, 0, 'no undo stop inside the reply');
      assert.equal(outsideStream.length, 0, 'every edit of the reply went through the streaming path');
      // The status bar followed: streaming while the reply came, then the cost.
      assert.ok(statusTexts.some((t) => t.startsWith('$(sync~spin)')), `the status bar spins while it streams: ${JSON.stringify(statusTexts)}`);
      const finalStatus = statusTexts[statusTexts.length - 1];
      assert.match(
        finalStatus,
        /^\$\(comment-discussion\) .* · \$0\.\d{4} · context \d+% of 200k$/,
        `idle with the chat's cost and the context window's share at the end: ${finalStatus}`,
      );
      assert.ok(progress.length > 0, 'the server reports $/progress while it works');

      // 2. A reply with a tool call: the placeholder is pending, the code lens offers Approve;
      // its command runs the tool and the cycle goes on to the next reply.
      await queueTurns(mock.url, [
        {
          steps: [
            { text: 'Writing the greeting.' },
            { tool_call: { name: 'bash', input: { label: 'greet', command: "printf 'hello from bash\\n' > greeting.txt && cat greeting.txt" } } },
          ],
        },
        { steps: [{ text: 'greeting.txt says hello.' }], bytes_per_sec: 1500 },
      ]);
      const typed = 'Put a greeting in greeting.txt.\n';
      const end = positionAt(document.text, document.text.length);
      await editor.edit((b) => b.replace({ start: end, end } as never, typed), { undoStopBefore: true, undoStopAfter: true });
      await reportChange([{ range: { start: end, end }, text: typed }]);
      await commands.executeCommand('flemma.chat.send');
      const lensesOf = () => state.codeLensProviders[0].provider.provideCodeLenses(document);
      await until('a pending placeholder with an Approve lens', () => lensesOf().some((l) => l.command?.title === 'Approve'), 20000, detail);
      await until('the status bar says it awaits approval', () => statusTexts[statusTexts.length - 1].includes('awaiting approval'), 5000, () => JSON.stringify(statusTexts));
      assert.equal(existsSync(join(project, 'greeting.txt')), false, 'the tool waits for approval');
      const approve = lensesOf().find((l) => l.command?.title === 'Approve')!;
      const toolId = approve.command!.arguments![1] as string;
      const editsBeforeApproval = editor.edits.length;
      await commands.executeCommand(approve.command!.command, ...(approve.command!.arguments ?? []));
      await until(
        'the tool result and the next reply',
        () =>
          document.text.includes(`**Tool Result:** \`${toolId}\`\n\`\`\`\nhello from bash\n\`\`\``) &&
          /@Assistant:\ngreeting\.txt says hello\.\n\n@You:\n+$/.test(document.text),
        20000,
        detail,
      );
      assert.equal(readFileSync(join(project, 'greeting.txt'), 'utf8'), 'hello from bash\n', 'the tool ran in the chat directory');
      assert.equal(lensesOf().length, 0, 'no lens is left once nothing is pending');
      await until('the engine to stop', () => events.filter((e) => e.name === 'engine:stopped').length >= 3, 5000, detail);
      // The next reply, streamed in several edits, is one undo stop too (the approval and the tool's
      // result may come in the same edits, coalesced by the server, or as steps of their own).
      const secondReply = editor.edits.slice(editsBeforeApproval).filter((e) => !e.undoStopAfter);
      assert.ok(secondReply.length >= 2, `the next reply streamed in (${JSON.stringify(editor.edits.slice(editsBeforeApproval))})`);
      assert.equal(secondReply.filter((e) => e.undoStopBefore).length, 1, 'the next reply is one undo stop too');
      assert.deepEqual(state.messages.filter((m) => m.level === 'error'), [], 'no command failed');
      await until('the end of the last request', () => events.filter((e) => e.name === 'request:finished').length >= 3, 5000, detail);
      assert.match(
        statusTexts[statusTexts.length - 1],
        /^\$\(comment-discussion\) .* · \$0\.\d{4} · context \d+% of 200k$/,
        'idle with the cost after the cycle',
      );

      // Show status (the status bar item's click) tells the state and the usage in one line.
      const statusShown = () => state.messages.filter((m) => m.level === 'info' && m.text.startsWith('Flemma: talk.chat: '));
      await commands.executeCommand('flemma.chat.status');
      assert.match(statusShown()[0]?.text ?? '', /^Flemma: talk\.chat: idle · \d+ input, \d+ output tokens, \$0\.\d{4}$/, JSON.stringify(state.messages));

      await lsp.sendRequest(ShutdownRequest.type);
      await lsp.sendNotification(ExitNotification.type);
    } finally {
      connection?.dispose();
      server?.kill();
      mock.child.kill();
      rmSync(work, { recursive: true, force: true });
      state.reset();
    }
  },
);
