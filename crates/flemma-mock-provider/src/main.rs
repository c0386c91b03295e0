//! `flemma-mock-provider`: serve the scripted mock provider on 127.0.0.1 until SIGINT/SIGTERM.

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use flemma_mock_provider::{ChatReasoningField, MockConfig, MockProvider, Turn};

/// A local LLM provider that speaks the Anthropic, OpenAI Responses, Chat Completions,
/// Gemini and Vertex wire formats and answers from a script.
///
/// Prints its base URL (`http://127.0.0.1:PORT`) as the first line of stdout, logs requests
/// to stderr, and serves until SIGINT or SIGTERM.
///
/// Endpoints: POST /v1/messages, /v1/messages/count_tokens, GET /v1/models (Anthropic);
/// POST /v1/responses, /v1/responses/input_tokens (OpenAI Responses); POST
/// /v1/chat/completions; POST /v1beta/models/{m}:streamGenerateContent?alt=sse,
/// :generateContent, :countTokens, GET /v1beta/models (Gemini); POST
/// /{v1|v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent
/// (Vertex; Claude on Vertex: …/publishers/anthropic/models/{m}:streamRawPredict); POST
/// /backend-api/codex/responses and the token refresh POST /oauth/token (Codex, a ChatGPT
/// subscription: log in from a test with `MockProvider::chatgpt_login`). Control API: POST /_mock/turns (JSON array of turns, appended to the queue), GET
/// /_mock/requests (recorded requests), DELETE /_mock/requests.
///
/// A turn in JSON: {"steps":[{"thinking":{"text":"…","signature":"…"}},{"text":"Hi"},
/// {"tool_call":{"name":"bash","input":{"cmd":"ls"}}}], "stop":"end_turn",
/// "usage":{"input_tokens":10,"output_tokens":5}, "failure":{"http":{"status":429,
/// "retry_after":"2"}}, "bytes_per_sec":200}.
#[derive(Debug, Parser)]
#[command(name = "flemma-mock-provider", version)]
struct Args {
    /// Port to listen on (127.0.0.1 only); 0 picks a free port.
    #[arg(long, default_value_t = 0)]
    port: u16,

    /// JSON file holding an array of turns to preload into the queue.
    #[arg(long, value_name = "FILE.json")]
    script: Option<PathBuf>,

    /// When the queue is empty, answer HTTP 500 instead of echoing
    /// "You said: <last user message>".
    #[arg(long)]
    no_echo: bool,

    /// Require this API key (x-api-key, Authorization: Bearer, x-goog-api-key or ?key=, as
    /// each provider expects); other keys get the provider's real authentication error.
    #[arg(long, value_name = "KEY")]
    require_key: Option<String>,

    /// Delta field for thinking text in Chat Completions streams.
    #[arg(long, value_enum, default_value = "reasoning-content")]
    chat_reasoning_field: ReasoningFieldArg,
}

/// `--chat-reasoning-field` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ReasoningFieldArg {
    /// `delta.reasoning_content` (llama.cpp, DeepSeek, Moonshot).
    ReasoningContent,
    /// `delta.reasoning` (Ollama, vLLM, OpenRouter).
    Reasoning,
}

/// Why the binary could not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("cannot read the script file {path}: {source}; check the path passed to --script")]
    ReadScript {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the script file {path} is not a JSON array of turns: {source}; expected e.g. [{{\"steps\":[{{\"text\":\"Hi\"}}]}}]"
    )]
    ParseScript {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "cannot listen on 127.0.0.1:{port}: {source}; pick another --port or use 0 for a free one"
    )]
    Bind { port: u16, source: std::io::Error },
    #[error("cannot install the signal handler: {0}")]
    Signal(std::io::Error),
}

fn load_script(path: &PathBuf) -> Result<Vec<Turn>, StartError> {
    let text = std::fs::read_to_string(path).map_err(|source| StartError::ReadScript {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| StartError::ParseScript {
        path: path.clone(),
        source,
    })
}

async fn run(args: Args) -> Result<(), StartError> {
    let turns = match &args.script {
        Some(path) => load_script(path)?,
        None => Vec::new(),
    };
    let config = MockConfig {
        port: args.port,
        require_key: args.require_key.clone(),
        echo_when_empty: !args.no_echo,
        chat_reasoning_field: match args.chat_reasoning_field {
            ReasoningFieldArg::ReasoningContent => ChatReasoningField::ReasoningContent,
            ReasoningFieldArg::Reasoning => ChatReasoningField::Reasoning,
        },
        ..MockConfig::default()
    };
    let mock = MockProvider::start_with(config)
        .await
        .map_err(|source| StartError::Bind {
            port: args.port,
            source,
        })?;
    let preloaded = turns.len();
    for turn in turns {
        mock.push(turn);
    }
    let mut stdout = std::io::stdout();
    // A closed stdout must not stop the server: the URL is also logged to stderr.
    let _ = writeln!(stdout, "{}", mock.base_url());
    let _ = stdout.flush();
    tracing::info!(
        "serving on {} with {preloaded} scripted turn(s)",
        mock.base_url()
    );

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(StartError::Signal)?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, stopping"),
        _ = terminate.recv() => tracing::info!("SIGTERM received, stopping"),
    }
    mock.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("flemma-mock-provider: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
