// Pure scanner of the tool blocks of a `.chat` text: tool uses and tool results with their status.
// It follows the structural rules of the chat format (spec/chat-format.md §1) closely enough to
// place code lenses and to find the tool under the cursor; the language server stays the authority
// on everything else. No `vscode` import: tested with `node --test`.

export type ToolStatus = 'pending' | 'approved' | 'rejected' | 'denied' | 'aborted' | 'error';

export interface ToolResultHeader {
  kind: 'result';
  /** Zero-based line of the `**Tool Result:**` header. */
  line: number;
  toolId: string;
  /** The lifecycle or final status from the suffix; `undefined` for a plain final result. */
  status: ToolStatus | undefined;
  /** The `job=` meta when the tool runs (or ran) as a background job. */
  jobId: string | undefined;
}

export interface ToolUseHeader {
  kind: 'use';
  line: number;
  toolId: string;
  toolName: string;
}

export type ToolHeader = ToolResultHeader | ToolUseHeader;

const ROLE_LINE = /^@([A-Za-z0-9]+):\s*$/;
const TOOL_RESULT = /^\*\*Tool Result:\*\*\s+`([^`]+)`(?:\s+\((.*)\))?\s*$/;
const TOOL_USE = /^\*\*Tool Use:\*\*\s+`([^`]+)`\s+\(`([^`]+)`\)/;
const FENCE_OPEN = /^(`{3,})([^`]*)$/;

const STATUS_WORDS: Record<string, ToolStatus> = {
  pending: 'pending',
  approved: 'approved',
  rejected: 'rejected',
  reject: 'rejected',
  denied: 'denied',
  deny: 'denied',
  aborted: 'aborted',
  error: 'error',
};

/** One token of a result header's suffix ("modeline"): `key=value` or a bare word. */
export interface SuffixToken {
  key: string | undefined;
  value: string;
}

/** Splits a suffix into tokens: whitespace-separated, `'…'`/`"…"` quoting with `\` escapes. */
export function tokenizeSuffix(suffix: string): SuffixToken[] {
  const tokens: SuffixToken[] = [];
  let i = 0;
  while (i < suffix.length) {
    while (i < suffix.length && /\s/.test(suffix[i])) i++;
    if (i >= suffix.length) break;
    let raw = '';
    let key: string | undefined;
    while (i < suffix.length && !/\s/.test(suffix[i])) {
      const ch = suffix[i];
      if (ch === '=' && key === undefined && /^[A-Za-z0-9_]+$/.test(raw)) {
        key = raw;
        raw = '';
        i++;
      } else if (ch === '"' || ch === "'") {
        i++;
        while (i < suffix.length && suffix[i] !== ch) {
          if (suffix[i] === '\\' && i + 1 < suffix.length) i++;
          raw += suffix[i];
          i++;
        }
        i++; // the closing quote (or the end of an unterminated quote)
      } else {
        raw += ch;
        i++;
      }
    }
    tokens.push({ key, value: raw });
  }
  return tokens;
}

/** The status a suffix declares: an explicit `status=` wins, else the first bare status word. */
export function statusOfSuffix(tokens: SuffixToken[]): ToolStatus | undefined {
  const explicit = tokens.find((t) => t.key === 'status');
  if (explicit) return STATUS_WORDS[explicit.value];
  for (const t of tokens) {
    if (t.key === undefined && STATUS_WORDS[t.value] !== undefined) return STATUS_WORDS[t.value];
  }
  return undefined;
}

function splitLines(text: string): string[] {
  return text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}

/**
 * Every tool use (in `@Assistant:` messages) and tool result (in `@You:` messages) header outside
 * code fences, in document order. Frontmatter and the preamble hold no tool blocks.
 */
export function scanToolHeaders(text: string): ToolHeader[] {
  const lines = splitLines(text);
  const headers: ToolHeader[] = [];
  let start = 0;
  const frontmatter = lines.length > 0 ? /^```[A-Za-z0-9]+\s*$/.exec(lines[0]) : null;
  if (frontmatter) {
    const close = lines.findIndex((l, i) => i > 0 && /^```\s*$/.test(l));
    if (close > 0) start = close + 1;
  }
  let role: string | undefined; // undefined while in the preamble
  let fence = 0; // length of the open fence, 0 when none
  for (let n = start; n < lines.length; n++) {
    const line = lines[n];
    if (fence > 0) {
      const close = /^(`{3,})\s*$/.exec(line);
      if (close && close[1].length >= fence) fence = 0;
      continue;
    }
    const roleMatch = ROLE_LINE.exec(line);
    if (roleMatch) {
      role = roleMatch[1];
      continue;
    }
    if (role === undefined) continue; // preamble: fences not tracked, no tool blocks
    const open = FENCE_OPEN.exec(line);
    if (open) {
      fence = open[1].length;
      continue;
    }
    if (role === 'You') {
      const m = TOOL_RESULT.exec(line);
      if (m) {
        const tokens = tokenizeSuffix(m[2] ?? '');
        const job = tokens.find((t) => t.key === 'job');
        headers.push({
          kind: 'result',
          line: n,
          toolId: m[1],
          status: statusOfSuffix(tokens),
          jobId: job?.value,
        });
      }
    } else if (role === 'Assistant') {
      const m = TOOL_USE.exec(line);
      if (m) headers.push({ kind: 'use', line: n, toolName: m[1].replace(/:/g, '.'), toolId: m[2] });
    }
  }
  return headers;
}

/** The placeholders awaiting the user's decision: tool results whose status is `pending`. */
export function pendingPlaceholders(text: string): ToolResultHeader[] {
  return scanToolHeaders(text).filter(
    (h): h is ToolResultHeader => h.kind === 'result' && h.status === 'pending',
  );
}

/**
 * The tool id a command run at `line` is about: the nearest tool header at or above the line;
 * failing that, the only candidate when there is exactly one. `undefined` means: ask the user.
 */
export function toolIdAtLine(headers: ToolHeader[], line: number): string | undefined {
  let best: ToolHeader | undefined;
  for (const h of headers) {
    if (h.line <= line) best = h;
  }
  if (best) return best.toolId;
  const ids = new Set(headers.map((h) => h.toolId));
  return ids.size === 1 ? headers[0].toolId : undefined;
}
