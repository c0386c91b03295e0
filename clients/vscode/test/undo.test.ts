import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReplyUndoGroups, singleDocumentEdit, undoGroupingEffect, type LspApplyEditParams } from '../src/undo';

const insert = (text: string, version: number | null = 3): LspApplyEditParams => ({
  edit: {
    documentChanges: [
      {
        textDocument: { uri: 'file:///t.chat', version },
        edits: [{ range: { start: { line: 4, character: 0 }, end: { line: 4, character: 0 } }, newText: text }],
      },
    ],
  },
});

test('a streamed insertion is a single plain document edit', () => {
  assert.equal(singleDocumentEdit(insert('Hello'))?.textDocument.version, 3);
});

test('anything else goes to the client unchanged', () => {
  assert.equal(singleDocumentEdit({ edit: { changes: { 'file:///t.chat': [] } } }), undefined);
  assert.equal(singleDocumentEdit({ edit: { documentChanges: [{ kind: 'create', uri: 'file:///x' }] } }), undefined);
  const two = insert('a');
  two.edit.documentChanges = [...(two.edit.documentChanges ?? []), ...(insert('b').edit.documentChanges ?? [])];
  assert.equal(singleDocumentEdit(two), undefined);
  const annotated = insert('a');
  (annotated.edit.documentChanges?.[0] as { edits: object[] }).edits[0] = {
    ...(annotated.edit.documentChanges?.[0] as { edits: object[] }).edits[0],
    annotationId: 'x',
  };
  assert.equal(singleDocumentEdit(annotated), undefined);
});

test('one undo stop before the first edit of a reply, none inside it', () => {
  const groups = new ReplyUndoGroups();
  assert.equal(groups.nextEdit('a'), undefined, 'not streaming');
  groups.begin('a');
  assert.deepEqual(groups.nextEdit('a'), { undoStopBefore: true, undoStopAfter: false });
  assert.deepEqual(groups.nextEdit('a'), { undoStopBefore: false, undoStopAfter: false });
  assert.equal(groups.nextEdit('b'), undefined, 'per document');
  groups.end('a');
  assert.equal(groups.isStreaming('a'), false);
  groups.begin('a');
  assert.deepEqual(groups.nextEdit('a'), { undoStopBefore: true, undoStopAfter: false }, 'the next reply is its own step');
});

test('events that open and close a reply', () => {
  assert.equal(undoGroupingEffect('request:sending'), 'begin');
  assert.equal(undoGroupingEffect('request:finished'), undefined, 'the turn may still write its empty @You:');
  assert.equal(undoGroupingEffect('conversation:idle'), undefined, 'sent before the last edits of the turn');
  assert.equal(undoGroupingEffect('engine:stopped'), 'end');
  assert.equal(undoGroupingEffect('tool:executing'), undefined);
});
