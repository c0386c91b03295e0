//! `{{ }}` / `{% %}` evaluation: values, control flow, trim, strict variables, persistence,
//! diagnostics ranges. Every seed example has a Rhai counterpart here.

use crate::common;

use common::{TestHost, assert_clean, blocking, covered, system_text, text_of};
use flemma_syntax::Severity;
use flemma_template::Category;

#[test]
fn frontmatter_variables_fill_expressions() {
    // Seed: `recipient = "QA team"` and a multi-line `notes` string.
    let host = TestHost::new();
    let evaluation = host.eval(
        "```rhai\nlet recipient = \"QA team\";\nlet notes = `- Verify presets list before providers.\n- Check spinner no longer triggers spell checking.`;\n```\n@You:\nDraft a short update for {{recipient}} covering:\n{{notes}}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 0),
        "Draft a short update for QA team covering:\n- Verify presets list before providers.\n- Check spinner no longer triggers spell checking."
    );
}

#[test]
fn values_are_written_by_type() {
    let host = TestHost::new();
    let evaluation = host.eval(
        "@You:\na={{ 1 + 1 }} b={{ () }} c={{ #{x: 1, y: [true, \"s\"]} }} d={{ [1, 2] }} e={{ 2.5 }} f={{ 'c' }} g={{ \"{{\" }} h={{ \"}}\" }}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 0),
        "a=2 b= c={\"x\":1,\"y\":[true,\"s\"]} d=[1,2] e=2.5 f=c g={{ h=}}"
    );
}

#[test]
fn code_blocks_span_tags_and_emit() {
    // Seed "Template code blocks" and "Control flow", in Rhai.
    let host = TestHost::new();
    let evaluation = host.eval(concat!(
        "```rhai\nlet task = \"review\";\nlet items = [\"alpha\", \"beta\", \"gamma\"];\n```\n",
        "@System:\n{% if task == \"review\" { %}\nYou are a code reviewer. Be concise and direct.\n{% } else { %}\nYou are a helpful assistant.\n{% } %}\n",
        "@You:\n{%- for x in each(items) { -%}\n- Item {{ x.index }} of {{ x.length }}: {{ x.item }}{% if x.last { emit(\" (last)\") } %}\n{% } -%}\n",
        "@Assistant:\nok\n",
        "@You:\n{% for item in values(items) { %}[{{ item }}]{% } %} {% emit(format_number(1234567)); %}\n",
    ));
    assert_clean(&evaluation);
    assert_eq!(
        system_text(&evaluation),
        "You are a code reviewer. Be concise and direct."
    );
    assert_eq!(
        text_of(&evaluation, 0),
        "- Item 1 of 3: alpha\n- Item 2 of 3: beta\n- Item 3 of 3: gamma (last)"
    );
    assert_eq!(text_of(&evaluation, 2), "[alpha][beta][gamma] 1,234,567");
}

#[test]
fn each_exposes_loop_metadata() {
    let host = TestHost::new();
    let evaluation = host.eval(
        "@You:\n{% for x in each([\"a\", \"b\"]) { %}{{ x.index0 }}{{ x.index }}{{ x.first }}{{ x.last }}{{ x.length }};{% } %}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "01truefalse2;12falsetrue2;");
}

#[test]
fn trim_markers_remove_one_line_break_and_spaces() {
    // Seed "Whitespace trimming", before and after.
    let host = TestHost::new();
    let untrimmed = host.eval(
        "```rhai\nlet verbose = true;\n```\n@System:\nStart\n{% if verbose { %}\nInclude full details.\n{% } %}\nEnd\n",
    );
    assert_eq!(
        system_text(&untrimmed),
        "Start\n\nInclude full details.\n\nEnd"
    );
    let trimmed = host.eval(
        "```rhai\nlet verbose = true;\n```\n@System:\nStart\n{%- if verbose { -%}\nInclude full details.\n{%- } -%}\nEnd\n",
    );
    assert_clean(&trimmed);
    assert_eq!(system_text(&trimmed), "StartInclude full details.End");
    let expression =
        host.eval("```rhai\nlet value = \"X\";\n```\n@You:\na  \n  {{- value -}}  \n  b\n");
    // Only the spaces up to the line break go: the spaces before it stay.
    assert_eq!(text_of(&expression, 0), "a  X  b");
}

#[test]
fn assignments_without_let_persist_and_let_stays_local() {
    // Seed: `{% mode = "strict" %}` in @System:, `Mode is {{mode}}` in @You:.
    let host = TestHost::new();
    let text = "```rhai\nlet project = \"flemma\";\n```\n@System:\n{% mode = \"strict\" %}\n{% label = project.to_upper() %}System for {{label}}\n@You:\n{% let local = 1; %}Mode is {{mode}}, label {{ label }}, local {{ local }}\n@Assistant:\nok\n@You:\nlocal again: {{ local }}\n";
    let evaluation = host.eval(text);
    assert_eq!(system_text(&evaluation), "System for FLEMMA");
    assert_eq!(
        text_of(&evaluation, 0),
        "Mode is strict, label FLEMMA, local 1"
    );
    assert_eq!(text_of(&evaluation, 2), "local again: {{ local }}");
    assert_eq!(
        evaluation.diagnostics.len(),
        1,
        "{:#?}",
        evaluation.diagnostics
    );
    assert_eq!(covered(text, &evaluation.diagnostics[0]), "local");
}

#[test]
fn undefined_variable_in_expression_warns_and_keeps_the_literal() {
    let host = TestHost::new();
    let text = "```rhai\nlet name = \"Ada\";\n```\n@You:\nHi {{ mane }} and {{ name.to_upper() }} and {{ mane.len() }}.\n";
    let evaluation = host.eval(text);
    assert_eq!(
        text_of(&evaluation, 0),
        "Hi {{ mane }} and ADA and {{ mane.len() }}."
    );
    assert_eq!(evaluation.diagnostics.len(), 2);
    for diagnostic in &evaluation.diagnostics {
        assert_eq!(diagnostic.severity, Severity::Warning);
        assert_eq!(diagnostic.category, Category::Expression);
        assert!(!diagnostic.blocking);
        assert!(
            diagnostic.message.contains("undefined variable `mane`"),
            "{}",
            diagnostic.message
        );
        assert_eq!(covered(text, diagnostic), "mane");
    }
}

#[test]
fn unparsable_and_lua_expressions_warn() {
    let host = TestHost::new();
    let text = "@You:\nA {{ string.upper(x) .. \"y\" }} B {{ }} C\n";
    let evaluation = host.eval(text);
    assert_eq!(
        text_of(&evaluation, 0),
        "A {{ string.upper(x) .. \"y\" }} B {{ }} C"
    );
    assert_eq!(
        evaluation.diagnostics.len(),
        2,
        "{:#?}",
        evaluation.diagnostics
    );
    assert!(
        evaluation
            .diagnostics
            .iter()
            .all(|d| !d.blocking && d.category == Category::Expression)
    );
}

#[test]
fn undefined_variable_in_code_blocks_the_send() {
    let host = TestHost::new();
    let text = "@You:\nBefore\n{% if mane { %}\nyes\n{% } %}\n";
    let evaluation = host.eval(text);
    let blocking = blocking(&evaluation);
    assert_eq!(blocking.len(), 1, "{:#?}", evaluation.diagnostics);
    assert_eq!(blocking[0].category, Category::Code);
    assert_eq!(covered(text, blocking[0]), "mane");
    assert!(blocking[0].message.contains("undefined variable `mane`"));
}

#[test]
fn code_syntax_error_points_inside_the_tag() {
    let host = TestHost::new();
    let text = "@You:\nhello\n{%\nlet a = 1;\nlet b = ;\n%}\n";
    let evaluation = host.eval(text);
    let blocking = blocking(&evaluation);
    assert_eq!(blocking.len(), 1, "{:#?}", evaluation.diagnostics);
    let at = blocking[0].range.start;
    let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    assert_eq!(&text[line_start..line_start + 9], "let b = ;");
}

#[test]
fn runtime_error_in_code_maps_to_its_line_and_column() {
    let host = TestHost::new();
    let text = "@You:\n{%\nlet list = [1];\nlet x = list[5];\n%}\n";
    let evaluation = host.eval(text);
    let blocking = blocking(&evaluation);
    assert_eq!(blocking.len(), 1, "{:#?}", evaluation.diagnostics);
    let line_start = text.find("let x").unwrap_or(0);
    assert!(
        blocking[0].range.start >= line_start && blocking[0].range.start < line_start + 16,
        "{:?} {:?}",
        blocking[0].range,
        covered(text, blocking[0])
    );
}

#[test]
fn frontmatter_functions_are_callable_from_messages() {
    let host = TestHost::new();
    let evaluation = host
        .eval("```rhai\nfn shout(s) { s.to_upper() + \"!\" }\n```\n@You:\n{{ shout(\"hi\") }}\n");
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "HI!");
}

#[test]
fn helpers_format_numbers_and_dates_from_the_host_clock() {
    let host = TestHost::new();
    let evaluation = host.eval(
        "@You:\n{{ format_number(1234.5) }} {{ format_tokens(15300) }} {{ format_money(12.5) }} {{ format_percent(0.256) }} {{ date() }} {{ now() }} {{ date(\"%A %B\") }}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 0),
        "1,234.50 15.3k $12.50 25.6% 2026-11-30 2026-11-30T08:38:57Z Monday November"
    );
}

#[test]
fn filename_and_dirname_describe_the_chat_file() {
    let host = TestHost::new();
    let evaluation = host.eval("@You:\n{{ __filename }}|{{ __dirname }}\n");
    assert_clean(&evaluation);
    let expected = format!(
        "{}|{}",
        host.path("chat.chat").display(),
        host.dir.path().display()
    );
    assert_eq!(text_of(&evaluation, 0), expected);
}

#[test]
fn assistant_text_is_never_evaluated() {
    let host = TestHost::new();
    let evaluation =
        host.eval("@You:\nhi\n@Assistant:\nUse {{ name }} and {% x %} and @./missing.txt\n");
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 1),
        "Use {{ name }} and {% x %} and @./missing.txt"
    );
}

#[test]
fn other_roles_are_skipped_and_the_last_system_wins() {
    let host = TestHost::new();
    let evaluation = host.eval("@System:\nfirst\n@Note:\nnot sent\n@System:\nsecond\n@You:\nhi\n\n@Assistant:\nhello\n\n@You:\n\n");
    assert_clean(&evaluation);
    assert_eq!(system_text(&evaluation), "second");
    assert_eq!(common::roles(&evaluation).len(), 2);
}

#[test]
fn evaluation_serialises_for_parse_eval_json() {
    let host = TestHost::new();
    let evaluation =
        host.eval("```rhai\nflemma.opt.thinking = \"high\";\n```\n@You:\nhi {{ missing }}\n");
    let json = serde_json::to_value(&evaluation).expect("serialises");
    assert_eq!(json["conversation"]["messages"][0]["role"], "user");
    assert_eq!(json["config_layer"]["parameters"]["thinking"], "high");
    assert_eq!(json["diagnostics"][0]["category"], "expression");
    assert_eq!(json["diagnostics"][0]["severity"], "warning");
    assert_eq!(json["diagnostics"][0]["blocking"], false);
}

#[test]
fn the_guide_example_evaluates_as_documented() {
    // docs/templates.md, "A complete example".
    let host = TestHost::new();
    host.write(
        "notes/sprint-12.md",
        "- Auth module validates JWTs server-side.\n",
    );
    host.write("greeting.md", "Hello {{ name }}, you review {{ area }}.");
    let text = concat!(
        "```rhai\nlet recipient = \"QA team\";\nlet items = [\"presets\", \"spinner\", \"logging\"];\n",
        "flemma.opt.thinking = \"medium\";\nflemma.opt.tools = [\"read\", \"grep\"];\nflemma.opt.tools.append(\"bash\");\n",
        "flemma.opt.tools.auto_approve = [\"$readonly\"];\n```\n",
        "@System:\nYou write release notes.\n{%- if recipient == \"QA team\" { %}\nBe terse; the audience is QA.\n{%- } %}\n",
        "{{ include(\"greeting.md\", #{ name: \"Ada\", area: \"auth\" }) }}\n\n",
        "@You:\n{% audience = recipient.to_upper() -%}\nDraft an update for {{ recipient }} based on @./notes/sprint-12.md.\nCover:\n",
        "{% for x in each(items) { -%}\n{{ x.index }}. {{ x.item }}{% if x.last { %} (last){% } %}\n{% } -%}\n",
        "Budget: {{ format_tokens(15300) }} tokens, typo: {{ recipent }}\n\n",
        "@Assistant:\nHere is the update for the {{ recipient }}.\n\n@You:\nThanks, {{ audience }} will read it.\n",
    );
    let evaluation = host.eval(text);
    assert_eq!(
        system_text(&evaluation),
        "You write release notes.\nBe terse; the audience is QA.\nHello Ada, you review auth."
    );
    let parts = &evaluation.conversation.messages[0].parts;
    assert_eq!(
        parts[0],
        flemma_conversation::Part::text("Draft an update for QA team based on ")
    );
    assert!(
        matches!(&parts[1], flemma_conversation::Part::TextFile { mime, .. } if mime == "text/markdown")
    );
    assert_eq!(
        parts[2],
        flemma_conversation::Part::text(
            ".\nCover:\n1. presets\n2. spinner\n3. logging (last)\nBudget: 15.3k tokens, typo: {{ recipent }}"
        )
    );
    assert_eq!(
        text_of(&evaluation, 1),
        "Here is the update for the {{ recipient }}."
    );
    assert_eq!(text_of(&evaluation, 2), "Thanks, QA TEAM will read it.");
    assert_eq!(
        flemma_template::layer_to_json(&evaluation.frontmatter_layer),
        serde_json::json!({"parameters": {"thinking": "medium"}, "tools": {"enabled": ["read", "grep", "+bash"], "auto_approve": ["$readonly"]}})
    );
    assert_eq!(evaluation.diagnostics.len(), 1);
    assert_eq!(covered(text, &evaluation.diagnostics[0]), "recipent");
}

#[test]
fn a_long_templated_chat_stays_within_the_per_run_budget() {
    let host = TestHost::new();
    let mut text = String::from("```rhai\nlet n = 7;\n```\n");
    for i in 0..400 {
        text.push_str(&format!(
            "@You:\n{{% let total = 0; for j in 0..200 {{ total += j * n; }} %}}m{i} {{{{ total }}}}\n@Assistant:\nok\n"
        ));
    }
    let evaluation = host.eval(&text);
    assert_clean(&evaluation);
    assert_eq!(evaluation.conversation.messages.len(), 800);
    assert_eq!(text_of(&evaluation, 798), "m399 139300");
}

#[test]
fn evaluations_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<flemma_template::Evaluation>();
    assert_send_sync::<flemma_template::FsHost>();
}

#[test]
fn positions_count_characters_not_bytes() {
    let host = TestHost::new();
    let text = "@You:\nÜber {{ \"é🙂\" + nope }}\n{%\n  let s = \"ü\"; let t = s + missing;\n%}\n";
    let evaluation = host.eval(text);
    assert_eq!(
        evaluation.diagnostics.len(),
        2,
        "{:#?}",
        evaluation.diagnostics
    );
    assert_eq!(covered(text, &evaluation.diagnostics[0]), "nope");
    assert_eq!(covered(text, &evaluation.diagnostics[1]), "missing");
}
