//! `initialize`: the server's capabilities and the negotiated position encoding.

use std::path::PathBuf;

use flemma_syntax::Encoding;
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CodeLensOptions,
    CompletionOptions, ExecuteCommandOptions, FoldingRangeProviderCapability,
    HoverProviderCapability, InitializeResult, OneOf, SemanticTokensFullOptions,
    SemanticTokensOptions, SemanticTokensServerCapabilities, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions,
};

use crate::to_proto;

/// Role markers (`@`), namespaced tool names (`.`), paths (`/`), and `$` (template variables).
const COMPLETION_TRIGGERS: &[&str] = &["@", ".", "/", "$"];

pub(crate) fn result(encoding: Encoding) -> InitializeResult {
    InitializeResult {
        capabilities: ServerCapabilities {
            position_encoding: Some(to_proto::encoding_kind(encoding)),
            text_document_sync: Some(TextDocumentSyncCapability::Options(
                TextDocumentSyncOptions {
                    open_close: Some(true),
                    change: Some(TextDocumentSyncKind::INCREMENTAL),
                    ..Default::default()
                },
            )),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            definition_provider: Some(OneOf::Left(true)),
            document_symbol_provider: Some(OneOf::Left(true)),
            folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
            inlay_hint_provider: Some(OneOf::Left(true)),
            semantic_tokens_provider: Some(
                SemanticTokensServerCapabilities::SemanticTokensOptions(SemanticTokensOptions {
                    legend: to_proto::semantic_token_legend(),
                    full: Some(SemanticTokensFullOptions::Bool(true)),
                    range: None,
                    ..Default::default()
                }),
            ),
            completion_provider: Some(CompletionOptions {
                trigger_characters: Some(
                    COMPLETION_TRIGGERS
                        .iter()
                        .map(|c| (*c).to_owned())
                        .collect(),
                ),
                ..Default::default()
            }),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX, CodeActionKind::SOURCE]),
                ..Default::default()
            })),
            code_lens_provider: Some(CodeLensOptions {
                resolve_provider: Some(false),
            }),
            execute_command_provider: Some(ExecuteCommandOptions {
                commands: crate::commands::commands(),
                ..Default::default()
            }),
            ..Default::default()
        },
        server_info: Some(ServerInfo {
            name: "flemmad".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
        }),
    }
}

/// The workspace root relative command paths resolve against: the first workspace folder,
/// else `rootUri`, else `rootPath` (Helix sends the current directory there).
#[allow(deprecated)] // rootUri and rootPath are what clients outside a workspace still send.
pub(crate) fn root(params: &lsp_types::InitializeParams) -> Option<PathBuf> {
    let from_uri = |uri: &lsp_types::Uri| flemma_protocol::document::uri_to_path(uri.as_str());
    params
        .workspace_folders
        .as_ref()
        .and_then(|f| f.first())
        .and_then(|f| from_uri(&f.uri))
        .or_else(|| params.root_uri.as_ref().and_then(from_uri))
        .or_else(|| params.root_path.as_ref().map(PathBuf::from))
}
