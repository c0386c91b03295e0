//! The analysis core shared by every front end (the CLI, the language server, the daemon).
//!
//! Plain data in, plain data out: no LSP types, no IO except through the template `Host`.

pub mod features;
