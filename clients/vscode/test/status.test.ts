import assert from 'node:assert/strict';
import { test } from 'node:test';
import { INITIAL_STATUS, formatCost, formatLimits, reduceStatus, statusSummary, statusText, type FlemmaEvent } from '../src/status';

const uri = 'file:///t.chat';
const fold = (events: FlemmaEvent[]) => events.reduce(reduceStatus, INITIAL_STATUS);

// The events as flemmad sends them (protocol/events.md, and `engine:stopped` {reason}).
test('a turn: streaming, finished with its cost, the total, idle', () => {
  const streaming = fold([{ name: 'request:sending', uri, data: { requestId: 1 } }]);
  assert.equal(statusText(streaming), '$(sync~spin) flemma · streaming');
  const done = fold([
    { name: 'request:sending', uri, data: { requestId: 1 } },
    { name: 'request:finished', uri, data: { requestId: 1, status: 'completed', usage: { input_tokens: 1000 }, costUsd: 0.006 } },
    { name: 'usage:updated', uri, data: { usage: { input_tokens: 1000 }, requests: 1, costUsd: 0.006 } },
    { name: 'conversation:idle', uri, data: {} },
    { name: 'engine:stopped', uri, data: { reason: 'idle' } },
  ]);
  assert.equal(done.activity, 'idle');
  assert.equal(statusText(done), '$(comment-discussion) flemma · $0.0060');
});

test("the last request's share of the context window shows (issue 34)", () => {
  const s = fold([
    { name: 'usage:updated', uri, data: { costUsd: 0.01, contextTokens: 84_000, contextWindow: 200_000 } },
  ]);
  assert.equal(statusText(s), '$(comment-discussion) flemma · $0.0100 · context 42% of 200k');
  const big = reduceStatus(s, { name: 'usage:updated', uri, data: { contextTokens: 500_000, contextWindow: 1_000_000 } });
  assert.equal(big.context, 'context 50% of 1M');
  // An unknown window keeps what was shown.
  assert.equal(reduceStatus(s, { name: 'usage:updated', uri, data: { contextTokens: 1, contextWindow: null } }).context, 'context 42% of 200k');
});

test('tools run, wait for approval, and the cycle goes on', () => {
  const waiting = fold([
    { name: 'request:sending', uri, data: { requestId: 1 } },
    { name: 'request:finished', uri, data: { requestId: 1, status: 'completed', costUsd: 0.01 } },
    { name: 'tool:approval-required', uri, data: { tools: [{ toolId: 'toolu_1', toolName: 'bash' }] } },
    { name: 'engine:stopped', uri, data: { reason: 'awaiting-approval' } },
  ]);
  assert.equal(statusText(waiting), '$(comment-discussion) flemma · awaiting approval · $0.0100');
  const running = reduceStatus(waiting, { name: 'tool:executing', uri, data: { toolId: 'toolu_1', toolName: 'bash' } });
  assert.equal(statusText(running), '$(sync~spin) flemma · tools · $0.0100');
  const next = reduceStatus(
    reduceStatus(running, { name: 'tool:completed', uri, data: { toolId: 'toolu_1', toolName: 'bash', status: 'success' } }),
    { name: 'request:sending', uri, data: { requestId: 2 } },
  );
  assert.equal(next.activity, 'streaming');
});

test('per-request costs add up; the document total replaces the sum', () => {
  const s = fold([
    { name: 'request:finished', uri, data: { status: 'completed', costUsd: 0.5 } },
    { name: 'request:finished', uri, data: { status: 'completed', costUsd: 0.75 } },
  ]);
  assert.equal(s.cost, 1.25);
  assert.equal(reduceStatus(s, { name: 'usage:updated', uri, data: { costUsd: 3 } }).cost, 3);
  assert.equal(fold([{ name: 'request:finished', uri, data: { status: 'completed', costUsd: null } }]).cost, undefined, 'no price known: no cost');
});

test('errors, a named model and jobs show; malformed data is ignored', () => {
  assert.equal(fold([{ name: 'request:finished', uri, data: { status: 'errored' } }]).activity, 'error');
  assert.equal(fold([{ name: 'request:finished', uri, data: { status: 'errored' } }, { name: 'conversation:idle', uri }]).activity, 'error');
  assert.equal(fold([{ name: 'engine:stopped', uri, data: { reason: 'max-turns' } }]).activity, 'error');
  assert.equal(fold([{ name: 'engine:stopped', uri, data: { reason: 'refused' } }]).activity, 'error');
  assert.equal(fold([{ name: 'engine:stopped', uri, data: { reason: 'cancelled' } }]).activity, 'idle');
  const named = fold([{ name: 'request:sending', uri, data: { provider: 'anthropic', model: 'claude-sonnet-4-5' } }]);
  assert.equal(statusText(named), '$(sync~spin) anthropic/claude-sonnet-4-5 · streaming');
  const jobs = fold([{ name: 'job:submitted', uri, data: { activeCount: 2 } }]);
  assert.equal(statusText(jobs), '$(comment-discussion) flemma · 2 jobs');
  const junk = fold([{ name: 'request:finished', uri, data: { costUsd: 'NaN', model: 7 } }, { name: 'who:knows', uri }]);
  assert.deepEqual(junk, INITIAL_STATUS);
});

test('cost formatting', () => {
  assert.equal(formatCost(0), '$0.0000');
  assert.equal(formatCost(12.345), '$12.35');
});

test('the status command answer in one line', () => {
  const answer = {
    path: '/home/me/talk.chat',
    state: 'awaiting-approval',
    runningTools: [],
    pending: ['toolu_1', 'toolu_2'],
    jobs: [{ jobId: 'job_ab12cd34', toolId: 'toolu_0', toolName: 'bash', state: 'running' }],
    usage: { inputTokens: 2326, outputTokens: 4, thinkingTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cost: 0.007 },
    lastStop: 'awaiting-approval',
  };
  assert.equal(
    statusSummary(answer),
    'talk.chat: awaiting-approval · waiting for approval: toolu_1, toolu_2 · jobs: job_ab12cd34 (bash, running) · 2326 input, 4 output tokens, $0.0070',
  );
  assert.equal(statusSummary({ path: '/t.chat', state: 'idle', usage: { inputTokens: 0, outputTokens: 0 }, lastStop: 'error: no key' }), 't.chat: idle · last stop: error: no key');
  assert.equal(statusSummary(null), 'no status (the server answered null)');
});

test("a subscription's rate limits show in the status bar and the summary", () => {
  const rateLimits = {
    windows: [
      { name: 'primary', usedPercent: 42.4, windowMinutes: 300, resetsAt: 1800000000 },
      { name: 'secondary', usedPercent: 7.5, windowMinutes: 10080 },
    ],
  };
  const s = fold([
    { name: 'request:sending', uri, data: { provider: 'codex', model: 'gpt-5.5' } },
    { name: 'rate-limits:updated', uri, data: { rateLimits } },
    { name: 'request:finished', uri, data: { status: 'completed', costUsd: null } },
    { name: 'usage:updated', uri, data: { costUsd: null, rateLimits } },
  ]);
  assert.equal(statusText(s), '$(comment-discussion) codex/gpt-5.5 · 5h 42% · week 8%');
  assert.equal(formatLimits({ windows: [{ name: 'odd', usedPercent: 100 }] }), 'odd 100%');
  assert.equal(formatLimits({ windows: [] }), undefined);
  assert.equal(formatLimits('junk'), undefined);
  // A total without limits keeps the last ones.
  assert.equal(reduceStatus(s, { name: 'usage:updated', uri, data: { costUsd: null, rateLimits: null } }).limits, '5h 42% · week 8%');
  const summary = statusSummary({
    path: '/p/t.chat',
    state: 'idle',
    usage: { inputTokens: 10, outputTokens: 2, rateLimits },
  });
  assert.equal(summary, 't.chat: idle · 10 input, 2 output tokens · subscription: 5h 42% · week 8%');
});
