// The editor glue: commands, code lenses over pending placeholders, the status bar, and the
// apply-edit middleware that makes one undo stop per streamed reply. It reaches the server only
// through `LspPort`, so it is tested against a stubbed `vscode` module without a language client.

import * as vscode from 'vscode';
import { COMMANDS, executeCommandParams, type CommandSpec } from './commands';
import { INITIAL_STATUS, reduceStatus, statusSummary, statusText, type DocumentStatus, type FlemmaEvent } from './status';
import { pendingPlaceholders, scanToolHeaders, toolIdAtLine, type ToolHeader } from './toolBlocks';
import { ReplyUndoGroups, singleDocumentEdit, undoGroupingEffect, type LspApplyEditParams } from './undo';

export const CHAT_LANGUAGE = 'chat';

/** What the features need from the language client. */
export interface LspPort {
  sendRequest(method: string, params: unknown): Promise<unknown>;
  onNotification(method: string, handler: (params: unknown) => void): { dispose(): unknown };
}

export interface ApplyEditResult {
  applied: boolean;
  failureReason?: string;
}

function isFlemmaEvent(value: unknown): value is FlemmaEvent {
  return typeof value === 'object' && value !== null && typeof (value as FlemmaEvent).name === 'string';
}

function activeChatEditor(): vscode.TextEditor | undefined {
  const editor = vscode.window.activeTextEditor;
  return editor !== undefined && editor.document.languageId === CHAT_LANGUAGE ? editor : undefined;
}

function candidatesFor(spec: CommandSpec, text: string): ToolHeader[] {
  if (spec.tool === 'pending') return pendingPlaceholders(text);
  return scanToolHeaders(text);
}

async function chooseTool(spec: CommandSpec, editor: vscode.TextEditor): Promise<string | undefined> {
  const candidates = candidatesFor(spec, editor.document.getText());
  if (candidates.length === 0) {
    const what = spec.tool === 'pending' ? 'pending tool call' : 'tool call';
    void vscode.window.showInformationMessage(`Flemma: no ${what} in this chat.`);
    return undefined;
  }
  const atCursor = toolIdAtLine(candidates, editor.selection.active.line);
  if (atCursor !== undefined) return atCursor;
  const ids = [...new Set(candidates.map((c) => c.toolId))];
  return vscode.window.showQuickPick(ids, { placeHolder: `${spec.title}: which tool call?` });
}

/** A JSON-RPC error answer of the server (a negative `code`), not a failure of the client. */
function isServerAnswer(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'number' && code < 0;
}

/** Runs one flemma command: resolves the document, the tool and the reason, then executes it. */
async function runCommand(port: LspPort, spec: CommandSpec, uriArg?: unknown, toolArg?: unknown): Promise<unknown> {
  const editor = activeChatEditor();
  const uri = typeof uriArg === 'string' ? uriArg : editor?.document.uri.toString();
  if (uri === undefined) {
    void vscode.window.showErrorMessage(`Flemma: ${spec.title} needs a .chat file: open one and run it again.`);
    return undefined;
  }
  let toolId = typeof toolArg === 'string' ? toolArg : undefined;
  if (spec.tool !== 'none' && toolId === undefined) {
    if (editor === undefined) {
      void vscode.window.showErrorMessage(`Flemma: ${spec.title} needs the chat's editor to find the tool call.`);
      return undefined;
    }
    toolId = await chooseTool(spec, editor);
    if (toolId === undefined) return undefined;
  }
  let reason: string | undefined;
  if (spec.asksReason) {
    reason = await vscode.window.showInputBox({
      title: `Reject ${toolId}`,
      prompt: 'Why? (optional: the model reads it as your feedback; Escape keeps the tool pending)',
    });
    if (reason === undefined) return undefined;
  }
  try {
    const result = await port.sendRequest('workspace/executeCommand', executeCommandParams(spec, uri, toolId, reason));
    if (spec.lspCommand === 'flemma.status') {
      void vscode.window.showInformationMessage(`Flemma: ${statusSummary(result)}`);
    }
    return result;
  } catch (error) {
    // flemmad tells why a command failed itself (`window/showMessage`); an error that is not
    // its answer (the connection went away) is told here.
    if (isServerAnswer(error)) return undefined;
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(`Flemma: ${spec.title} failed: ${message}`);
    return undefined;
  }
}

/** Code lenses "Approve" and "Reject" over each pending placeholder, computed client-side. */
export class PendingToolLenses implements vscode.CodeLensProvider {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;

  refresh(): void {
    this.changed.fire();
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const uri = document.uri.toString();
    return pendingPlaceholders(document.getText()).flatMap((p) => {
      const range = new vscode.Range(p.line, 0, p.line, 0);
      return [
        new vscode.CodeLens(range, { title: 'Approve', command: 'flemma.chat.approve', arguments: [uri, p.toolId] }),
        new vscode.CodeLens(range, { title: 'Reject', command: 'flemma.chat.reject', arguments: [uri, p.toolId] }),
      ];
    });
  }
}

/** The status bar item: the active chat's model, streaming state and cost. */
export class StatusBar {
  private readonly item: vscode.StatusBarItem;
  private readonly byUri = new Map<string, DocumentStatus>();

  constructor() {
    this.item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
    this.item.command = 'flemma.chat.status';
    this.item.tooltip = 'Flemma: model · state · cost of this chat (click for status)';
  }

  onEvent(event: FlemmaEvent): void {
    if (event.uri === undefined) return;
    this.byUri.set(event.uri, reduceStatus(this.byUri.get(event.uri) ?? INITIAL_STATUS, event));
    this.render();
  }

  statusOf(uri: string): DocumentStatus {
    return this.byUri.get(uri) ?? INITIAL_STATUS;
  }

  render(): void {
    const editor = activeChatEditor();
    if (editor === undefined) {
      this.item.hide();
      return;
    }
    this.item.text = statusText(this.statusOf(editor.document.uri.toString()));
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}

/**
 * `middleware.workspace.handleApplyEdit`: while a reply streams into a visible chat, apply its
 * edits through the editor with one undo stop per reply; everything else goes to `next`.
 * A stale version is refused (the server rebases and retries), exactly as the client would.
 */
export function applyEditMiddleware(undo: ReplyUndoGroups) {
  return async (
    params: LspApplyEditParams,
    next: (params: LspApplyEditParams) => unknown,
  ): Promise<ApplyEditResult> => {
    const edit = singleDocumentEdit(params);
    const uri = edit?.textDocument.uri;
    const editor =
      uri === undefined ? undefined : vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri);
    if (edit === undefined || uri === undefined || editor === undefined || !undo.isStreaming(uri)) {
      return (await next(params)) as ApplyEditResult;
    }
    const version = edit.textDocument.version;
    if (version !== null && version !== editor.document.version) {
      return {
        applied: false,
        failureReason: `document has changed: the edit is for version ${version}, the editor has ${editor.document.version}`,
      };
    }
    const stops = undo.nextEdit(uri) ?? { undoStopBefore: true, undoStopAfter: true };
    const applied = await editor.edit((builder) => {
      for (const e of edit.edits) {
        const r = e.range;
        builder.replace(new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character), e.newText);
      }
    }, stops);
    return applied ? { applied: true } : { applied: false, failureReason: 'the editor refused the edit' };
  };
}

/** Registers commands, code lenses, the status bar and the `flemma/event` handler. */
export function registerFeatures(
  subscriptions: { dispose(): unknown }[],
  port: LspPort,
  undo: ReplyUndoGroups,
): { lenses: PendingToolLenses; statusBar: StatusBar } {
  for (const spec of COMMANDS) {
    subscriptions.push(
      vscode.commands.registerCommand(spec.id, (uri?: unknown, toolId?: unknown) => runCommand(port, spec, uri, toolId)),
    );
  }
  const lenses = new PendingToolLenses();
  subscriptions.push(vscode.languages.registerCodeLensProvider({ language: CHAT_LANGUAGE }, lenses));
  const statusBar = new StatusBar();
  subscriptions.push(statusBar);
  subscriptions.push(vscode.window.onDidChangeActiveTextEditor(() => statusBar.render()));
  subscriptions.push(
    port.onNotification('flemma/event', (params) => {
      if (!isFlemmaEvent(params)) return;
      statusBar.onEvent(params);
      if (params.uri !== undefined) {
        const effect = undoGroupingEffect(params.name);
        if (effect === 'begin') undo.begin(params.uri);
        if (effect === 'end') undo.end(params.uri);
      }
      lenses.refresh();
    }),
  );
  statusBar.render();
  return { lenses, statusBar };
}
