// What a conversation changed, and the way back (issue 35, docs/review.md): the code lenses on
// the answers that changed files run `flemma.changes [uri, toolId]`, which opens the calls' diff
// as a read-only `flemma-changes:` document beside the chat, and `flemma.rewind [uri, toolId,
// files, chat]`, which asks first (a modal dialog) and then has the server put the files back
// and cut the chat back (the cut arrives as an edit of the chat's buffer). It reaches the server
// only through `LspPort`.

import * as vscode from 'vscode';
import type { LspPort } from './features';

export const CHANGES_SCHEME = 'flemma-changes';

/** The answer of `flemma/changes` (protocol/methods.schema.json). */
export interface ChangesAnswer {
  calls: {
    toolId: string;
    tool: string;
    files: { path: string; from?: string; added: number | null; removed: number | null }[];
    diff: string;
  }[];
}

/** The answer of `flemma/rewind`. */
export interface RewindAnswer {
  dryRun: boolean;
  restored: string[];
  removed: string[];
  changedSince: string[];
  refused: boolean;
  chat?: { line: number; messages: number };
  message: string;
}

function isChanges(value: unknown): value is ChangesAnswer {
  const answer = value as Partial<ChangesAnswer> | null;
  return typeof answer === 'object' && answer !== null && Array.isArray(answer.calls);
}

function isRewind(value: unknown): value is RewindAnswer {
  const answer = value as Partial<RewindAnswer> | null;
  return typeof answer === 'object' && answer !== null && typeof answer.message === 'string';
}

/** The calls' changes as `flemmad changes` prints them: `== id (tool): N files changed`, the diff. */
export function changesText(answer: ChangesAnswer): string {
  if (answer.calls.length === 0) return "(no call of this chat changed the project's files)\n";
  return answer.calls
    .map((call) => {
      const files = call.files.length;
      return `== ${call.toolId} (${call.tool}): ${files} file${files === 1 ? '' : 's'} changed\n${call.diff}`;
    })
    .join('');
}

/** The changes' documents: the text of the last `flemma.changes` answer for each call. */
export class ChangesDocuments implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;

  /** Holds `text` as the changes of `toolId` (every call's when undefined); returns its URI. */
  hold(toolId: string | undefined, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: CHANGES_SCHEME, path: `/${toolId ?? 'all'}.diff` });
    this.texts.set(uri.path, text);
    this.emitter.fire(uri);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.path) ?? '';
  }
}

/** Asks what `toolId` (every call when undefined) of the chat changed and opens it beside the chat. */
export async function openChanges(
  port: LspPort,
  documents: ChangesDocuments,
  chatUri: string,
  toolId: string | undefined,
): Promise<ChangesAnswer | undefined> {
  const answer = await port.sendRequest('workspace/executeCommand', {
    command: 'flemma.changes',
    arguments: toolId === undefined ? [chatUri] : [chatUri, toolId],
  });
  if (!isChanges(answer)) {
    void vscode.window.showErrorMessage(`Flemma: no changes to show for ${toolId ?? 'this chat'}.`);
    return undefined;
  }
  const uri = documents.hold(toolId, changesText(answer));
  const document = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(document, { preview: true, viewColumn: vscode.ViewColumn.Beside });
  return answer;
}

/** Asks first (modal), then rewinds to before `toolId` with the lens's `rest` of the arguments. */
export async function confirmRewind(
  port: LspPort,
  chatUri: string,
  toolId: string,
  rest: unknown[],
): Promise<RewindAnswer | undefined> {
  const choice = await vscode.window.showWarningMessage(
    `Rewind to before ${toolId}?`,
    {
      modal: true,
      detail:
        'The files go back as they were before this call, and the chat is cut back to before the answer that made it (the whole chat is kept first; `flemmad rewind FILE --undo-chat` puts it back once saved).',
    },
    'Rewind',
  );
  if (choice !== 'Rewind') return undefined;
  const answer = await port.sendRequest('workspace/executeCommand', {
    command: 'flemma.rewind',
    arguments: [chatUri, toolId, ...rest],
  });
  if (!isRewind(answer)) return undefined;
  if (answer.refused) void vscode.window.showErrorMessage(`Flemma: ${answer.message}`);
  else void vscode.window.showInformationMessage(`Flemma: ${answer.message}`);
  return answer;
}

type Next = (command: string, args: unknown[]) => unknown;

/**
 * `middleware.executeCommand`: the lenses' `flemma.changes` opens the diff and `flemma.rewind`
 * asks first; every other command goes to `inner`.
 */
export function changesMiddleware(
  port: LspPort,
  documents: ChangesDocuments,
  inner: (command: string, args: unknown[], next: Next) => unknown,
) {
  return async (command: string, args: unknown[], next: Next) => {
    const [chatUri, toolId, ...rest] = args;
    if (command === 'flemma.changes' && typeof chatUri === 'string') {
      return openChanges(port, documents, chatUri, typeof toolId === 'string' ? toolId : undefined);
    }
    if (command === 'flemma.rewind' && typeof chatUri === 'string' && typeof toolId === 'string') {
      return confirmRewind(port, chatUri, toolId, rest);
    }
    return inner(command, args, next);
  };
}
