// Entry point: starts the language client (daemon socket or `flemmad lsp`) and the features.

import * as vscode from 'vscode';
import {
  LanguageClient,
  type ApplyWorkspaceEditParams,
  type ApplyWorkspaceEditResult,
  type ServerOptions,
  type StreamInfo,
} from 'vscode-languageclient/node';
import { CHAT_LANGUAGE, applyEditMiddleware, registerFeatures } from './features';
import { CHANGES_SCHEME, ChangesDocuments, changesMiddleware } from './changes';
import { PROPOSAL_SCHEME, ProposalFileSystem, reviewMiddleware } from './review';
import { connectOrSpawn } from './server';
import { configurationChange, serverSettings } from './trust';
import { ReplyUndoGroups, type LspApplyEditParams } from './undo';

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  // Read at each (re)start, so a settings change takes effect on restart.
  const settings = () => vscode.workspace.getConfiguration('flemma');
  // What the server gets: `flemma.config`, marked restricted while the workspace is not
  // trusted (every chat is then untrusted: docs/security.md).
  const serverConfig = () =>
    serverSettings(settings().get<Record<string, unknown>>('config', {}), vscode.workspace.isTrusted);
  const output = vscode.window.createOutputChannel('Flemma', { log: true });
  const undo = new ReplyUndoGroups();
  const streamEdits = applyEditMiddleware(undo);
  const handleApplyEdit = (
    params: ApplyWorkspaceEditParams,
    next: (params: ApplyWorkspaceEditParams, token: never) => unknown,
  ): Promise<ApplyWorkspaceEditResult> =>
    streamEdits(params as LspApplyEditParams, (p) => next(p as ApplyWorkspaceEditParams, undefined as never));
  const serverOptions: ServerOptions = async () => {
    const connection = await connectOrSpawn(settings().get<string>('path', 'flemmad'), process.env);
    if (connection.kind === 'daemon') {
      output.info(`connected to the flemmad daemon at ${connection.socketPath}`);
      const stream: StreamInfo = { reader: connection.socket, writer: connection.socket };
      return stream;
    }
    output.info(`started ${connection.executable} lsp`);
    return connection.process;
  };
  // The proposals' documents (review before approval), answered through the client once it runs.
  const port = {
    sendRequest: (method: string, params: unknown) =>
      client === undefined ? Promise.reject(new Error('the language server is not running')) : client.sendRequest(method, params),
    onNotification: (method: string, handler: (params: unknown) => void) =>
      client === undefined ? { dispose: () => undefined } : client.onNotification(method, handler),
  };
  const proposals = new ProposalFileSystem(port);
  // What the conversation changed (the code lenses' Diff) and the way back (their Rewind).
  const changes = new ChangesDocuments();
  const executeCommand = changesMiddleware(port, changes, reviewMiddleware(port, proposals));
  context.subscriptions.push(
    vscode.workspace.registerFileSystemProvider(PROPOSAL_SCHEME, proposals, { isCaseSensitive: true }),
    vscode.workspace.registerTextDocumentContentProvider(CHANGES_SCHEME, changes),
  );
  client = new LanguageClient(
    'flemma',
    'Flemma',
    serverOptions,
    {
      documentSelector: [{ language: CHAT_LANGUAGE }],
      initializationOptions: serverConfig,
      outputChannel: output,
      middleware: {
        workspace: { handleApplyEdit },
        executeCommand: (command, args, next) =>
          executeCommand(command, args, (c, a) => next(c, a as never[])),
      },
    },
  );
  const lsp = client;
  const pushConfig = () => {
    if (!lsp.isRunning()) return; // it reads them at its start
    lsp
      .sendNotification('workspace/didChangeConfiguration', configurationChange(serverConfig()))
      .catch((error: unknown) => output.warn(`cannot send the settings to flemmad: ${String(error)}`));
  };
  registerFeatures(
    context.subscriptions,
    {
      sendRequest: (method, params) => lsp.sendRequest(method, params),
      onNotification: (method, handler) => lsp.onNotification(method, handler),
    },
    undo,
  );
  context.subscriptions.push(
    vscode.commands.registerCommand('flemma.chat.restartServer', () => lsp.restart()),
    // `flemma.config` changes, and the user trusting the workspace, reach the server as
    // `workspace/didChangeConfiguration` (its client layer is `settings.flemma.config`): no
    // restart needed.
    vscode.workspace.onDidGrantWorkspaceTrust(pushConfig),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('flemma.config')) pushConfig();
      // The configuration is synchronized live; which flemmad runs is chosen at start.
      if (e.affectsConfiguration('flemma.path')) {
        void vscode.window
          .showInformationMessage('Flemma: the path of flemmad changed: restart the language server to use it.', 'Restart')
          .then((choice) => (choice === 'Restart' ? lsp.restart() : undefined));
      }
    }),
  );
  try {
    await lsp.start();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(`Flemma: ${message}`);
  }
}

export async function deactivate(): Promise<void> {
  if (client !== undefined) await client.stop();
}
