//! `read`: a text file's lines (with `offset`/`limit`), or an attachment reference for a binary
//! file.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileTypeExt;

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{Capability, ToolSpec, strict_object_schema};

pub const NAME: &str = "read";
/// Bytes sniffed to tell text from binary.
const SNIFF_BYTES: usize = 8192;
/// Lines returned when no `limit` is given.
pub const DEFAULT_LIMIT: u64 = 2000;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "Read a file. Text files give their lines (from `offset`, 1-based, at most \
`limit` lines, default 2000); binary files (images, PDFs) are attached to the conversation."
            .into(),
        input_schema: strict_object_schema(vec![
            (
                "path",
                json!({"type": "string", "description": "File path, relative to the chat's directory or absolute."}),
            ),
            (
                "offset",
                json!({"type": ["integer", "null"], "minimum": 1, "description": "First line to read (1-based)."}),
            ),
            (
                "limit",
                json!({"type": ["integer", "null"], "minimum": 1, "description": "Maximum number of lines."}),
            ),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![Capability::EmitsTemplate],
    }
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let Some(shown) = input.get("path").and_then(Value::as_str) else {
        return Outcome::error("read needs a `path` string");
    };
    let path = match ctx.readable(shown) {
        Ok(path) => path,
        Err(refused) => return Outcome::error(refused),
    };
    let metadata = match std::fs::metadata(&path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Outcome::error(format!("{shown} does not exist. Create it with write"));
        }
        Err(error) => return Outcome::error(format!("{shown} cannot be read: {error}")),
    };
    let kind = metadata.file_type();
    if kind.is_dir() {
        return Outcome::error(format!(
            "{shown} is a directory, not a file; list it with ls"
        ));
    }
    if kind.is_fifo() || kind.is_socket() || kind.is_char_device() || kind.is_block_device() {
        return Outcome::error(format!(
            "{shown} is not a regular file (a FIFO, socket or device); read refuses it because reading could block forever"
        ));
    }
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(error) => return Outcome::error(format!("{shown} cannot be read: {error}")),
    };
    if let Err(refused) = ctx.check_opened(shown, &file) {
        return Outcome::error(refused);
    }
    let mut reader = BufReader::new(file);
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    if let Err(error) = (&mut reader)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
    {
        return Outcome::error(format!("{shown} cannot be read: {error}"));
    }
    if is_binary(&head) {
        let mime = sniff_mime(&head).map(str::to_string).unwrap_or_else(|| {
            mime_guess::from_path(&path)
                .first_raw()
                .unwrap_or("application/octet-stream")
                .to_string()
        });
        // A plain relative path is kept as the model wrote it when it is relative to the chat's
        // folder too; `~/…`, `$VAR/…`, absolute ones and paths under another working directory
        // are written as the resolved path, which the chat's reference reads back exactly. The
        // conversation builder attaches this reference, and no other, because it names the
        // file of the call's `path` (flemma-template's `read_result`).
        let chat_dir = ctx.chat_path.as_deref().and_then(std::path::Path::parent);
        let plain = !shown.starts_with(['/', '~', '$'])
            && chat_dir.is_none_or(|dir| dir == ctx.cwd.as_path());
        let reference = if plain {
            shown.to_string()
        } else {
            path.to_string_lossy().into_owned()
        };
        let mut outcome = Outcome::ok(flemma_syntax::write::file_reference(&reference, &mime));
        outcome.is_error = false;
        return outcome;
    }
    let offset = input
        .get("offset")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1);
    // The window stays inside the truncation limits with room for the notice, so the result
    // is never cut into the store (whose file would hold the window, not the file): when more
    // follows, the notice says where to continue instead.
    let limit = input
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_LIMIT)
        .min(WINDOW_LINES);
    // Stream the file: a huge file is read only up to the requested window (plus a count of
    // what follows is not attempted, so a 2 GB file costs the window, not the whole file).
    // A text file the editor holds is its text (an unsaved buffer included).
    let mut lines: Box<dyn BufRead> = match ctx.editor_reads() {
        Some(editor) if metadata.len() <= crate::context::EDITOR_READ_LIMIT => {
            match editor.read_text(&path, &ctx.cancel) {
                Ok(text) => Box::new(std::io::Cursor::new(text.into_bytes())),
                Err(error) => {
                    return Outcome::error(format!(
                        "{shown} cannot be read by the editor: {error}"
                    ));
                }
            }
        }
        _ => Box::new(BufReader::new(std::io::Cursor::new(head).chain(reader))),
    };
    let window = match read_window(&mut lines, offset, limit, WINDOW_BYTES) {
        Ok(window) => window,
        Err(error) => return Outcome::error(format!("{shown} cannot be read: {error}")),
    };
    let Window {
        mut text,
        lines_before: number,
        taken,
        more,
    } = window;
    if taken == 0 && number < offset && offset > 1 {
        return Outcome::error(format!(
            "{shown} has {number} lines; offset {offset} is past its end"
        ));
    }
    if text.is_empty() && !more {
        return Outcome::ok(format!("{shown} is empty"));
    }
    if more {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let notice = if taken == 0 {
            format!(
                "[Line {offset} is longer than {}; showing its beginning. Continue with offset {}, or read the line with bash (cut -c).]",
                crate::truncate::human_size(WINDOW_BYTES as u64),
                offset + 1
            )
        } else {
            let last = offset + taken - 1;
            format!(
                "[Showing lines {offset}-{last}; more lines follow. Continue with offset {}.]",
                last + 1
            )
        };
        text.push_str(&notice);
    }
    Outcome::ok(text)
}

/// Lines one `read` returns at most: one less than the truncation limit (the notice is a line).
const WINDOW_LINES: u64 = crate::truncate::MAX_LINES as u64 - 1;
/// Bytes one `read` returns at most, leaving room for the notice within the truncation limit.
const WINDOW_BYTES: usize = crate::truncate::MAX_BYTES - 256;

/// Lines `offset..offset+limit` of a reader, holding at most `budget` bytes of text: lines before
/// the window are counted without being kept, and a line with no newline in sight does not grow
/// memory past the budget.
struct Window {
    text: String,
    /// Lines seen before the window started (all lines when the window is past the end).
    lines_before: u64,
    taken: u64,
    more: bool,
}

fn read_window(
    reader: &mut impl BufRead,
    offset: u64,
    limit: u64,
    budget: usize,
) -> std::io::Result<Window> {
    let mut line_number: u64 = 1;
    // Skip to the window.
    while line_number < offset {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(Window {
                text: String::new(),
                lines_before: line_number - 1,
                taken: 0,
                more: false,
            });
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(index) => {
                reader.consume(index + 1);
                line_number += 1;
            }
            None => {
                let n = chunk.len();
                reader.consume(n);
            }
        }
    }
    let mut bytes = Vec::new();
    let mut taken = 0;
    let mut more = false;
    while taken < limit {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            if bytes.last().is_some_and(|b| *b != b'\n') {
                taken += 1;
            }
            break;
        }
        let room = budget.saturating_sub(bytes.len());
        if room == 0 {
            more = true;
            break;
        }
        match chunk.iter().take(room).position(|b| *b == b'\n') {
            Some(index) => {
                bytes.extend_from_slice(&chunk[..=index]);
                reader.consume(index + 1);
                taken += 1;
            }
            None => {
                let n = chunk.len().min(room);
                bytes.extend_from_slice(&chunk[..n]);
                reader.consume(n);
            }
        }
    }
    if taken == limit && !more {
        more = !reader.fill_buf()?.is_empty();
    }
    Ok(Window {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        lines_before: if taken == 0 { line_number - 1 } else { offset },
        taken,
        more,
    })
}

/// Binary when the sniffed bytes hold a NUL or are not UTF-8 (allowing a character cut at the
/// end of the sample).
fn is_binary(head: &[u8]) -> bool {
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(error) => error.error_len().is_some(),
    }
}

/// The MIME type of common binary formats from their magic bytes.
fn sniff_mime(head: &[u8]) -> Option<&'static str> {
    const MAGIC: [(&[u8], &str); 8] = [
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"\x7fELF", "application/x-executable"),
    ];
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, mime)| *mime)
}
