//! Validation of a tool input against its JSON schema, for the subset our schemas use: `type`
//! (a name or an array of names, so `["string", "null"]` is nullable), `required`, `properties`,
//! `additionalProperties` (false or a schema), `enum`, `items`, `minimum`, `maximum`.

use serde_json::Value;

/// An input that does not fit: where (`edits[2].old`, `(root)`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaMismatch {
    pub path: String,
    pub message: String,
}

/// Checks `value` against `schema`; the first mismatch found is returned.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaMismatch> {
    check(schema, value, "")
}

fn shown(path: &str) -> String {
    if path.is_empty() {
        "(root)".into()
    } else {
        path.to_string()
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

fn fits_type(expected: &str, value: &Value) -> bool {
    let actual = type_name(value);
    actual == expected || (expected == "number" && actual == "integer")
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaMismatch> {
    let fail = |message: String| {
        Err(SchemaMismatch {
            path: shown(path),
            message,
        })
    };
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !names.is_empty() && !names.iter().any(|name| fits_type(name, value)) {
            return fail(format!(
                "expected {}, got {}",
                names.join(" or "),
                type_name(value)
            ));
        }
    }
    if value.is_null() {
        return Ok(());
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return fail(format!("{value} is not one of {}", list.join(", ")));
        }
    }
    if let Some(number) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if number < min {
                return fail(format!("{value} is below the minimum {min}"));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if number > max {
                return fail(format!("{value} is above the maximum {max}"));
            }
        }
    }
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    // A nullable field may be left out (strict schemas list every field as
                    // required; models without strict mode, and people, omit the null ones).
                    let nullable = properties
                        .and_then(|p| p.get(name))
                        .is_some_and(accepts_null);
                    if !object.contains_key(name) && !nullable {
                        return Err(SchemaMismatch {
                            path: join(path, name),
                            message: "is required but missing".into(),
                        });
                    }
                }
            }
            for (key, item) in object {
                let child = join(path, key);
                match properties.and_then(|p| p.get(key)) {
                    Some(property) => check(property, item, &child)?,
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            let known: Vec<&str> = properties
                                .map(|p| p.keys().map(String::as_str).collect())
                                .unwrap_or_default();
                            return Err(SchemaMismatch {
                                path: child,
                                message: format!(
                                    "is not a known field (known: {})",
                                    known.join(", ")
                                ),
                            });
                        }
                        Some(extra @ Value::Object(_)) => check(extra, item, &child)?,
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(
                        item_schema,
                        item,
                        &format!("{}[{index}]", shown_prefix(path)),
                    )?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn shown_prefix(path: &str) -> &str {
    path
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Whether a property schema admits `null` (`"type": ["string", "null"]` or `"type": "null"`).
fn accepts_null(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "null",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "null"),
        _ => false,
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

    #[test]
    fn accepts_a_fitting_input() {
        let input = json!({"path": "x", "limit": null, "edits": [{"old": "a"}]});
        assert_eq!(validate(&schema(), &input), Ok(()));
    }

    #[test]
    fn names_the_offending_field() {
        let error = validate(
            &schema(),
            &json!({"path": "x", "edits": [{"old": "a"}, {"old": 3}]}),
        )
        .expect_err("mismatch");
        assert_eq!(error.path, "edits[1].old");
        assert_eq!(error.message, "expected string, got integer");
        let error = validate(&schema(), &json!({})).expect_err("mismatch");
        assert_eq!(error.path, "path");
        let error = validate(&schema(), &json!({"path": "x", "lmit": 2})).expect_err("mismatch");
        assert_eq!(error.path, "lmit");
        let error = validate(&schema(), &json!({"path": "x", "mode": "c"})).expect_err("mismatch");
        assert!(error.message.contains("not one of"));
        let error = validate(&schema(), &json!({"path": "x", "limit": 0})).expect_err("mismatch");
        assert!(error.message.contains("minimum"));
    }

    #[test]
    fn a_nullable_required_field_may_be_left_out() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": ["integer", "null"]}
            },
            "required": ["path", "offset"],
            "additionalProperties": false
        });
        assert!(validate(&schema, &serde_json::json!({"path": "a"})).is_ok());
        let missing = validate(&schema, &serde_json::json!({"offset": 1})).unwrap_err();
        assert_eq!(missing.path, "path");
    }
}
