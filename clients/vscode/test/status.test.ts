import assert from 'node:assert/strict';
import { test } from 'node:test';
import { INITIAL_STATUS, formatCost, reduceStatus, statusText, type FlemmaEvent } from '../src/status';

const uri = 'file:///t.chat';
const fold = (events: FlemmaEvent[]) => events.reduce(reduceStatus, INITIAL_STATUS);

test('a turn: sending, tools, finished with cost', () => {
  const s = fold([
    { name: 'request:sending', uri, data: { provider: 'anthropic', model: 'claude-sonnet-4-5' } },
    { name: 'tool:executing', uri, data: { tool: 'bash' } },
  ]);
  assert.equal(s.activity, 'tools');
  assert.equal(statusText(s), '$(sync~spin) anthropic/claude-sonnet-4-5 · tools');
  const done = reduceStatus(s, { name: 'request:finished', uri, data: { usage: { cost: 0.0123 } } });
  assert.equal(done.activity, 'idle');
  assert.equal(statusText(done), '$(comment-discussion) anthropic/claude-sonnet-4-5 · $0.0123');
});

test('per-request costs add up; a reported total replaces the sum', () => {
  const s = fold([
    { name: 'request:finished', uri, data: { cost: 0.5 } },
    { name: 'request:finished', uri, data: { cost: 0.75 } },
  ]);
  assert.equal(s.cost, 1.25);
  assert.equal(reduceStatus(s, { name: 'usage:updated', uri, data: { sessionCost: 3 } }).cost, 3);
});

test('errors, approvals and jobs show; malformed data is ignored', () => {
  assert.equal(fold([{ name: 'request:finished', uri, data: { error: 'rate limited' } }]).activity, 'error');
  const waiting = fold([{ name: 'tool:approval-required', uri, data: null }]);
  assert.equal(statusText(waiting), '$(comment-discussion) flemma · awaiting approval');
  const jobs = fold([{ name: 'job:submitted', uri, data: { activeCount: 2 } }]);
  assert.equal(statusText(jobs), '$(comment-discussion) flemma · 2 jobs');
  const junk = fold([{ name: 'request:finished', uri, data: { cost: 'NaN', model: 7 } }, { name: 'who:knows', uri }]);
  assert.deepEqual(junk, INITIAL_STATUS);
});

test('cost formatting', () => {
  assert.equal(formatCost(0), '$0.0000');
  assert.equal(formatCost(12.345), '$12.35');
});
