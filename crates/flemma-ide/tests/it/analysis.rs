//! The analysis host through its public API: one diagnostic list, the send rules, edits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use flemma_config::{ConfigLayer, LayerKind};
use flemma_ide::{AnalysisHost, ChangeError, ConfigInput, DocumentId, NOTHING_TO_SEND, Source};
use flemma_syntax::{TextEdit, TextRange};
use flemma_template::FsHost;

fn host_with(config: ConfigInput, text: &str) -> (AnalysisHost, DocumentId, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let id = DocumentId::new(dir.path().join("talk.chat"));
    let mut host = AnalysisHost::new(Arc::new(FsHost::default()), config);
    host.set_text(id.clone(), text);
    (host, id, dir)
}

fn host(text: &str) -> (AnalysisHost, DocumentId, tempfile::TempDir) {
    host_with(ConfigInput::default(), text)
}

fn blocker_codes(host: &mut AnalysisHost, id: &DocumentId) -> Vec<String> {
    host.analysis(id)
        .unwrap()
        .send_blockers()
        .into_iter()
        .map(|d| d.code)
        .collect()
}

#[test]
fn a_plain_question_can_be_sent() {
    let (mut host, id, _dir) = host("@You:\nHello\n");
    let analysis = host.analysis(&id).unwrap();
    assert!(
        analysis.diagnostics.is_empty(),
        "{:?}",
        analysis.diagnostics
    );
    assert!(analysis.send_blockers().is_empty());
    assert!(analysis.config.is_some());
    assert_eq!(analysis.evaluation.conversation.messages.len(), 1);
}

#[test]
fn an_unclosed_fence_in_the_last_question_blocks_and_names_the_fix() {
    let (mut host, id, _dir) = host("@You:\nPlease fix this:\n```python\nprint(1)\n");
    let analysis = host.analysis(&id).unwrap();
    let blockers = analysis.send_blockers();
    assert_eq!(blockers.len(), 1, "{blockers:?}");
    assert_eq!(blockers[0].code, "unclosed-fence");
    assert_eq!(blockers[0].source, Source::Syntax);
    assert_eq!(
        blockers[0].hint.as_deref(),
        Some("close the fence with ``` on its own line")
    );
}

#[test]
fn an_unclosed_fence_in_a_reply_does_not_block() {
    let (mut host, id, _dir) = host("@You:\nhi\n@Assistant:\n```rust\nfn main() {}\n");
    let analysis = host.analysis(&id).unwrap();
    let fence = analysis
        .diagnostics
        .iter()
        .find(|d| d.code == "unclosed-fence")
        .expect("the parser reports the fence");
    assert!(!fence.blocking);
}

#[test]
fn an_unclosed_frontmatter_blocks_at_its_first_line() {
    let (mut host, id, _dir) =
        host("```json\n{ \"flemma\": { \"provider\": \"openai\" } }\n@You:\nhi\n");
    let analysis = host.analysis(&id).unwrap();
    let blockers = analysis.send_blockers();
    assert_eq!(blockers.len(), 1, "{blockers:?}");
    assert_eq!(blockers[0].code, "unclosed-frontmatter");
    assert_eq!(blockers[0].range, TextRange::new(0, 7));
}

#[test]
fn lua_frontmatter_blocks() {
    let (mut host, id, _dir) = host("```lua\nflemma.opt.thinking = \"low\"\n```\n@You:\nhi\n");
    assert_eq!(blocker_codes(&mut host, &id), ["lua-frontmatter"]);
}

#[test]
fn nothing_to_send_after_a_finished_reply_but_an_aborted_reply_can_be_continued() {
    let (mut host, id, _dir) = host("@You:\nhi\n@Assistant:\nHello!\n\n@You:\n\n");
    assert_eq!(blocker_codes(&mut host, &id), [NOTHING_TO_SEND]);
    // Nothing to send is not a problem of the document: an editor shows no diagnostic.
    assert!(host.analysis(&id).unwrap().diagnostics.is_empty());

    host.set_text(
        id.clone(),
        "@You:\nhi\n@Assistant:\nHel\n\n<!-- flemma:aborted: the provider failed -->\n\n@You:\n\n",
    );
    assert!(blocker_codes(&mut host, &id).is_empty());

    host.set_text(id.clone(), "");
    assert_eq!(blocker_codes(&mut host, &id), [NOTHING_TO_SEND]);
}

#[test]
fn a_blocking_template_error_is_a_template_diagnostic() {
    let (mut host, id, _dir) = host("@You:\n{% let x = ; %}\n");
    let analysis = host.analysis(&id).unwrap();
    let blockers = analysis.send_blockers();
    assert!(
        blockers
            .iter()
            .any(|d| d.source == Source::Template && d.code == "template-code"),
        "{blockers:?}"
    );
}

#[test]
fn a_misspelt_option_in_the_config_blocks_with_a_hint() {
    let read = ConfigLayer::from_toml_str("[parameters]\nthinkng = \"low\"\n", LayerKind::UserFile);
    let config = ConfigInput::default().with_user_file("/etc/flemma.toml".into(), read);
    let (mut host, id, _dir) = host_with(config, "@You:\nhi\n");
    let analysis = host.analysis(&id).unwrap();
    let blockers = analysis.send_blockers();
    assert_eq!(blockers.len(), 1, "{blockers:?}");
    let error = &blockers[0];
    assert_eq!(error.source, Source::Config);
    assert_eq!(
        error.file.as_deref(),
        Some(std::path::Path::new("/etc/flemma.toml"))
    );
    assert_eq!(error.line_in_file, Some(2));
    assert_eq!(
        error.hint.as_deref(),
        Some("did you mean 'parameters.thinking'?")
    );
    assert!(analysis.config.is_none());
}

#[test]
fn a_frontmatter_config_error_blocks() {
    let (mut host, id, _dir) = host("```rhai\nflemma.opt.thinking = \"loud\";\n```\n@You:\nhi\n");
    let analysis = host.analysis(&id).unwrap();
    assert!(
        analysis.send_blockers().iter().all(|d| d.blocking),
        "{:?}",
        analysis.diagnostics
    );
    assert!(
        !analysis.send_blockers().is_empty(),
        "{:?}",
        analysis.diagnostics
    );
}

#[test]
fn edits_change_the_analysis_and_bad_edits_change_nothing() {
    let (mut host, id, _dir) = host("@You:\nPlease fix this:\n```python\nprint(1)\n");
    assert_eq!(blocker_codes(&mut host, &id), ["unclosed-fence"]);
    let end = host.document(&id).unwrap().text().len();
    host.apply_edits(&id, &[TextEdit::insert(end, "```\n")])
        .unwrap();
    assert!(blocker_codes(&mut host, &id).is_empty());
    let before = host.document(&id).unwrap().text().to_owned();
    let messages_before = host.document(&id).unwrap().messages().to_vec();

    let error = host
        .apply_edits(
            &id,
            &[
                TextEdit::insert(0, "x"),
                TextEdit::replace(TextRange::new(5, 500), ""),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(error, ChangeError::EditOutOfRange { index: 1, .. }),
        "{error}"
    );
    assert_eq!(host.document(&id).unwrap().text(), before);
    assert_eq!(host.document(&id).unwrap().messages(), messages_before);
    assert_eq!(
        host.document(&id).unwrap().diagnostics().len(),
        flemma_syntax::parse(before.as_str()).diagnostics().len()
    );

    let missing = DocumentId::new("/nowhere.chat");
    assert!(matches!(
        host.apply_edits(&missing, &[]),
        Err(ChangeError::UnknownDocument(_))
    ));
}

#[test]
fn the_analysis_is_cached_until_something_changes() {
    let (mut host, id, _dir) = host("@You:\nHello\n");
    let first = host.analysis(&id).unwrap();
    let again = host.analysis(&id).unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    host.set_config(ConfigInput::default());
    let after = host.analysis(&id).unwrap();
    assert!(!Arc::ptr_eq(&first, &after));
}

#[test]
fn relative_includes_resolve_against_the_chat_directory() {
    let (mut host, id, dir) = host("@You:\n{{ include(\"./notes.md\") }}\n");
    std::fs::write(dir.path().join("notes.md"), "from the notes").unwrap();
    host.set_text(id.clone(), "@You:\n{{ include(\"./notes.md\") }}\n");
    let analysis = host.analysis(&id).unwrap();
    assert!(
        analysis.diagnostics.is_empty(),
        "{:?}",
        analysis.diagnostics
    );
    let text =
        flemma_conversation::Part::joined_text(&analysis.evaluation.conversation.messages[0].parts);
    assert!(text.contains("from the notes"), "{text}");
}

#[test]
fn compiled_templates_are_cached_by_the_host_not_the_process() {
    let (mut host, id, _dir) = host("@You:\nHello {{ 1 + 1 }}\n");
    assert!(host.template_cache().compiled_scripts() == 0);
    host.analysis(&id).unwrap();
    let compiled = host.template_cache().compiled_scripts();
    assert!(compiled > 0);
    host.set_text(id.clone(), "@You:\nHello {{ 1 + 1 }}\n");
    host.analysis(&id).unwrap();
    assert_eq!(
        host.template_cache().compiled_scripts(),
        compiled,
        "the same script is reused"
    );
    let (other, _, _dir2) = self::host("@You:\nHi\n");
    assert!(
        other.template_cache().compiled_scripts() == 0,
        "another host has its own cache"
    );
}

#[test]
fn a_document_can_have_its_own_configuration_and_hosts_can_share_evaluations() {
    let (mut host, id, _dir) = host("@You:\nHello {{ 1 + 1 }}\n");
    let default_model = host
        .analysis(&id)
        .unwrap()
        .config
        .clone()
        .unwrap()
        .config
        .model;
    let mut runtime = ConfigLayer::new(LayerKind::Runtime);
    runtime
        .set("model", serde_json::json!("claude-haiku-4-5"))
        .unwrap();
    let own = ConfigInput::default().with_layer(Ok(runtime));
    host.set_document_config(&id, own.clone());
    let switched = host.analysis(&id).unwrap();
    assert_eq!(
        switched.config.as_ref().unwrap().config.model,
        "claude-haiku-4-5"
    );
    assert_ne!(default_model, "claude-haiku-4-5");
    // A new text keeps the document's configuration; a text changed at several places is
    // the text given.
    host.change_text(&id, "@You:\nHi {{ 1 + 1 }}, and more\n\n@Assistant:\nok\n");
    assert_eq!(
        host.document(&id).unwrap().text(),
        "@You:\nHi {{ 1 + 1 }}, and more\n\n@Assistant:\nok\n"
    );
    host.set_text(id.clone(), "@You:\nHello again\n");
    assert_eq!(
        host.analysis(&id)
            .unwrap()
            .config
            .as_ref()
            .unwrap()
            .config
            .model,
        "claude-haiku-4-5"
    );

    // Two hosts with one template cache: the second finds the first's message results, and
    // forgetting a document in one leaves them for the other.
    let cache = flemma_template::TemplateCache::new();
    let mut first = AnalysisHost::with_template_cache(
        Arc::new(FsHost::default()),
        ConfigInput::default(),
        cache.clone(),
    );
    let mut second = AnalysisHost::with_template_cache(
        Arc::new(FsHost::default()),
        ConfigInput::default(),
        cache.clone(),
    );
    let text = "@You:\nHello {{ 1 + 1 }}\n\n@Assistant:\nHi\n\n@You:\nMore\n";
    first.set_text(id.clone(), text);
    first.analysis(&id).unwrap();
    assert_eq!(cache.cached_messages(Some(id.path())), 3);
    second.set_text(id.clone(), text);
    second.analysis(&id).unwrap();
    second.forget(&id);
    assert_eq!(cache.cached_messages(Some(id.path())), 3);
}
