//! The committed generated files must match what the schema generates.
//! `UPDATE_GENERATED=1 cargo test -p flemma-config` rewrites them.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::path::PathBuf;

fn repo_file(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn check(relative: &str, expected: &str) {
    let path = repo_file(relative);
    if std::env::var_os("UPDATE_GENERATED").is_some() {
        std::fs::write(&path, expected).unwrap();
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} is out of date; run `UPDATE_GENERATED=1 cargo test -p flemma-config` and commit the result",
        path.display()
    );
}

#[test]
fn json_schema_file_is_current() {
    let mut text = serde_json::to_string_pretty(&flemma_config::json_schema()).unwrap();
    text.push('\n');
    check("protocol/config.schema.json", &text);
}

#[test]
fn frontmatter_schema_file_is_current() {
    let mut text = serde_json::to_string_pretty(&flemma_config::frontmatter_json_schema()).unwrap();
    text.push('\n');
    check("protocol/frontmatter.schema.json", &text);
}

#[test]
fn frontmatter_schema_accepts_variables_and_checks_the_flemma_key() {
    let schema = flemma_config::frontmatter_json_schema();
    assert_eq!(schema["additionalProperties"], true);
    assert_eq!(
        schema["properties"]["flemma"]["properties"]["provider"],
        flemma_config::json_schema()["properties"]["provider"]
    );
}

#[test]
fn configuration_reference_is_current() {
    let path = repo_file("docs/configuration.md");
    let current = std::fs::read_to_string(&path).unwrap();
    let expected = flemma_config::splice_docs(&current).unwrap_or_else(|| {
        panic!(
            "{} lacks the generated-section markers {:?} / {:?}",
            path.display(),
            flemma_config::DOCS_BEGIN,
            flemma_config::DOCS_END
        )
    });
    check("docs/configuration.md", &expected);
}

#[test]
fn json_schema_describes_every_top_level_option() {
    let schema = flemma_config::json_schema();
    let properties = schema["properties"].as_object().unwrap();
    for key in [
        "provider",
        "model",
        "parameters",
        "providers",
        "models",
        "tools",
        "presets",
        "sandbox",
        "editing",
        "secrets",
        "log",
    ] {
        assert!(properties.contains_key(key), "missing {key}");
    }
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["properties"]["tools"]["anyOf"][0]["properties"]["auto_approve"]["default"],
        serde_json::json!(["$standard"])
    );
}
