//! Rhai frontmatter with `flemma.opt`, JSON frontmatter, the Lua conversion, the cheap path.

use crate::common;

use common::{TestHost, assert_clean, blocking, covered, text_of};
use flemma_config::{ConfigLayer, LayerKind, resolve};
use flemma_template::{Category, EvalOptions, evaluate_frontmatter, lua_frontmatter_to_rhai};
use serde_json::json;

fn frontmatter(code: &str) -> String {
    format!("```rhai\n{code}```\n@You:\nhi\n")
}

#[test]
fn parameter_overrides() {
    // Seed "Parameter overrides" and "Provider-specific overrides".
    let host = TestHost::new();
    let evaluation = host.eval(&frontmatter(
        "flemma.opt.thinking = \"medium\";\nflemma.opt.temperature = 0.3;\nflemma.opt.max_tokens = 8000;\nflemma.opt.cache_retention = \"none\";\nflemma.opt.anthropic.thinking_budget = 20000;\nflemma.opt.openai.reasoning = \"high\";\nflemma.opt.vertex.thinking_budget = 4096;\n",
    ));
    assert_clean(&evaluation);
    let layer = &evaluation.frontmatter_layer;
    assert_eq!(layer.get("parameters.thinking"), Some(json!("medium")));
    assert_eq!(layer.get("parameters.temperature"), Some(json!(0.3)));
    assert_eq!(layer.get("parameters.max_tokens"), Some(json!(8000)));
    assert_eq!(layer.get("parameters.cache_retention"), Some(json!("none")));
    assert_eq!(
        layer.get("parameters.anthropic.thinking_budget"),
        Some(json!(20000))
    );
    assert_eq!(
        layer.get("parameters.openai.reasoning"),
        Some(json!("high"))
    );
    assert_eq!(
        layer.get("parameters.vertex.thinking_budget"),
        Some(json!(4096))
    );
}

#[test]
fn tool_list_operations_and_operators() {
    // Seed "Tool selection": replace, append, remove, prepend, and the operator shorthand.
    let host = TestHost::new();
    let evaluation = host.eval(&frontmatter(
        "flemma.opt.tools = [\"bash\", \"read\"];\nflemma.opt.tools.append(\"grep\");\nflemma.opt.tools.remove(\"write\");\nflemma.opt.tools.prepend(\"bash\");\nflemma.opt.tools += \"edit\";\nflemma.opt.tools -= \"grep\";\nflemma.opt.tools = flemma.opt.tools + \"grep\" - \"edit\" ^ \"write\";\n",
    ));
    assert_clean(&evaluation);
    assert_eq!(
        evaluation.frontmatter_layer.get("tools.enabled"),
        Some(json!([
            "bash", "read", "+grep", "!write", "^bash", "+edit", "!grep", "+grep", "!edit",
            "^write"
        ]))
    );
    let resolved = resolve(&[
        ConfigLayer::defaults(),
        evaluation.frontmatter_layer.clone(),
    ])
    .expect("resolves");
    assert_eq!(resolved.enabled_tools(), ["write", "bash", "read", "grep"]);
}

#[test]
fn auto_approve_lists_presets_and_autopilot() {
    // Seed "Per-buffer auto-approval" (preset, list, list operations) and autopilot.
    let host = TestHost::new();
    let evaluation = host.eval(&frontmatter(
        "flemma.opt.tools.auto_approve = [\"$standard\"];\nflemma.opt.tools.auto_approve.remove(\"write\");\nflemma.opt.tools.auto_approve.append(\"bash\");\nflemma.opt.tools.autopilot = false;\n",
    ));
    assert_clean(&evaluation);
    let layer = &evaluation.frontmatter_layer;
    assert_eq!(
        layer.get("tools.auto_approve"),
        Some(json!(["$standard", "!write", "+bash"]))
    );
    assert_eq!(layer.get("tools.autopilot.enabled"), Some(json!(false)));
    let resolved = resolve(&[ConfigLayer::defaults(), layer.clone()]).expect("resolves");
    assert_eq!(resolved.auto_approve().approves("bash"), Some(true));
    assert_eq!(resolved.auto_approve().approves("write"), Some(false));

    let readonly = host.eval(&frontmatter(
        "flemma.opt.tools.auto_approve = [\"$readonly\", \"+bash\"];\n",
    ));
    assert_clean(&readonly);
    assert_eq!(
        readonly.frontmatter_layer.get("tools.auto_approve"),
        Some(json!(["$readonly", "+bash"]))
    );
}

#[test]
fn auto_approve_closure_is_kept_and_callable() {
    // Seed "Function form", in Rhai.
    let host = TestHost::new();
    let evaluation = host.eval(&frontmatter(
        "let trusted = \"grep\";\nflemma.opt.tools.auto_approve = |tool_name, input, context| {\n  if tool_name == trusted { return true; }\n  if input.command == \"rm -rf /\" { return false; }\n  ()\n};\n",
    ));
    assert_clean(&evaluation);
    let value = evaluation
        .frontmatter_layer
        .get("tools.auto_approve")
        .expect("set");
    let id = value["function"]["id"].as_u64().expect("function ref");
    let function = &evaluation.auto_approve_functions[&id];
    let limits = flemma_template::Limits::default();
    let context = json!({});
    assert_eq!(
        function.call("grep", &json!({}), &context, &limits),
        Ok(Some(true))
    );
    assert_eq!(
        function.call("bash", &json!({"command": "rm -rf /"}), &context, &limits),
        Ok(Some(false))
    );
    assert_eq!(
        function.call("bash", &json!({"command": "ls"}), &context, &limits),
        Ok(None)
    );
}

#[test]
fn misspelled_tool_and_option_block_with_did_you_mean_on_their_line() {
    let host = TestHost::new();
    let text = frontmatter("let ok = 1;\nflemma.opt.tools = [\"raed\"];\n");
    let evaluation = host.eval(&text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    assert_eq!(errors[0].category, Category::Frontmatter);
    assert!(
        errors[0].message.contains("Did you mean 'read'?"),
        "{}",
        errors[0].message
    );
    assert_eq!(covered(&text, errors[0]), "flemma.opt.tools = [\"raed\"];");

    let text = frontmatter("flemma.opt.thinkng = \"high\";\n");
    let evaluation = host.eval(&text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    assert!(
        errors[0].message.contains("Did you mean"),
        "{}",
        errors[0].message
    );
    assert!(
        errors[0].message.contains("thinking"),
        "{}",
        errors[0].message
    );
    assert_eq!(covered(&text, errors[0]), "flemma.opt.thinkng = \"high\";");
}

#[test]
fn frontmatter_syntax_and_runtime_errors_block_at_their_position() {
    let host = TestHost::new();
    let text = frontmatter("let a = 1;\nlet b = ;\n");
    let evaluation = host.eval(&text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1);
    let line = text.find("let b").unwrap_or(0);
    assert!(errors[0].range.start >= line && errors[0].range.start <= line + 9);

    let text = frontmatter("let a = 1;\nlet c = undefined_thing + 1;\n");
    let evaluation = host.eval(&text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1);
    assert_eq!(covered(&text, errors[0]), "undefined_thing");
}

#[test]
fn json_frontmatter_variables_and_config() {
    // Seed "JSON frontmatter" and chat-format §7.3.
    let host = TestHost::new();
    let evaluation = host.eval(
        "```json\n{\n  \"flemma\": {\n    \"provider\": \"vertex\",\n    \"model\": \"gemini-3.1-pro-preview\",\n    \"parameters\": { \"thinking\": \"high\", \"vertex\": { \"project_id\": \"my-proj\" } },\n    \"tools\": { \"auto_approve\": [\"$standard\", \"!write\", \"+bash\"] }\n  },\n  \"recipient\": \"QA team\",\n  \"count\": 3\n}\n```\n@You:\nFor {{ recipient }} ({{ count + 1 }})\n",
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "For QA team (4)");
    let layer = &evaluation.frontmatter_layer;
    assert_eq!(layer.get("provider"), Some(json!("vertex")));
    assert_eq!(layer.get("parameters.thinking"), Some(json!("high")));
    assert_eq!(
        layer.get("parameters.vertex.project_id"),
        Some(json!("my-proj"))
    );
    assert_eq!(
        layer.get("tools.auto_approve"),
        Some(json!(["$standard", "!write", "+bash"]))
    );
}

#[test]
fn invalid_json_frontmatter_blocks_at_the_line() {
    let host = TestHost::new();
    let text = "```json\n{\n  \"a\": 1,\n  \"b\": oops\n}\n```\n@You:\nhi\n";
    let evaluation = host.eval(text);
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1);
    let line = text.find("  \"b\"").unwrap_or(0);
    let line_end = line + text[line..].find('\n').unwrap_or(0);
    assert!(
        errors[0].range.start >= line && errors[0].range.start <= line_end,
        "{:?}",
        errors[0].range
    );

    let evaluation = host
        .eval("```json\n{\"flemma\": {\"parameters\": {\"thinkng\": \"high\"}}}\n```\n@You:\nhi\n");
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    assert!(
        errors[0].message.contains("Did you mean"),
        "{}",
        errors[0].message
    );
}

#[test]
fn frontmatter_only_path_returns_the_layer() {
    let host = TestHost::new();
    let text =
        "```rhai\nflemma.opt.model = \"claude-sonnet-4-5\";\n```\n@You:\n{{ never_evaluated }}\n";
    let doc = flemma_syntax::parse(text);
    let (layer, diagnostics) = evaluate_frontmatter(&doc, host.shared(), &EvalOptions::default());
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert_eq!(layer.kind(), LayerKind::Frontmatter);
    assert_eq!(layer.get("model"), Some(json!("claude-sonnet-4-5")));
}

#[test]
fn reading_options_back_and_replacing_opt_is_refused() {
    let host = TestHost::new();
    let evaluation = host.eval("```rhai\nflemma.opt.thinking = \"low\";\nlet t = flemma.opt.thinking;\nlet unset = flemma.opt.temperature;\n```\n@You:\n{{ t }}|{{ unset }}|\n");
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "low||");
    let evaluation = host.eval(&frontmatter("flemma.opt = 3;\n"));
    assert_eq!(blocking(&evaluation).len(), 1);
}

#[test]
fn lua_conversion_produces_working_rhai() {
    let lua = "recipient = \"QA team\"\nflemma.opt.thinking = \"medium\"\nflemma.opt.tools = { \"bash\", \"read\" }\nflemma.opt.tools:append(\"grep\")\n";
    let rhai = lua_frontmatter_to_rhai(lua).expect("declarative subset");
    let host = TestHost::new();
    let evaluation = host.eval(&format!(
        "```rhai\n{rhai}```\n@You:\nTo {{{{ recipient }}}}\n"
    ));
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "To QA team");
    assert_eq!(
        evaluation.frontmatter_layer.get("tools.enabled"),
        Some(json!(["bash", "read", "+grep"]))
    );
}

#[test]
fn flemma_only_options_are_warnings_in_rhai_too() {
    // A Flemma chat's `flemma.opt.tools.mcporter…` is accepted, ignored, and said.
    let host = TestHost::new();
    let evaluation = host.eval(&frontmatter(
        "flemma.opt.tools.mcporter.enabled = true;\nflemma.opt.tools.mcporter.include.append(\"slack:*\");\nflemma.opt.model = \"$fast\";\n",
    ));
    assert_clean(&evaluation);
    let layer = &evaluation.frontmatter_layer;
    assert_eq!(layer.get("model"), Some(json!("$fast")));
    let warnings = layer.warnings();
    assert!(!warnings.is_empty());
    assert!(
        warnings
            .iter()
            .all(|w| w.message.contains("`tools.mcporter") && w.message.contains("[tools.mcp]")),
        "{warnings:?}"
    );
}
