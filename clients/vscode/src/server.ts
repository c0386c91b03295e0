// Reaching the language server: the running daemon's socket
// (`$XDG_RUNTIME_DIR/flemma/lsp.sock`, one LSP session per connection), else `flemmad lsp` on
// stdio. Node only (net, child_process, fs); no `vscode` import.

import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { delimiter, isAbsolute, join } from 'node:path';

/** The daemon's LSP socket for this user, or `undefined` when `XDG_RUNTIME_DIR` is not set. */
export function daemonSocketPath(env: NodeJS.ProcessEnv): string | undefined {
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime === undefined || runtime === '') return undefined;
  return join(runtime, 'flemma', 'lsp.sock');
}

/** Connects to a Unix socket; `undefined` when nothing listens there (missing, stale, refused). */
export function connectSocket(path: string, timeoutMs = 500): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    const socket = connect(path);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(undefined);
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(undefined);
    });
  });
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Resolves `flemma.path` (a bare name is looked up on `PATH`); `undefined` when not found. */
export function findExecutable(command: string, env: NodeJS.ProcessEnv): string | undefined {
  if (command.includes('/') || isAbsolute(command)) return isExecutable(command) ? command : undefined;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

export class ServerNotFoundError extends Error {
  constructor(command: string) {
    super(
      `cannot start the flemma language server: '${command}' was not found or is not executable. ` +
        `Install it (cargo install --path . in the flemmad checkout) or set "flemma.path" to the flemmad binary.`,
    );
    this.name = 'ServerNotFoundError';
  }
}

export type ServerConnection =
  | { kind: 'daemon'; socketPath: string; socket: Socket }
  | { kind: 'spawned'; executable: string; process: ChildProcess };

/**
 * Connects to the running daemon when its socket answers, otherwise spawns `<path> lsp`
 * (which itself proxies to a daemon that starts later, or runs the engine in-process).
 */
export async function connectOrSpawn(command: string, env: NodeJS.ProcessEnv): Promise<ServerConnection> {
  const socketPath = daemonSocketPath(env);
  if (socketPath !== undefined) {
    const socket = await connectSocket(socketPath);
    if (socket) return { kind: 'daemon', socketPath, socket };
  }
  const executable = findExecutable(command, env);
  if (executable === undefined) throw new ServerNotFoundError(command);
  const child = spawn(executable, ['lsp'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  return { kind: 'spawned', executable, process: child };
}
