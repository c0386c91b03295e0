//! The `flemmad` command line: one module per subcommand.

mod acp;
mod approve;
mod cancel;
mod changes;
mod compact;
mod count;
mod doctor;
mod error;
mod events;
mod fmt;
mod install_service;
mod local_host;
mod lsp;
mod models;
mod parse;
mod progress;
mod proposed;
mod proxy;
mod questions;
mod reject;
mod send;
mod serve;
mod status;
mod tools;
mod trust;
mod ui;
mod via_daemon;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub use error::{BROKEN_PIPE_EXIT, CliError};
use ui::Ui;

use crate::process_context::ProcessContext;

/// flemmad makes `.chat` files live conversations with LLMs, from any editor or the command line.
///
/// A `.chat` file is plain text: role markers (`@System:`, `@You:`, `@Assistant:`), optional
/// frontmatter, templates, file references, tool calls and their results. The file is the whole
/// state of the conversation.
///
/// Logs go to standard error; set RUST_LOG (e.g. `RUST_LOG=flemmad=debug`) for more detail.
#[derive(Debug, Parser)]
#[command(
    name = "flemmad",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Configuration file to use instead of $FLEMMA_CONFIG or
    /// $XDG_CONFIG_HOME/flemma/config.toml (see docs/configuration.md).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse a .chat file and print its tree and diagnostics.
    ///
    /// Without --eval this is the file's syntax only: the configuration is not read (its
    /// errors are reported by --eval, `send`, `status` and `doctor`).
    /// Without --json, prints an outline: one line per node with its line:column range.
    /// With --json, prints the stable JSON form documented in protocol/parse.md.
    /// With --eval, prints the conversation that would be sent (or, with --json, the form of
    /// protocol/eval.md) and reports diagnostics on stderr exactly as `send` does.
    /// Exits 0 even when the file has diagnostics (with --eval: 1 when one blocks sending);
    /// 2 when it cannot be read.
    Parse(parse::ParseArgs),
    /// Normalise a .chat file in place (or check that it is normalised).
    ///
    /// Only what the format lets us normalise changes: legacy inline role markers (`@You: hi`)
    /// are split onto their own line and Flemma 0.11 `:` tool namespaces become `.`.
    /// Everything else stays byte-identical. With --check, nothing is written: the command
    /// exits 1 and names each change it would make.
    Fmt(fmt::FmtArgs),
    /// Run a .chat file as an agentic conversation: replies, tools, approvals, jobs.
    ///
    /// Runs the conversation as an agent: evaluates the frontmatter and templates, streams the
    /// reply of the provider and model the file (or the config) selects under a new
    /// `@Assistant:`, runs the tool calls the approval chain approves (background jobs too: the
    /// process waits for them and delivers their results), sends the results, and goes on with
    /// autopilot until the model answers without tools. Every change is written as it happens
    /// (atomic writes; text added to the file meanwhile is kept). Progress goes to stderr
    /// (--quiet: only the summary); --events prints lifecycle events as JSON lines on stdout.
    ///
    /// Exit status: 0 idle (the file ends with an empty `@You:`); 3 a tool call waits for
    /// approval (stderr lists each with the `flemmad approve` / `reject` commands); 1 an error,
    /// an invalid chat or configuration included (explained; everything before stays in the
    /// file); 2 the file cannot be read; 130 interrupted with Ctrl-C (what ran is marked
    /// `aborted`).
    ///
    /// With a daemon running (`flemmad serve`), the daemon sends and this command follows the
    /// chat until the cycle stops, with the same output and exit codes (Ctrl-C cancels through
    /// the daemon); --detach returns at once, --no-daemon runs here anyway (docs/rpc.md).
    ///
    /// Credentials: ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, VERTEX_ACCESS_TOKEN (or
    /// gcloud), MOONSHOT_API_KEY, OPENAI_COMPATIBLE_API_KEY, then secret-tool / the macOS
    /// keychain. Base URLs: ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GEMINI_BASE_URL,
    /// VERTEX_BASE_URL, MOONSHOT_BASE_URL, OPENAI_COMPATIBLE_BASE_URL.
    Send(send::SendArgs),
    /// Approve tool calls that wait for approval, so the next `send` runs them.
    ///
    /// Rewrites each `(pending)` placeholder to `(approved)` in place (meta kept), atomically.
    /// Exit status: 0 done; 2 when an id is unknown or not pending (the pending ids are listed;
    /// nothing is changed) or the file cannot be read.
    ///
    /// With a daemon running, the daemon approves and (with autopilot) goes on with the
    /// conversation; the command follows it as `send` does, with its exit codes (--detach
    /// returns at once; --no-daemon, or no daemon running, only marks the call in this process, and
    /// the next `flemmad send` runs it).
    Approve(approve::ApproveArgs),
    /// Reject a tool call that waits for approval (optionally telling the model why).
    ///
    /// Without --reason the placeholder becomes `(rejected)`; with it, an error result holding
    /// `User feedback: <reason>`. Exit status as for `approve`; with a daemon running, the
    /// daemon rejects and goes on, as for `approve`.
    Reject(reject::RejectArgs),
    /// Cancel what runs for a chat: its request, its foreground tools, its resume timer.
    ///
    /// Through the daemon when one runs (background jobs keep running); else interrupts the
    /// `flemmad send` of the chat running in another process, as Ctrl-C would. What had started
    /// is marked `aborted` in the file. Exit status: 0 cancelled; 1 nothing runs for the chat.
    Cancel(cancel::CancelArgs),
    /// Show what a chat is configured to do and what waits in it.
    ///
    /// The resolved configuration with the layer of each value set, the enabled tools and what
    /// the approval chain decides for them, every unresolved tool call (status and decision),
    /// the jobs the file mentions, and whether a `send` runs. --json: protocol/status.md.
    Status(status::StatusArgs),
    /// Count the input tokens of a .chat file with its provider's counting endpoint.
    ///
    /// Evaluates the file like `send` does, then asks the provider (Anthropic
    /// /v1/messages/count_tokens, OpenAI /v1/responses/input_tokens, Gemini/Vertex
    /// :countTokens). The Codex backend and Chat Completions servers have no counting
    /// endpoint: their count is a local estimate, printed as `≈N input tokens (estimated
    /// locally…)`.
    Count(count::CountArgs),
    /// Replace a chat's older turns with a summary, keeping them whole in an archive.
    ///
    /// A summary request (to `context.compact_model`, else the chat's own model) summarises
    /// every exchange but the last `--keep` (default `context.keep`); the summary is written
    /// into the chat as a `@You:` message of plain text, and the turns it replaced are moved,
    /// byte for byte, into an archive chat under $XDG_STATE_HOME/flemma/compacted/ (where no
    /// tool can write). Calls still waiting are never compacted away. `--undo` puts the turns
    /// of the last compaction back exactly. A failing summary request changes nothing.
    Compact(compact::CompactArgs),
    /// List the models a provider serves (with catalogue prices when known).
    Models(models::ModelsArgs),
    /// List the tools enabled for a chat, or run one as the engine would.
    ///
    /// `flemmad tools [--chat FILE] [--json]` lists the enabled tools (config from the user
    /// file and the chat's frontmatter) with their input schemas and what the approval chain
    /// decides for each. `flemmad tools run NAME 'JSON' [--chat FILE]` validates the input,
    /// runs the tool in the chat's directory with the sandbox and the result store applied, and
    /// prints exactly the text that would go into the tool-result fence. You are the approver:
    /// nothing is asked. Exit status: 0 success result, 1 error result (text still on stdout),
    /// 2 bad invocation (unknown tool, JSON that does not parse or fit the schema).
    Tools(tools::ToolsArgs),
    /// Run the language server over stdio (what editors launch: `flemmad lsp --stdio`).
    ///
    /// Diagnostics, hover, go-to-definition, symbols, folding, code actions and the flemma.*
    /// commands (protocol/README.md). When a daemon (`flemmad serve`) runs, this only pipes
    /// stdio to its lsp.sock session; --no-daemon runs the server in this process anyway.
    /// Logs go to $XDG_STATE_HOME/flemma/flemmad.log, never stdout; RUST_LOG sets the level.
    Lsp(lsp::LspArgs),
    /// Run the Agent Client Protocol agent over stdio (what ACP editors launch: `flemmad acp`).
    ///
    /// For Zed, JetBrains, CodeCompanion, avante.nvim, Emacs agent-shell and every editor that
    /// embeds agents through ACP (protocol version 1). A session is a .chat file: session/new
    /// creates one under <cwd>/.flemma/sessions/ (the sessionId is its absolute path, and the
    /// session's cwd is recorded in its frontmatter as the tools' working directory);
    /// session/load opens any .chat and replays its history; session/list lists a project's
    /// sessions (newest first, titled by their first question); session/prompt writes the prompt
    /// under the chat's trailing @You:, runs the engine as `flemmad send` does and streams the
    /// reply, thinking and tool calls; tools that need approval are asked with
    /// session/request_permission and the answer is written into the chat; session/cancel
    /// stops what runs, leaving the partial reply with the abort marker. The provider, model
    /// and tools come from the configuration layers as for any chat in cwd; credentials from
    /// the environment, config and keychain (no ACP authentication); the editor's mcpServers
    /// become tool sources of the session, and when the editor reads and writes files
    /// (fs/read_text_file, fs/write_text_file) the read, write and edit tools go through it.
    /// When a daemon (`flemmad serve`) runs, this only pipes stdio to its acp.sock (so
    /// background jobs outlive the editor); --no-daemon runs the agent in this process.
    /// docs/editors/zed.md and docs/editors/acp.md show the editor set-ups. Logs go to
    /// $XDG_STATE_HOME/flemma/flemmad.log, never stdout; RUST_LOG sets the level.
    Acp(acp::AcpArgs),
    /// Run the daemon: LSP sessions, the JSON-RPC API and ACP sessions on Unix sockets.
    ///
    /// Sockets `lsp.sock` (one LSP session per connection), `rpc.sock` (JSON-RPC 2.0, one
    /// message per line; docs/rpc.md) and `acp.sock` (one Agent Client Protocol connection per
    /// connection, what `flemmad acp` pipes to) in $XDG_RUNTIME_DIR/flemma/ (/tmp/flemma-$UID/
    /// when XDG_RUNTIME_DIR is unset): directory 0700, sockets 0600, other users refused.
    /// Never TCP. Supports systemd socket activation (sockets named `lsp`, `rpc` and `acp`, or
    /// told apart by their file names; an `acp.sock` systemd does not pass the daemon binds
    /// itself) and sd_notify.
    /// SIGTERM/SIGINT stop it cleanly. Exits 1 when a daemon already runs. Logs go to
    /// $XDG_STATE_HOME/flemma/flemmad.log.
    Serve(serve::ServeArgs),
    /// Print a running daemon's events as JSON lines (`{name, uri?, data}`), until it stops.
    ///
    /// Exits 1 when no daemon runs.
    Events(events::EventsArgs),
    /// Write the systemd user units (flemmad.socket, flemmad.service) for this binary.
    ///
    /// Into $XDG_CONFIG_HOME/systemd/user/ (~/.config/systemd/user/); --print shows them
    /// instead. Then run the command it prints to enable socket activation.
    InstallService(install_service::InstallServiceArgs),
    /// Check this machine's set-up and say what to do about each problem.
    ///
    /// The configuration file, the credential of the configured provider (which resolver found
    /// it; never the value), with --online the provider itself, the daemon's sockets, the
    /// sandbox, rg and fd, and each editor set-up found here. Exit status: 0 when all is well,
    /// 1 when something needs attention.
    Doctor(doctor::DoctorArgs),
    /// Trust a folder's chats, so that their frontmatter may widen what they can do.
    ///
    /// Chats are files: they come from repositories, downloads and other people. flemmad
    /// trusts a chat's frontmatter only when the chat lies in a trusted folder (this command,
    /// the editor's "Trust this folder" action, or `[trust] paths` in the configuration file).
    /// In any other chat the frontmatter still sets the model, the parameters, templates and
    /// narrower tool lists, but what would widen what the chat may do is ignored, with a
    /// warning on its line: the sandbox and its paths, `require_approval`, approvals beyond
    /// yours and approval functions, custom tools, tool sources, language-server commands,
    /// working directories, the result store's paths, `secrets.*`, provider base URLs. And a
    /// tool call that arrives marked `(approved)`, or without a result, waits for your approval
    /// (the approvals you give through flemmad are remembered). docs/security.md says more;
    /// docs/configuration.md marks each option.
    ///
    /// `flemmad trust DIR` trusts DIR and everything below it; `--remove DIR` stops trusting
    /// it; `--list` lists the trusted folders (kept in
    /// $XDG_CONFIG_HOME/flemma/trusted-folders, one path a line, readable and writable by you
    /// alone) and the configuration's `trust.paths`. Trust only folders whose chats you wrote
    /// or checked: a chat in a trusted folder can turn the sandbox off. Editors in
    /// Restricted Mode (VS Code's Workspace Trust) make every chat untrusted.
    Trust(trust::TrustArgs),
    /// Show what a chat's tool calls changed in its project's files, call by call, as diffs.
    ///
    /// Before and after each call that can change files (`bash`, `write`, `edit`, custom and
    /// MCP tools, an `lsp` rename), flemmad records the project's files (its git work tree,
    /// else the chat's folder) in a shadow repository under $XDG_STATE_HOME/flemma/checkpoints/
    /// — never in your own `.git`. Ignored files (`.gitignore`), chats, `.flemma/`, nested
    /// repositories and files over `checkpoints.max_file_mb` (16 MiB) are left out; a chat kept
    /// directly in your home directory or in `/` gets no checkpoints; old ones are pruned by
    /// `checkpoints.max_age_days` and `checkpoints.max_size_mb`. --call ID shows one call. Exit status: 0; 2 for an unknown call or file.
    Changes(changes::ChangesArgs),
    /// Put a project's files back as they were before one of the chat's tool calls, and/or
    /// cut the chat back to before it.
    ///
    /// Restores every file the calls since then changed and removes the files they created
    /// (from the checkpoints `flemmad changes` shows); the chat itself is not changed unless
    /// --chat or --both: then the answer that made the call and everything after it are cut
    /// off, the whole chat kept first under $XDG_STATE_HOME/flemma/rewound/ (where no tool can
    /// write), and --undo-chat puts it back. A file changed since the conversation's last call
    /// (by you or another program) is not overwritten without --force: the command then
    /// changes nothing and names it. --dry-run says what would happen. Exit status: 0 done; 1
    /// refused or failed; 2 for an unknown call or file.
    Rewind(changes::RewindArgs),
}

/// Unit of the `character` field of positions in JSON output.
#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum PositionEncoding {
    /// UTF-16 code units (the LSP default; what VS Code uses).
    #[default]
    #[value(name = "utf-16")]
    Utf16,
    /// UTF-8 bytes (what Helix uses).
    #[value(name = "utf-8")]
    Utf8,
}

impl From<PositionEncoding> for flemma_syntax::Encoding {
    fn from(value: PositionEncoding) -> Self {
        match value {
            PositionEncoding::Utf16 => flemma_syntax::Encoding::Utf16,
            PositionEncoding::Utf8 => flemma_syntax::Encoding::Utf8,
        }
    }
}

/// A path argument for a chat file.
pub type ChatPath = PathBuf;

/// Logging: `RUST_LOG` when set, else the configuration's `log.level` when the configuration
/// file sets it, else warnings only; to the configuration's `log.file` (appended) when set,
/// else to stderr.
pub fn init_logging(cli: &Cli, context: &ProcessContext) {
    use tracing_subscriber::EnvFilter;
    if matches!(
        cli.command,
        Command::Lsp(_) | Command::Serve(_) | Command::Acp(_)
    ) {
        return lsp::init_logging(context);
    }
    let layers = crate::chat::config_input(context).layers;
    let setting = |key: &str| {
        layers
            .iter()
            .rev()
            .find_map(|layer| layer.get(key))
            .and_then(|value| value.as_str().map(str::to_owned))
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(setting("log.level").unwrap_or_else(|| "warn".to_owned()))
    });
    let subscriber = tracing_subscriber::fmt().with_env_filter(filter);
    let file = setting("log.file").and_then(|file| {
        let path = match (file.strip_prefix("~/"), &context.dirs.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(&file),
        };
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|error| {
                Ui::root().note(format_args!(
                    "cannot open the log file {} ({error}); logging to stderr. Fix `log.file` in the configuration",
                    path.display()
                ));
            })
            .ok()
    });
    let _ = match file {
        Some(file) => subscriber
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .try_init(),
        None => subscriber
            .with_ansi(Ui::root().stderr_is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
    };
}

/// Runs the command. Exit codes are decided by [`CliError`] (`fmt` still returns its own
/// until it moves to `CliError`).
///
/// Every command gets the process's context (`main` reads it once), never the environment.
pub fn run(cli: Cli, context: &ProcessContext) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Parse(args) => parse::run(args, context),
        Command::Fmt(args) => return Ok(fmt::run(args, context)?),
        Command::Send(args) => return send::run(args, context),
        Command::Approve(args) => return approve::run(args, context),
        Command::Reject(args) => return reject::run(args, context),
        Command::Cancel(args) => cancel::run(args, context),
        Command::Status(args) => status::run(args, context),
        Command::Count(args) => count::run(args, context),
        Command::Compact(args) => compact::run(args, context),
        Command::Models(args) => models::run(args, context),
        Command::Tools(args) => return Ok(tools::run(args, context)?),
        Command::Lsp(args) => return Ok(lsp::run(args, context)?),
        Command::Acp(args) => return Ok(acp::run(args, context)?),
        Command::Serve(args) => serve::run(args, context),
        Command::Events(args) => events::run(args, context),
        Command::InstallService(args) => install_service::run(args, context),
        Command::Doctor(args) => return doctor::run(args, context),
        Command::Trust(args) => trust::run(args, context),
        Command::Changes(args) => changes::run_changes(args, context),
        Command::Rewind(args) => changes::run_rewind(args, context),
    }
    .map(|()| ExitCode::SUCCESS)
}
