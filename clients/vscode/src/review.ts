// Review before approval (issue 35, docs/review.md): the "Review changes" code action's command
// (`flemma.proposal [uri, toolId]`) opens VS Code's diff editor between the file as it is and
// the proposed content, a `flemma-proposal:` document. That document can be edited and saved:
// saving writes the new content back into the call's input in the chat (`flemma.reviseProposal`,
// through the server, which edits the chat buffer). It reaches the server only through
// `LspPort`; the document store is a `FileSystemProvider` (a content provider's documents
// cannot be saved).

import * as vscode from 'vscode';
import type { LspPort } from './features';

export const PROPOSAL_SCHEME = 'flemma-proposal';

/** The answer of `flemma/proposal` (protocol/methods.schema.json). */
export interface Proposal {
  tool: string;
  shown: string;
  path: string;
  before: string | null;
  after: string;
  diff: string;
  hunks: { number: number; header: string; diff: string }[];
}

export function isProposal(value: unknown): value is Proposal {
  const p = value as Partial<Proposal> | null;
  return typeof p === 'object' && p !== null && typeof p.after === 'string' && typeof p.path === 'string';
}

/** Where a proposal's document lives: `flemma-proposal:/<toolId>/<side>/<path as shown>`. */
export function proposalPath(toolId: string, side: 'after' | 'before', shown: string): string {
  const name = shown.replace(/^\/+/, '');
  return `/${encodeURIComponent(toolId)}/${side}/${name}`;
}

/** The diff editor's title. */
export function reviewTitle(toolId: string, p: Proposal): string {
  const hunks = p.hunks.length;
  return `${p.shown} ↔ proposed by ${toolId} (${hunks} hunk${hunks === 1 ? '' : 's'}; save to change the proposal)`;
}

interface Entry {
  chatUri: string;
  toolId: string;
  content: Uint8Array;
  mtime: number;
  /** Saving it writes the call's input (the proposed side). */
  writable: boolean;
}

/** The proposals' documents: read from the last `flemma.proposal` answer, saved through the server. */
export class ProposalFileSystem implements vscode.FileSystemProvider {
  private readonly entries = new Map<string, Entry>();
  private readonly emitter = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.emitter.event;

  constructor(private readonly port: LspPort) {}

  /** Holds the two sides of `p`; returns their URIs (the file itself when it exists). */
  hold(chatUri: string, toolId: string, p: Proposal): { left: vscode.Uri; right: vscode.Uri } {
    const encode = (text: string) => new TextEncoder().encode(text);
    const right = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: proposalPath(toolId, 'after', p.shown) });
    this.entries.set(right.path, { chatUri, toolId, content: encode(p.after), mtime: Date.now(), writable: true });
    this.emitter.fire([{ type: vscode.FileChangeType.Changed, uri: right }]);
    if (p.before !== null) return { left: vscode.Uri.file(p.path), right };
    const left = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: proposalPath(toolId, 'before', p.shown) });
    this.entries.set(left.path, { chatUri, toolId, content: encode(''), mtime: Date.now(), writable: false });
    return { left, right };
  }

  private entry(uri: vscode.Uri): Entry {
    const entry = this.entries.get(uri.path);
    if (entry === undefined) throw vscode.FileSystemError.FileNotFound(uri);
    return entry;
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  stat(uri: vscode.Uri): vscode.FileStat {
    const entry = this.entry(uri);
    return {
      type: vscode.FileType.File,
      ctime: entry.mtime,
      mtime: entry.mtime,
      size: entry.content.byteLength,
      permissions: entry.writable ? undefined : vscode.FilePermission.Readonly,
    };
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }

  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  readFile(uri: vscode.Uri): Uint8Array {
    return this.entry(uri).content;
  }

  /** Saving the proposal: its text becomes the call's input (the server says when it cannot). */
  async writeFile(uri: vscode.Uri, content: Uint8Array): Promise<void> {
    const entry = this.entry(uri);
    if (!entry.writable) throw vscode.FileSystemError.NoPermissions(uri);
    const text = new TextDecoder().decode(content);
    try {
      await this.port.sendRequest('workspace/executeCommand', {
        command: 'flemma.reviseProposal',
        arguments: [entry.chatUri, entry.toolId, text],
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String((error as { message?: unknown })?.message ?? error);
      throw vscode.FileSystemError.Unavailable(`flemmad did not take the proposal: ${message}`);
    }
    entry.content = content;
    entry.mtime = Date.now();
    this.emitter.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  delete(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }
}

/** Asks for the proposal of `toolId` in the chat `chatUri` and opens it beside the file as a diff. */
export async function openReview(
  port: LspPort,
  proposals: ProposalFileSystem,
  chatUri: string,
  toolId: string,
): Promise<Proposal | undefined> {
  const answer = await port.sendRequest('workspace/executeCommand', {
    command: 'flemma.proposal',
    arguments: [chatUri, toolId],
  });
  if (!isProposal(answer)) {
    void vscode.window.showErrorMessage(`Flemma: no proposal to review for ${toolId}.`);
    return undefined;
  }
  const { left, right } = proposals.hold(chatUri, toolId, answer);
  await vscode.commands.executeCommand('vscode.diff', left, right, reviewTitle(toolId, answer));
  return answer;
}

/**
 * `middleware.executeCommand`: the "Review changes" code action's `flemma.proposal` opens the
 * diff editor; every other command goes to the server as it is.
 */
export function reviewMiddleware(port: LspPort, proposals: ProposalFileSystem) {
  return async (command: string, args: unknown[], next: (command: string, args: unknown[]) => unknown) => {
    const [chatUri, toolId] = args;
    if (command === 'flemma.proposal' && typeof chatUri === 'string' && typeof toolId === 'string') {
      return openReview(port, proposals, chatUri, toolId);
    }
    return next(command, args);
  };
}
