import assert from 'node:assert/strict';
import { test } from 'node:test';
import { COMMANDS, commandSpec, executeCommandParams } from '../src/commands';

const URI = 'file:///tmp/t.chat';

test('every LSP command of the server contract is reachable', () => {
  assert.deepEqual(
    COMMANDS.map((c) => c.lspCommand).sort(),
    [
      'flemma.approve',
      'flemma.approveAll',
      'flemma.background',
      'flemma.cancel',
      'flemma.execute',
      'flemma.reject',
      'flemma.send',
      'flemma.status',
    ],
  );
  for (const c of COMMANDS) assert.notEqual(c.id, c.lspCommand, 'the language client registers the server ids itself');
});

test('positional arguments as the server advertises them', () => {
  assert.deepEqual(executeCommandParams(commandSpec('flemma.chat.send'), URI), { command: 'flemma.send', arguments: [URI] });
  assert.deepEqual(executeCommandParams(commandSpec('flemma.chat.approve'), URI, 'toolu_1'), {
    command: 'flemma.approve',
    arguments: [URI, 'toolu_1'],
  });
  assert.deepEqual(executeCommandParams(commandSpec('flemma.chat.reject'), URI, 'toolu_1', 'run make test-unit'), {
    command: 'flemma.reject',
    arguments: [URI, 'toolu_1', 'run make test-unit'],
  });
  assert.deepEqual(executeCommandParams(commandSpec('flemma.chat.reject'), URI, 'toolu_1', '  '), {
    command: 'flemma.reject',
    arguments: [URI, 'toolu_1'],
  });
  assert.deepEqual(executeCommandParams(commandSpec('flemma.chat.background'), URI, 'toolu_2').arguments, [URI, 'toolu_2']);
  assert.throws(() => executeCommandParams(commandSpec('flemma.chat.execute'), URI), /needs a tool id/);
  assert.throws(() => commandSpec('flemma.chat.nope'), /unknown flemma command/);
});
