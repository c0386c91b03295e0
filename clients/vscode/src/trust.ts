// VS Code's Workspace Trust, as flemmad's trust model sees it (docs/security.md). In Restricted
// Mode the extension still runs (the manifest declares limited support), and tells the server
// so: the client settings carry `trust.restricted = true`, which makes every chat untrusted
// (its frontmatter cannot widen what it may do, and tool calls that arrive approved wait for
// approval). No `vscode` import: the glue is in extension.ts.

/** A JSON object. */
export type Settings = Record<string, unknown>;

function isObject(value: unknown): value is Settings {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The client settings sent to flemmad (`initializationOptions`, then each
 * `workspace/didChangeConfiguration`): `flemma.config` as the user wrote it, with
 * `trust.restricted` set while the workspace is not trusted. A trusted workspace sends the
 * settings unchanged.
 */
export function serverSettings(config: Settings, workspaceTrusted: boolean): Settings {
  if (workspaceTrusted) return config;
  const trust = isObject(config.trust) ? config.trust : {};
  return { ...config, trust: { ...trust, restricted: true } };
}

/** The `workspace/didChangeConfiguration` params carrying `settings` (the server reads `flemma.config`). */
export function configurationChange(settings: Settings): { settings: { flemma: { config: Settings } } } {
  return { settings: { flemma: { config: settings } } };
}
