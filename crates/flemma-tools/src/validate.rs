//! Tool inputs checked against their JSON Schemas by the `jsonschema` crate (drafts 4 to
//! 2020-12, the draft a schema's `$schema` names, else 2020-12 as MCP says; `$ref`/`$defs`,
//! `anyOf`/`oneOf`/`allOf`, `const`, `pattern`, `format`, lengths and counts). This module
//! compiles a schema once ([`InputSchema`], kept with the registered tool) and says a mismatch
//! the way flemmad always has: where (`edits[1].old`, `(root)`) and what is wrong.
//!
//! Our own rules: a required field whose `type` admits `null` may be left out (strict schemas
//! list every field as required; models without strict mode, and people, omit the null ones);
//! `date-time` and `time` also take naive times (what Python servers accept). No reference is
//! fetched: a `$ref` outside the schema does not compile.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{ValidationError, Validator};
use std::sync::OnceLock;

use serde_json::Value;

/// At most this many mismatches are reported for one input.
const MAX_REPORTED: usize = 5;

/// An input that does not fit: where (`edits[2].old`, `(root)`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaMismatch {
    pub path: String,
    pub message: String,
}

/// Every way an input does not fit (at least one), shown as `a: …; b.c: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatches(pub Vec<SchemaMismatch>);

impl std::fmt::Display for Mismatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, mismatch) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{mismatch}")?;
        }
        Ok(())
    }
}

/// A tool's input schema, compiled once.
#[derive(Debug)]
pub struct InputSchema {
    /// The schema as compiled (the nullable required fields made optional).
    schema: Value,
    compiled: Result<Validator, String>,
}

impl InputSchema {
    /// Compiles `schema`. A schema that does not compile (not a valid schema, a `$ref` to
    /// another document) checks nothing: the tool still gets its input and checks it itself;
    /// [`InputSchema::unusable`] says why.
    pub fn compile(schema: &Value) -> Self {
        let mut schema = schema.clone();
        let _ = optional_nullables(&mut schema);
        let compiled = jsonschema::options()
            .offline()
            .should_validate_formats(true)
            .with_format("date-time", |value: &str| {
                naive_or_strict("date-time", value)
            })
            .with_format("time", |value: &str| naive_or_strict("time", value))
            .build(&schema)
            .map_err(|error| error.to_string());
        Self { schema, compiled }
    }

    /// Why the schema checks nothing (`None` when it compiled).
    pub fn unusable(&self) -> Option<&str> {
        self.compiled.as_ref().err().map(String::as_str)
    }

    /// Checks `input`: every mismatch found (up to a few), in the order the schema finds them.
    pub fn check(&self, input: &Value) -> Result<(), Mismatches> {
        let Ok(validator) = &self.compiled else {
            return Ok(());
        };
        let mut out: Vec<SchemaMismatch> = Vec::new();
        for error in validator.iter_errors(input) {
            for mismatch in self.explain(&error, input) {
                if !out.contains(&mismatch) {
                    out.push(mismatch);
                }
            }
            if out.len() >= MAX_REPORTED {
                break;
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out.truncate(MAX_REPORTED);
        if out.is_empty() {
            Ok(())
        } else {
            Err(Mismatches(out))
        }
    }

    /// One validation error in our words. `anyOf`/`oneOf` are explained by the alternative
    /// the value has the shape of, else by what the alternatives expect.
    fn explain(&self, error: &ValidationError<'_>, input: &Value) -> Vec<SchemaMismatch> {
        let here = || shown_path(error, input);
        let value = error.instance();
        let message = match error.kind() {
            ValidationErrorKind::AnyOf { context }
            | ValidationErrorKind::OneOfNotValid { context } => {
                return self.explain_alternatives(error, context, input);
            }
            ValidationErrorKind::Type { kind } => {
                format!(
                    "expected {}, got {}",
                    self.type_names(error, kind),
                    type_name(value)
                )
            }
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_owned);
                return vec![SchemaMismatch {
                    path: join(&here(), &name),
                    message: "is required but missing".into(),
                }];
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = self.known_fields(error);
                let path = here();
                return unexpected
                    .iter()
                    .map(|name| SchemaMismatch {
                        path: join(&path, name),
                        message: if known.is_empty() {
                            "is not a known field".into()
                        } else {
                            format!("is not a known field (known: {})", known.join(", "))
                        },
                    })
                    .collect();
            }
            ValidationErrorKind::Enum { options } => {
                format!("{value} is not one of {}", listed(options))
            }
            ValidationErrorKind::Constant { expected_value } => {
                format!("expected {expected_value}, got {value}")
            }
            ValidationErrorKind::Minimum { limit } => {
                format!("{value} is below the minimum {limit}")
            }
            ValidationErrorKind::Maximum { limit } => {
                format!("{value} is above the maximum {limit}")
            }
            _ => error.to_string(),
        };
        vec![SchemaMismatch {
            path: here(),
            message,
        }]
    }

    fn explain_alternatives(
        &self,
        error: &ValidationError<'_>,
        branches: &[Vec<ValidationError<'static>>],
        input: &Value,
    ) -> Vec<SchemaMismatch> {
        let here = error.instance_path();
        let wrong_type =
            |e: &ValidationError<'_>| e.instance_path() == here && is_type_error(e.kind());
        // The alternatives the value has the shape of: it failed them inside, not by its type.
        let shaped: Vec<&Vec<ValidationError<'static>>> = branches
            .iter()
            .filter(|branch| !branch.iter().any(wrong_type))
            .collect();
        let closest = shaped.into_iter().min_by_key(|branch| {
            let depth = branch
                .iter()
                .map(|e| e.instance_path().segments().count())
                .max()
                .unwrap_or(0);
            (std::cmp::Reverse(depth), branch.len())
        });
        if let Some(branch) = closest {
            let out: Vec<SchemaMismatch> =
                branch.iter().flat_map(|e| self.explain(e, input)).collect();
            if !out.is_empty() {
                return out;
            }
        }
        // What the alternatives expect here: types (`expected integer or null, got string`),
        // values (`expected "a" or "b", got "c"`).
        let mut expected: Vec<String> = Vec::new();
        let mut only_types = true;
        for branch in branches {
            for e in branch.iter().filter(|e| e.instance_path() == here) {
                let what = match e.kind() {
                    ValidationErrorKind::Type { kind } => self.type_names(e, kind),
                    ValidationErrorKind::Constant { expected_value } => expected_value.to_string(),
                    ValidationErrorKind::Enum { options } => format!("one of {}", listed(options)),
                    _ => continue,
                };
                only_types &= matches!(e.kind(), ValidationErrorKind::Type { .. });
                if !expected.contains(&what) {
                    expected.push(what);
                }
            }
        }
        let value = error.instance();
        let message = if expected.is_empty() {
            error.to_string()
        } else if only_types {
            format!(
                "expected {}, got {}",
                expected.join(" or "),
                type_name(value)
            )
        } else {
            format!("expected {}, got {value}", expected.join(" or "))
        };
        vec![SchemaMismatch {
            path: shown_path(error, input),
            message,
        }]
    }

    /// The types a `type` error expects, in the order the schema lists them.
    fn type_names(&self, error: &ValidationError<'_>, kind: &TypeKind) -> String {
        let written = self.schema.pointer(error.schema_path().as_str());
        match (kind, written) {
            (TypeKind::Multiple(_), Some(Value::Array(names))) => names
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" or "),
            (TypeKind::Single(one), _) => one.to_string(),
            (TypeKind::Multiple(set), _) => set
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }

    /// The properties of the object schema an `additionalProperties` error comes from.
    fn known_fields(&self, error: &ValidationError<'_>) -> Vec<String> {
        let keyword = error.schema_path().as_str();
        let parent = keyword.rsplit_once('/').map_or("", |(parent, _)| parent);
        self.schema
            .pointer(parent)
            .and_then(|schema| schema.get("properties"))
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// `date-time` and `time` as the servers that write them take them: RFC 3339, also without an
/// offset (a naive time) and with a space between date and time. pydantic writes these formats
/// for `datetime` and `time` parameters and accepts all of those forms; refusing them would
/// refuse calls the server takes. Checked by the crate's own format, on the value completed.
fn naive_or_strict(format: &'static str, value: &str) -> bool {
    static DATE_TIME: OnceLock<Option<Validator>> = OnceLock::new();
    static TIME: OnceLock<Option<Validator>> = OnceLock::new();
    let cell = if format == "time" { &TIME } else { &DATE_TIME };
    let Some(strict) = cell.get_or_init(|| {
        jsonschema::options()
            .should_validate_formats(true)
            .build(&serde_json::json!({"format": format}))
            .ok()
    }) else {
        return true;
    };
    let fits = |text: String| strict.is_valid(&Value::String(text));
    let mut text = value.to_owned();
    if format == "date-time" && text.as_bytes().get(10) == Some(&b' ') {
        text.replace_range(10..11, "T");
    }
    fits(text.clone()) || fits(text + "Z")
}

fn is_type_error(kind: &ValidationErrorKind) -> bool {
    matches!(
        kind,
        ValidationErrorKind::Type { .. }
            | ValidationErrorKind::Constant { .. }
            | ValidationErrorKind::Enum { .. }
    )
}

/// Makes every required property whose `type` admits `null` optional, in every object
/// schema of `schema` (values of `enum`, `const`, `default` and `examples` are data, left as
/// they are). Whether anything changed.
fn optional_nullables(schema: &mut Value) -> bool {
    let mut changed = false;
    match schema {
        Value::Object(object) => {
            let nullable: Vec<String> = object
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| {
                    properties
                        .iter()
                        .filter(|(_, property)| accepts_null(property))
                        .map(|(name, _)| name.clone())
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Array(required)) = object.get_mut("required") {
                let before = required.len();
                required.retain(|name| {
                    !name
                        .as_str()
                        .is_some_and(|n| nullable.iter().any(|x| x == n))
                });
                changed |= required.len() != before;
            }
            for (key, child) in object.iter_mut() {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    changed |= optional_nullables(child);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                changed |= optional_nullables(item);
            }
        }
        _ => {}
    }
    changed
}

/// Whether a property schema admits `null` by its `type` (`["string", "null"]`, `"null"`).
fn accepts_null(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "null",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "null"),
        _ => false,
    }
}

/// The instance path of `error` as flemmad writes it: `edits[1].old`, `(root)`.
fn shown_path(error: &ValidationError<'_>, input: &Value) -> String {
    let mut path = String::new();
    let mut value = Some(input);
    for segment in error.instance_path().segments() {
        let key = match &segment {
            LocationSegment::Property(name) => name.to_string(),
            LocationSegment::Index(index) => index.to_string(),
        };
        match value {
            Some(Value::Array(items)) => {
                path.push_str(&format!("[{key}]"));
                value = key.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            other => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key);
                value = other.and_then(|v| v.get(&key));
            }
        }
    }
    if path.is_empty() {
        "(root)".into()
    } else {
        path
    }
}

fn join(path: &str, key: &str) -> String {
    if path == "(root)" {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `"a", "b"` from an `enum`'s array.
fn listed(options: &Value) -> String {
    match options {
        Value::Array(items) => items
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "edits": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"old": {"type": "string"}},
                    "required": ["old"],
                    "additionalProperties": false
                }}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn first(schema: &Value, input: Value) -> SchemaMismatch {
        let Err(Mismatches(all)) = InputSchema::compile(schema).check(&input) else {
            panic!("{input} fits");
        };
        all[0].clone()
    }

    #[test]
    fn accepts_a_fitting_input() {
        let input = json!({"path": "x", "limit": null, "edits": [{"old": "a"}]});
        assert_eq!(InputSchema::compile(&schema()).check(&input), Ok(()));
    }

    #[test]
    fn names_the_offending_field() {
        let error = first(
            &schema(),
            json!({"path": "x", "edits": [{"old": "a"}, {"old": 3}]}),
        );
        assert_eq!(error.path, "edits[1].old");
        assert_eq!(error.message, "expected string, got integer");
        let error = first(&schema(), json!({}));
        assert_eq!(
            (error.path.as_str(), error.message.as_str()),
            ("path", "is required but missing")
        );
        let error = first(&schema(), json!({"path": "x", "lmit": 2}));
        assert_eq!(error.path, "lmit");
        assert_eq!(
            error.message,
            "is not a known field (known: path, limit, mode, edits)"
        );
        let error = first(&schema(), json!({"path": "x", "mode": "c"}));
        assert_eq!(error.message, r#""c" is not one of "a", "b""#);
        let error = first(&schema(), json!({"path": "x", "limit": 0}));
        assert_eq!(error.message, "0 is below the minimum 1");
        let error = first(&schema(), json!({"path": "x", "limit": "3"}));
        assert_eq!(error.message, "expected integer or null, got string");
        let error = first(&schema(), json!([1]));
        assert_eq!(error.path, "(root)");
    }

    #[test]
    fn a_nullable_required_field_may_be_left_out() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": ["integer", "null"]}
            },
            "required": ["path", "offset"],
            "additionalProperties": false
        });
        let compiled = InputSchema::compile(&schema);
        assert!(compiled.check(&json!({"path": "a"})).is_ok());
        let missing = compiled.check(&json!({"offset": 1})).unwrap_err();
        assert_eq!(missing.0[0].path, "path");
    }

    #[test]
    fn alternatives_are_explained_by_the_one_the_value_is_shaped_like() {
        let schema = json!({
            "$defs": {"Point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"]
            }},
            "type": "object",
            "properties": {
                "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "p": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
                "q": {"$ref": "#/$defs/Point"},
                "lit": {"anyOf": [{"const": "a"}, {"const": "b"}]}
            }
        });
        let error = first(&schema, json!({"n": "not-a-number"}));
        assert_eq!(error.to_string(), "n: expected integer or null, got string");
        let all = InputSchema::compile(&schema)
            .check(&json!({"p": {"x": "a"}}))
            .unwrap_err();
        assert_eq!(
            all.to_string(),
            "p.x: expected integer, got string; p.y: is required but missing"
        );
        let error = first(&schema, json!({"q": {"x": 1, "y": [2]}}));
        assert_eq!(error.to_string(), "q.y: expected integer, got array");
        let error = first(&schema, json!({"lit": "c"}));
        assert_eq!(error.to_string(), r#"lit: expected "a" or "b", got "c""#);
    }

    #[test]
    fn every_keyword_of_draft_7_and_2020_12_is_checked() {
        let properties = json!({
            "word": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
            "mail": {"type": "string", "format": "email"},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "minItems": 2, "items": {"type": "string"}},
            "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "all": {"allOf": [{"type": "string"}, {"maxLength": 3}]},
            "c": {"const": 5},
            "p": {"$ref": "#/definitions/P"}
        });
        let draft7 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": false}},
            "type": "object",
            "properties": properties.clone()
        });
        let mut draft2020 = draft7.clone();
        draft2020["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        let cases = [
            (
                json!({"word": "A"}),
                r#"word: "A" is shorter than 2 characters; word: "A" does not match "^[a-z]+$""#,
            ),
            (json!({"mail": "nope"}), r#"mail: "nope" is not a "email""#),
            (
                json!({"when": "yesterday"}),
                r#"when: "yesterday" is not a "date-time""#,
            ),
            (
                json!({"when": "2026-01-02T25:04:05"}),
                r#"when: "2026-01-02T25:04:05" is not a "date-time""#,
            ),
            (
                json!({"tags": ["a"]}),
                r#"tags: ["a"] has less than 2 items"#,
            ),
            (
                json!({"tags": ["a", 1]}),
                "tags[1]: expected string, got integer",
            ),
            (
                json!({"one": 1}),
                "one: 1 is valid under more than one of the schemas listed in the 'oneOf' keyword",
            ),
            (
                json!({"all": "abcd"}),
                r#"all: "abcd" is longer than 3 characters"#,
            ),
            (json!({"c": 4}), "c: expected 5, got 4"),
            (
                json!({"p": {"x": 1, "z": 2}}),
                "p.z: is not a known field (known: x)",
            ),
        ];
        for schema in [draft7, draft2020] {
            let compiled = InputSchema::compile(&schema);
            assert_eq!(compiled.unusable(), None);
            for (input, expected) in &cases {
                let got = compiled.check(input).map_err(|m| m.to_string());
                assert_eq!(
                    got,
                    Err(expected.to_string()),
                    "{input} in {}",
                    schema["$schema"]
                );
            }
            let fits = json!({"word": "ab", "mail": "a@b.c", "when": "2026-01-02T03:04:05Z",
                "tags": ["a", "b"], "one": 1.5, "all": "abc", "c": 5, "p": {"x": 1}});
            assert_eq!(compiled.check(&fits), Ok(()));
        }
        // Times as Python servers take them: also naive, and with a space.
        let times = InputSchema::compile(&json!({"properties": {
            "d": {"type": "string", "format": "date-time"},
            "t": {"type": "string", "format": "time"}
        }}));
        for fits in [
            json!({"d": "2026-01-02T03:04:05Z", "t": "12:30:00+02:00"}),
            json!({"d": "2026-01-02T03:04:05", "t": "12:30:00"}),
            json!({"d": "2026-01-02 03:04:05.5", "t": "12:30:00.25"}),
        ] {
            assert_eq!(times.check(&fits), Ok(()), "{fits}");
        }
        assert!(times.check(&json!({"t": "12:61:00"})).is_err());
        let tuple = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "array", "items": [{"type": "string"}, {"type": "integer"}]
        });
        let error = first(&tuple, json!(["a", "b"]));
        assert_eq!(error.to_string(), "[1]: expected integer, got string");
    }

    #[test]
    fn a_schema_that_does_not_compile_checks_nothing_and_says_why() {
        let remote = InputSchema::compile(&json!({"$ref": "https://example.com/s.json"}));
        assert!(remote.unusable().is_some());
        assert_eq!(remote.check(&json!({"any": "thing"})), Ok(()));
    }
}
