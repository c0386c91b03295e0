//! The provider edge of flemmad: HTTP, retries, credentials, the model catalogue and the
//! explanation of provider errors. Everything pure (request builders, decoders, SSE, tool-name
//! encoding, the reply renderer) lives in [`flemma_wire`], re-exported here so callers of the
//! edge need one import path.

pub use flemma_wire::*;

pub mod catalogue;
pub mod chatgpt;
pub mod credentials;
mod environment;
pub mod explain;
pub mod http;
pub mod retry;
pub mod service_account;
