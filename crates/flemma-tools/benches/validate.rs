//! What checking one call's input against its tool's schema costs: a built-in (`edit` with three
//! replacements) and an MCP tool's schema as the official Python SDK writes it (`$ref` into
//! `$defs`, `anyOf` for optional and union parameters, `enum`, arrays, `pattern`).

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_tools::validate::InputSchema;
use serde_json::{Value, json};

/// A FastMCP tool `shape(p: Point, tags: list[str], color: Color, mode: Literal["a", "b"],
/// value: int | str, maybe: Point | None = None, word: str = Field(min_length=2, pattern=…))`.
fn sdk_schema() -> Value {
    json!({
        "$defs": {
            "Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
            "Point": {
                "properties": {"x": {"title": "X", "type": "integer"}, "y": {"title": "Y", "type": "integer"}},
                "required": ["x", "y"], "title": "Point", "type": "object"
            }
        },
        "properties": {
            "p": {"$ref": "#/$defs/Point"},
            "tags": {"items": {"type": "string"}, "title": "Tags", "type": "array"},
            "color": {"$ref": "#/$defs/Color"},
            "mode": {"enum": ["a", "b"], "title": "Mode", "type": "string"},
            "value": {"anyOf": [{"type": "integer"}, {"type": "string"}], "title": "Value"},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": null},
            "word": {"default": "x", "minLength": 2, "pattern": "^[a-z]+$", "title": "Word", "type": "string"}
        },
        "required": ["p", "tags", "color", "mode", "value"],
        "title": "shapeArguments",
        "type": "object"
    })
}

fn cases() -> Vec<(&'static str, Value, Value)> {
    let edit = flemma_tools::builtin::edit::spec().input_schema;
    let edit_input = json!({
        "label": "rename", "path": "src/main.rs", "dry_run": null, "oldText": null, "newText": null,
        "edits": [
            {"old": "fn main() {", "new": "fn main() -> ExitCode {"},
            {"old": "let x = 1;", "new": "let x = 2;"},
            {"old": "println!(\"hi\");", "new": "println!(\"hello\");"}
        ]
    });
    let sdk_input = json!({
        "p": {"x": 1, "y": 2}, "tags": ["a", "b", "c"], "color": "red", "mode": "a",
        "value": "seven", "maybe": {"x": 3, "y": 4}, "word": "abc"
    });
    vec![
        ("edit", edit, edit_input),
        ("sdk_shape", sdk_schema(), sdk_input),
    ]
}

fn validation(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    for (name, schema, input) in cases() {
        // Once per tool (on its first call), not per call.
        group.bench_function(format!("{name}_compile"), |b| {
            b.iter(|| {
                let compiled = InputSchema::compile(&schema);
                assert!(compiled.unusable().is_none());
            })
        });
        let compiled = InputSchema::compile(&schema);
        group.bench_function(format!("{name}_call"), |b| {
            b.iter(|| {
                let checked = compiled.check(&input);
                assert!(checked.is_ok(), "{checked:?}");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, validation);
criterion_main!(benches);
