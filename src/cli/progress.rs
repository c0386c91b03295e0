//! The display of a send, one for both paths (`send` in-process and `send` through the
//! daemon, `via_daemon`): the live line on a terminal, plain lines elsewhere, `--events` JSON
//! lines, the listing of calls waiting for approval and the closing summary.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_engine::{EngineEvent, PendingCall};
use flemma_protocol::activity::Activity;
use flemma_protocol::event::{EngineSetup, LifecycleEvent, Written};

use super::{CliError, Ui};
use crate::engine_driver::Report;

/// The code of the template diagnostics about tool uses and results (missing results,
/// unresolved placeholders), which a send does not show before it goes out.
const TOOL_DIAGNOSTIC: &str = "template-tool";

/// What a send that is refused before anything went out says last, in this process as through
/// the daemon.
const NOT_SENT: &str = "nothing was sent; fix the errors above and send again";

/// What a send shows of its driver's setup (`engine:setup`), in this process as through the
/// daemon: the chat's errors and warnings but the tool ones (not when `quiet`), then the
/// model's and the tools' warnings. `Err`: nothing runs, and the send ends with it — the lines
/// that say why (the chat's errors, or why there is nothing to send), then [`NOT_SENT`]
/// (exit 1): one wording on both paths.
pub(super) fn show_setup(
    ui: &Ui,
    path: &Path,
    setup: &EngineSetup,
    quiet: bool,
) -> Result<(), CliError> {
    let refused = |lines: String| Err(CliError::blocked("send", lines, NOT_SENT));
    if setup.provider.is_none() {
        // The chat's errors block it: all of them are the refusal.
        let mut all = setup.diagnostics.clone();
        all.extend(setup.blocking.iter().cloned());
        return refused(crate::chat::render_data(path, &all));
    }
    if !quiet {
        let shown: Vec<_> = setup
            .diagnostics
            .iter()
            .filter(|d| d.code.as_deref() != Some(TOOL_DIAGNOSTIC))
            .cloned()
            .collect();
        ui.stderr(&crate::chat::render_data(path, &shown));
    }
    for warning in &setup.warnings {
        ui.warn(warning);
    }
    if setup.blocking.is_empty() {
        Ok(())
    } else {
        refused(crate::chat::render_data(path, &setup.blocking))
    }
}

/// The line a send says when its first request goes out: `sending PATH to PROVIDER (MODEL)…`,
/// with `how` (` through the daemon`) before the ellipsis.
pub(super) fn sending_line(path: &Path, setup: &EngineSetup, how: &str) -> String {
    match (&setup.provider, &setup.model) {
        (Some(provider), Some(model)) => {
            format!("sending {} to {provider} ({model}){how}…", path.display())
        }
        _ => format!("sending {}{how}…", path.display()),
    }
}

/// The stderr listing of the calls waiting for approval, with the commands to answer them
/// (and, with `--diff`, what each `write` and `edit` would change: `diffs` by tool use id).
pub(super) fn approval_listing(
    path: &Path,
    pending: &[PendingCall],
    summary: &str,
    diffs: &std::collections::HashMap<String, Result<String, String>>,
) -> String {
    let file = shell_quote(&path.display().to_string());
    let mut out = format!(
        "flemmad send: waiting for approval ({summary}); {} tool call{} pending:\n",
        pending.len(),
        if pending.len() == 1 { "" } else { "s" }
    );
    for call in pending {
        out.push_str(&format!(
            "  `{}` ({}), asked by {}: {}\n    approve: flemmad approve {file} {}\n    reject:  flemmad reject {file} {} --reason 'why not'\n",
            call.tool_name,
            call.tool_id,
            call.resolver,
            preview(&call.input),
            shell_quote(&call.tool_id),
            shell_quote(&call.tool_id),
        ));
        if let Some(change) = diffs.get(&call.tool_id) {
            out.push_str(&indented_diff(change));
        }
    }
    out.push_str(&format!(
        "then run `flemmad send {file}` again (or `flemmad approve {file} --all`)\n"
    ));
    out
}

/// A call's change under its line in a listing: the diff indented by four spaces, each hunk's
/// `@@` line numbered as `flemma/proposal` numbers them (`approve --hunks` names them), `(no
/// change)`, or `(no diff: why)`.
pub(super) fn indented_diff(change: &Result<String, String>) -> String {
    match change {
        Ok(diff) if diff.is_empty() => "    (no change)\n".to_owned(),
        Ok(diff) => {
            let mut hunk = 0;
            diff.lines()
                .map(|line| {
                    // The body's lines start with ` `, `+`, `-` or `\`: `@@` is a hunk's header
                    // (text after its second `@@` is a heading, so the diff stays a diff).
                    if line.starts_with("@@ ") {
                        hunk += 1;
                        format!("    {line} (hunk {hunk})\n")
                    } else {
                        format!("    {line}\n")
                    }
                })
                .collect()
        }
        Err(error) => format!("    (no diff: {error})\n"),
    }
}

/// A one-line preview of a tool input (at most 100 characters).
fn preview(input: &serde_json::Value) -> String {
    const MAX: usize = 100;
    let text = input.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let mut cut: String = text.chars().take(MAX).collect();
    cut.push('…');
    cut
}

/// The last line of a send: time, and the usage line (tokens, the cache, the cost when the
/// model's prices are known, a subscription's rate limits).
pub(super) fn summary(elapsed: Duration, totals: &flemma_protocol::engine::UsageTotals) -> String {
    format!(
        "{:.1}s, {}",
        elapsed.as_secs_f64(),
        crate::usage_report::line(totals, crate::usage_report::unix_now())
    )
}

/// `word` quoted for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Shows what the driver reports: events as JSON lines on stdout (`--events`), progress on
/// stderr (unless `--quiet`): on a terminal one live line rewritten in place ([`LiveLine`]) with
/// the notable events printed above it; elsewhere plain lines and the streamed text.
pub(super) struct Progress {
    ui: Ui,
    uri: String,
    events: bool,
    quiet: bool,
    /// The last thing written to stderr ended a line (plain mode).
    at_line_start: bool,
    /// Set when stderr is a terminal and not `--quiet`.
    live: Option<LiveLine>,
    /// The line said when the first request goes out (`sending … to …`).
    announce: Option<String>,
    /// Whether a request went out.
    requested: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    pub(super) fn new(ui: Ui, uri: String, events: bool, quiet: bool) -> Self {
        let terminal = ui.stderr_is_terminal();
        Self {
            live: (terminal && !quiet).then(|| LiveLine::start(ui.clone())),
            ui,
            uri,
            events,
            quiet,
            at_line_start: true,
            announce: None,
            requested: std::sync::Arc::default(),
        }
    }

    /// Says `line` when the first request goes out; the flag returned tells whether one did.
    pub(super) fn announce_on_first_request(
        &mut self,
        line: String,
    ) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.announce = Some(line);
        self.requested.clone()
    }

    pub(super) fn show(&mut self, report: Report) {
        match report {
            Report::Event(event) => {
                if matches!(event, EngineEvent::RequestSending(_))
                    && !self
                        .requested
                        .swap(true, std::sync::atomic::Ordering::Relaxed)
                    && let Some(line) = self.announce.take()
                {
                    match &self.live {
                        Some(live) => live.update(Some(&line), |_| {}),
                        None => self.line(&line),
                    }
                }
                if self.events {
                    let line = LifecycleEvent::new(self.uri.clone(), &event);
                    // A reader gone away stops no send: the reply still goes to the file.
                    let _ = self.ui.json(&line);
                }
                if let EngineEvent::EngineNotice(notice) = &event {
                    return self.notice(&notice.message);
                }
                let line = describe(&event);
                if let Some(live) = &self.live {
                    let above = line.filter(|_| worth_a_line_above_the_live_line(&event));
                    live.update(above.as_deref(), |status| status.apply(&event));
                } else if let Some(line) = line {
                    self.line(&line);
                }
            }
            Report::Text(text) => {
                if let Some(live) = &self.live {
                    live.update(None, |status| status.apply_text(&text));
                } else if !self.quiet {
                    self.ui.stderr(&text);
                    self.at_line_start = text.ends_with('\n');
                }
            }
            // `send` shows the reply, not the thinking (it is in the file).
            Report::Thinking(_) => {}
            Report::Notice(notice) => self.notice(&notice),
        }
    }

    /// A driver's notice (`engine:notice`): a line of its own, even with `--quiet`.
    fn notice(&mut self, notice: &str) {
        if let Some(live) = &self.live {
            live.update(Some(notice), |_| {});
            return;
        }
        if !self.at_line_start {
            self.ui.stderr("\n");
            self.at_line_start = true;
        }
        self.ui.note(notice);
    }

    fn line(&mut self, line: &str) {
        if self.quiet {
            return;
        }
        if !self.at_line_start {
            self.ui.stderr("\n");
        }
        self.ui.note(line);
        self.at_line_start = true;
    }
}

/// The stderr line of an event (`None`: not worth a line).
fn describe(event: &EngineEvent) -> Option<String> {
    Some(match event {
        EngineEvent::ToolExecuting(tool) => {
            format!("running `{}` ({})", tool.tool_name, tool.tool_id)
        }
        EngineEvent::ToolCompleted(done) => {
            let (name, id, status) = (&done.tool_name, &done.tool_id, done.status.as_str());
            match done.written {
                Written::Restored => format!(
                    "`{name}` ({id}) finished: {status}; its result block had been removed from the file, so the output went into a new one"
                ),
                Written::Dropped => format!(
                    "`{name}` ({id}) finished, but the turn that called it had been removed from the file: its output was dropped"
                ),
                Written::BelowUserText => format!(
                    "`{name}` ({id}) finished: {status}; its result block holds your text, so the output went right below it"
                ),
                Written::Result => format!("`{name}` ({id}) finished: {status}"),
            }
        }
        EngineEvent::ContextCompacted(data) => crate::compaction::notice(data),
        EngineEvent::JobSubmitted(job) => format!(
            "`{}` ({}) runs in the background as {}",
            job.tool_name, job.tool_id, job.job_id
        ),
        EngineEvent::JobCompleted(job) => format!(
            "background job {} (`{}`) delivered",
            job.job_id, job.tool_name
        ),
        EngineEvent::AutopilotResumeScheduled(resume) => format!(
            "continuing in {} ms (edit the file to stop)",
            resume.delay_ms
        ),
        EngineEvent::AutopilotResumeCancelled(_) => {
            "you edited the file: not continuing".to_owned()
        }
        EngineEvent::DocumentRecovered(recovered) if recovered.cut_reply => {
            "the reply an earlier session was writing had been cut off: marked so in the file, and continued".to_owned()
        }
        EngineEvent::DocumentRecovered(recovered) if !recovered.interrupted.is_empty() => {
            let ids: Vec<String> = recovered
                .interrupted
                .iter()
                .map(|id| format!("`{id}`"))
                .collect();
            format!(
                "tool call(s) {} were running when an earlier session ended and may have run: they wait for your approval to run again",
                ids.join(", ")
            )
        }
        EngineEvent::DocumentRecovered(recovered) => format!(
            "{} background job(s) of an earlier session were lost and marked so",
            recovered.count
        ),
        _ => return None,
    })
}

/// On a terminal the live line shows tools starting and finishing; the rest of the described
/// events (jobs, resumes, recovery, an output that did not land in its block) get a line of
/// their own above it.
fn worth_a_line_above_the_live_line(event: &EngineEvent) -> bool {
    match event {
        EngineEvent::ToolExecuting(_) => false,
        EngineEvent::ToolCompleted(done) => done.written != Written::Result,
        _ => true,
    }
}

/// What the live line knows, folded from the events and the streamed text.
#[derive(Debug, Clone, Default, PartialEq)]
struct LiveStatus {
    /// What the engine does (the one fold of its events, shared with the LSP's progress).
    activity: Activity,
    /// Characters of the reply streamed so far in the current request.
    reply_chars: usize,
    /// The end of the reply's current line (what the model writes now).
    reply_tail: String,
    /// Document totals from `usage:updated`.
    input_tokens: u64,
    output_tokens: u64,
    /// Requests finished.
    requests: u64,
    /// The last request's input tokens and the model's context window, when it is known
    /// (docs/context.md).
    context: Option<(u64, u64)>,
}

impl LiveStatus {
    fn apply(&mut self, event: &EngineEvent) {
        self.activity.apply(event);
        match event {
            EngineEvent::RequestSending(_) => {
                self.reply_chars = 0;
                self.reply_tail.clear();
            }
            EngineEvent::UsageUpdated(usage) => {
                self.input_tokens = usage.usage.input_tokens;
                self.output_tokens = usage.usage.output_tokens;
                self.requests = usage.requests;
                self.context = usage
                    .context_window
                    .filter(|window| *window > 0)
                    .map(|window| (usage.context_tokens, window));
            }
            _ => {}
        }
    }

    fn apply_text(&mut self, text: &str) {
        self.reply_chars += text.chars().count();
        match text.rfind('\n') {
            Some(newline) => self.reply_tail = text[newline + 1..].to_owned(),
            None => self.reply_tail.push_str(text),
        }
        // Only the end is ever shown.
        let keep = self.reply_tail.chars().count().saturating_sub(200);
        if keep > 0 {
            self.reply_tail = self.reply_tail.chars().skip(keep).collect();
        }
    }

    /// Something runs or is scheduled: the line stays on screen and its clock ticks.
    fn is_active(&self) -> bool {
        self.activity.active()
    }
}

/// The live line for `status` after `elapsed`, at most `width` characters (no line break, no
/// escape codes: the caller rewrites the terminal line with it).
fn render_live_line(status: &LiveStatus, elapsed: Duration, width: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    let state = if !status.activity.tools.is_empty() {
        let names: Vec<&str> = status.activity.tool_names().collect();
        match &status.activity.agent {
            Some(agent) => format!("running {} — {agent}", names.join(", ")),
            None => format!("running {}", names.join(", ")),
        }
    } else if status.activity.requesting && status.activity.composing {
        "Composing a tool call".to_owned()
    } else if status.activity.requesting && status.reply_chars == 0 {
        "waiting for the model".to_owned()
    } else if status.activity.requesting {
        format!("writing the reply ({} chars)", status.reply_chars)
    } else if status.activity.jobs > 0 {
        "waiting for background jobs".to_owned()
    } else if let Some(ms) = status.activity.resume_in_ms {
        format!("continuing in {ms} ms")
    } else {
        "idle".to_owned()
    };
    parts.push(state);
    if status.activity.jobs > 0 {
        parts.push(format!("{} job(s) running", status.activity.jobs));
    }
    if status.requests > 0 {
        parts.push(format!(
            "{} in / {} out tokens",
            status.input_tokens, status.output_tokens
        ));
    }
    if let Some((used, window)) = status.context {
        parts.push(format!(
            "context {}% of {}",
            used.saturating_mul(100) / window,
            crate::context::thousands(window)
        ));
    }
    parts.push(format!("{:.0}s", elapsed.as_secs_f64().floor()));
    let mut line = format!("flemmad: {}", parts.join(" · "));
    let tail = status.reply_tail.trim();
    if status.activity.requesting && status.activity.tools.is_empty() && !tail.is_empty() {
        line.push_str(" · ");
        line.push_str(tail);
    }
    fit_to_width(&line, width)
}

/// `line` cut to `width` characters; a cut line ends with `…`. The end of a long reply tail is
/// what is kept (the part being written), so the cut is in the middle: the status stays whole.
fn fit_to_width(line: &str, width: usize) -> String {
    let count = line.chars().count();
    if count <= width {
        return line.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    line.chars().take(width - 1).chain(['…']).collect()
}

/// One stderr line rewritten in place while `flemmad send` works (a terminal only). A ticker
/// thread redraws it every quarter second while something runs, so the clock moves during a
/// long tool; it is erased as soon as nothing runs (every stop of the cycle) and when dropped.
struct LiveLine {
    shared: Arc<std::sync::Mutex<LiveShared>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct LiveShared {
    ui: Ui,
    status: LiveStatus,
    started: Instant,
    /// The line is on screen now.
    drawn: bool,
    /// The ticker ends.
    done: bool,
}

/// How often the ticker redraws the live line.
const LIVE_TICK: Duration = Duration::from_millis(250);

impl LiveLine {
    fn start(ui: Ui) -> Self {
        let shared = Arc::new(std::sync::Mutex::new(LiveShared {
            ui,
            status: LiveStatus::default(),
            started: Instant::now(),
            drawn: false,
            done: false,
        }));
        let for_ticker = shared.clone();
        let ticker = std::thread::Builder::new()
            .name("flemmad-progress".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(LIVE_TICK);
                    let Ok(mut shared) = for_ticker.lock() else {
                        return;
                    };
                    if shared.done {
                        return;
                    }
                    if shared.status.is_active() {
                        shared.draw();
                    }
                }
            })
            .ok();
        Self { shared, ticker }
    }

    /// Prints `above` (a finished line) above the live line, applies `change` and redraws.
    fn update(&self, above: Option<&str>, change: impl FnOnce(&mut LiveStatus)) {
        let Ok(mut shared) = self.shared.lock() else {
            return;
        };
        if let Some(line) = above {
            shared.erase();
            shared.ui.note(line);
        }
        change(&mut shared.status);
        if shared.status.is_active() {
            shared.draw();
        } else {
            shared.erase();
        }
    }
}

impl LiveShared {
    fn draw(&mut self) {
        let line = render_live_line(&self.status, self.started.elapsed(), terminal_width());
        // `\r` to the line's start, the line, then erase what a longer line left.
        self.ui.stderr(&format!("\r{line}\x1b[K"));
        self.drawn = true;
    }

    fn erase(&mut self) {
        if self.drawn {
            self.ui.stderr("\r\x1b[K");
            self.drawn = false;
        }
    }
}

impl Drop for LiveLine {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.done = true;
            shared.erase();
        }
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

/// The terminal's width from `COLUMNS` (shells export it), else 80; one column is kept free so
/// the cursor never wraps.
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.trim().parse::<usize>().ok())
        .filter(|&columns| columns > 1)
        .unwrap_or(80)
        - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("talk.chat"), "talk.chat");
        assert_eq!(shell_quote("my talk.chat"), "'my talk.chat'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    /// The event of a JSON line, as `--events` prints it.
    fn event(name: &str, data: serde_json::Value) -> EngineEvent {
        EngineEvent::from_parts(name, data.clone())
            .unwrap_or_else(|| panic!("not a {name} event: {data}"))
    }

    #[test]
    fn the_live_line_says_when_a_tool_call_is_composed_and_what_an_asked_agent_does() {
        let mut status = LiveStatus::default();
        let at = Duration::from_secs(2);
        status.apply(&event(
            "request:sending",
            serde_json::json!({"requestId": 1}),
        ));
        status.apply(&event(
            "request:composing",
            serde_json::json!({"requestId": 1, "toolId": "t1", "toolName": "ask_agent"}),
        ));
        assert_eq!(
            render_live_line(&status, at, 100),
            "flemmad: Composing a tool call · 2s"
        );
        status.apply(&event(
            "request:composed",
            serde_json::json!({"requestId": 1, "toolId": "t1", "toolName": "ask_agent"}),
        ));
        status.apply(&event(
            "request:finished",
            serde_json::json!({"requestId": 1, "status": "completed"}),
        ));
        status.apply(&event(
            "tool:executing",
            serde_json::json!({"toolId": "t1", "toolName": "ask_agent"}),
        ));
        status.apply(&event(
            "tool:progress",
            serde_json::json!({"kind": "tool_call", "childToolId": "c1", "title": "Read notes.txt",
                "toolKind": "read", "status": "pending", "agent": "helper",
                "message": "helper · Read notes.txt", "toolId": "t1", "toolName": "ask_agent"}),
        ));
        assert_eq!(
            render_live_line(&status, at, 100),
            "flemmad: running ask_agent — helper · Read notes.txt · 2s"
        );
    }

    #[test]
    fn the_live_line_follows_a_cycle() {
        let mut status = LiveStatus::default();
        let at = Duration::from_millis(3_700);
        assert!(!status.is_active());
        status.apply(&event(
            "request:sending",
            serde_json::json!({"requestId": 1}),
        ));
        assert_eq!(
            render_live_line(&status, at, 100),
            "flemmad: waiting for the model · 3s"
        );
        status.apply_text("First line.\nNow writing");
        status.apply_text(" more");
        assert_eq!(
            render_live_line(&status, at, 100),
            "flemmad: writing the reply (28 chars) · 3s · Now writing more"
        );
        status.apply(&event(
            "request:finished",
            serde_json::json!({"requestId": 1, "status": "completed"}),
        ));
        status.apply(&event(
            "usage:updated",
            serde_json::json!({"usage": {"input_tokens": 120, "output_tokens": 45, "thinking_tokens": 0,
                "cache_read_tokens": 0, "cache_write_tokens": 0}, "requests": 1, "costUsd": null,
                "cacheSavedUsd": null, "rateLimits": null, "contextTokens": 165, "contextWindow": null}),
        ));
        assert!(
            !status.is_active(),
            "between a reply and its tools nothing runs"
        );
        for (id, name) in [("t1", "ls"), ("t2", "bash")] {
            status.apply(&event(
                "tool:executing",
                serde_json::json!({"toolId": id, "toolName": name}),
            ));
        }
        assert_eq!(
            render_live_line(&status, Duration::from_secs(61), 100),
            "flemmad: running ls, bash · 120 in / 45 out tokens · 61s"
        );
        status.apply(&event(
            "tool:completed",
            serde_json::json!({"toolId": "t1", "toolName": "ls", "status": "success", "written": "result"}),
        ));
        status.apply(&event(
            "job:submitted",
            serde_json::json!({"toolId": "t2", "toolName": "bash", "jobId": "job_a", "activeCount": 1}),
        ));
        assert_eq!(
            render_live_line(&status, at, 100),
            "flemmad: waiting for background jobs · 1 job(s) running · 120 in / 45 out tokens · 3s"
        );
        status.apply(&event(
            "job:completed",
            serde_json::json!({"jobId": "job_a", "toolId": "t2", "toolName": "bash", "success": true, "activeCount": 0}),
        ));
        status.apply(&event(
            "autopilot:resume-scheduled",
            serde_json::json!({"delayMs": 2000}),
        ));
        assert!(status.is_active());
        status.apply(&event("autopilot:resume-cancelled", serde_json::json!({})));
        assert!(!status.is_active());
    }

    /// `usage:updated` after `requests` requests, the last one holding `context` tokens of a
    /// 200,000-token window.
    fn usage_updated(input: u64, output: u64, requests: u64, context: u64) -> EngineEvent {
        event(
            "usage:updated",
            serde_json::json!({"usage": {"input_tokens": input, "output_tokens": output,
                "thinking_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0},
                "requests": requests, "costUsd": null, "cacheSavedUsd": null, "rateLimits": null,
                "contextTokens": context, "contextWindow": 200000}),
        )
    }

    #[test]
    fn the_live_line_shows_the_context_window_once_the_model_has_one() {
        let mut status = LiveStatus::default();
        status.apply(&usage_updated(1700, 45, 1, 1745));
        assert_eq!(
            render_live_line(&status, Duration::from_secs(2), 100),
            "flemmad: idle · 1700 in / 45 out tokens · context 0% of 200,000 · 2s"
        );
        status.apply(&usage_updated(9000, 90, 2, 170_000));
        assert_eq!(
            render_live_line(&status, Duration::from_secs(3), 100),
            "flemmad: idle · 9000 in / 90 out tokens · context 85% of 200,000 · 3s"
        );
    }

    #[test]
    fn the_live_line_fits_the_terminal() {
        let mut status = LiveStatus::default();
        status.apply(&event(
            "request:sending",
            serde_json::json!({"requestId": 1}),
        ));
        status.apply_text(&"word ".repeat(100));
        let line = render_live_line(&status, Duration::ZERO, 40);
        assert_eq!(line.chars().count(), 40);
        assert!(
            line.starts_with("flemmad: writing the reply (500 chars)"),
            "{line}"
        );
        assert!(line.ends_with('…'));
        assert!(!line.contains('\n') && !line.contains('\r'));
        assert_eq!(fit_to_width("abc", 0), "");
    }

    #[test]
    fn outputs_that_missed_their_block_get_a_line_of_their_own() {
        let dropped = event(
            "tool:completed",
            serde_json::json!({"toolId": "t1", "toolName": "bash", "status": "success", "written": "dropped"}),
        );
        assert!(worth_a_line_above_the_live_line(&dropped));
        assert!(describe(&dropped).is_some_and(|l| l.contains("its output was dropped")));
        let plain = event(
            "tool:completed",
            serde_json::json!({"toolId": "t1", "toolName": "bash", "status": "success", "written": "result"}),
        );
        assert!(!worth_a_line_above_the_live_line(&plain));
    }
}

#[cfg(test)]
mod listing_tests {
    use super::*;

    #[test]
    fn the_listing_numbers_the_hunks_as_the_proposal_does() {
        let diff = "--- a/n\n+++ b/n\n@@ -1,2 +1,2 @@\n-1\n+one\n@@ -9,2 +9,2 @@\n-12\n+twelve\n";
        assert_eq!(
            indented_diff(&Ok(diff.to_owned())),
            "    --- a/n\n    +++ b/n\n    @@ -1,2 +1,2 @@ (hunk 1)\n    -1\n    +one\n    @@ -9,2 +9,2 @@ (hunk 2)\n    -12\n    +twelve\n"
        );
        assert_eq!(indented_diff(&Ok(String::new())), "    (no change)\n");
    }
}
