import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pendingPlaceholders, scanToolHeaders, statusOfSuffix, tokenizeSuffix, toolIdAtLine } from '../src/toolBlocks';

const PARALLEL = [
  '@You:',
  'Generate a snippet, then run the tests.',
  '',
  '@Assistant:',
  "I'll write the snippet and run the tests.",
  '',
  '**Tool Use:** `write` (`toolu_01AAA`)',
  '````json',
  '{"content":"```\\n**Tool Result:** `fake` (pending)\\n```"}',
  '````',
  '',
  '**Tool Use:** `bash` (`toolu_01BBB`)',
  '```json',
  '{"command":"make test"}',
  '```',
  '',
  '@You:',
  '**Tool Result:** `toolu_01AAA`',
  '```',
  'Wrote 38 bytes to hello.md',
  '```',
  '',
  '**Tool Result:** `toolu_01BBB` (pending)',
  '```',
  '```',
  '',
].join('\n');

test('finds the pending placeholder and the final result, not text inside fences', () => {
  const pending = pendingPlaceholders(PARALLEL);
  assert.deepEqual(pending, [{ kind: 'result', line: 22, toolId: 'toolu_01BBB', status: 'pending', jobId: undefined }]);
  const headers = scanToolHeaders(PARALLEL);
  assert.deepEqual(
    headers.map((h) => [h.kind, h.line, h.toolId]),
    [
      ['use', 6, 'toolu_01AAA'],
      ['use', 11, 'toolu_01BBB'],
      ['result', 17, 'toolu_01AAA'],
      ['result', 22, 'toolu_01BBB'],
    ],
  );
});

test('a fenced role line is content, not a new message', () => {
  const text = ['@Assistant:', '```', '@You:', '```', '**Tool Result:** `x` (pending)', '```', '```'].join('\n');
  assert.deepEqual(pendingPlaceholders(text), [], 'a tool result in an assistant message is not a placeholder');
});

test('frontmatter and preamble hold no tool blocks', () => {
  const text = [
    '```json',
    '{"a": "**Tool Result:** `fm` (pending)"}',
    '```',
    '**Tool Result:** `pre` (pending)',
    '@You:',
    '**Tool Result:** `real` (pending)',
    '```',
    '```',
  ].join('\n');
  assert.deepEqual(
    pendingPlaceholders(text).map((p) => p.toolId),
    ['real'],
  );
});

test('CRLF files parse like LF files', () => {
  const text = PARALLEL.replace(/\n/g, '\r\n');
  assert.deepEqual(pendingPlaceholders(text).map((p) => [p.line, p.toolId]), [[22, 'toolu_01BBB']]);
});

test('suffix grammar: explicit status wins, aliases, quoting, job meta', () => {
  assert.equal(statusOfSuffix(tokenizeSuffix('status=pending sandbox=false')), 'pending');
  assert.equal(statusOfSuffix(tokenizeSuffix('approved status=rejected')), 'rejected');
  assert.equal(statusOfSuffix(tokenizeSuffix('note="pending later" deny')), 'denied');
  assert.equal(statusOfSuffix(tokenizeSuffix('job=job_k7x2m9qa')), undefined);
  assert.deepEqual(tokenizeSuffix(`error job=job_lost1 msg='a \\'b\\' c'`), [
    { key: undefined, value: 'error' },
    { key: 'job', value: 'job_lost1' },
    { key: 'msg', value: "a 'b' c" },
  ]);
  const [job] = scanToolHeaders('@You:\n**Tool Result:** `toolu_01X` (job=job_k7x2m9qa)\n```\nRunning\n```\n');
  assert.equal(job.kind === 'result' ? job.jobId : 'not a result', 'job_k7x2m9qa');
});

test('Flemma 0.11 namespace separator is read as a dot', () => {
  const [use] = scanToolHeaders('@Assistant:\n**Tool Use:** `flemma:jobs:status` (`t1`)\n```json\n{}\n```\n');
  assert.equal(use.kind === 'use' ? use.toolName : '', 'flemma.jobs.status');
});

test('the tool under the cursor is the nearest header above it, else the only one', () => {
  const headers = scanToolHeaders(PARALLEL);
  assert.equal(toolIdAtLine(headers, 13), 'toolu_01BBB');
  assert.equal(toolIdAtLine(headers, 19), 'toolu_01AAA');
  assert.equal(toolIdAtLine(headers, 0), undefined, 'two candidates below the cursor: ask');
  const pending = pendingPlaceholders(PARALLEL);
  assert.equal(toolIdAtLine(pending, 0), 'toolu_01BBB', 'one pending placeholder: take it');
  assert.equal(toolIdAtLine([], 5), undefined);
});
