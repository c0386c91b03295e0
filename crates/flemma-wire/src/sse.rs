//! A small incremental `text/event-stream` decoder following the WHATWG parsing rules.
//!
//! Lines may end with `\n`, `\r\n` or `\r`, and may be split anywhere across chunks, including
//! inside a UTF-8 sequence (lines are only decoded once complete). Comments (`:`) and unknown
//! fields are ignored, several `data:` lines are joined with `\n`, and one space after the colon
//! is stripped. With [`SseDecoder::with_bare_json`], lines that start a JSON object outside any
//! field (Gemini's mid-stream error objects) are collected by brace counting and delivered as
//! events of their own.

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` name (empty when the event had none).
    pub event: String,
    /// The joined `data:` payload.
    pub data: String,
}

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a leading `\n` in the next chunk belongs to it.
    skip_leading_lf: bool,
    event: String,
    data: String,
    has_data: bool,
    /// Accept bare JSON objects outside `data:` fields.
    bare_json: bool,
    /// The bare JSON object being collected and its state.
    bare: Option<BareJson>,
}

#[derive(Debug, Default)]
struct BareJson {
    text: String,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl BareJson {
    /// Scans `line`, returns true when the object is complete.
    fn scan(&mut self, line: &str) -> bool {
        for byte in line.bytes() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' => self.depth += 1,
                b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(line);
        self.depth == 0
    }
}

impl SseDecoder {
    /// A decoder for standard SSE.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder that also accepts bare JSON objects between events (Gemini).
    pub fn with_bare_json() -> Self {
        Self {
            bare_json: true,
            ..Self::default()
        }
    }

    /// Feeds a chunk and returns the events it completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        self.feed_with(bytes, &mut |event, data| {
            events.push(SseEvent {
                event: event.to_string(),
                data: data.to_string(),
            });
        });
        events
    }

    /// Ends the stream and returns the last events: a final line without terminator and a
    /// final event without blank line are still delivered (servers that close right after the
    /// last `data:` line).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        self.finish_with(&mut |event, data| {
            events.push(SseEvent {
                event: event.to_string(),
                data: data.to_string(),
            });
        });
        events
    }

    /// Feeds a chunk and calls `on_event(event name, data)` for every completed event, without
    /// allocating per event.
    pub fn feed_with(&mut self, mut bytes: &[u8], on_event: &mut dyn FnMut(&str, &str)) {
        if self.skip_leading_lf {
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
            if !bytes.is_empty() {
                self.skip_leading_lf = false;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', bytes) {
            let terminator = bytes[pos];
            if self.line.is_empty() {
                self.process_line(&bytes[..pos], on_event);
            } else {
                self.line.extend_from_slice(&bytes[..pos]);
                let line = std::mem::take(&mut self.line);
                self.process_line(&line, on_event);
                self.line = line;
                self.line.clear();
            }
            bytes = &bytes[pos + 1..];
            if terminator == b'\r' {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.skip_leading_lf = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
    }

    /// [`SseDecoder::finish`] with a callback.
    pub fn finish_with(&mut self, on_event: &mut dyn FnMut(&str, &str)) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, on_event);
        }
        if let Some(bare) = self.bare.take() {
            on_event("", &bare.text);
        }
        self.dispatch(on_event);
    }

    fn process_line(&mut self, raw: &[u8], on_event: &mut dyn FnMut(&str, &str)) {
        let decoded = match std::str::from_utf8(raw) {
            Ok(line) => std::borrow::Cow::Borrowed(line),
            Err(_) => String::from_utf8_lossy(raw),
        };
        let line: &str = &decoded;
        if let Some(bare) = self.bare.as_mut() {
            if bare.scan(line) {
                if let Some(done) = self.bare.take() {
                    on_event("", &done.text);
                }
            }
            return;
        }
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        if self.bare_json && line.starts_with(['{', '[']) {
            let mut bare = BareJson::default();
            if bare.scan(line) {
                on_event("", &bare.text);
            } else {
                self.bare = Some(bare);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.find(':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, on_event: &mut dyn FnMut(&str, &str)) {
        if self.has_data {
            on_event(&self.event, &self.data);
        }
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(decoder: &mut SseDecoder, input: &[u8]) -> Vec<SseEvent> {
        let mut events = decoder.feed(input);
        events.extend(decoder.finish());
        events
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_string(),
            data: data.to_string(),
        }
    }

    #[test]
    fn line_endings_comments_and_multiline_data() {
        let input = b": comment\r\nevent: a\r\ndata: {\r\ndata:  x\r\ndata:\r\ndata: }\r\n\r\nevent: b\rdata:y\r\rdata: z\n\n";
        let events = all(&mut SseDecoder::new(), input);
        assert_eq!(
            events,
            vec![ev("a", "{\n x\n\n}"), ev("b", "y"), ev("", "z")]
        );
    }

    #[test]
    fn split_crlf_and_utf8_across_chunks() {
        let input = "data: Olá\r\n\r\ndata: é\r\n\r\n".as_bytes();
        for split in 0..input.len() {
            let mut decoder = SseDecoder::new();
            let mut events = decoder.feed(&input[..split]);
            events.extend(decoder.feed(&input[split..]));
            events.extend(decoder.finish());
            assert_eq!(events, vec![ev("", "Olá"), ev("", "é")], "split at {split}");
        }
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let events = all(&mut SseDecoder::new(), b"event: ping\n\ndata: 1\n\n");
        assert_eq!(events, vec![ev("", "1")]);
    }

    #[test]
    fn final_event_without_blank_line_is_delivered_at_finish() {
        let events = all(&mut SseDecoder::new(), b"data: last");
        assert_eq!(events, vec![ev("", "last")]);
    }

    #[test]
    fn bare_json_objects_spanning_lines() {
        let input =
            b"data: {\"a\":1}\r\n\r\n{\"error\":{\n  \"message\":\"}{\",\n  \"code\":500}\n}\n";
        let events = all(&mut SseDecoder::with_bare_json(), input);
        assert_eq!(
            events,
            vec![
                ev("", "{\"a\":1}"),
                ev(
                    "",
                    "{\"error\":{\n  \"message\":\"}{\",\n  \"code\":500}\n}"
                )
            ]
        );
    }
}
