//! `fetch_content` against a local HTTP server (std `TcpListener`, one thread per connection).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_tools::builtin::fetch;
use flemma_tools::context::{PathGuard, RunContext};
use serde_json::json;

#[derive(Debug)]
struct UnderRoot(PathBuf);
impl PathGuard for UnderRoot {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        if path.starts_with(&self.0) && !path.components().any(|c| c.as_os_str() == "..") {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "{} is outside {}",
                path.display(),
                self.0.display()
            ))
        }
    }
}

const PAGE: &str = "<!doctype html><html><head><title>T</title><script>alert(1)</script></head>\
<body><nav><a href=\"/\">Home</a></nav><h1>Hello</h1><p>Some <strong>bold</strong> text.</p></body></html>";

/// Serves a few fixed routes; returns the base URL.
fn server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    return;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                        break;
                    }
                }
                let path = request.split(' ').nth(1).unwrap_or("/").to_string();
                let mut out = &stream;
                let respond = |out: &mut &std::net::TcpStream,
                               status: &str,
                               headers: &str,
                               body: &[u8]| {
                    let head = format!(
                        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = out.write_all(head.as_bytes());
                    let _ = out.write_all(body);
                };
                match path.as_str() {
                    "/robots.txt" => respond(
                        &mut out,
                        "200 OK",
                        "Content-Type: text/plain\r\n",
                        b"User-agent: *\nDisallow: /private\n",
                    ),
                    "/page" => respond(
                        &mut out,
                        "200 OK",
                        "Content-Type: text/html; charset=utf-8\r\n",
                        PAGE.as_bytes(),
                    ),
                    "/moved" => respond(&mut out, "302 Found", "Location: /page\r\n", b""),
                    "/loop" => respond(&mut out, "302 Found", "Location: /loop2\r\n", b""),
                    "/loop2" => respond(&mut out, "302 Found", "Location: /loop\r\n", b""),
                    "/to-private" => {
                        respond(&mut out, "301 Moved", "Location: /private/x\r\n", b"")
                    }
                    "/private/x" => respond(
                        &mut out,
                        "200 OK",
                        "Content-Type: text/html\r\n",
                        PAGE.as_bytes(),
                    ),
                    "/empty" => respond(
                        &mut out,
                        "200 OK",
                        "Content-Type: text/html\r\n",
                        b"<html><script>x()</script><nav>menu</nav></html>",
                    ),
                    "/json" => respond(
                        &mut out,
                        "200 OK",
                        "Content-Type: application/json\r\n",
                        b"{}",
                    ),
                    "/big" => {
                        // 50 MB, streamed without a Content-Length.
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html><body>");
                        let chunk = vec![b'a'; 1024 * 1024];
                        for _ in 0..50 {
                            if out.write_all(&chunk).is_err() {
                                return;
                            }
                        }
                    }
                    _ => respond(&mut out, "404 Not Found", "", b"no"),
                }
            });
        }
    });
    format!("http://{addr}")
}

fn ctx(dir: &Path) -> RunContext {
    RunContext::new(dir, Arc::new(UnderRoot(dir.to_path_buf())))
}

fn get(base: &str, route: &str, dir: &Path) -> flemma_tools::context::Outcome {
    fetch::run(
        &ctx(dir),
        &json!({"label": "t", "url": format!("{base}{route}"), "output": null}),
    )
}

#[test]
fn page_becomes_markdown_without_chrome() {
    let base = server();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = get(&base, "/moved", dir.path());
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "# Hello\n\nSome **bold** text.\n");
}

#[test]
fn output_file_gets_the_markdown() {
    let base = server();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let input = json!({"label": "t", "url": format!("{base}/page"), "output": "notes/page.md"});
    let out = fetch::run(&ctx(dir.path()), &input);
    assert_eq!(
        out.text,
        format!(
            "[fetch_content: saved 3 lines of Markdown (29 bytes) from {base}/page to notes/page.md — the content is not shown]"
        )
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/page.md")).unwrap_or_default(),
        "# Hello\n\nSome **bold** text.\n"
    );
    let outside = json!({"label": "t", "url": format!("{base}/page"), "output": "../x.md"});
    let out = fetch::run(&ctx(dir.path()), &outside);
    assert!(
        out.text
            .starts_with("[fetch_content: error 1 (conversion) — ../x.md may not be written"),
        "{}",
        out.text
    );
}

#[test]
fn redirect_loop_is_input_error() {
    let base = server();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = get(&base, "/loop", dir.path());
    assert!(out.is_error);
    assert!(
        out.text
            .starts_with("[fetch_content: error 2 (input) — more than 10 redirections"),
        "{}",
        out.text
    );
}

#[test]
fn fifty_megabyte_page_is_refused() {
    let base = server();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = get(&base, "/big", dir.path());
    assert_eq!(
        out.text,
        format!("[fetch_content: error 1 (conversion) — {base}/big is larger than 5 MiB]")
    );
}

#[test]
fn robots_txt_forbids_the_page_and_redirect_targets() {
    let base = server();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for route in ["/private/x", "/to-private"] {
        let out = get(&base, route, dir.path());
        assert_eq!(
            out.text,
            format!(
                "[fetch_content: error 2 (input) — robots.txt of {base} forbids {base}/private/x to flemmad]"
            ),
            "{route}"
        );
    }
}

#[test]
fn other_failures_have_their_codes() {
    let base = server();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        get(&base, "/nothing", dir.path()).text,
        format!("[fetch_content: error 2 (input) — {base}/nothing answered HTTP 404 Not Found]")
    );
    assert_eq!(
        get(&base, "/json", dir.path()).text,
        format!(
            "[fetch_content: error 1 (conversion) — {base}/json is not an HTML page (application/json)]"
        )
    );
    assert_eq!(
        get(&base, "/empty", dir.path()).text,
        format!(
            "[fetch_content: {base}/empty has no text content once scripts, navigation and ads are removed — nothing saved]"
        )
    );
    let out = fetch::run(
        &ctx(dir.path()),
        &json!({"label": "t", "url": "ftp://x.org/a", "output": null}),
    );
    assert!(
        out.text
            .starts_with("[fetch_content: error 3 (usage) — the scheme ftp:"),
        "{}",
        out.text
    );
}
