// One undo stop per streamed reply. flemmad streams a reply as many small versioned
// `workspace/applyEdit` requests; VS Code would make each its own undo step. While a reply streams
// (between `request:sending` and the engine's stop for that document) the extension applies
// those edits itself with `undoStopBefore` only on the first one and no stop after, so one `Undo`
// removes the whole reply. Pure: the decisions, not the API calls.

export interface LspPosition {
  line: number;
  character: number;
}
export interface LspTextEdit {
  range: { start: LspPosition; end: LspPosition };
  newText: string;
}
export interface LspTextDocumentEdit {
  textDocument: { uri: string; version: number | null };
  edits: LspTextEdit[];
}
export interface LspApplyEditParams {
  label?: string;
  edit: { documentChanges?: unknown[]; changes?: unknown };
}

/**
 * The single plain text document edit of a request, or `undefined` when the request is anything
 * else (several documents, file operations, snippet or annotated edits, `changes` without a
 * version): those go to the language client's own handler unchanged.
 */
export function singleDocumentEdit(params: LspApplyEditParams): LspTextDocumentEdit | undefined {
  const changes = params.edit.documentChanges;
  if (params.edit.changes !== undefined || !Array.isArray(changes) || changes.length !== 1) return undefined;
  const change = changes[0] as Partial<LspTextDocumentEdit> & { kind?: unknown };
  if (change.kind !== undefined || change.textDocument === undefined || !Array.isArray(change.edits)) return undefined;
  for (const e of change.edits as unknown[]) {
    const edit = e as Partial<LspTextEdit> & { annotationId?: unknown; snippet?: unknown };
    if (typeof edit.newText !== 'string' || edit.range === undefined) return undefined;
    if (edit.annotationId !== undefined || edit.snippet !== undefined) return undefined;
  }
  return change as LspTextDocumentEdit;
}

export interface UndoStops {
  undoStopBefore: boolean;
  undoStopAfter: boolean;
}

/** Tracks, per document URI, whether a reply is streaming and whether it has had its first edit. */
export class ReplyUndoGroups {
  private readonly streaming = new Map<string, { edits: number }>();

  /** A reply starts streaming into `uri` (`request:sending`). */
  begin(uri: string): void {
    this.streaming.set(uri, { edits: 0 });
  }

  /** The reply in `uri` is over (finished, failed, cancelled, idle). */
  end(uri: string): void {
    this.streaming.delete(uri);
  }

  isStreaming(uri: string): boolean {
    return this.streaming.has(uri);
  }

  /** The undo stops for the next streamed edit to `uri`, or `undefined` when none is streaming. */
  nextEdit(uri: string): UndoStops | undefined {
    const reply = this.streaming.get(uri);
    if (reply === undefined) return undefined;
    const first = reply.edits === 0;
    reply.edits++;
    return { undoStopBefore: first, undoStopAfter: false };
  }
}

/**
 * Which events start and end a reply for the undo grouping. A reply's group runs from
 * `request:sending` until the engine stops (`engine:stopped`, sent once the engine's writes to
 * the document are done): the server sends events at once but its edits one at a time, so the
 * end of a turn (the empty `@You:`, the placeholders of its tool calls) still reaches the editor
 * after `request:finished` and `conversation:idle`. The next `request:sending` (autopilot)
 * starts a new group.
 */
export function undoGroupingEffect(eventName: string): 'begin' | 'end' | undefined {
  switch (eventName) {
    case 'request:sending':
      return 'begin';
    case 'engine:stopped':
      return 'end';
    default:
      return undefined;
  }
}
