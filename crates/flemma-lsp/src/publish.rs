//! Publishing a document's diagnostics (`textDocument/publishDiagnostics`) once its analysis
//! is known: the analysis worker publishes when an analysis finishes, the handlers when the
//! context meter or the settings change.

use crate::session::Session;
use crate::to_proto;

/// Publishes the document's diagnostics: `Analysis::diagnostics`, the one source (parser,
/// frontmatter, templates, file references, configuration), of the analysis of its current
/// text (computed off the main loop, [`crate::analysis_worker`]; nothing when it is not known yet),
/// when they differ from what the client was last sent (never an empty list after an empty
/// one; the same problems again only when their ranges moved). The first analysis of a
/// document is published even when empty.
pub(crate) fn publish_diagnostics(session: &mut Session, uri: &str) {
    let Some(doc) = session.documents.get_mut(uri) else {
        return;
    };
    let Some(analysis) = session.host.cached_analysis(&doc.id) else {
        return;
    };
    let text = analysis.document.text();
    let mut diagnostics: Vec<lsp_types::Diagnostic> = analysis
        .diagnostics
        .iter()
        .map(|d| to_proto::diagnostic(&doc.index, text, d, session.encoding))
        .collect();
    // Past `context.warn_at`: the meter's advice on the last message's role line.
    if let Some((advice, full)) = session
        .backend
        .context(uri, &analysis)
        .and_then(|meter| meter.advice)
    {
        let diagnostic = flemma_ide::Diagnostic {
            range: meter_range(&analysis.document),
            file: None,
            line_in_file: None,
            severity: if full {
                flemma_syntax::Severity::Error
            } else {
                flemma_syntax::Severity::Warning
            },
            source: flemma_ide::Source::Send,
            code: CONTEXT_WINDOW.to_owned(),
            message: advice,
            hint: None,
            include_stack: Vec::new(),
            blocking: false,
        };
        diagnostics.push(to_proto::diagnostic(
            &doc.index,
            text,
            &diagnostic,
            session.encoding,
        ));
    }
    if doc.published.as_ref() == Some(&diagnostics) {
        return;
    }
    doc.published = Some(diagnostics.clone());
    let params = lsp_types::PublishDiagnosticsParams {
        uri: doc.uri.clone(),
        diagnostics,
        version: Some(doc.version),
    };
    session.notify::<lsp_types::notification::PublishDiagnostics>(params);
}

/// The code of the context meter's diagnostic.
pub(crate) const CONTEXT_WINDOW: &str = "context-window";

/// Where the context meter shows: the last message's role line (without its line break), or
/// the end of a document without messages.
pub(crate) fn meter_range(syntax: &flemma_syntax::Document) -> flemma_syntax::TextRange {
    match syntax.messages().last() {
        Some(message) => {
            let line = message.role_line;
            let end = syntax.slice(line).trim_end_matches(['\n', '\r']).len();
            flemma_syntax::TextRange::new(line.start, line.start + end)
        }
        None => {
            let end = syntax.text().len();
            flemma_syntax::TextRange::new(end, end)
        }
    }
}
