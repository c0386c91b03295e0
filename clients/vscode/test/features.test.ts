// The glue against the fake `vscode` module: commands, code lenses, status bar, undo middleware.
import './support/fakeVscode';
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { FakeDocument, FakeEditor, commands, state, window } from './support/fakeVscode';
import { applyEditMiddleware, registerFeatures, type LspPort } from '../src/features';
import { ReplyUndoGroups } from '../src/undo';

const URI = 'file:///work/t.chat';
const CHAT = [
  '@You:',
  'run the tests',
  '',
  '@Assistant:',
  '**Tool Use:** `bash` (`toolu_A`)',
  '```json',
  '{"command":"make test"}',
  '```',
  '',
  '**Tool Use:** `bash` (`toolu_B`)',
  '```json',
  '{"command":"make lint"}',
  '```',
  '',
  '@You:',
  '**Tool Result:** `toolu_A` (pending)',
  '```',
  '```',
  '',
  '**Tool Result:** `toolu_B` (pending)',
  '```',
  '```',
  '',
].join('\n');

class RecordingPort implements LspPort {
  requests: { method: string; params: unknown }[] = [];
  handlers = new Map<string, (p: unknown) => void>();
  failWith: Error | undefined;
  sendRequest(method: string, params: unknown): Promise<unknown> {
    this.requests.push({ method, params });
    return this.failWith ? Promise.reject(this.failWith) : Promise.resolve({ ok: true });
  }
  onNotification(method: string, handler: (p: unknown) => void) {
    this.handlers.set(method, handler);
    return { dispose: () => this.handlers.delete(method) };
  }
  notify(method: string, params: unknown): void {
    const handler = this.handlers.get(method);
    assert.ok(handler, `no handler for ${method}`);
    handler(params);
  }
}

let port: RecordingPort;
let undo: ReplyUndoGroups;
let editor: FakeEditor;

beforeEach(() => {
  state.reset();
  port = new RecordingPort();
  undo = new ReplyUndoGroups();
  editor = new FakeEditor(new FakeDocument(URI, CHAT));
  window.activeTextEditor = editor;
  window.visibleTextEditors = [editor];
  registerFeatures([], port, undo);
});

const sent = () => port.requests.map((r) => r.params);

test('send runs flemma.send on the active chat', async () => {
  await commands.executeCommand('flemma.chat.send');
  assert.deepEqual(port.requests, [{ method: 'workspace/executeCommand', params: { command: 'flemma.send', arguments: [URI] } }]);
});

test('approve takes the pending placeholder under the cursor', async () => {
  editor.selection = { active: { line: 20, character: 0 } as never };
  await commands.executeCommand('flemma.chat.approve');
  assert.deepEqual(sent(), [{ command: 'flemma.approve', arguments: [URI, 'toolu_B'] }]);
});

test('approve above every placeholder asks which one', async () => {
  state.quickPickAnswers.push('toolu_A');
  await commands.executeCommand('flemma.chat.approve');
  assert.deepEqual(state.quickPicks, [['toolu_A', 'toolu_B']]);
  assert.deepEqual(sent(), [{ command: 'flemma.approve', arguments: [URI, 'toolu_A'] }]);
});

test('reject asks for a reason; Escape keeps the tool pending', async () => {
  state.inputBoxAnswers.push('just run make test-unit', undefined, '');
  await commands.executeCommand('flemma.chat.reject', URI, 'toolu_A');
  await commands.executeCommand('flemma.chat.reject', URI, 'toolu_A');
  await commands.executeCommand('flemma.chat.reject', URI, 'toolu_B');
  assert.deepEqual(sent(), [
    { command: 'flemma.reject', arguments: [URI, 'toolu_A', 'just run make test-unit'] },
    { command: 'flemma.reject', arguments: [URI, 'toolu_B'] },
  ]);
});

test('code lenses Approve and Reject sit on each pending header and run the commands', async () => {
  const [{ provider }] = state.codeLensProviders;
  const lenses = provider.provideCodeLenses(editor.document);
  assert.deepEqual(
    lenses.map((l) => [l.range.start.line, l.command?.title, l.command?.command, l.command?.arguments]),
    [
      [15, 'Approve', 'flemma.chat.approve', [URI, 'toolu_A']],
      [15, 'Reject', 'flemma.chat.reject', [URI, 'toolu_A']],
      [19, 'Approve', 'flemma.chat.approve', [URI, 'toolu_B']],
      [19, 'Reject', 'flemma.chat.reject', [URI, 'toolu_B']],
    ],
  );
  const approve = lenses[0].command;
  assert.ok(approve);
  await commands.executeCommand(approve.command, ...(approve.arguments ?? []));
  assert.deepEqual(sent(), [{ command: 'flemma.approve', arguments: [URI, 'toolu_A'] }]);
});

test('without a chat editor a command explains what to do', async () => {
  window.activeTextEditor = undefined;
  await commands.executeCommand('flemma.chat.send');
  assert.equal(port.requests.length, 0);
  assert.match(state.messages[0].text, /needs a \.chat file: open one/);
});

test('a failure to reach the server is shown, not thrown', async () => {
  port.failWith = new Error('connection got disposed');
  await commands.executeCommand('flemma.chat.approveAll');
  assert.deepEqual(state.messages, [{ level: 'error', text: 'Flemma: Approve all pending tools failed: connection got disposed' }]);
});

test("the server's error answer is not shown twice (the server shows it with window/showMessage)", async () => {
  port.failWith = Object.assign(new Error('no pending tool call'), { code: -32803 });
  await commands.executeCommand('flemma.chat.approveAll');
  assert.deepEqual(state.messages, []);
});

test('the status bar follows flemma/event for the active chat', () => {
  const [item] = state.statusBarItems;
  assert.equal(item.visible, true);
  assert.equal(item.text, '$(comment-discussion) flemma');
  port.notify('flemma/event', { name: 'request:sending', uri: URI, data: { requestId: 1 } });
  assert.equal(item.text, '$(sync~spin) flemma · streaming');
  port.notify('flemma/event', { name: 'request:finished', uri: URI, data: { requestId: 1, status: 'completed', costUsd: 0.02 } });
  assert.equal(item.text, '$(comment-discussion) flemma · $0.0200');
  port.notify('flemma/event', { name: 'request:sending', uri: 'file:///other.chat', data: { requestId: 1 } });
  assert.equal(item.text, '$(comment-discussion) flemma · $0.0200', 'another document does not show');
  window.activeTextEditor = undefined;
  for (const l of state.activeEditorListeners) l();
  assert.equal(item.visible, false);
});

function streamed(text: string, line: number, version: number, character = 0) {
  return {
    edit: {
      documentChanges: [
        {
          textDocument: { uri: URI, version },
          edits: [{ range: { start: { line, character }, end: { line, character } }, newText: text }],
        },
      ],
    },
  };
}

test('a streamed reply is applied with one undo stop; a stale edit is refused', async () => {
  const doc = new FakeDocument(URI, '@You:\nhi\n\n@Assistant:\n');
  editor = new FakeEditor(doc);
  window.visibleTextEditors = [editor];
  const middleware = applyEditMiddleware(undo);
  let passedOn = 0;
  const next = () => {
    passedOn++;
    return { applied: true };
  };
  assert.deepEqual(await middleware(streamed('x', 4, doc.version), next), { applied: true });
  assert.equal(passedOn, 1, 'not streaming: the client applies it');
  port.notify('flemma/event', { name: 'request:sending', uri: URI });
  assert.deepEqual(await middleware(streamed('Hello', 4, doc.version), next), { applied: true });
  assert.deepEqual(await middleware(streamed(' world\n', 4, doc.version, 5), next), { applied: true });
  const stale = await middleware(streamed('lost?', 4, doc.version - 1), next);
  assert.equal(stale.applied, false);
  assert.match(stale.failureReason ?? '', /document has changed/);
  port.notify('flemma/event', { name: 'engine:stopped', uri: URI, data: { reason: 'idle' } });
  assert.deepEqual(await middleware(streamed('y', 4, doc.version), next), { applied: true });
  assert.equal(passedOn, 2);
  assert.equal(doc.text, '@You:\nhi\n\n@Assistant:\nHello world\n');
  assert.deepEqual(editor.edits, [
    { undoStopBefore: true, undoStopAfter: false },
    { undoStopBefore: false, undoStopAfter: false },
  ]);
});
