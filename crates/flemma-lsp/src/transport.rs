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
    fn malformed_json_gets_a_parse_error_with_null_id() {
        let error = serde_json::from_slice::<Message>(b"{nope").unwrap_err();
        let reply = malformed_reply(b"{nope", &error);
        assert_eq!(reply["error"]["code"], -32700);
        assert!(reply["id"].is_null());
    }
}
