//! Message framing over byte streams (stdio today, the daemon's sockets later).
//!
//! Unlike `lsp_server::Connection::stdio`, a malformed message does not end the connection: it
//! is answered with a JSON-RPC error (`-32700` parse error with `id: null`, or `-32600` invalid
//! request with the message's id when it has one) and reading goes on.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread;

use crossbeam_channel::{Receiver, Sender};
use lsp_server::{Connection, Message};

/// The threads moving bytes; join them after the main loop returns.
#[derive(Debug)]
pub struct IoThreads {
    reader: thread::JoinHandle<io::Result<()>>,
    writer: thread::JoinHandle<io::Result<()>>,
}

impl IoThreads {
    pub fn join(self) -> io::Result<()> {
        let reader = self
            .reader
            .join()
            .map_err(|_| io::Error::other("the reader thread panicked"))?;
        let writer = self
            .writer
            .join()
            .map_err(|_| io::Error::other("the writer thread panicked"))?;
        reader.and(writer)
    }
}

/// A connection over this process's stdin and stdout.
pub fn stdio() -> io::Result<(Connection, IoThreads)> {
    streams(io::stdin(), io::stdout())
}

/// A connection over any pair of byte streams.
pub fn streams<R, W>(input: R, output: W) -> io::Result<(Connection, IoThreads)>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let output = Arc::new(Mutex::new(output));
    let (writer_tx, writer_rx) = crossbeam_channel::bounded::<Message>(0);
    let (reader_tx, reader_rx) = crossbeam_channel::bounded::<Message>(0);
    let writer = {
        let output = Arc::clone(&output);
        thread::Builder::new()
            .name("lsp-writer".into())
            .spawn(move || write_loop(&writer_rx, &output))?
    };
    let reader = thread::Builder::new()
        .name("lsp-reader".into())
        .spawn(move || read_loop(BufReader::new(input), &reader_tx, &output))?;
    Ok((
        Connection {
            sender: writer_tx,
            receiver: reader_rx,
        },
        IoThreads { reader, writer },
    ))
}

fn write_loop<W: Write>(messages: &Receiver<Message>, output: &Mutex<W>) -> io::Result<()> {
    for message in messages {
        // `Message::write` frames the message and adds `"jsonrpc": "2.0"`.
        let mut framed = Vec::new();
        message.write(&mut framed)?;
        let mut out = output
            .lock()
            .map_err(|_| io::Error::other("the output lock is poisoned"))?;
        out.write_all(&framed)?;
        out.flush()?;
    }
    Ok(())
}

fn write_frame<W: Write>(output: &Mutex<W>, body: &[u8]) -> io::Result<()> {
    let mut out = output
        .lock()
        .map_err(|_| io::Error::other("the output lock is poisoned"))?;
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.write_all(body)?;
    out.flush()
}

fn read_loop<R: BufRead, W: Write>(
    mut input: R,
    messages: &Sender<Message>,
    output: &Mutex<W>,
) -> io::Result<()> {
    while let Some(body) = read_frame(&mut input)? {
        match serde_json::from_slice::<Message>(&body) {
            Ok(message) => {
                let is_exit = matches!(&message, Message::Notification(n) if n.method == "exit");
                if messages.send(message).is_err() || is_exit {
                    return Ok(());
                }
            }
            Err(error) => {
                tracing::warn!(%error, "malformed message from the client");
                let reply = malformed_reply(&body, &error);
                write_frame(output, reply.to_string().as_bytes())?;
            }
        }
    }
    Ok(())
}

/// The JSON-RPC error answering a message that could not be read.
fn malformed_reply(body: &[u8], error: &serde_json::Error) -> serde_json::Value {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => serde_json::json!({
            "jsonrpc": "2.0",
            "id": value.get("id").cloned().unwrap_or(serde_json::Value::Null),
            "error": {
                "code": -32600,
                "message": format!("invalid request: {error}; expected a JSON-RPC 2.0 request, notification or response"),
            }
        }),
        Err(_) => serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": -32700,
                "message": format!("parse error: the message is not valid JSON ({error})"),
            }
        }),
    }
}

/// Watches the bytes a client sends, in whatever chunks they come, for the `exit`
/// notification: a byte pipe between an editor and a language server (`flemmad lsp` in front
/// of the daemon) learns from it whether the editor ended its session, or the server went
/// away under it. It passes nothing on and keeps only small bodies (an `exit` is one).
#[derive(Debug, Default)]
pub struct ExitWatch {
    /// The header line being read.
    line: Vec<u8>,
    length: Option<usize>,
    /// Body bytes still to come (`None`: reading headers).
    remaining: Option<usize>,
    /// The body, when it is small enough to be an `exit`.
    body: Option<Vec<u8>>,
    seen: bool,
}

impl ExitWatch {
    /// The largest body that is looked at: an `exit` notification is far smaller.
    const SMALL: usize = 1024;

    /// Takes the next bytes; whether an `exit` notification was among the bytes so far.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() && !self.seen {
            match self.remaining {
                Some(remaining) => {
                    let take = remaining.min(bytes.len());
                    if let Some(body) = &mut self.body {
                        body.extend_from_slice(&bytes[..take]);
                    }
                    bytes = &bytes[take..];
                    self.remaining = Some(remaining - take);
                    if remaining == take {
                        self.remaining = None;
                        self.seen = self.body.take().is_some_and(|body| is_exit(&body));
                    }
                }
                None => {
                    let end = bytes.iter().position(|&b| b == b'\n');
                    let (part, rest) = match end {
                        Some(end) => (&bytes[..=end], &bytes[end + 1..]),
                        None => (bytes, &[][..]),
                    };
                    if self.line.len() < Self::SMALL {
                        self.line.extend_from_slice(part);
                    }
                    bytes = rest;
                    if end.is_some() {
                        self.header_line();
                    }
                }
            }
        }
        self.seen
    }

    fn header_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let header = String::from_utf8_lossy(&line);
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if let Some(length) = self.length.take() {
                self.remaining = Some(length);
                self.body = (length <= Self::SMALL).then(Vec::new);
                if length == 0 {
                    self.remaining = None;
                    self.body = None;
                }
            }
            return;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            self.length = value.trim().parse().ok();
        }
    }
}

fn is_exit(body: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<Message>(body),
        Ok(Message::Notification(notification)) if notification.method == "exit"
    )
}

/// Reads one `Content-Length` framed body; `None` at the end of the input.
fn read_frame<R: BufRead>(input: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut length: Option<usize> = None;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok();
            }
        }
    }
    let Some(length) = length else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a message header has no valid Content-Length",
        ));
    };
    let mut body = vec![0; length];
    input.read_exact(&mut body)?;
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn frames_round_trip_and_headers_are_case_insensitive() {
        let mut input = io::Cursor::new(b"content-length: 2\r\nContent-Type: x\r\n\r\n{}".to_vec());
        assert_eq!(read_frame(&mut input).unwrap().unwrap(), b"{}");
        assert_eq!(read_frame(&mut input).unwrap(), None);
    }

    #[test]
    fn the_exit_notification_is_seen_in_any_chunks_and_nothing_else_counts() {
        let frame = |body: &str| format!("Content-Length: {}\r\n\r\n{body}", body.len());
        let big = format!(
            r#"{{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{{"text":"{}\"method\":\"exit\""}}}}"#,
            "x".repeat(5000)
        );
        let stream = [
            frame(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            frame(&big),
            frame(r#"{"jsonrpc":"2.0","id":2,"method":"shutdown"}"#),
        ]
        .concat();
        let exit = frame(r#"{"jsonrpc":"2.0","method":"exit"}"#);
        for chunk in [1, 7, 100, usize::MAX] {
            let mut watch = ExitWatch::default();
            for piece in stream.as_bytes().chunks(chunk.min(stream.len())) {
                assert!(!watch.feed(piece), "chunks of {chunk}: not an exit");
            }
            let mut seen = false;
            for piece in exit.as_bytes().chunks(chunk.min(exit.len())) {
                seen = watch.feed(piece);
            }
            assert!(seen, "chunks of {chunk}");
        }
        // An `exit` with an id is a request, not the notification.
        let mut watch = ExitWatch::default();
        assert!(!watch.feed(frame(r#"{"jsonrpc":"2.0","id":3,"method":"exit"}"#).as_bytes()));
    }

    #[test]
    fn malformed_json_gets_a_parse_error_with_null_id() {
        let error = serde_json::from_slice::<Message>(b"{nope").unwrap_err();
        let reply = malformed_reply(b"{nope", &error);
        assert_eq!(reply["error"]["code"], -32700);
        assert!(reply["id"].is_null());
    }
}
