//! MCP to flemmad, without IO: a listed tool becomes a [`ToolSpec`], and a `tools/call`
//! result (as JSON) becomes the text of a tool result. The text content is the output exactly;
//! images, audio and binary resources are handed to a `save` callback (the result store) and
//! named in the output with where they were saved; text resources are rendered with their URI.

use base64::Engine as _;
use flemma_tools::ToolSpec;
use serde_json::Value;

/// One listed tool of a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    /// The tool's own name on its server.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

impl ListedTool {
    /// A tool from its `tools/list` JSON (`name`, `description`, `title`, `inputSchema`);
    /// `None` without a name.
    pub fn from_json(tool: &Value) -> Option<Self> {
        let name = tool.get("name")?.as_str()?.to_string();
        if name.is_empty() {
            return None;
        }
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| tool.get("title").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        let input_schema = match tool.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => serde_json::json!({"type": "object", "properties": {}}),
        };
        Some(Self {
            name,
            description,
            input_schema,
        })
    }

    /// The spec flemmad offers for it under `full_name` (not strict: MCP schemas are the
    /// server's; not async: a call holds its connection's request until it answers).
    pub fn spec(&self, full_name: &str, server: &str) -> ToolSpec {
        let description = if self.description.trim().is_empty() {
            format!("The tool `{}` of the MCP server `{server}`.", self.name)
        } else {
            self.description.clone()
        };
        ToolSpec {
            name: full_name.to_string(),
            description,
            input_schema: self.input_schema.clone(),
            strict: false,
            is_async: false,
            capabilities: Vec::new(),
        }
    }
}

/// Binary content of a result: saved by the caller, then named in the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// `image`, `audio` or `resource`.
    pub kind: &'static str,
    pub mime: String,
    pub data: Vec<u8>,
    /// The resource's URI.
    pub uri: Option<String>,
}

impl Binary {
    /// A file extension for its MIME type.
    pub fn extension(&self) -> &'static str {
        match self.mime.as_str() {
            "image/png" => "png",
            "image/jpeg" => "jpg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            "image/svg+xml" => "svg",
            "audio/wav" | "audio/x-wav" => "wav",
            "audio/mpeg" => "mp3",
            "application/pdf" => "pdf",
            _ => "bin",
        }
    }
}

/// One piece of a result, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Binary(Binary),
}

/// A `tools/call` result taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    pub pieces: Vec<Piece>,
    pub is_error: bool,
}

/// Takes a `CallToolResult` (JSON) apart. Unknown content types are named, never dropped.
pub fn call_result(result: &Value) -> CallResult {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut pieces = Vec::new();
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in content {
        pieces.push(piece(block));
    }
    if pieces.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        pieces.push(Piece::Text(structured.to_string()));
    }
    CallResult { pieces, is_error }
}

fn text_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn decode(data: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(data).ok()
}

fn piece(block: &Value) -> Piece {
    let kind = text_of(block, "type");
    match kind {
        "text" => Piece::Text(text_of(block, "text").to_string()),
        "image" | "audio" => {
            let mime = text_of(block, "mimeType").to_string();
            match decode(text_of(block, "data")) {
                Some(data) => Piece::Binary(Binary {
                    kind: if kind == "image" { "image" } else { "audio" },
                    mime,
                    data,
                    uri: None,
                }),
                None => Piece::Text(format!("[{kind}: {mime}, not valid base64]")),
            }
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = text_of(&resource, "uri").to_string();
            let mime = text_of(&resource, "mimeType").to_string();
            if let Some(text) = resource.get("text").and_then(Value::as_str) {
                let mime = if mime.is_empty() {
                    String::new()
                } else {
                    format!(" ({mime})")
                };
                Piece::Text(format!("[resource: {uri}{mime}]\n{text}"))
            } else {
                match decode(text_of(&resource, "blob")) {
                    Some(data) => Piece::Binary(Binary {
                        kind: "resource",
                        mime: if mime.is_empty() {
                            "application/octet-stream".into()
                        } else {
                            mime
                        },
                        data,
                        uri: Some(uri),
                    }),
                    None => Piece::Text(format!("[resource: {uri}, no readable content]")),
                }
            }
        }
        "resource_link" => {
            let uri = text_of(block, "uri");
            let name = text_of(block, "name");
            let mime = text_of(block, "mimeType");
            let mut line = format!("[resource link: {uri}");
            if !name.is_empty() {
                line.push_str(&format!(" — {name}"));
            }
            if !mime.is_empty() {
                line.push_str(&format!(" ({mime})"));
            }
            line.push(']');
            Piece::Text(line)
        }
        other => Piece::Text(format!(
            "[content of type `{other}` that flemmad does not show]"
        )),
    }
}

/// The output text: the pieces joined by line breaks (a single text piece is the output
/// exactly). `save` stores a binary piece and returns where, or why it could not.
pub fn render(pieces: &[Piece], save: &mut dyn FnMut(&Binary) -> Result<String, String>) -> String {
    let rendered: Vec<String> = pieces
        .iter()
        .map(|piece| match piece {
            Piece::Text(text) => text.clone(),
            Piece::Binary(binary) => {
                let what = match &binary.uri {
                    Some(uri) => format!("{} {uri}", binary.kind),
                    None => binary.kind.to_string(),
                };
                let size = flemma_tools::truncate::human_size(binary.data.len() as u64);
                match save(binary) {
                    Ok(path) => format!(
                        "[{what}: {}, {size}, saved to {path} (read it with the `read` tool to see it)]",
                        binary.mime
                    ),
                    Err(reason) => format!("[{what}: {}, {size}, not saved: {reason}]", binary.mime),
                }
            }
        })
        .collect();
    rendered.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_save(_: &Binary) -> Result<String, String> {
        Err("no store".into())
    }

    #[test]
    fn a_text_result_is_the_output_exactly() {
        let result =
            call_result(&json!({"content": [{"type": "text", "text": "  two\n\nlines \n"}]}));
        assert!(!result.is_error);
        assert_eq!(render(&result.pieces, &mut no_save), "  two\n\nlines \n");
    }

    #[test]
    fn is_error_is_kept_with_the_servers_text() {
        let result = call_result(
            &json!({"isError": true, "content": [{"type": "text", "text": "no such repo"}]}),
        );
        assert!(result.is_error);
        assert_eq!(render(&result.pieces, &mut no_save), "no such repo");
    }

    #[test]
    fn resources_are_text_with_their_uri() {
        let result = call_result(&json!({"content": [
            {"type": "text", "text": "see:"},
            {"type": "resource", "resource": {"uri": "test://n/1", "mimeType": "text/plain", "text": "milk"}},
            {"type": "resource_link", "uri": "file:///x.md", "name": "x", "mimeType": "text/markdown"},
        ]}));
        assert_eq!(
            render(&result.pieces, &mut no_save),
            "see:\n[resource: test://n/1 (text/plain)]\nmilk\n[resource link: file:///x.md — x (text/markdown)]"
        );
    }

    #[test]
    fn images_are_saved_and_named() {
        let result = call_result(&json!({"content": [
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        ]}));
        let Piece::Binary(binary) = &result.pieces[0] else {
            panic!("a binary piece")
        };
        assert_eq!(binary.extension(), "png");
        assert_eq!(binary.data[..4], [0x89, b'P', b'N', b'G']);
        let mut saved = Vec::new();
        let text = render(&result.pieces, &mut |b| {
            saved.push(b.mime.clone());
            Ok("/store/image.png".into())
        });
        assert_eq!(saved, ["image/png"]);
        assert!(
            text.starts_with("[image: image/png, 8B, saved to /store/image.png"),
            "{text}"
        );
        let text = render(&result.pieces, &mut no_save);
        assert!(text.contains("not saved: no store"), "{text}");
    }

    #[test]
    fn structured_content_stands_in_for_missing_content() {
        let result = call_result(&json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(render(&result.pieces, &mut no_save), "{\"n\":1}");
    }

    #[test]
    fn unknown_content_is_named() {
        let result = call_result(&json!({"content": [{"type": "hologram"}]}));
        assert!(render(&result.pieces, &mut no_save).contains("`hologram`"));
    }

    #[test]
    fn a_listed_tool_becomes_a_spec() {
        let tool = ListedTool::from_json(&json!({
            "name": "get__x", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}
        }))
        .expect("a tool");
        let spec = tool.spec("docs.get__x", "docs");
        assert_eq!(spec.name, "docs.get__x");
        assert!(spec.description.contains("`get__x`"));
        assert_eq!(spec.input_schema["properties"]["a"]["type"], "string");
        assert!(ListedTool::from_json(&json!({"description": "no name"})).is_none());
    }
}
