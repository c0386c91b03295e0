// Unpacks the packaged extension (`npm run package` builds it first) and checks what VS Code reads.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readZip } from '../support/zip';

const root = join(__dirname, '..', '..', '..');
const vsix = readZip(readFileSync(join(root, 'dist', 'flemma.vsix')));

function entry(name: string): Buffer {
  const data = vsix.get(name);
  assert.ok(data, `${name} is in the .vsix (it has: ${[...vsix.keys()].join(', ')})`);
  return data;
}

const manifest = JSON.parse(entry('extension/package.json').toString('utf8'));

test('the .vsix holds the manifest, grammar, language configuration, bundle and licence', () => {
  for (const name of [
    '[Content_Types].xml',
    'extension.vsixmanifest',
    'extension/package.json',
    'extension/syntaxes/chat.tmLanguage.json',
    'extension/language-configuration.json',
    'extension/dist/extension.js',
    'extension/LICENSE.txt',
  ]) {
    entry(name);
  }
  const stray = [...vsix.keys()].filter((n) => /\/(src|test|out|node_modules)\//.test(n));
  assert.deepEqual(stray, [], 'sources, tests and node_modules stay out');
  assert.match(entry('extension.vsixmanifest').toString('utf8'), /Microsoft\.VisualStudio\.Code\.Manifest/);
});

test('language chat for *.chat with its grammar', () => {
  const [language] = manifest.contributes.languages;
  assert.equal(language.id, 'chat');
  assert.deepEqual(language.extensions, ['.chat']);
  const [grammar] = manifest.contributes.grammars;
  assert.equal(grammar.language, 'chat');
  const packed = JSON.parse(entry(`extension/${grammar.path.replace(/^\.\//, '')}`).toString('utf8'));
  assert.equal(packed.scopeName, grammar.scopeName);
  assert.ok(packed.repository['tool-result'] && packed.repository['tool-use'] && packed.repository.thinking);
  const configuration = JSON.parse(entry('extension/language-configuration.json').toString('utf8'));
  // A backtick closed automatically gave a closing fence typed by hand a fourth backtick
  // (seen in code-server, test/code-server); backticks still surround a selection.
  const autoClosed = configuration.autoClosingPairs.map((p: { open: string }) => p.open);
  assert.ok(!autoClosed.includes('`'), `backticks are not auto-closed: ${autoClosed}`);
  assert.ok(configuration.surroundingPairs.some((p: string[]) => p[0] === '`'));
});

test('limited support in untrusted workspaces, with the binary and the config from user settings only', () => {
  const untrusted = manifest.capabilities.untrustedWorkspaces;
  assert.equal(untrusted.supported, 'limited');
  assert.match(untrusted.description, /untrusted/);
  assert.deepEqual(untrusted.restrictedConfigurations, ['flemma.path', 'flemma.config']);
});

test('commands and keybindings', () => {
  const ids = manifest.contributes.commands.map((c: { command: string }) => c.command);
  for (const c of ['send', 'cancel', 'approve', 'reject', 'approveAll', 'background', 'execute', 'status']) {
    assert.ok(ids.includes(`flemma.chat.${c}`), c);
  }
  const send = manifest.contributes.keybindings.find((k: { command: string }) => k.command === 'flemma.chat.send');
  assert.equal(send.key, 'ctrl+]');
  assert.equal(send.mac, 'cmd+]');
  assert.match(send.when, /editorLangId == chat/);
  const bound = new Set(manifest.contributes.keybindings.map((k: { command: string }) => k.command));
  for (const c of ['send', 'cancel', 'approve', 'reject', 'approveAll', 'background', 'execute']) {
    assert.ok(bound.has(`flemma.chat.${c}`), `${c} has a keybinding`);
  }
  assert.ok(manifest.contributes.configuration.properties['flemma.path']);
  assert.ok(manifest.contributes.configuration.properties['flemma.config']);
});

test('the bundle is self-contained apart from vscode and exports activate', () => {
  const bundle = entry('extension/dist/extension.js').toString('utf8');
  assert.equal(manifest.main, './dist/extension.js');
  assert.ok(/require\("vscode"\)/.test(bundle), 'vscode stays external');
  assert.ok(!/require\("vscode-languageclient/.test(bundle), 'the language client is bundled in');
  assert.ok(bundle.includes('activate'));
  assert.ok(bundle.includes('lsp.sock') && bundle.includes('flemma.send'));
});

test('the packed bundle loads in Node with vscode stubbed and exports activate/deactivate', () => {
  // Every property of the stub is a constructible no-op, enough for the language client's
  // module-level code; starting a client is not attempted (that needs VS Code).
  const stub: object = new Proxy(function () {}, {
    get: (_t, key) => (key === Symbol.toPrimitive ? () => '' : stub),
    construct: () => stub as object,
    apply: () => stub,
  });
  const loader = Module as unknown as { _load: (r: string, p: unknown, m: boolean) => unknown };
  const load = loader._load;
  loader._load = function (request: string, parent: unknown, isMain: boolean) {
    return request === 'vscode' ? stub : load.call(this, request, parent, isMain);
  };
  try {
    const dir = mkdtempSync(join(tmpdir(), 'flemma-vsix-'));
    try {
      const file = join(dir, 'extension.js');
      writeFileSync(file, entry('extension/dist/extension.js'));
      const extension = require(file);
      assert.equal(typeof extension.activate, 'function');
      assert.equal(typeof extension.deactivate, 'function');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    loader._load = load;
  }
});
