//! Helpers shared by the integration tests: a plain-HTTP client and an SSE splitter.
#![allow(dead_code)]

use serde_json::Value;

/// A reqwest client (plain HTTP; the TLS provider is installed only because reqwest's
/// rustls backend wants one at build time).
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .build()
        .expect("build reqwest client")
}

/// What a test looks at in an answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).expect("JSON body")
    }
}

/// POSTs `body` with extra headers and reads the whole answer.
pub async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
    let mut request = client().post(url).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("send request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("read body");
    Answer {
        status,
        headers,
        text,
    }
}

pub async fn get(url: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = client().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("send request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("read body");
    Answer {
        status,
        headers,
        text,
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", self.data))
    }
}

/// Splits an SSE body on `separator`; every event must end with it.
pub fn events(text: &str, separator: &str) -> Vec<Event> {
    assert!(
        text.ends_with(separator),
        "stream does not end with a separator: {text:?}"
    );
    text.split(separator)
        .filter(|chunk| !chunk.is_empty())
        .map(|chunk| {
            let mut name = None;
            let mut data = Vec::new();
            for line in chunk.split('\n') {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = Some(value.to_string());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data.push(value.to_string());
                } else {
                    panic!("unexpected SSE line {line:?} in {chunk:?}");
                }
            }
            Event {
                name,
                data: data.join("\n"),
            }
        })
        .collect()
}
