// The extension's commands and how each maps onto a `flemma.*` LSP command run through
// `workspace/executeCommand` (arguments are positional, as the server advertises them).
// Pure: no `vscode` import.

/** What a command needs besides the document. */
export type ToolTarget = 'none' | 'pending' | 'anyTool';

export interface CommandSpec {
  /** The VS Code command id (distinct from the server's, which the language client registers). */
  id: string;
  /** The LSP command sent through `workspace/executeCommand`. */
  lspCommand: string;
  title: string;
  /** Which tool id the command takes: none, a pending placeholder, or any tool block. */
  tool: ToolTarget;
  /** Whether the command asks for an optional reason (reject). */
  asksReason: boolean;
}

export const COMMANDS: readonly CommandSpec[] = [
  { id: 'flemma.chat.send', lspCommand: 'flemma.send', title: 'Send', tool: 'none', asksReason: false },
  { id: 'flemma.chat.cancel', lspCommand: 'flemma.cancel', title: 'Cancel', tool: 'none', asksReason: false },
  { id: 'flemma.chat.approve', lspCommand: 'flemma.approve', title: 'Approve tool', tool: 'pending', asksReason: false },
  { id: 'flemma.chat.reject', lspCommand: 'flemma.reject', title: 'Reject tool', tool: 'pending', asksReason: true },
  { id: 'flemma.chat.approveAll', lspCommand: 'flemma.approveAll', title: 'Approve all pending tools', tool: 'none', asksReason: false },
  { id: 'flemma.chat.background', lspCommand: 'flemma.background', title: 'Move tool to background', tool: 'anyTool', asksReason: false },
  { id: 'flemma.chat.execute', lspCommand: 'flemma.execute', title: 'Execute tool now', tool: 'anyTool', asksReason: false },
  { id: 'flemma.chat.status', lspCommand: 'flemma.status', title: 'Show status', tool: 'none', asksReason: false },
];

export function commandSpec(id: string): CommandSpec {
  const spec = COMMANDS.find((c) => c.id === id);
  if (!spec) throw new Error(`unknown flemma command ${id}`);
  return spec;
}

export interface ExecuteCommandParams {
  command: string;
  arguments: unknown[];
}

/**
 * The `workspace/executeCommand` parameters for a command: `[uri]`, `[uri, toolId]` or
 * `[uri, toolId, reason]` (the reason only when the user gave one).
 */
export function executeCommandParams(
  spec: CommandSpec,
  uri: string,
  toolId?: string,
  reason?: string,
): ExecuteCommandParams {
  const args: unknown[] = [uri];
  if (spec.tool !== 'none') {
    if (toolId === undefined) throw new Error(`${spec.lspCommand} needs a tool id`);
    args.push(toolId);
    if (spec.asksReason && reason !== undefined && reason.trim() !== '') args.push(reason);
  }
  return { command: spec.lspCommand, arguments: args };
}
