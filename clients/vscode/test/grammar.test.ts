// Tokenizes real chat text with the engine VS Code uses (vscode-textmate + Oniguruma).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import * as oniguruma from 'vscode-oniguruma';
import * as textmate from 'vscode-textmate';

const root = join(__dirname, '..', '..');
let grammar: textmate.IGrammar;

/** Grammars built into VS Code that the chat grammar may embed (a missing one breaks its rule). */
const VSCODE_BUILTIN_SCOPES = ['text.html.markdown', 'source.json', 'source.rust', 'source.lua'];

test('the grammar embeds only grammars that VS Code ships', () => {
  const raw = readFileSync(join(root, 'syntaxes', 'chat.tmLanguage.json'), 'utf8');
  const external = [...raw.matchAll(/"include": "([^#$][^"]*)"/g)].map((m) => m[1]);
  assert.ok(external.length > 0);
  for (const scope of external) assert.ok(VSCODE_BUILTIN_SCOPES.includes(scope), scope);
});

before(async () => {
  const wasm = readFileSync(join(root, 'node_modules', 'vscode-oniguruma', 'release', 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns: string[]) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s: string) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName: string) => {
      const file =
        scopeName === 'text.chat'
          ? join(root, 'syntaxes', 'chat.tmLanguage.json')
          : scopeName === 'text.html.markdown'
            ? join(root, 'test', 'fixtures', 'markdown-standin.tmLanguage.json')
            : undefined;
      if (file === undefined) {
        if (!VSCODE_BUILTIN_SCOPES.includes(scopeName)) return null;
        // VS Code ships these grammars; an empty stand-in keeps the embedding rules working here.
        return textmate.parseRawGrammar(JSON.stringify({ scopeName, patterns: [] }), `${scopeName}.json`);
      }
      return textmate.parseRawGrammar(readFileSync(file, 'utf8'), file);
    },
  });
  const loaded = await registry.loadGrammar('text.chat');
  assert.ok(loaded, 'the chat grammar loads');
  grammar = loaded;
});

/** The scopes of every token, as `[line, text, scopes joined]`. */
function tokenize(text: string): { line: number; text: string; scopes: string[] }[] {
  let stack = textmate.INITIAL;
  const out: { line: number; text: string; scopes: string[] }[] = [];
  text.split('\n').forEach((line, n) => {
    const r = grammar.tokenizeLine(line, stack);
    for (const t of r.tokens) out.push({ line: n, text: line.slice(t.startIndex, t.endIndex), scopes: t.scopes });
    stack = r.ruleStack;
  });
  return out;
}

function scopesOf(tokens: ReturnType<typeof tokenize>, text: string, line?: number): string[] {
  const t = tokens.find((x) => x.text === text && (line === undefined || x.line === line));
  assert.ok(t, `no token ${JSON.stringify(text)}${line === undefined ? '' : ` on line ${line}`}`);
  return t.scopes;
}

const CHAT = [
  '```rhai',
  'let recipient = "QA team";',
  '```',
  '@System:',
  'Be terse.',
  '',
  '@You:',
  'Draft an update for {{ recipient }} based on @./notes/sprint-12.md.',
  '{%- if x { -%}',
  '',
  '@Assistant:',
  'Sure, {{ not_a_template }} here.',
  '',
  '**Tool Use:** `bash` (`toolu_01BBB`)',
  '```json',
  '{"command":"make test"}',
  '```',
  '',
  '<thinking anthropic:signature="Ev0B">',
  'The user wants a summary.',
  '</thinking>',
  '<!-- flemma:aborted: Response interrupted by the user. -->',
  '',
  '@You:',
  '**Tool Result:** `toolu_01BBB` (pending)',
  '```',
  '@Assistant:',
  '```',
  '',
  '**Tool Result:** `toolu_01X` (error job=job_k7x2m9qa)',
  '```',
  'lost',
  '```',
  '',
  '**Job Result:** `job_k7x2m9qa`',
  '```',
  'done',
  '```',
].join('\n');

test('role lines, per role', () => {
  const tokens = tokenize(CHAT);
  assert.ok(scopesOf(tokens, 'System', 3).includes('entity.name.section.role.user.chat'));
  assert.ok(scopesOf(tokens, 'Assistant', 10).includes('entity.name.section.role.assistant.chat'));
  assert.ok(scopesOf(tokens, 'You', 23).includes('entity.name.section.role.user.chat'));
});

test('a role line inside a fence is content, not a new message', () => {
  const scopes = scopesOf(tokenize(CHAT), '@Assistant:', 26);
  assert.ok(scopes.includes('markup.fenced_code.block.markdown'), scopes.join(' '));
  assert.ok(!scopes.some((s) => s.startsWith('entity.name.section.role')));
});

test('frontmatter', () => {
  const tokens = tokenize(CHAT);
  assert.ok(scopesOf(tokens, 'rhai', 0).includes('fenced_code.block.language.chat'));
  assert.ok(tokens.find((t) => t.line === 1)?.scopes.includes('meta.frontmatter.rhai.chat'));
});

test('templates and file references inside a Markdown paragraph of @You:', () => {
  const tokens = tokenize(CHAT);
  const open = scopesOf(tokens, '{{', 7);
  assert.ok(open.includes('punctuation.section.embedded.begin.template.chat'), open.join(' '));
  assert.ok(open.includes('meta.paragraph.markdown'), 'the injection reaches into the paragraph');
  assert.ok(scopesOf(tokens, '{%-', 8).includes('meta.embedded.statement.template.chat'));
  const path = tokens.find((t) => t.line === 7 && t.text.includes('notes/sprint-12.md'));
  assert.ok(path?.scopes.includes('meta.file-reference.chat'), JSON.stringify(path));
  assert.equal(path?.text.endsWith('.md'), true, 'trailing punctuation is not part of the path');
});

test('assistant text is never a template', () => {
  const tokens = tokenize(CHAT).filter((t) => t.line === 11);
  assert.ok(tokens.every((t) => !t.scopes.some((s) => s.includes('template'))), JSON.stringify(tokens));
});

test('tool use header: name and id', () => {
  const tokens = tokenize(CHAT);
  assert.ok(scopesOf(tokens, '**Tool Use:**', 13).includes('keyword.control.tool-use.chat'));
  assert.ok(scopesOf(tokens, 'bash', 13).includes('entity.name.function.tool.chat'));
  assert.ok(scopesOf(tokens, 'toolu_01BBB', 13).includes('constant.other.tool-id.chat'));
});

test('tool result and job headers with their status', () => {
  const tokens = tokenize(CHAT);
  assert.ok(scopesOf(tokens, 'pending', 24).includes('keyword.other.status.pending.chat'));
  assert.ok(scopesOf(tokens, 'error', 29).includes('invalid.illegal.status.error.chat'));
  assert.ok(scopesOf(tokens, 'job_k7x2m9qa', 29).includes('constant.other.job-id.chat'));
  assert.ok(scopesOf(tokens, '**Job Result:**', 34).includes('keyword.control.job-result.chat'));
});

test('thinking and the abort marker', () => {
  const tokens = tokenize(CHAT);
  assert.ok(scopesOf(tokens, 'anthropic', 18).includes('entity.other.attribute-name.provider.chat'));
  assert.ok(tokens.find((t) => t.line === 19)?.scopes.includes('comment.block.thinking.chat'));
  assert.ok(
    tokens.find((t) => t.line === 21)?.scopes.includes('comment.block.abort-marker.chat'),
  );
});
