//! The `fetch_content` tool (seed `002`): downloads a web page and returns it as Markdown (or
//! saves it to `output`). robots.txt is honoured before the page and before every redirection
//! target (each origin's rules read once and cached for the process, 24 h; a failed read is not
//! cached); at most 10
//! redirections, 30 s for the whole fetch, pages above 5 MiB refused (the download stops there).
//! The charset comes from the BOM, the `Content-Type` header or `<meta>`; HTML → Markdown in
//! [`markdown`]. Failures are `[fetch_content: error N (<class>) — <reason>]`: 1 conversion,
//! 2 input, 3 usage. Declared only when `tools.fetch_content = true`.

pub mod address;
mod charset;
pub mod markdown;
pub mod robots;

use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use self::markdown::Tables;
use self::robots::{Robots, Rules};
use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};

pub const NAME: &str = "fetch_content";
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
pub const MAX_REDIRECTS: usize = 10;
pub const TIME_LIMIT: Duration = Duration::from_secs(30);
/// robots.txt files above this are read up to here (RFC 9309 asks for at least 500 KiB).
const MAX_ROBOTS_BYTES: usize = 512 * 1024;
/// The robots.txt product token.
pub const ROBOTS_TOKEN: &str = "flemmad";
const USER_AGENT: &str = concat!("flemmad/", env!("CARGO_PKG_VERSION"));

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description:
            "Download a web page and return it as Markdown (scripts, navigation and ads removed), \
or save the Markdown to `output`. robots.txt is honoured; only HTML pages; pages above 5 MiB are refused."
                .into(),
        input_schema: strict_object_schema(vec![
            (
                "url",
                json!({"type": "string", "description": "The page (http or https; a missing scheme means https)"}),
            ),
            (
                "output",
                json!({"type": ["string", "null"], "description": "File to save the Markdown to instead of returning it (relative to the working directory)"}),
            ),
            (
                "baseUrl",
                json!({"type": ["string", "null"], "description": "Absolute URL to resolve relative links and images against (default: the page's final URL, or its <base href>)"}),
            ),
            (
                "tables",
                json!({"type": ["string", "null"], "enum": ["html", "flatten", null], "description": "Tables with rowspan/colspan or a nested table: html keeps them as HTML (default), flatten makes a Markdown table"}),
            ),
            (
                "strikethrough",
                json!({"type": ["boolean", "null"], "description": "<del>/<s>/<strike> as ~~text~~ (default false: plain text)"}),
            ),
            (
                "taskList",
                json!({"type": ["boolean", "null"], "description": "List items starting with a checkbox as - [ ] / - [x] (default false: checkbox dropped)"}),
            ),
        ]),
        strict: true,
        is_async: true,
        capabilities: vec![],
    }
}

/// The three failure classes of the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Conversion = 1,
    Input = 2,
    Usage = 3,
}

fn failure(class: Class, reason: impl std::fmt::Display) -> Outcome {
    let name = match class {
        Class::Conversion => "conversion",
        Class::Input => "input",
        Class::Usage => "usage",
    };
    Outcome::error(format!(
        "[fetch_content: error {} ({name}) — {reason}]",
        class as u8
    ))
}

/// `k33g.org` → `https://k33g.org`; `https//x` → `https://x`; only http and https.
fn parse_url(raw: &str) -> Result<Url, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("the url is empty — give the page's address".into());
    }
    let repaired = if let Some(rest) = raw.strip_prefix("https//") {
        format!("https://{rest}")
    } else if let Some(rest) = raw.strip_prefix("http//") {
        format!("http://{rest}")
    } else if raw.contains("://") {
        raw.to_string()
    } else {
        format!("https://{raw}")
    };
    let url = Url::parse(&repaired).map_err(|e| format!("\"{raw}\" is not a URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "the scheme {other}: is not supported — only http and https"
        )),
    }
}

/// The input, checked: everything a usage error (code 3) is about.
struct Request<'a> {
    url: Url,
    output: Option<&'a str>,
    base: Option<Url>,
    tables: Tables,
    strikethrough: bool,
    task_list: bool,
}

fn parse_input(input: &Value) -> Result<Request<'_>, String> {
    let text = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    let flag = |key: &str| input.get(key).and_then(Value::as_bool).unwrap_or(false);
    let url = parse_url(text("url").unwrap_or(""))?;
    let base = match text("baseUrl") {
        None => None,
        Some(raw) => match Url::parse(raw.trim()) {
            Ok(u) if u.has_host() => Some(u),
            _ => {
                return Err(format!(
                    "baseUrl \"{raw}\" is not an absolute URL — give one like https://example.org/docs/"
                ));
            }
        },
    };
    let tables = match text("tables") {
        None | Some("html") => Tables::Html,
        Some("flatten") => Tables::Flatten,
        Some(other) => {
            return Err(format!(
                "tables \"{other}\" is not known — use \"html\" or \"flatten\""
            ));
        }
    };
    Ok(Request {
        url,
        output: text("output"),
        base,
        tables,
        strikethrough: flag("strikethrough"),
        task_list: flag("taskList"),
    })
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let request = match parse_input(input) {
        Ok(r) => r,
        Err(e) => return failure(Class::Usage, e),
    };
    let limit = TIME_LIMIT.min(ctx.timeout.max(Duration::from_secs(1)));
    let fetched = async {
        let cancel = ctx.cancel.clone();
        let watch = async move {
            while !cancel.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            r = tokio::time::timeout(limit, fetch(request.url.clone(), ctx.fetch_private_addresses)) => {
                r.unwrap_or_else(|_| Err(Fail(Class::Input, format!(
                    "{} took longer than {}s", request.url, limit.as_secs()
                ))))
            }
            () = watch => Err(Fail(Class::Input, format!("the fetch of {} was cancelled", request.url))),
        }
    };
    // The process's runtime when the caller has one (blocked on from this tool's thread); else
    // one for this call.
    let page = match &ctx.runtime {
        Some(runtime) => runtime.block_on(fetched),
        None => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(fetched),
            Err(e) => return failure(Class::Input, format!("cannot start the HTTP client: {e}")),
        },
    };
    let (final_url, html) = match page {
        Ok(p) => p,
        Err(Fail(class, reason)) => return failure(class, reason),
    };
    let options = markdown::Options {
        page: final_url.clone(),
        base: request.base,
        tables: request.tables,
        strikethrough: request.strikethrough,
        task_list: request.task_list,
    };
    let markdown = match markdown::convert(&html, &options) {
        Ok(m) => m,
        Err(e) => {
            return failure(
                Class::Conversion,
                format!("the page cannot be converted: {e}"),
            );
        }
    };
    if markdown.trim().is_empty() {
        return Outcome::error(format!(
            "[fetch_content: {final_url} has no text content once scripts, navigation and ads are removed — nothing saved]"
        ));
    }
    let Some(output) = request.output else {
        return Outcome::ok(markdown);
    };
    let path = match ctx
        .resolve(output)
        .and_then(|path| ctx.guard.check_write(&path))
    {
        Ok(p) => p,
        Err(reason) => {
            return failure(
                Class::Conversion,
                format!("{output} may not be written: {reason}"),
            );
        }
    };
    let written = crate::nofollow::replace_file(&path, markdown.as_bytes());
    if let Err(e) = written {
        return failure(
            Class::Conversion,
            format!("{output} cannot be written: {e}"),
        );
    }
    Outcome::ok(format!(
        "[fetch_content: saved {} lines of Markdown ({} bytes) from {final_url} to {output} — the content is not shown]",
        markdown.lines().count(),
        markdown.len()
    ))
}

struct Fail(Class, String);

/// GETs `url`, following redirections by hand so robots.txt is asked about each target; with
/// `allow_private` false every target's addresses must be public ([`address`]).
async fn fetch(mut url: Url, allow_private: bool) -> Result<(Url, String), Fail> {
    // Fails only when a provider is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(USER_AGENT);
    if let Some(resolver) = address::resolver(allow_private) {
        builder = builder.dns_resolver(resolver);
    }
    let client = builder
        .build()
        .map_err(|e| Fail(Class::Input, format!("cannot build the HTTP client: {e}")))?;
    for _ in 0..=MAX_REDIRECTS {
        if !allow_private {
            address::check_target(&url)
                .await
                .map_err(|reason| Fail(Class::Input, reason))?;
        }
        let origin = url.origin().ascii_serialization();
        let robots = match robots::cached(&origin) {
            Some(r) => r,
            None => {
                let r = robots_for(&url, allow_private).await;
                // A site that was down or failing is asked again next time, not shut out a day.
                if matches!(r, Robots::Rules(_)) {
                    robots::remember(&origin, &r);
                }
                r
            }
        };
        match &robots {
            Robots::Forbidden(why) => {
                return Err(Fail(Class::Input, format!("robots.txt of {origin} {why}")));
            }
            Robots::Rules(rules) => {
                let target = match url.query() {
                    Some(q) => format!("{}?{q}", url.path()),
                    None => url.path().to_string(),
                };
                if !rules.allows(&target) {
                    return Err(Fail(
                        Class::Input,
                        format!("robots.txt of {origin} forbids {url} to {ROBOTS_TOKEN}"),
                    ));
                }
            }
        }
        let response = client.get(url.clone()).send().await.map_err(|e| {
            Fail(
                Class::Input,
                format!("{url} cannot be reached: {}", causes(&e)),
            )
        })?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    Fail(
                        Class::Input,
                        format!("{url} answered {status} without a Location"),
                    )
                })?;
            url = url.join(location).map_err(|e| {
                Fail(
                    Class::Input,
                    format!("{url} redirects to an invalid URL: {e}"),
                )
            })?;
            continue;
        }
        if !status.is_success() {
            return Err(Fail(Class::Input, format!("{url} answered HTTP {status}")));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(ct) = &content_type {
            let mime = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if mime != "text/html" && mime != "application/xhtml+xml" {
                return Err(Fail(
                    Class::Conversion,
                    format!("{url} is not an HTML page ({mime}) — fetch_content reads HTML only"),
                ));
            }
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BYTES as u64)
        {
            return Err(too_large(&url));
        }
        let body = read_limited(response, &url, MAX_BYTES)
            .await?
            .ok_or_else(|| too_large(&url))?;
        if content_type.is_none() && !looks_like_html(&body) {
            return Err(Fail(
                Class::Conversion,
                format!(
                    "{url} is not an HTML page (no Content-Type, and it does not look like HTML)"
                ),
            ));
        }
        let text = charset::decode(&body, content_type.as_deref())
            .map_err(|e| Fail(Class::Conversion, format!("{url} cannot be decoded: {e}")))?;
        return Ok((url, text));
    }
    Err(Fail(
        Class::Input,
        format!("more than {MAX_REDIRECTS} redirections (last: {url})"),
    ))
}

/// An error with its causes (reqwest's own text stops at "error sending request").
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

fn too_large(url: &Url) -> Fail {
    Fail(Class::Conversion, format!("{url} is larger than 5 MiB"))
}

/// The body, or `None` as soon as it passes `limit` (the rest is never downloaded).
async fn read_limited(
    mut response: reqwest::Response,
    url: &Url,
    limit: usize,
) -> Result<Option<Vec<u8>>, Fail> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        Fail(
            Class::Input,
            format!("{url}: the download broke off: {}", causes(&e)),
        )
    })? {
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let head = head.trim_start_matches('\u{feff}').trim_start();
    head.starts_with("<!doctype html") || head.starts_with("<html") || head.contains("<body")
}

/// robots.txt of `url`'s origin, its own redirections followed (up to 5, RFC 9309).
async fn robots_for(url: &Url, allow_private: bool) -> Robots {
    let Ok(robots_url) = url.join("/robots.txt") else {
        return Robots::Rules(Rules::default());
    };
    let redirections = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 {
            return attempt.error("more than 5 redirections");
        }
        match address::check_literal(attempt.url()) {
            Err(reason) if !allow_private => attempt.error(reason),
            _ => attempt.follow(),
        }
    });
    let mut builder = reqwest::Client::builder()
        .redirect(redirections)
        .user_agent(USER_AGENT);
    if let Some(resolver) = address::resolver(allow_private) {
        builder = builder.dns_resolver(resolver);
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => return Robots::Forbidden(format!("cannot be read ({e})")),
    };
    let response = match client.get(robots_url).send().await {
        Ok(r) => r,
        Err(e) => return Robots::Forbidden(format!("cannot be read ({})", causes(&e))),
    };
    let status = response.status();
    if status.is_server_error() {
        return Robots::Forbidden(format!("answered HTTP {status}"));
    }
    if !status.is_success() {
        // 4xx (and too many redirections): everything is allowed.
        return Robots::Rules(Rules::default());
    }
    let mut body = Vec::new();
    let mut response = response;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk);
                if body.len() >= MAX_ROBOTS_BYTES {
                    body.truncate(MAX_ROBOTS_BYTES);
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => return Robots::Forbidden(format!("cannot be read ({})", causes(&e))),
        }
    }
    Robots::Rules(Rules::parse(&String::from_utf8_lossy(&body), ROBOTS_TOKEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::robots::Rules;

    #[test]
    fn robots_longest_match_and_tie() {
        let r = Rules::parse(
            "User-agent: *\nDisallow: /private\nAllow: /private/open\nDisallow: /*.pdf$\n\nUser-agent: other\nDisallow: /\n",
            "flemmad",
        );
        assert!(!r.allows("/private/x"));
        assert!(r.allows("/private/open/x"));
        assert!(!r.allows("/doc/a.pdf"));
        assert!(r.allows("/doc/a.pdf?x"));
        assert!(r.allows("/"));
        let ours = Rules::parse(
            "User-agent: *\nDisallow: /\n\nUser-agent: flemmad\nAllow: /\n",
            "flemmad",
        );
        assert!(ours.allows("/anything"));
    }

    #[test]
    fn urls_are_repaired_or_refused() {
        assert_eq!(
            parse_url("k33g.org").map(|u| u.to_string()),
            Ok("https://k33g.org/".into())
        );
        assert_eq!(
            parse_url("https//k33g.org/a").map(|u| u.to_string()),
            Ok("https://k33g.org/a".into())
        );
        assert!(parse_url("ftp://x.org").is_err());
        assert!(parse_url("  ").is_err());
    }
}
