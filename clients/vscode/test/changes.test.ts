// What a conversation changed, and the way back, against the fake `vscode` module: the lenses'
// `flemma.changes` opens the calls' diff as a `flemma-changes:` document, `flemma.rewind` asks
// first (modal) and runs only when the user says so; other commands go on to the next handler.
import './support/fakeVscode';
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { state, workspace } from './support/fakeVscode';
import { Port } from './support/fakePort';
import { CHANGES_SCHEME, ChangesDocuments, changesMiddleware, changesText, type ChangesAnswer } from '../src/changes';

const CHAT = 'file:///work/t.chat';
const CHANGES: ChangesAnswer = {
  calls: [
    {
      toolId: 'toolu_w',
      tool: 'write',
      files: [{ path: 'notes.txt', added: 1, removed: 0 }],
      diff: 'diff --git a/notes.txt b/notes.txt\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+one\n',
    },
  ],
};


let documents: ChangesDocuments;
beforeEach(() => {
  state.reset();
  documents = new ChangesDocuments();
  workspace.registerTextDocumentContentProvider(CHANGES_SCHEME, documents as never);
});

const passOn = (passed: string[]) => (command: string, _args: unknown[], next: (c: string, a: unknown[]) => unknown) =>
  next(command, _args) ?? passed.push(command);

test('the changes command opens the calls diff beside the chat', async () => {
  const port = new Port();
  port.answers.push(CHANGES);
  const passed: string[] = [];
  const middleware = changesMiddleware(port, documents, passOn(passed));
  await middleware('flemma.changes', [CHAT, 'toolu_w'], () => undefined);
  assert.deepEqual(passed, []);
  assert.deepEqual(port.requests, [
    { method: 'workspace/executeCommand', params: { command: 'flemma.changes', arguments: [CHAT, 'toolu_w'] } },
  ]);
  assert.deepEqual(state.shown, [{ uri: 'flemma-changes:/toolu_w.diff', text: changesText(CHANGES) }]);
  assert.match(state.shown[0].text, /^== toolu_w \(write\): 1 file changed\ndiff --git/);
  assert.match(changesText({ calls: [] }), /no call of this chat changed/);
});

test('rewind asks first, and runs only when the user says so', async () => {
  const port = new Port();
  const passed: string[] = [];
  const middleware = changesMiddleware(port, documents, passOn(passed));
  // Cancelled: nothing reaches the server.
  state.warningAnswers.push(undefined);
  assert.equal(await middleware('flemma.rewind', [CHAT, 'toolu_w', true, true], () => undefined), undefined);
  assert.equal(state.warnings.length, 1);
  assert.deepEqual((state.warnings[0].options as { modal: boolean }).modal, true);
  assert.match(state.warnings[0].text, /toolu_w/);
  assert.deepEqual(port.requests, []);
  // Confirmed: the lens's arguments go to the server as they are; its answer is told.
  state.warningAnswers.push('Rewind');
  port.answers.push({ dryRun: false, restored: [], removed: ['notes.txt'], changedSince: [], refused: false, message: 'put back 1 file' });
  await middleware('flemma.rewind', [CHAT, 'toolu_w', true, true], () => undefined);
  assert.deepEqual(port.requests, [
    { method: 'workspace/executeCommand', params: { command: 'flemma.rewind', arguments: [CHAT, 'toolu_w', true, true] } },
  ]);
  assert.deepEqual(state.messages, [{ level: 'info', text: 'Flemma: put back 1 file' }]);
  // Refused (files changed since): said as an error.
  state.warningAnswers.push('Rewind');
  port.answers.push({ dryRun: false, restored: ['a'], removed: [], changedSince: ['a'], refused: true, message: 'nothing was changed: a' });
  await middleware('flemma.rewind', [CHAT, 'toolu_w', true, true], () => undefined);
  assert.deepEqual(state.messages[1], { level: 'error', text: 'Flemma: nothing was changed: a' });
  // Any other command goes on.
  await middleware('flemma.send', [CHAT], () => undefined);
  assert.deepEqual(passed, ['flemma.send']);
});
