// A hand-written fake of the few `vscode` APIs the extension uses, installed as the `vscode`
// module so the glue runs in plain Node. It records what the glue does for the tests to check.
import Module from 'node:module';

export class Disposable {
  constructor(private readonly onDispose: () => void = () => undefined) {}
  dispose(): void {
    this.onDispose();
  }
}

export class EventEmitter<T> {
  private listeners: ((e: T) => void)[] = [];
  fires = 0;
  event = (listener: (e: T) => void) => {
    this.listeners.push(listener);
    return new Disposable(() => (this.listeners = this.listeners.filter((l) => l !== listener)));
  };
  fire(e: T): void {
    this.fires++;
    for (const l of this.listeners) l(e);
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(sl: number, sc: number, el: number, ec: number) {
    this.start = new Position(sl, sc);
    this.end = new Position(el, ec);
  }
}

export class CodeLens {
  constructor(
    readonly range: Range,
    readonly command?: { title: string; command: string; arguments?: unknown[] },
  ) {}
}

export const StatusBarAlignment = { Left: 1, Right: 2 };

export interface FakeStatusBarItem {
  text: string;
  tooltip?: string;
  command?: string;
  visible: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

/** A text document held as a string; `replace` edits apply like the editor's. */
export class FakeDocument {
  version = 1;
  constructor(
    public uriString: string,
    public text: string,
    public languageId = 'chat',
  ) {}
  get uri() {
    return { toString: () => this.uriString };
  }
  getText(): string {
    return this.text;
  }
  offsetAt(line: number, character: number): number {
    const lines = this.text.split('\n');
    let offset = 0;
    for (let i = 0; i < line; i++) offset += lines[i].length + 1;
    return offset + character;
  }
}

export class FakeEditor {
  edits: { undoStopBefore: boolean; undoStopAfter: boolean }[] = [];
  selection = { active: new Position(0, 0) };
  constructor(public document: FakeDocument) {}
  async edit(
    callback: (builder: { replace(range: Range, text: string): void }) => void,
    options: { undoStopBefore: boolean; undoStopAfter: boolean },
  ): Promise<boolean> {
    const replacements: { range: Range; text: string }[] = [];
    callback({ replace: (range, text) => replacements.push({ range, text }) });
    for (const r of replacements.reverse()) {
      const start = this.document.offsetAt(r.range.start.line, r.range.start.character);
      const end = this.document.offsetAt(r.range.end.line, r.range.end.character);
      this.document.text = this.document.text.slice(0, start) + r.text + this.document.text.slice(end);
    }
    this.document.version++;
    this.edits.push(options);
    return true;
  }
}

export const state = {
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  codeLensProviders: [] as { selector: unknown; provider: { provideCodeLenses(d: FakeDocument): CodeLens[] } }[],
  statusBarItems: [] as FakeStatusBarItem[],
  messages: [] as { level: 'info' | 'error'; text: string }[],
  inputBoxAnswers: [] as (string | undefined)[],
  quickPickAnswers: [] as (string | undefined)[],
  quickPicks: [] as string[][],
  activeEditorListeners: [] as (() => void)[],
  /** What `showWarningMessage` answers next (a modal's button), and what it was asked. */
  warningAnswers: [] as (string | undefined)[],
  warnings: [] as { text: string; options: unknown }[],
  /** The documents `window.showTextDocument` showed: their URI and text. */
  shown: [] as { uri: string; text: string }[],
  contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): string }>(),
  reset(): void {
    this.warningAnswers = [];
    this.warnings = [];
    this.shown = [];
    this.contentProviders = new Map();
    this.commands.clear();
    this.codeLensProviders = [];
    this.statusBarItems = [];
    this.messages = [];
    this.inputBoxAnswers = [];
    this.quickPickAnswers = [];
    this.quickPicks = [];
    this.activeEditorListeners = [];
    window.activeTextEditor = undefined;
    window.visibleTextEditors = [];
  },
};

export const commands = {
  registerCommand(id: string, handler: (...args: unknown[]) => unknown) {
    if (state.commands.has(id)) throw new Error(`command '${id}' already exists`);
    state.commands.set(id, handler);
    return new Disposable(() => state.commands.delete(id));
  },
  executeCommand(id: string, ...args: unknown[]) {
    const handler = state.commands.get(id);
    if (!handler) throw new Error(`command '${id}' not found`);
    return Promise.resolve(handler(...args));
  },
};

export const window = {
  activeTextEditor: undefined as FakeEditor | undefined,
  visibleTextEditors: [] as FakeEditor[],
  createStatusBarItem(): FakeStatusBarItem {
    const item: FakeStatusBarItem = {
      text: '',
      visible: false,
      show() {
        item.visible = true;
      },
      hide() {
        item.visible = false;
      },
      dispose() {
        item.visible = false;
      },
    };
    state.statusBarItems.push(item);
    return item;
  },
  showInformationMessage(text: string) {
    state.messages.push({ level: 'info', text });
    return Promise.resolve(undefined);
  },
  showErrorMessage(text: string) {
    state.messages.push({ level: 'error', text });
    return Promise.resolve(undefined);
  },
  showWarningMessage(text: string, options: unknown) {
    state.warnings.push({ text, options });
    return Promise.resolve(state.warningAnswers.shift());
  },
  showTextDocument(document: { uri: Uri; getText(): string }) {
    state.shown.push({ uri: document.uri.toString(), text: document.getText() });
    return Promise.resolve(undefined);
  },
  showInputBox() {
    return Promise.resolve(state.inputBoxAnswers.shift());
  },
  showQuickPick(items: string[]) {
    state.quickPicks.push(items);
    return Promise.resolve(state.quickPickAnswers.shift());
  },
  onDidChangeActiveTextEditor(listener: () => void) {
    state.activeEditorListeners.push(listener);
    return new Disposable();
  },
};

/** A virtual document's text comes from the content provider of its scheme. */
export const workspace = {
  registerTextDocumentContentProvider(
    scheme: string,
    provider: { provideTextDocumentContent(uri: Uri): string },
  ) {
    state.contentProviders.set(scheme, provider);
    return new Disposable(() => state.contentProviders.delete(scheme));
  },
  openTextDocument(uri: Uri) {
    const provider = state.contentProviders.get(uri.scheme);
    if (provider === undefined) return Promise.reject(new Error(`no provider for ${uri.scheme}`));
    const text = provider.provideTextDocumentContent(uri);
    return Promise.resolve({ uri, getText: () => text });
  },
};

export const ViewColumn = { Active: -1, Beside: -2 };

export const languages = {
  registerCodeLensProvider(selector: unknown, provider: { provideCodeLenses(d: FakeDocument): CodeLens[] }) {
    state.codeLensProviders.push({ selector, provider });
    return new Disposable();
  },
};

/** The parts of `vscode.Uri` the review's documents use. */
export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
  ) {}
  static from(parts: { scheme: string; path: string }): Uri {
    return new Uri(parts.scheme, parts.path);
  }
  static file(path: string): Uri {
    return new Uri('file', path);
  }
  toString(): string {
    return `${this.scheme}:${this.path}`;
  }
}

export class FileSystemError extends Error {
  static FileNotFound(uri: unknown): FileSystemError {
    return new FileSystemError(`FileNotFound: ${String(uri)}`);
  }
  static NoPermissions(uri: unknown): FileSystemError {
    return new FileSystemError(`NoPermissions: ${String(uri)}`);
  }
  static Unavailable(message: string): FileSystemError {
    return new FileSystemError(`Unavailable: ${message}`);
  }
}

export const FileType = { File: 1, Directory: 2 };
export const FileChangeType = { Changed: 1, Created: 2, Deleted: 3 };
export const FilePermission = { Readonly: 1 };

const fake = {
  Disposable,
  EventEmitter,
  Position,
  Range,
  CodeLens,
  StatusBarAlignment,
  commands,
  window,
  workspace,
  ViewColumn,
  languages,
  Uri,
  FileSystemError,
  FileType,
  FileChangeType,
  FilePermission,
};

type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
const moduleWithLoad = Module as unknown as { _load: Loader };
const load = moduleWithLoad._load;
moduleWithLoad._load = function (request: string, parent: unknown, isMain: boolean) {
  if (request === 'vscode') return fake;
  return load.call(this, request, parent, isMain);
};
