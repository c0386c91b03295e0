//! `include()`: text mode, arguments, isolation, nesting, cycles, missing files, binary mode,
//! personalities.

use crate::common;

use common::{TestHost, assert_clean, blocking, covered, system_text, text_of};
use flemma_conversation::Part;
use flemma_template::Category;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

#[test]
fn includes_render_with_passed_variables_only() {
    // Seed "Argument passing": greeting.md gets name and role.
    let host = TestHost::new();
    host.write(
        "greeting.md",
        "Hello {{name}}, you are acting as a {{role}}.\n",
    );
    host.write("system-prompt.md", "Be precise.");
    let evaluation = host.eval(
        "@System:\n{{ include(\"system-prompt.md\") }}\n{{ include(\"greeting.md\", #{ name: \"Alice\", role: \"reviewer\" }) }}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(
        system_text(&evaluation),
        "Be precise.\nHello Alice, you are acting as a reviewer."
    );
}

#[test]
fn included_files_do_not_see_the_parent_variables() {
    let host = TestHost::new();
    host.write("child.md", "line one\nsecret={{ secret }}\n");
    let text = "```rhai\nlet secret = \"s3cret\";\n```\n@You:\n{{ include(\"child.md\") }}\n";
    let evaluation = host.eval(text);
    assert_eq!(text_of(&evaluation, 0), "line one\nsecret={{ secret }}");
    assert_eq!(evaluation.diagnostics.len(), 1);
    let diagnostic = &evaluation.diagnostics[0];
    assert_eq!(
        diagnostic.file.as_deref(),
        Some(host.path("child.md").as_path())
    );
    assert_eq!(diagnostic.line_in_file, Some(2));
    assert!(diagnostic.message.contains("undefined variable `secret`"));
    assert_eq!(covered(text, diagnostic), "include(\"child.md\")");
}

#[test]
fn nested_includes_resolve_relative_to_the_including_file() {
    let host = TestHost::new();
    host.write("parts/outer.md", "outer[{{ include(\"inner/inner.md\", #{ n: 2 }) }}] {{ __filename.ends_with(\"outer.md\") }}");
    host.write(
        "parts/inner/inner.md",
        "inner {{ n * 21 }} from {{ __dirname.ends_with(\"inner\") }}",
    );
    let evaluation = host.eval("@You:\n{{ include(\"./parts/outer.md\") }}\n");
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "outer[inner 42 from true] true");
}

#[test]
fn include_works_in_frontmatter_and_code() {
    let host = TestHost::new();
    host.write("snippet.md", "{% for i in 1..=3 { %}{{ i }}{% } %}");
    let evaluation = host.eval(
        "```rhai\nlet counted = include(\"snippet.md\");\n```\n@You:\n{{ counted }} {% let again = include(\"snippet.md\"); emit(again.len().to_string()); %}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "123 3");
}

#[test]
fn circular_includes_are_detected_with_the_stack() {
    let host = TestHost::new();
    let a = host.write("a.md", "A {{ include(\"b.md\") }}");
    let b = host.write("b.md", "B {{ include(\"a.md\") }}");
    let text = "@You:\nstart {{ include(\"a.md\") }}\n";
    let evaluation = host.eval(text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    let error = errors[0];
    assert_eq!(error.category, Category::Include);
    assert!(
        error.message.contains(&format!(
            "Circular include detected (requested by '{}')",
            b.display()
        )),
        "{}",
        error.message
    );
    assert_eq!(
        error.include_stack,
        vec![host.path("chat.chat"), a.clone(), b, a]
    );
    assert_eq!(covered(text, error), "include(\"a.md\")");
}

#[test]
fn a_missing_include_blocks() {
    let host = TestHost::new();
    let text = "@You:\nx {{ include(\"nope.md\") }} y\n";
    let evaluation = host.eval(text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    assert!(
        errors[0].message.contains("cannot include 'nope.md'"),
        "{}",
        errors[0].message
    );
    assert_eq!(covered(text, errors[0]), "include(\"nope.md\")");
}

#[test]
fn errors_inside_included_code_block_and_name_the_file_and_line() {
    let host = TestHost::new();
    host.write("broken.md", "ok\n{% if { %}\n");
    let evaluation = host.eval("@You:\n{{ include(\"broken.md\") }}\n");
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    assert_eq!(
        errors[0].file.as_deref(),
        Some(host.path("broken.md").as_path())
    );
    assert_eq!(errors[0].line_in_file, Some(2));
}

#[test]
fn binary_includes_attach_files() {
    // Seed "Binary mode": `screenshot = include('./latest.png', { [symbols.BINARY] = true })`.
    let host = TestHost::new();
    host.write("latest.png", PNG);
    host.write("data.bin", "a,b\n1,2\n");
    let evaluation = host.eval(
        "```rhai\nlet screenshot = include(\"./latest.png\", #{ binary: true });\n```\n@You:\nWhat do you see? {{ screenshot }} and {{ include(\"data.bin\", #{ binary: true, mime: \"text/csv\" }) }}\n",
    );
    assert_clean(&evaluation);
    let parts = &evaluation.conversation.messages[0].parts;
    assert_eq!(parts.len(), 4, "{parts:#?}");
    assert_eq!(parts[0], Part::text("What do you see? "));
    assert_eq!(
        parts[1],
        Part::Image {
            mime: "image/png".into(),
            data: PNG.to_vec(),
            path: "./latest.png".into()
        }
    );
    assert_eq!(parts[2], Part::text(" and "));
    assert_eq!(
        parts[3],
        Part::TextFile {
            mime: "text/csv".into(),
            text: "a,b\n1,2\n".into(),
            path: "data.bin".into()
        }
    );
}

#[test]
fn the_coding_assistant_personality_describes_the_environment() {
    let host = TestHost::new();
    host.write("AGENTS.md", "Run `cargo test` before you finish.\n");
    let evaluation =
        host.eval("@System:\n{{ include(\"urn:flemma:personality:coding-assistant\") }}\n");
    assert_clean(&evaluation);
    let system = system_text(&evaluation);
    for expected in [
        "- bash\n- read\n",
        &format!("Working directory: {}", host.dir.path().display()),
        &format!("Conversation file: {}", host.path("chat.chat").display()),
        "Git branch: feature/templates",
        "Date: Monday 30 November 2026",
        "Run `cargo test` before you finish.",
    ] {
        assert!(
            system.contains(expected),
            "missing {expected:?} in {system}"
        );
    }
}

#[test]
fn an_unknown_personality_suggests_the_closest() {
    let host = TestHost::new();
    let evaluation =
        host.eval("@System:\n{{ include(\"urn:flemma:personality:coding-asistant\") }}\n");
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .message
            .contains("Did you mean 'coding-assistant'?"),
        "{}",
        errors[0].message
    );
}

#[test]
fn a_failing_include_inside_a_function_is_reported_once() {
    let host = TestHost::new();
    let evaluation = host.eval(
        "```rhai\nfn helper() { include(\"missing.md\") }\n```\n@You:\n{{ helper() }} and {{ 1 + 1 }}\n",
    );
    assert_eq!(
        evaluation.diagnostics.len(),
        1,
        "{:#?}",
        evaluation.diagnostics
    );
    assert!(evaluation.diagnostics[0].blocking);
    assert!(
        evaluation.diagnostics[0]
            .message
            .contains("cannot include 'missing.md'")
    );
}

#[test]
fn an_unsaved_chat_resolves_against_the_host_working_directory() {
    let host = TestHost::new();
    host.write("x.md", "from cwd");
    let doc = flemma_syntax::parse("@You:\n{{ include(\"x.md\") }} [{{ __filename }}]\n");
    let evaluation = flemma_template::evaluate(
        &doc,
        host.shared(),
        &flemma_template::EvalOptions::default(),
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "from cwd []");
}

#[test]
fn the_personality_falls_back_to_the_frontmatter_tools() {
    let mut host = TestHost::new();
    host.tools.clear();
    let evaluation = host.eval(
        "```rhai\nflemma.opt.tools = [\"grep\", \"read\"];\n```\n@System:\n{{ include(\"urn:flemma:personality:coding-assistant\") }}\n",
    );
    assert_clean(&evaluation);
    assert!(
        system_text(&evaluation).contains("# Tools\n\n- grep\n- read\n"),
        "{}",
        system_text(&evaluation)
    );
}

#[test]
fn the_personality_lists_the_tools_of_the_configuration_below_the_frontmatter() {
    let mut host = TestHost::new();
    host.tools.clear();
    let user_file = flemma_config::ConfigLayer::from_toml_str(
        "[tools]\nenabled = [\"bash\", \"read\"]\n",
        flemma_config::LayerKind::UserFile,
    )
    .unwrap();
    let evaluation = host.eval_with(
        "```rhai\nflemma.opt.tools.append(\"grep\");\n```\n@System:\n{{ include(\"urn:flemma:personality:coding-assistant\") }}\n",
        flemma_template::EvalOptions {
            config_layers: vec![user_file],
            ..Default::default()
        },
    );
    assert_clean(&evaluation);
    assert!(
        system_text(&evaluation).contains("# Tools\n\n- bash\n- read\n- grep\n"),
        "{}",
        system_text(&evaluation)
    );
}
