//! A scripted, local LLM provider server for tests and demos.
//!
//! [`MockProvider`] binds `127.0.0.1`, answers like the real Anthropic, OpenAI Responses,
//! OpenAI Chat Completions, Gemini and Vertex endpoints (chosen by the request path), and
//! replies from a FIFO queue of scripted [`Turn`]s, rendered faithfully in each wire format
//! (headers, SSE framing, event order, usage shapes, error bodies).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use flemma_mock_provider::{MockProvider, Turn};
//! let mock = MockProvider::start().await?;
//! mock.push(Turn::text("Hello!").tool_call("bash", serde_json::json!({"cmd": "ls"})));
//! // point a client at mock.base_url(), e.g. POST {base}/v1/messages with "stream": true
//! let seen = mock.requests();
//! # drop(seen); mock.shutdown().await; Ok(()) }
//! ```
//!
//! Served paths:
//! * Anthropic: `POST /v1/messages`, `POST /v1/messages/count_tokens`, `GET /v1/models`
//!   (when `anthropic-version` or `x-api-key` is sent).
//! * OpenAI Responses: `POST /v1/responses`, `POST /v1/responses/input_tokens`,
//!   `GET /v1/models`.
//! * Chat Completions: `POST /v1/chat/completions`.
//! * Gemini: `POST /v1beta/models/{m}:streamGenerateContent?alt=sse` (also `v1`,
//!   `:generateContent`, `:countTokens`), `GET /v1beta/models`.
//! * Vertex: `POST /{v1|v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{m}:{action}`;
//!   Claude on Vertex: `…/publishers/anthropic/models/{m}:streamRawPredict` (or `:rawPredict`),
//!   answered in the Anthropic format (recorded as [`WireFormat::Anthropic`]).
//! * Google OAuth: `POST /token`, the token endpoint of a service-account key
//!   (`"token_uri": "{base}/token"`): a JWT bearer assertion in, an access token out
//!   ([`oauth`]).
//! * Codex (a ChatGPT subscription): `POST /backend-api/codex/responses` and the token refresh
//!   `POST /oauth/token` ([`chatgpt`]: its login, rate-limit windows and refusals).
//! * Control: `POST /_mock/turns` (JSON array of turns), `GET /_mock/requests`,
//!   `DELETE /_mock/requests`.

pub mod chatgpt;
mod deltas;
mod formats;
mod ids;
pub mod oauth;
mod script;
mod server;

pub use chatgpt::ChatGptLogin;
pub use formats::ChatReasoningField;
pub use script::{Failure, LAST_JOB_ID, MockStop, MockUsage, Step, Turn};
pub use server::{MockConfig, MockProvider, RecordedRequest, WireFormat};
