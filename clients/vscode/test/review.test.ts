// Review before approval against the fake `vscode` module: the "Review changes" code action's
// `flemma.proposal` opens a diff between the file and the proposal's document, which reads the
// proposed content and, saved, sends it back with `flemma.reviseProposal`; other commands pass.
import './support/fakeVscode';
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { Uri, state } from './support/fakeVscode';
import { Port } from './support/fakePort';
import { ProposalFileSystem, proposalPath, reviewMiddleware, reviewTitle, type Proposal } from '../src/review';

const CHAT = 'file:///work/t.chat';
const PROPOSAL: Proposal = {
  tool: 'write',
  shown: 'notes.md',
  path: '/work/notes.md',
  before: 'alpha\nbeta\n',
  after: 'alpha\nBETA\n',
  diff: '--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n',
  hunks: [{ number: 1, header: '@@ -1,2 +1,2 @@', diff: '@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n' }],
};


let diffs: unknown[][] = [];
beforeEach(() => {
  state.reset();
  diffs = [];
  state.commands.set('vscode.diff', (...args: unknown[]) => diffs.push(args));
});

test('the proposal command opens the diff editor between the file and the proposal', async () => {
  const port = new Port();
  port.answers.push(PROPOSAL);
  const proposals = new ProposalFileSystem(port);
  const passed: string[] = [];
  const middleware = reviewMiddleware(port, proposals);
  await middleware('flemma.proposal', [CHAT, 'toolu_1'], (command) => passed.push(command));
  assert.deepEqual(passed, []);
  assert.deepEqual(port.requests, [
    { method: 'workspace/executeCommand', params: { command: 'flemma.proposal', arguments: [CHAT, 'toolu_1'] } },
  ]);
  assert.equal(diffs.length, 1);
  const [left, right, title] = diffs[0] as [Uri, Uri, string];
  assert.equal(left.toString(), 'file:/work/notes.md');
  assert.equal(right.scheme, 'flemma-proposal');
  assert.equal(right.path, proposalPath('toolu_1', 'after', 'notes.md'));
  assert.equal(title, reviewTitle('toolu_1', PROPOSAL));
  assert.match(title, /notes\.md .* toolu_1 \(1 hunk; save/);
  assert.equal(new TextDecoder().decode(proposals.readFile(right as never)), 'alpha\nBETA\n');
  // Saved: the content goes back into the call's input through the server.
  await proposals.writeFile(right as never, new TextEncoder().encode('alpha\nBeta\n'));
  assert.deepEqual(port.requests[1], {
    method: 'workspace/executeCommand',
    params: { command: 'flemma.reviseProposal', arguments: [CHAT, 'toolu_1', 'alpha\nBeta\n'] },
  });
  assert.equal(new TextDecoder().decode(proposals.readFile(right as never)), 'alpha\nBeta\n');
});

test('a file the call creates is compared with an empty read-only side; other commands pass', async () => {
  const port = new Port();
  port.answers.push({ ...PROPOSAL, before: null });
  const proposals = new ProposalFileSystem(port);
  const middleware = reviewMiddleware(port, proposals);
  await middleware('flemma.proposal', [CHAT, 'toolu_2'], () => assert.fail('not passed on'));
  const [left] = diffs[0] as [Uri];
  assert.equal(left.scheme, 'flemma-proposal');
  assert.equal(new TextDecoder().decode(proposals.readFile(left as never)), '');
  await assert.rejects(Promise.resolve(proposals.writeFile(left as never, new Uint8Array())), /NoPermissions/);
  const passed: unknown[] = [];
  await middleware('flemma.approve', [CHAT, 'toolu_2'], (command, args) => passed.push([command, args]));
  assert.deepEqual(passed, [['flemma.approve', [CHAT, 'toolu_2']]]);
});
