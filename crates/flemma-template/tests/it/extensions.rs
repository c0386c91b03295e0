//! The extension points: template modules (`templating.modules`), custom frontmatter parsers
//! (`templating.frontmatter_parsers`) and the path helpers.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestHost, assert_clean, blocking, covered, text_of};
use flemma_template::{
    Category, EvalOptions, Host, TemplatingOptions, evaluate, evaluate_frontmatter,
};
use serde_json::json;

fn with_modules(modules: Vec<PathBuf>) -> EvalOptions {
    EvalOptions {
        templating: TemplatingOptions {
            modules,
            ..TemplatingOptions::default()
        },
        ..EvalOptions::default()
    }
}

fn with_parser(language: &str, argv: &[&str], timeout: Duration) -> EvalOptions {
    let mut parsers = BTreeMap::new();
    parsers.insert(
        language.to_string(),
        argv.iter().map(|arg| arg.to_string()).collect(),
    );
    EvalOptions {
        templating: TemplatingOptions {
            frontmatter_parsers: parsers,
            parser_timeout: timeout,
            ..TemplatingOptions::default()
        },
        ..EvalOptions::default()
    }
}

// ---- template modules ----------------------------------------------------------------------

#[test]
fn module_functions_and_constants_reach_frontmatter_messages_and_includes() {
    let host = TestHost::new();
    let module = host.write(
        "lib/helpers.rhai",
        "const TEAM = \"QA\";\nfn shout(text) { text.to_upper() + \"!\" }\nfn greet(name) { `Hello ${shout(name)}` }\n",
    );
    host.write("part.md", "{{ shout(\"included\") }}");
    let evaluation = host.eval_with(
        "```rhai\nlet who = greet(\"frontmatter\");\n```\n@You:\n{{ who }} / {{ shout(TEAM) }} / {{ include(\"part.md\") }}\n",
        with_modules(vec![module]),
    );
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 0),
        "Hello FRONTMATTER! / QA! / INCLUDED!"
    );
}

#[test]
fn later_modules_override_earlier_ones_and_the_frontmatter_overrides_both() {
    let host = TestHost::new();
    let first = host.write(
        "first.rhai",
        "fn tag() { \"first\" }\nfn only_first() { \"kept\" }\nfn pick(x) { \"first/1\" }\n",
    );
    let second = host.write("second.rhai", "fn tag() { \"second\" }\n");
    let evaluation = host.eval_with(
        "@You:\n{{ tag() }} {{ only_first() }} {{ pick(1) }}\n",
        with_modules(vec![first.clone(), second.clone()]),
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "second kept first/1");

    let evaluation = host.eval_with(
        "```rhai\nfn tag() { \"frontmatter\" }\n```\n@You:\n{{ tag() }} {{ only_first() }}\n",
        with_modules(vec![first, second]),
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "frontmatter kept");
}

#[test]
fn relative_module_paths_resolve_against_the_chat_directory() {
    let host = TestHost::new();
    host.write("mods/one.rhai", "fn one() { 1 }\n");
    let evaluation = host.eval_with(
        "@You:\n{{ one() + 1 }}\n",
        with_modules(vec![PathBuf::from("mods/one.rhai")]),
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "2");
}

#[test]
fn an_auto_approve_function_may_call_module_functions() {
    let host = TestHost::new();
    let module = host.write("policy.rhai", "fn safe_tool(name) { name == \"read\" }\n");
    let evaluation = host.eval_with(
        "```rhai\nflemma.opt.tools.auto_approve = |tool, input, context| safe_tool(tool);\n```\n@You:\nhi\n",
        with_modules(vec![module]),
    );
    assert_clean(&evaluation);
    let function = evaluation
        .auto_approve_functions
        .values()
        .next()
        .expect("the closure is recorded");
    let limits = flemma_template::Limits::default();
    assert_eq!(
        function.call("read", &json!({}), &json!({}), &limits),
        Ok(Some(true))
    );
    assert_eq!(
        function.call("bash", &json!({}), &json!({}), &limits),
        Ok(Some(false))
    );
}

#[test]
fn a_module_that_does_not_parse_blocks_with_its_file_and_line() {
    let host = TestHost::new();
    let module = host.write("broken.rhai", "fn fine() { 1 }\n\nfn broken( { 2 }\n");
    let text = "@You:\nhi\n";
    let evaluation = host.eval_with(text, with_modules(vec![module.clone()]));
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let error = errors[0];
    assert_eq!(error.category, Category::Module);
    assert_eq!(error.file.as_deref(), Some(module.as_path()));
    assert_eq!(error.line_in_file, Some(3));
    assert!(error.message.contains("broken.rhai"), "{}", error.message);
    assert!(
        error.message.contains("does not parse"),
        "{}",
        error.message
    );
    assert_eq!(error.range.start, 0);
    // The diagnostic serialises with the new category name.
    let json = serde_json::to_value(error).expect("serialises");
    assert_eq!(json["category"], json!("module"));
}

#[test]
fn a_missing_module_blocks_and_names_the_setting() {
    let host = TestHost::new();
    let evaluation = host.eval_with("@You:\nhi\n", with_modules(vec![host.path("nowhere.rhai")]));
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].category, Category::Module);
    assert_eq!(errors[0].line_in_file, None);
    assert!(
        errors[0].message.contains("nowhere.rhai")
            && errors[0].message.contains("templating.modules"),
        "{}",
        errors[0].message
    );
}

#[test]
fn a_module_failing_at_run_time_blocks_with_its_line() {
    let host = TestHost::new();
    let module = host.write(
        "runtime.rhai",
        "const A = 1;\nconst B = A + undefined_thing;\n",
    );
    let evaluation = host.eval_with("@You:\nhi\n", with_modules(vec![module.clone()]));
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].category, Category::Module);
    assert_eq!(errors[0].file.as_deref(), Some(module.as_path()));
    assert_eq!(errors[0].line_in_file, Some(2));
}

#[test]
fn modules_are_sandboxed_like_templates() {
    let host = TestHost::new();
    let module = host.write("loop.rhai", "fn spin() { loop {} }\n");
    let started = Instant::now();
    let evaluation = host.eval_with("@You:\n{% spin(); %}\n", with_modules(vec![module.clone()]));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(evaluation.is_blocked());

    // No module resolver: `import` cannot reach the filesystem.
    let importer = host.write("import.rhai", "import \"loop\" as l;\nfn f() { 1 }\n");
    let evaluation = host.eval_with("@You:\nhi\n", with_modules(vec![importer]));
    assert_eq!(
        blocking(&evaluation).len(),
        1,
        "{:#?}",
        evaluation.diagnostics
    );
    assert_eq!(blocking(&evaluation)[0].category, Category::Module);
}

#[test]
fn modules_load_for_the_cheap_frontmatter_path_too() {
    let host = TestHost::new();
    let module = host.write("level.rhai", "fn level() { \"high\" }\n");
    let text = "```rhai\nflemma.opt.thinking = level();\n```\n@You:\nhi\n";
    let path = host.write("chat.chat", text);
    let mut options = with_modules(vec![module]);
    options.path = Some(path);
    let doc = flemma_syntax::parse(text);
    let (layer, diagnostics) = evaluate_frontmatter(&doc, host.shared(), &options);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert_eq!(layer.get("parameters.thinking"), Some(json!("high")));
}

// ---- custom frontmatter parsers --------------------------------------------------------------

/// A "YAML" parser: a shell script that turns `key: value` lines into a JSON object (the
/// `flemma_thinking` key becomes `flemma.parameters.thinking`), so the test needs no real YAML tool.
fn write_parser(host: &TestHost) -> PathBuf {
    let path = host.write(
        "bin/kv-to-json",
        r#"#!/bin/sh
set -e
vars=""
thinking=""
while IFS= read -r line; do
  [ -z "$line" ] && continue
  key=${line%%:*}
  value=$(printf '%s' "${line#*:}" | sed 's/^ *//')
  if [ "$key" = "flemma_thinking" ]; then
    thinking=$value
  else
    vars="$vars\"$key\": \"$value\", "
  fi
done
printf '{ %s"flemma": { "parameters": { "thinking": "%s" } } }\n' "$vars" "$thinking"
"#,
    );
    make_executable(&path);
    path
}

fn make_executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path).expect("metadata").permissions();
    permissions.set_mode(0o755);
    std::fs::set_permissions(path, permissions).expect("chmod");
}

#[test]
fn a_configured_parser_turns_the_frontmatter_into_variables_and_options() {
    let host = TestHost::new();
    let parser = write_parser(&host);
    let parser = parser.display().to_string();
    let text =
        "```yaml\nrecipient: QA team\nflemma_thinking: medium\n```\n@You:\nHello {{ recipient }}\n";
    let evaluation = host.eval_with(
        text,
        with_parser("yaml", &[&parser], Duration::from_secs(10)),
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "Hello QA team");
    assert_eq!(
        evaluation.frontmatter_layer.get("parameters.thinking"),
        Some(json!("medium"))
    );
}

/// The argv reaches the program as configured, and the program runs in `/`, never in the
/// chat's directory (docs/security.md, invariant III: a repository there would choose the
/// code `python3 -m yaml2json` imports).
#[test]
fn the_parser_receives_arguments_and_runs_in_the_neutral_directory() {
    let host = TestHost::new();
    host.write("data.json", "{\"from_file\": \"yes\"}");
    let script = "cat >/dev/null; [ -e data.json ] && exit 3; printf '{\"cwd\": \"%s\", \"arg\": \"%s\"}' \"$(pwd)\" \"$0\"";
    let evaluation = host.eval_with(
        "```toml\nignored = 1\n```\n@You:\n{{ cwd }} {{ arg }}\n",
        with_parser(
            "toml",
            &["sh", "-c", script, "given"],
            Duration::from_secs(10),
        ),
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "/ given");
}

#[test]
fn an_invalid_flemma_table_from_a_parser_blocks() {
    let host = TestHost::new();
    let evaluation = host.eval_with(
        "```yaml\nx: 1\n```\n@You:\nhi\n",
        with_parser(
            "yaml",
            &[
                "sh",
                "-c",
                "cat >/dev/null; echo '{\"flemma\": {\"thinkng\": \"high\"}}'",
            ],
            Duration::from_secs(10),
        ),
    );
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].category, Category::Frontmatter);
    assert!(
        errors[0].message.contains("thinkng"),
        "{}",
        errors[0].message
    );
}

#[test]
fn parser_failures_block_with_what_to_do() {
    let host = TestHost::new();
    let text = "```yaml\nx: 1\n```\n@You:\nhi\n";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["flemmad-no-such-parser-program"], "install"),
        (
            vec![
                "sh",
                "-c",
                "cat >/dev/null; echo 'bad yaml at line 1' >&2; exit 3",
            ],
            "bad yaml at line 1",
        ),
        (
            vec!["sh", "-c", "cat >/dev/null; echo 'not json'"],
            "did not print JSON",
        ),
        (
            vec!["sh", "-c", "cat >/dev/null; echo '[1, 2]'"],
            "not an object",
        ),
        (vec![], "empty command"),
    ];
    for (argv, expected) in cases {
        let evaluation = host.eval_with(text, with_parser("yaml", &argv, Duration::from_secs(10)));
        let errors = blocking(&evaluation);
        assert_eq!(errors.len(), 1, "{argv:?}: {errors:#?}");
        assert_eq!(errors[0].category, Category::Frontmatter);
        assert!(
            errors[0].message.contains(expected),
            "{argv:?}: {}",
            errors[0].message
        );
        assert!(
            errors[0]
                .message
                .contains("templating.frontmatter_parsers.yaml")
                || errors[0].message.contains("install"),
            "{argv:?}: {}",
            errors[0].message
        );
        let range = covered(text, errors[0]);
        assert!(range == "yaml" || range == "x: 1\n", "{argv:?}: {range:?}");
    }
}

#[test]
fn a_parser_that_runs_too_long_is_killed() {
    let host = TestHost::new();
    let started = Instant::now();
    let evaluation = host.eval_with(
        "```yaml\nx: 1\n```\n@You:\nhi\n",
        with_parser(
            "yaml",
            &["sh", "-c", "exec sleep 10"],
            Duration::from_millis(200),
        ),
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let errors = blocking(&evaluation);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].message.contains("did not finish within 200 ms"),
        "{}",
        errors[0].message
    );
}

#[test]
fn without_a_configured_parser_the_template_crate_adds_nothing() {
    let host = TestHost::new();
    let evaluation = host.eval("```yaml\nx: 1\n```\n@You:\nhi\n");
    assert_clean(&evaluation);
    // The syntax parser reports the language (the binary drops that report when a parser is
    // configured).
    let doc = flemma_syntax::parse("```yaml\nx: 1\n```\n@You:\nhi\n");
    assert!(
        doc.diagnostics()
            .iter()
            .any(|d| d.code.as_str() == "unknown-frontmatter-language")
    );
}

#[test]
fn fs_host_captures_stdout_and_feeds_stdin() {
    let output = common::fs_host()
        .run_filter(
            &["tr".to_string(), "a-z".to_string(), "A-Z".to_string()],
            b"shout",
            Duration::from_secs(10),
        )
        .expect("tr runs");
    assert_eq!(output, b"SHOUT");
    // Larger than a pipe buffer in both directions.
    let big = vec![b'x'; 1 << 20];
    let output = common::fs_host()
        .run_filter(&["cat".to_string()], &big, Duration::from_secs(10))
        .expect("cat runs");
    assert_eq!(output.len(), big.len());
}

/// `FsHost` reads no environment: `~/` is the home its creator gave (not `$HOME`), the
/// personalities' working directory is the one it was given (not the process's), and a
/// parser is looked up on its `PATH` only.
#[test]
fn fs_host_uses_the_home_cwd_and_path_it_is_given() {
    let home = tempfile::tempdir().expect("temp dir");
    let cwd = tempfile::tempdir().expect("temp dir");
    let host = flemma_template::FsHost {
        home: Some(home.path().to_path_buf()),
        cwd: Some(cwd.path().to_path_buf()),
        search_path: None,
    };
    assert_eq!(host.home_dir().as_deref(), Some(home.path()));
    assert_eq!(host.environment().cwd.as_deref(), Some(cwd.path()));
    let options = EvalOptions {
        path: Some(cwd.path().join("c.chat")),
        ..EvalOptions::default()
    };
    let doc = flemma_syntax::parse("@You:\n{{ path_absolute(\"~/x\") }}\n");
    let evaluation = evaluate(&doc, Arc::new(host.clone()), &options);
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 0),
        home.path().join("x").display().to_string()
    );
    let refused = host
        .run_filter(&["cat".to_string()], b"x", Duration::from_secs(10))
        .expect_err("no PATH, no cat");
    assert_eq!(refused.kind(), std::io::ErrorKind::NotFound);
    assert!(flemma_template::FsHost::default().home_dir().is_none());
}

// ---- path helpers --------------------------------------------------------------------------

#[test]
fn path_helpers_in_templates() {
    let host = TestHost::new();
    host.write("notes/today.md", "x");
    std::fs::create_dir_all(host.path("a-directory")).expect("mkdir");
    let dir = host.dir.path().display().to_string();
    let evaluation = host.eval(
        "@You:\n{{ path_basename(__filename) }}|{{ path_dirname(\"a/b.txt\") }}|{{ path_extension(\"x.tar.gz\") }}|{{ path_join(\"a\", \"b\") }}|{{ path_normalize(\"a/./b/../c\") }}|{{ path_absolute(\"notes/../notes/today.md\") }}|{{ file_readable(\"notes/today.md\") }}|{{ file_readable(\"missing.md\") }}|{{ file_readable(\"a-directory\") }}|{{ path_absolute(\"~/x\") }}\n",
    );
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 0),
        format!("chat.chat|a|gz|a/b|a/c|{dir}/notes/today.md|true|false|false|{dir}/home/x")
    );
}

#[test]
fn path_absolute_and_file_readable_follow_the_included_file() {
    let host = TestHost::new();
    host.write(
        "sub/part.md",
        "{{ path_absolute(\"x.md\") }} {{ file_readable(\"sibling.md\") }}",
    );
    host.write("sub/sibling.md", "s");
    let dir = host.dir.path().display().to_string();
    let evaluation = host.eval("@You:\n{{ include(\"sub/part.md\") }}\n");
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), format!("{dir}/sub/x.md true"));
}

#[test]
fn file_readable_goes_through_the_host() {
    #[derive(Debug)]
    struct OnlyOneFile;
    impl Host for OnlyOneFile {
        fn read_file(&self, path: &std::path::Path, _limit: u64) -> std::io::Result<Vec<u8>> {
            if path.ends_with("virtual.md") {
                Ok(b"v".to_vec())
            } else {
                Err(std::io::Error::from(std::io::ErrorKind::NotFound))
            }
        }
        fn home_dir(&self) -> Option<PathBuf> {
            None
        }
        fn now(&self) -> std::time::SystemTime {
            std::time::SystemTime::UNIX_EPOCH
        }
        fn environment(&self) -> flemma_template::PersonalityContext {
            flemma_template::PersonalityContext::default()
        }
        fn run_filter(
            &self,
            _argv: &[String],
            _input: &[u8],
            _timeout: Duration,
        ) -> std::io::Result<Vec<u8>> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }
    }
    let text = "@You:\n{{ file_readable(\"virtual.md\") }} {{ file_readable(\"chat.chat\") }}\n";
    let doc = flemma_syntax::parse(text);
    let evaluation = evaluate(
        &doc,
        Arc::new(OnlyOneFile),
        &EvalOptions {
            path: Some(PathBuf::from("/nowhere/chat.chat")),
            ..EvalOptions::default()
        },
    );
    assert_clean(&evaluation);
    assert_eq!(text_of(&evaluation, 0), "true false");
}
