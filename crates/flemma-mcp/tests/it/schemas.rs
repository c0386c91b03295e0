//! Inputs checked against the schemas the official Python SDK writes (pydantic: `anyOf` for
//! optional and union parameters, `$ref` into `$defs` for nested models and enums, arrays,
//! `pattern`, `minLength`), by the registry as flemmad runs a call: an input that does not fit
//! is refused with the path of the offending field and never reaches the server; one that fits
//! runs and the server answers with what it received.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use flemma_mcp::hub::CallOptions;
use flemma_mcp::{HubOptions, McpHub, ServerState};
use flemma_tools::registry::Registry;
use flemma_tools::truncate::Keep;
use flemma_tools::{InvocationError, PathPolicy, ResultStore, RunContext};
use serde_json::{Value, json};

use crate::support::{python, runtime, script_def, typed_server};

const STARTUP: Duration = Duration::from_secs(30);

/// (tool, input, what flemmad says is wrong)
fn refused() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "count",
            json!({"n": "not-a-number"}),
            "n: expected integer or null, got string",
        ),
        (
            "count",
            json!({"n": 1.5}),
            "n: expected integer or null, got number",
        ),
        (
            "plot",
            json!({"p": {"x": "a"}}),
            "p.x: expected integer, got string; p.y: is required but missing",
        ),
        ("plot", json!({}), "p: is required but missing"),
        (
            "plot",
            json!({"p": {"x": 1, "y": 2}, "maybe": {"x": 1}}),
            "maybe.y: is required but missing",
        ),
        (
            "plot",
            json!({"p": "1,2"}),
            "p: expected object, got string",
        ),
        (
            "paint",
            json!({"color": "blue"}),
            r#"color: "blue" is not one of "red", "green""#,
        ),
        (
            "paint",
            json!({"color": "red", "mode": "dash"}),
            r#"mode: "dash" is not one of "fill", "stroke""#,
        ),
        (
            "tag",
            json!({"tags": "a"}),
            "tags: expected array, got string",
        ),
        (
            "tag",
            json!({"tags": ["a", 2]}),
            "tags[1]: expected string, got integer",
        ),
        (
            "tag",
            json!({"tags": [], "points": [{"x": 1, "y": "2"}]}),
            "points[0].y: expected integer, got string",
        ),
        (
            "pick",
            json!({"value": [1]}),
            "value: expected integer or string, got array",
        ),
        (
            "pick",
            json!({"value": 1, "word": "A"}),
            r#"word: "A" is shorter than 2 characters; word: "A" does not match "^[a-z]+$""#,
        ),
    ]
}

/// (tool, input, what the server received)
fn accepted() -> Vec<(&'static str, Value, Value)> {
    vec![
        ("count", json!({}), json!({"n": null})),
        ("count", json!({"n": null}), json!({"n": null})),
        ("count", json!({"n": 3}), json!({"n": 3})),
        (
            "plot",
            json!({"p": {"x": 1, "y": 2}}),
            json!({"p": {"x": 1, "y": 2}, "maybe": null}),
        ),
        (
            "plot",
            json!({"p": {"x": 1, "y": 2}, "maybe": {"x": 3, "y": 4}}),
            json!({"p": {"x": 1, "y": 2}, "maybe": {"x": 3, "y": 4}}),
        ),
        (
            "paint",
            json!({"color": "green", "mode": "stroke"}),
            json!({"color": "green", "mode": "stroke"}),
        ),
        (
            "tag",
            json!({"tags": ["a"], "points": [{"x": 1, "y": 2}]}),
            json!({"tags": ["a"], "points": [{"x": 1, "y": 2}]}),
        ),
        (
            "pick",
            json!({"value": "seven"}),
            json!({"value": "seven", "word": "abc"}),
        ),
        (
            "pick",
            json!({"value": 7, "word": "xyz"}),
            json!({"value": 7, "word": "xyz"}),
        ),
    ]
}

#[test]
fn sdk_schemas_refuse_what_does_not_fit_and_run_what_does() {
    let Some(python) = python("sdk_schemas_refuse_what_does_not_fit_and_run_what_does") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    let def = script_def("typed", &python, &typed_server(), &[], &root, Vec::new());
    let hub = McpHub::new(HubOptions::default());
    let rt = runtime();
    let statuses = rt.block_on(hub.ensure(std::slice::from_ref(&def), STARTUP, None));
    let status = statuses.into_iter().next().expect("one server");
    assert!(
        matches!(status.state, ServerState::Ready { .. }),
        "the server runs: {:?}",
        status.state
    );
    // Registered as flemmad registers them; `calls` counts what reaches the server.
    let calls = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::default();
    let options = CallOptions {
        timeout: Duration::from_secs(20),
        startup_timeout: STARTUP,
    };
    for tool in &status.tools {
        let (runner_tool, options, calls) = (tool.clone(), options.clone(), calls.clone());
        registry.register(
            tool.tool.spec(&tool.full_name, &tool.server),
            move |ctx, input| {
                calls.fetch_add(1, Ordering::SeqCst);
                runner_tool.run(input, &options, &ctx.cancel, None)
            },
            Keep::Head,
        );
    }
    for tool in registry.all() {
        assert_eq!(tool.input_schema().unusable(), None, "{}", tool.spec.name);
    }
    let store_config = flemma_config::resolve(&[])
        .expect("defaults")
        .config
        .tools
        .store;
    let store = ResultStore::new(&store_config, Some(&root.join("t.chat")), 0, &|_| None);
    let ctx = RunContext::new(&root, Arc::new(PathPolicy::new([root.clone()])));
    let results = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let run = |name: &str, input: &Value| {
                registry.execute(&format!("typed.{name}"), input.clone(), &ctx, &store, "t1")
            };
            let refused: Vec<_> = refused()
                .into_iter()
                .map(|(name, input, _)| run(name, &input))
                .collect();
            let calls_before = calls.load(Ordering::SeqCst);
            let accepted: Vec<_> = accepted()
                .into_iter()
                .map(|(name, input, _)| run(name, &input))
                .collect();
            (refused, calls_before, accepted)
        })
        .await
        .expect("the tool thread")
    });
    let (refused_results, calls_before, accepted_results) = results;
    let mut failures = Vec::new();
    for ((name, input, expected), result) in refused().into_iter().zip(refused_results) {
        let expected = format!("the input does not fit the schema of `typed.{name}`: {expected}");
        match result {
            Err(error @ InvocationError::Schema { .. }) if error.to_string() == expected => {}
            other => failures.push(format!(
                "{name} {input}: expected `{expected}`, got {other:?}"
            )),
        }
    }
    assert_eq!(calls_before, 0, "no refused input reached the server");
    for ((name, input, received), result) in accepted().into_iter().zip(accepted_results) {
        match result {
            Ok(outcome) if !outcome.is_error => {
                let got: Value = serde_json::from_str(&outcome.text).unwrap_or(Value::Null);
                if got != received {
                    failures.push(format!(
                        "{name} {input}: the server received {}",
                        outcome.text
                    ));
                }
            }
            other => failures.push(format!("{name} {input} did not run: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    rt.block_on(hub.shutdown());
}
