// The status bar model: which model answers, whether a reply is streaming or tools run, the
// document's cost, and a subscription's rate limits (provider `codex`), folded from
// `flemma/event` notifications ({name, uri, data}). Pure.
//
// The event shapes are protocol/events.md's (the engine's lifecycle events) plus the server's
// `engine:stopped` {reason}: `request:finished` {status, costUsd} is one request's cost,
// `usage:updated` {costUsd} the document's total, and {contextTokens, contextWindow} the last
// request's share of the model's context window. `request:sending` names the provider and
// the model (`anthropic/claude-sonnet-4-5`); the item keeps the last one it was told. Missing or
// mistyped fields are ignored, so an older or newer server never breaks the status bar.

export type Activity = 'idle' | 'streaming' | 'tools' | 'awaiting approval' | 'error';

export interface DocumentStatus {
  model: string | undefined;
  activity: Activity;
  /** The document's accumulated cost in US dollars, when the server reported one. */
  cost: number | undefined;
  /** The number of running background jobs, when known. */
  jobs: number | undefined;
  /** A subscription's windows as the last response reported them (`5h 42% · week 8%`). */
  limits: string | undefined;
  /** The last request's share of the model's context window (`context 42% of 200k`). */
  context: string | undefined;
}

export interface FlemmaEvent {
  name: string;
  uri?: string;
  data?: unknown;
}

export const INITIAL_STATUS: DocumentStatus = {
  model: undefined,
  activity: 'idle',
  cost: undefined,
  jobs: undefined,
  limits: undefined,
  context: undefined,
};

function field(data: unknown, ...names: string[]): unknown {
  if (typeof data !== 'object' || data === null) return undefined;
  for (const n of names) {
    const v = (data as Record<string, unknown>)[n];
    if (v !== undefined) return v;
  }
  return undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function modelOf(data: unknown, previous: string | undefined): string | undefined {
  const model = str(field(data, 'model'));
  const provider = str(field(data, 'provider'));
  if (model && provider) return `${provider}/${model}`;
  return model ?? previous;
}

/** The document's cost after an event: a total (`usage:updated`) replaces it, a request's adds. */
function costOf(data: unknown, previous: number | undefined, isTotal: boolean): number | undefined {
  const cost = num(field(data, 'costUsd'));
  if (cost === undefined) return previous;
  return isTotal ? cost : (previous ?? 0) + cost;
}

/** A window's length: `5h`, `week`, `day`, `90m`; its name when unknown. */
function windowLabel(window: unknown): string {
  const minutes = num(field(window, 'windowMinutes'));
  if (minutes === 10080) return 'week';
  if (minutes === 1440) return 'day';
  if (minutes !== undefined && minutes > 0) return minutes % 60 === 0 ? `${minutes / 60}h` : `${minutes}m`;
  return str(field(window, 'name')) ?? '?';
}

/**
 * A subscription's rate limits (`{windows: [{name, usedPercent, windowMinutes?, resetsAt?}]}`,
 * protocol/events.md) in a few characters: `5h 42% · week 8%`; undefined without windows.
 */
export function formatLimits(limits: unknown): string | undefined {
  const windows = field(limits, 'windows');
  if (!Array.isArray(windows)) return undefined;
  const shown = windows
    .map((w) => {
      const used = num(field(w, 'usedPercent'));
      return used === undefined ? undefined : `${windowLabel(w)} ${Math.round(used)}%`;
    })
    .filter((text): text is string => text !== undefined);
  return shown.length > 0 ? shown.join(' · ') : undefined;
}

/** The activity once the engine stopped for `reason` (`engine:stopped`). */
function stoppedActivity(reason: unknown): Activity {
  switch (reason) {
    case 'awaiting-approval':
      return 'awaiting approval';
    case 'error':
    case 'refused':
    case 'max-turns':
    case 'user-content-in-approved':
      return 'error';
    default:
      return 'idle';
  }
}

/** Folds one event into the status of its document. */
export function reduceStatus(status: DocumentStatus, event: FlemmaEvent): DocumentStatus {
  const d = event.data;
  switch (event.name) {
    case 'request:sending':
      // The engine writes `@Assistant:` and streams the reply into the document from here.
      return { ...status, model: modelOf(d, status.model), activity: 'streaming' };
    case 'request:finished': {
      const failed = field(d, 'status') === 'errored';
      return {
        ...status,
        model: modelOf(d, status.model),
        activity: failed ? 'error' : 'idle',
        cost: costOf(d, status.cost, false),
      };
    }
    case 'usage:updated':
      return {
        ...status,
        cost: costOf(d, status.cost, true),
        limits: formatLimits(field(d, 'rateLimits')) ?? status.limits,
        context: formatContext(num(field(d, 'contextTokens')), num(field(d, 'contextWindow'))) ?? status.context,
      };
    case 'rate-limits:updated':
      return { ...status, limits: formatLimits(field(d, 'rateLimits')) ?? status.limits };
    case 'tool:executing':
      return { ...status, activity: 'tools' };
    case 'tool:approval-required':
      return { ...status, activity: 'awaiting approval' };
    case 'tool:completed':
      return status.activity === 'tools' ? { ...status, activity: 'idle' } : status;
    case 'job:submitted':
    case 'job:completed':
      return { ...status, jobs: num(field(d, 'activeCount')) ?? status.jobs };
    case 'conversation:idle':
      return status.activity === 'error' ? status : { ...status, activity: 'idle' };
    case 'engine:stopped':
      return { ...status, activity: stoppedActivity(field(d, 'reason')) };
    default:
      return status;
  }
}

/**
 * The last request's share of the model's context window (`usage:updated` {contextTokens,
 * contextWindow}): `context 42% of 200k`; nothing when the window is unknown.
 */
export function formatContext(tokens: number | undefined, window: number | undefined): string | undefined {
  if (tokens === undefined || window === undefined || window <= 0) return undefined;
  const share = Math.round((tokens / window) * 100);
  const size = window >= 1_000_000 ? `${+(window / 1_000_000).toFixed(1)}M` : `${Math.round(window / 1000)}k`;
  return `context ${share}% of ${size}`;
}

/** Formats a cost like `$0.0123` (four decimals under a dollar, two above). */
export function formatCost(cost: number): string {
  return cost < 1 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

/** The status bar text, with a codicon first: `$(sync~spin)` while work runs. */
export function statusText(status: DocumentStatus): string {
  const busy = status.activity === 'streaming' || status.activity === 'tools';
  const icon = busy ? '$(sync~spin)' : status.activity === 'error' ? '$(error)' : '$(comment-discussion)';
  const parts: string[] = [status.model ?? 'flemma'];
  if (status.activity !== 'idle') parts.push(status.activity);
  if (status.jobs !== undefined && status.jobs > 0) parts.push(`${status.jobs} job${status.jobs === 1 ? '' : 's'}`);
  if (status.cost !== undefined) parts.push(formatCost(status.cost));
  if (status.context !== undefined) parts.push(status.context);
  if (status.limits !== undefined) parts.push(status.limits);
  return `${icon} ${parts.join(' · ')}`;
}

/**
 * One line for a `flemma.status` answer ({path, state, pending, runningTools, jobs, usage,
 * lastStop}): the state, what waits or runs, the tokens and the cost so far.
 */
export function statusSummary(answer: unknown): string {
  if (typeof answer !== 'object' || answer === null) return `no status (the server answered ${JSON.stringify(answer)})`;
  const path = str(field(answer, 'path')) ?? '?';
  const state = str(field(answer, 'state')) ?? '?';
  const parts = [`${path.split('/').pop()}: ${state}`];
  const ids = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const pending = ids(field(answer, 'pending'));
  if (pending.length > 0) parts.push(`waiting for approval: ${pending.join(', ')}`);
  const running = ids(field(answer, 'runningTools'));
  if (running.length > 0) parts.push(`running: ${running.join(', ')}`);
  const jobs = field(answer, 'jobs');
  if (Array.isArray(jobs) && jobs.length > 0) {
    parts.push(
      `jobs: ${jobs.map((j) => `${str(field(j, 'jobId')) ?? '?'} (${str(field(j, 'toolName')) ?? '?'}, ${str(field(j, 'state')) ?? '?'})`).join(', ')}`,
    );
  }
  const usage = field(answer, 'usage');
  const input = num(field(usage, 'inputTokens')) ?? 0;
  const output = num(field(usage, 'outputTokens')) ?? 0;
  if (input > 0 || output > 0) {
    const cost = num(field(usage, 'cost'));
    parts.push(`${input} input, ${output} output tokens${cost === undefined ? '' : `, ${formatCost(cost)}`}`);
  }
  const limits = formatLimits(field(usage, 'rateLimits'));
  if (limits !== undefined) parts.push(`subscription: ${limits}`);
  const lastStop = str(field(answer, 'lastStop'));
  if (lastStop !== undefined && lastStop !== state) parts.push(`last stop: ${lastStop}`);
  return parts.join(' · ');
}
