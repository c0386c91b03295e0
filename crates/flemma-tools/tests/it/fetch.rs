//! `fetch_content` against a local HTTP server (std `TcpListener`, one thread per connection):
//! every limit, robots.txt rule, charset, link and table rule of seed `002`, and its error codes.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use flemma_tools::builtin::fetch;
use flemma_tools::context::{Outcome, PathGuard, RunContext};
use serde_json::{Value, json};

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
const MIB: usize = 1024 * 1024;

/// What the server answers for `/robots.txt`.
#[derive(Clone, Copy)]
enum RobotsReply {
    Text(&'static str),
    Status(&'static str),
}

struct Server {
    base: String,
    /// How many times `/robots.txt` was asked for.
    robots_hits: Arc<AtomicUsize>,
    /// Bytes of the 50 MB body the client took, and whether the server is done sending.
    big_sent: Arc<AtomicUsize>,
    big_done: Arc<AtomicBool>,
}

impl Server {
    fn start(robots: RobotsReply) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let server = Server {
            base: format!("http://{addr}"),
            robots_hits: Arc::new(AtomicUsize::new(0)),
            big_sent: Arc::new(AtomicUsize::new(0)),
            big_done: Arc::new(AtomicBool::new(false)),
        };
        let (hits, sent, done) = (
            server.robots_hits.clone(),
            server.big_sent.clone(),
            server.big_done.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (hits, sent, done) = (hits.clone(), sent.clone(), done.clone());
                std::thread::spawn(move || serve(&stream, robots, &hits, &sent, &done));
            }
        });
        server
    }

    fn url(&self, route: &str) -> String {
        format!("{}{route}", self.base)
    }

    /// Waits (at most 20 s) until the big body's sender stopped, and returns what it sent.
    fn big_body_sent(&self) -> usize {
        let start = Instant::now();
        while !self.big_done.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            self.big_done.load(Ordering::SeqCst),
            "the server never stopped sending"
        );
        self.big_sent.load(Ordering::SeqCst)
    }
}

fn respond(mut out: &TcpStream, status: &str, headers: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(body);
}

fn html(out: &TcpStream, body: &str) {
    respond(
        out,
        "200 OK",
        "Content-Type: text/html\r\n",
        body.as_bytes(),
    );
}

fn redirect(out: &TcpStream, to: &str) {
    respond(out, "302 Found", &format!("Location: {to}\r\n"), b"");
}

/// Sends 50 MiB of page, counting what the client accepted, until it hangs up.
fn send_big(mut out: &TcpStream, head: &str, sent: &AtomicUsize, done: &AtomicBool) {
    if out.write_all(head.as_bytes()).is_ok() && out.write_all(b"<html><body><p>").is_ok() {
        let chunk = vec![b'a'; 64 * 1024];
        for _ in 0..(50 * MIB / chunk.len()) {
            if out.write_all(&chunk).is_err() {
                break;
            }
            sent.fetch_add(chunk.len(), Ordering::SeqCst);
        }
    }
    done.store(true, Ordering::SeqCst);
}

fn serve(
    stream: &TcpStream,
    robots: RobotsReply,
    hits: &AtomicUsize,
    sent: &AtomicUsize,
    done: &AtomicBool,
) {
    let mut reader = BufReader::new(stream);
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
    let out = stream;
    if let Some(n) = path
        .strip_prefix("/r/")
        .and_then(|n| n.parse::<usize>().ok())
    {
        return if n == 0 {
            html(out, PAGE)
        } else {
            redirect(out, &format!("/r/{}", n - 1))
        };
    }
    match path.as_str() {
        "/robots.txt" => {
            hits.fetch_add(1, Ordering::SeqCst);
            match robots {
                RobotsReply::Text(t) => respond(
                    out,
                    "200 OK",
                    "Content-Type: text/plain\r\n",
                    t.as_bytes(),
                ),
                RobotsReply::Status(s) => respond(out, s, "", b""),
            }
        }
        "/page" | "/private/x" => html(out, PAGE),
        "/moved" => redirect(out, "/page"),
        "/loop" => redirect(out, "/loop2"),
        "/loop2" => redirect(out, "/loop"),
        "/to-private" => redirect(out, "/private/x"),
        "/empty" => html(out, "<html><script>x()</script><nav>menu</nav></html>"),
        "/json" => respond(out, "200 OK", "Content-Type: application/json\r\n", b"{}"),
        "/text" => respond(out, "200 OK", "Content-Type: text/plain\r\n", b"plain"),
        "/pdf" => respond(
            out,
            "200 OK",
            "Content-Type: application/pdf\r\n",
            b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n",
        ),
        "/png" => respond(
            out,
            "200 OK",
            "Content-Type: image/png\r\n",
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        ),
        "/untyped-binary" => respond(out, "200 OK", "", b"\x00\x01\x02binary"),
        "/untyped-html" => respond(out, "200 OK", "", PAGE.as_bytes()),
        "/latin1-header" => respond(
            out,
            "200 OK",
            "Content-Type: text/html; charset=ISO-8859-1\r\n",
            b"<p>Caf\xe9 cr\xe8me</p>",
        ),
        "/latin1-meta" => respond(
            out,
            "200 OK",
            "Content-Type: text/html\r\n",
            b"<html><head><meta charset=\"windows-1252\"></head><body><p>\x93Caf\xe9\x94</p></body></html>",
        ),
        "/bad-utf8" => respond(
            out,
            "200 OK",
            "Content-Type: text/html; charset=utf-8\r\n",
            b"<p>Caf\xe9</p>",
        ),
        "/go-docs" => redirect(out, "/docs/guide/intro.html"),
        "/docs/guide/intro.html" => html(
            out,
            "<p><a href=\"next.html\">Next</a> <a href=\"../api/\">API</a> \
<a href=\"/top\">Top</a> <img src=\"fig.png\" alt=\"Fig\"> <a href=\"https://other.example/x\">Far</a></p>",
        ),
        "/based" => html(
            out,
            "<html><head><base href=\"https://cdn.example.net/v2/\"></head>\
<body><p><a href=\"page\">Page</a> <img src=\"logo.svg\" alt=\"Logo\"></p></body></html>",
        ),
        "/table" => html(
            out,
            "<table><caption>Sizes</caption><thead><tr><th>Name</th><th>Size</th></tr></thead>\
<tbody><tr><td>a|b</td><td>1<br>KB</td></tr><tr><td><em>c</em></td><td>2</td></tr></tbody></table>",
        ),
        "/spanned" => html(
            out,
            "<table><tr><th>K</th><th>V</th></tr><tr><td rowspan=\"2\">x</td><td>1</td></tr>\
<tr><td>2</td></tr><tr><td colspan=\"2\">wide</td></tr></table>",
        ),
        "/rich" => html(
            out,
            "<ul><li><input type=\"checkbox\" checked> shipped</li><li><input type=\"checkbox\"> later</li></ul>\
<p><del>old</del> new</p>",
        ),
        "/big" => send_big(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n",
            sent,
            done,
        ),
        "/big-declared" => send_big(
            out,
            &format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                50 * MIB + 15
            ),
            sent,
            done,
        ),
        "/slow" => {
            std::thread::sleep(Duration::from_secs(4));
            html(out, PAGE);
        }
        _ => respond(out, "404 Not Found", "", b"no"),
    }
}

/// The pages are served on loopback, which `fetch_content` refuses unless the configuration
/// allows private addresses (`tools.fetch_private_addresses`): these tests allow them.
fn ctx(dir: &Path) -> RunContext {
    let mut ctx = RunContext::new(dir, Arc::new(UnderRoot(dir.to_path_buf())));
    ctx.fetch_private_addresses = true;
    ctx
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the tool with `extra` fields (all others null, as a strict-schema model sends them).
fn call(url: &str, extra: Value, dir: &Path) -> Outcome {
    let mut input = json!({"label": "t", "url": url, "output": null, "baseUrl": null,
        "tables": null, "strikethrough": null, "taskList": null});
    if let (Some(map), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            map.insert(k.clone(), v.clone());
        }
    }
    fetch::run(&ctx(dir), &input)
}

fn get(server: &Server, route: &str) -> Outcome {
    call(&server.url(route), json!({}), tempdir().path())
}

fn allow_all() -> Server {
    Server::start(RobotsReply::Text("User-agent: *\nDisallow: /private\n"))
}

#[test]
fn page_becomes_markdown_without_chrome() {
    let server = allow_all();
    let out = get(&server, "/moved");
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "# Hello\n\nSome **bold** text.\n");
}

#[test]
fn the_callers_runtime_serves_the_fetch_when_it_has_one() {
    // The process's runtime (what flemmad passes): the fetch blocks on it from the tool's
    // thread instead of starting a runtime of its own, several times over.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let server = allow_all();
    let dir = tempdir();
    let mut ctx = ctx(dir.path());
    ctx.runtime = Some(runtime.handle().clone());
    for _ in 0..3 {
        let input = json!({"label": "t", "url": format!("{}/moved", server.base), "output": null,
            "baseUrl": null, "tables": null, "strikethrough": null, "taskList": null});
        let out = std::thread::scope(|scope| {
            scope
                .spawn(|| fetch::run(&ctx, &input))
                .join()
                .unwrap_or_else(|_| panic!("the tool's thread panicked"))
        });
        assert!(!out.is_error, "{}", out.text);
        assert!(out.text.contains("# Hello"), "{}", out.text);
    }
}

#[test]
fn output_file_gets_the_markdown() {
    let server = allow_all();
    let dir = tempdir();
    let out = call(
        &server.url("/page"),
        json!({"output": "notes/page.md"}),
        dir.path(),
    );
    assert_eq!(
        out.text,
        format!(
            "[fetch_content: saved 3 lines of Markdown (29 bytes) from {} to notes/page.md — the content is not shown]",
            server.url("/page")
        )
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/page.md")).unwrap_or_default(),
        "# Hello\n\nSome **bold** text.\n"
    );
    let out = call(
        &server.url("/page"),
        json!({"output": "../x.md"}),
        dir.path(),
    );
    assert!(
        out.text
            .starts_with("[fetch_content: error 1 (conversion) — ../x.md may not be written"),
        "{}",
        out.text
    );
    // No content left: nothing is written.
    let out = call(&server.url("/empty"), json!({"output": "e.md"}), dir.path());
    assert!(
        out.is_error && out.text.contains("nothing saved"),
        "{}",
        out.text
    );
    assert!(!dir.path().join("e.md").exists());
}

#[test]
fn ten_redirections_are_followed_eleven_are_not() {
    let server = allow_all();
    let out = get(&server, "/r/10");
    assert_eq!(out.text, "# Hello\n\nSome **bold** text.\n");
    let out = get(&server, "/r/11");
    assert_eq!(
        out.text,
        format!(
            "[fetch_content: error 2 (input) — more than 10 redirections (last: {})]",
            server.url("/r/0")
        )
    );
}

#[test]
fn redirect_loop_is_input_error() {
    let server = allow_all();
    let out = get(&server, "/loop");
    assert!(out.is_error);
    assert!(
        out.text
            .starts_with("[fetch_content: error 2 (input) — more than 10 redirections"),
        "{}",
        out.text
    );
}

#[test]
fn fifty_megabyte_page_stops_at_the_limit() {
    for route in ["/big", "/big-declared"] {
        let server = allow_all();
        let out = get(&server, route);
        assert_eq!(
            out.text,
            format!(
                "[fetch_content: error 1 (conversion) — {} is larger than 5 MiB]",
                server.url(route)
            )
        );
        // The client hung up near the limit: the rest (tens of MB) was never downloaded, so
        // memory stays flat. Loopback socket buffers hold some MB (about 11 MB seen here).
        let sent = server.big_body_sent();
        assert!(
            sent < 30 * MIB,
            "{route}: the server could send {sent} bytes"
        );
    }
}

#[test]
fn the_fetch_has_a_time_limit() {
    let server = allow_all();
    let dir = tempdir();
    let mut context = ctx(dir.path());
    context.timeout = Duration::from_secs(1);
    let input = json!({"label": "t", "url": server.url("/slow"), "output": null});
    let start = Instant::now();
    let out = fetch::run(&context, &input);
    assert_eq!(
        out.text,
        format!(
            "[fetch_content: error 2 (input) — {} took longer than 1s]",
            server.url("/slow")
        )
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn robots_txt_forbids_the_page_and_redirect_targets() {
    let server = allow_all();
    for route in ["/private/x", "/to-private"] {
        let out = get(&server, route);
        assert_eq!(
            out.text,
            format!(
                "[fetch_content: error 2 (input) — robots.txt of {} forbids {} to flemmad]",
                server.base,
                server.url("/private/x")
            ),
            "{route}"
        );
    }
}

#[test]
fn robots_txt_is_read_once_per_origin() {
    let server = allow_all();
    for route in ["/page", "/moved", "/private/x", "/page"] {
        let _ = get(&server, route);
    }
    assert_eq!(server.robots_hits.load(Ordering::SeqCst), 1);
}

#[test]
fn robots_txt_groups_status_and_absence() {
    let ours = Server::start(RobotsReply::Text(
        "User-agent: *\nAllow: /\n\nUser-agent: flemmad\nDisallow: /page\n",
    ));
    assert!(get(&ours, "/page").text.contains("forbids"));
    let missing = Server::start(RobotsReply::Status("404 Not Found"));
    assert_eq!(
        get(&missing, "/page").text,
        "# Hello\n\nSome **bold** text.\n"
    );
    let broken = Server::start(RobotsReply::Status("503 Service Unavailable"));
    for _ in 0..2 {
        assert_eq!(
            get(&broken, "/page").text,
            format!(
                "[fetch_content: error 2 (input) — robots.txt of {} answered HTTP 503 Service Unavailable]",
                broken.base
            )
        );
    }
    // A failing robots.txt is not cached: the next fetch asks again.
    assert_eq!(broken.robots_hits.load(Ordering::SeqCst), 2);
    assert_eq!(missing.robots_hits.load(Ordering::SeqCst), 1);
}

#[test]
fn a_cancelled_fetch_stops_at_once() {
    let server = allow_all();
    let dir = tempdir();
    let context = ctx(dir.path());
    let cancel = context.cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
    });
    let start = Instant::now();
    let out = fetch::run(&context, &json!({"label": "t", "url": server.url("/slow")}));
    assert_eq!(
        out.text,
        format!(
            "[fetch_content: error 2 (input) — the fetch of {} was cancelled]",
            server.url("/slow")
        )
    );
    assert!(start.elapsed() < Duration::from_secs(2));
    let _ = canceller.join();
}

#[test]
fn unreachable_host_is_input_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let out = call(
        &format!("http://127.0.0.1:{port}/x"),
        json!({}),
        tempdir().path(),
    );
    assert!(
        out.text.starts_with(&format!(
            "[fetch_content: error 2 (input) — robots.txt of http://127.0.0.1:{port} cannot be read"
        )) && out.text.contains("Connection refused"),
        "{}",
        out.text
    );
}

#[test]
fn charset_from_header_or_meta() {
    let server = allow_all();
    assert_eq!(get(&server, "/latin1-header").text, "Café crème\n");
    assert_eq!(get(&server, "/latin1-meta").text, "\u{201c}Café\u{201d}\n");
    assert_eq!(
        get(&server, "/bad-utf8").text,
        format!(
            "[fetch_content: error 1 (conversion) — {} cannot be decoded: the page is not valid UTF-8 (its declared or guessed encoding)]",
            server.url("/bad-utf8")
        )
    );
}

#[test]
fn relative_links_resolve_against_the_final_url_base_href_or_base_url() {
    let server = allow_all();
    let docs = server.url("/docs");
    assert_eq!(
        get(&server, "/go-docs").text,
        format!(
            "[Next]({docs}/guide/next.html) [API]({docs}/api/) [Top]({}) ![Fig]({docs}/guide/fig.png) [Far](https://other.example/x)\n",
            server.url("/top")
        )
    );
    assert_eq!(
        get(&server, "/based").text,
        "[Page](https://cdn.example.net/v2/page) ![Logo](https://cdn.example.net/v2/logo.svg)\n"
    );
    let out = call(
        &server.url("/based"),
        json!({"baseUrl": "https://mirror.example/m/"}),
        tempdir().path(),
    );
    assert_eq!(
        out.text,
        "[Page](https://mirror.example/m/page) ![Logo](https://mirror.example/m/logo.svg)\n"
    );
}

#[test]
fn tables_become_markdown_tables() {
    let server = allow_all();
    assert_eq!(
        get(&server, "/table").text,
        "Sizes\n\n| Name | Size |\n| --- | --- |\n| a\\|b | 1<br>KB |\n| *c* | 2 |\n"
    );
    let kept = get(&server, "/spanned").text;
    assert!(kept.starts_with("<table><tbody><tr><th>K</th>"), "{kept}");
    let out = call(
        &server.url("/spanned"),
        json!({"tables": "flatten"}),
        tempdir().path(),
    );
    assert_eq!(
        out.text,
        "| K | V |\n| --- | --- |\n| x | 1 |\n| x | 2 |\n| wide | wide |\n"
    );
}

#[test]
fn strikethrough_and_task_lists_are_opt_in() {
    let server = allow_all();
    assert_eq!(
        get(&server, "/rich").text,
        "- shipped\n- later\n\nold new\n"
    );
    let out = call(
        &server.url("/rich"),
        json!({"strikethrough": true, "taskList": true}),
        tempdir().path(),
    );
    assert_eq!(out.text, "- [x] shipped\n- [ ] later\n\n~~old~~ new\n");
}

#[test]
fn only_html_is_converted() {
    let server = allow_all();
    for (route, mime) in [
        ("/json", "application/json"),
        ("/text", "text/plain"),
        ("/pdf", "application/pdf"),
        ("/png", "image/png"),
    ] {
        assert_eq!(
            get(&server, route).text,
            format!(
                "[fetch_content: error 1 (conversion) — {} is not an HTML page ({mime}) — fetch_content reads HTML only]",
                server.url(route)
            )
        );
    }
    assert_eq!(
        get(&server, "/untyped-binary").text,
        format!(
            "[fetch_content: error 1 (conversion) — {} is not an HTML page (no Content-Type, and it does not look like HTML)]",
            server.url("/untyped-binary")
        )
    );
    assert_eq!(
        get(&server, "/untyped-html").text,
        "# Hello\n\nSome **bold** text.\n"
    );
}

#[test]
fn other_failures_have_their_codes() {
    let server = allow_all();
    let dir = tempdir();
    assert_eq!(
        get(&server, "/nothing").text,
        format!(
            "[fetch_content: error 2 (input) — {} answered HTTP 404 Not Found]",
            server.url("/nothing")
        )
    );
    assert_eq!(
        get(&server, "/empty").text,
        format!(
            "[fetch_content: {} has no text content once scripts, navigation and ads are removed — nothing saved]",
            server.url("/empty")
        )
    );
    let usage = [
        (
            json!({}),
            "ftp://x.org/a",
            "the scheme ftp: is not supported",
        ),
        (json!({}), "", "the url is empty"),
        (
            json!({"tables": "grid"}),
            "x.org",
            "tables \"grid\" is not known",
        ),
        (
            json!({"baseUrl": "/docs/"}),
            "x.org",
            "baseUrl \"/docs/\" is not an absolute URL",
        ),
    ];
    for (extra, url, reason) in usage {
        let out = call(url, extra, dir.path());
        assert!(
            out.is_error
                && out
                    .text
                    .starts_with(&format!("[fetch_content: error 3 (usage) — {reason}")),
            "{}",
            out.text
        );
    }
}

/// By default (`tools.fetch_private_addresses = false`) loopback is refused before any
/// connection: by literal address (also in its IPv4-mapped IPv6 form) and by name (`localhost`
/// resolves to loopback). The listener counts what reaches it: nothing may. (Redirections are
/// checked by the same function before each request; the address rules are unit tests of
/// `fetch::address`, never tried against real private addresses.)
#[test]
fn loopback_is_refused_before_connecting_unless_allowed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            // The request first (answering before it arrives confuses the client).
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            html(&stream, PAGE);
        }
    });
    let dir = tempdir();
    let strict = RunContext::new(dir.path(), Arc::new(UnderRoot(dir.path().to_path_buf())));
    let input = |url: String| {
        json!({"label": "t", "url": url, "output": null, "baseUrl": null,
            "tables": null, "strikethrough": null, "taskList": null})
    };
    for url in [
        format!("http://127.0.0.1:{port}/page"),
        format!("http://localhost:{port}/page"),
        format!("http://[::ffff:127.0.0.1]:{port}/page"),
    ] {
        let out = fetch::run(&strict, &input(url.clone()));
        assert!(out.is_error, "{url}: {}", out.text);
        assert!(
            out.text.contains("loopback") && out.text.contains("fetch_private_addresses"),
            "{url}: {}",
            out.text
        );
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "nothing reached the listener"
    );
    // Allowed by the configuration: the same page is fetched.
    let out = fetch::run(
        &ctx(dir.path()),
        &input(format!("http://127.0.0.1:{port}/page")),
    );
    assert!(!out.is_error, "{}", out.text);
    assert!(connections.load(Ordering::SeqCst) > 0);
}
