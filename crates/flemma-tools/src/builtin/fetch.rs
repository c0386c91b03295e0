//! The `fetch_content` tool (seed `002`): downloads a web page and returns it as Markdown (or
//! saves it to `output`). robots.txt is honoured before the page and before every redirection
//! target; at most 10 redirections, 30 s for the whole fetch, pages above 5 MiB refused.
//! Failures are `[fetch_content: error N (<class>) — <reason>]`: 1 conversion, 2 input, 3 usage.
//! HTML → Markdown with `htmd`. Declared only when `tools.fetch_content = true`.

use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};

pub const NAME: &str = "fetch_content";
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
pub const MAX_REDIRECTS: usize = 10;
pub const TIME_LIMIT: Duration = Duration::from_secs(30);
/// The robots.txt product token.
const ROBOTS_TOKEN: &str = "flemmad";
const USER_AGENT: &str = concat!("flemmad/", env!("CARGO_PKG_VERSION"));
/// Elements dropped before conversion (scripts, navigation, forms and other chrome).
const REMOVED: [&str; 19] = [
    "script", "style", "noscript", "template", "meta", "link", "base", "title", "svg", "canvas",
    "iframe", "object", "embed", "nav", "aside", "dialog", "button", "select", "textarea",
];

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description:
            "Download a web page and return it as Markdown (scripts, navigation and ads removed), \
or save the Markdown to `output`. robots.txt is honoured; pages above 5 MiB are refused."
                .into(),
        input_schema: strict_object_schema(vec![
            (
                "url",
                json!({"type": "string", "description": "The page (http or https; a missing scheme means https)"}),
            ),
            (
                "output",
                json!({"type": ["string", "null"], "description": "File to save the Markdown to instead of returning it"}),
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

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let url = match parse_url(input.get("url").and_then(Value::as_str).unwrap_or("")) {
        Ok(u) => u,
        Err(e) => return failure(Class::Usage, e),
    };
    let output = input
        .get("output")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return failure(Class::Input, format!("cannot start the HTTP client: {e}")),
    };
    let page = runtime.block_on(async {
        let cancel = ctx.cancel.clone();
        let watch = async move {
            while !cancel.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            r = tokio::time::timeout(TIME_LIMIT.min(ctx.timeout.max(Duration::from_secs(1))), fetch(url.clone())) => {
                r.unwrap_or_else(|_| Err(Fail(Class::Input, format!("the fetch took longer than {}s", TIME_LIMIT.min(ctx.timeout).as_secs()))))
            }
            () = watch => Err(Fail(Class::Input, "cancelled".into())),
        }
    });
    let (final_url, html) = match page {
        Ok(p) => p,
        Err(Fail(class, reason)) => return failure(class, reason),
    };
    let markdown = match to_markdown(&html) {
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
    let Some(output) = output else {
        return Outcome::ok(markdown);
    };
    let path = match ctx.guard.check_write(&ctx.resolve(output)) {
        Ok(p) => p,
        Err(reason) => {
            return failure(
                Class::Conversion,
                format!("{output} may not be written: {reason}"),
            );
        }
    };
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, markdown.as_bytes()));
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

/// GETs `url`, following redirections by hand so robots.txt is asked about each target.
async fn fetch(mut url: Url) -> Result<(Url, String), Fail> {
    // Fails only when a provider is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| Fail(Class::Input, format!("cannot build the HTTP client: {e}")))?;
    let mut robots_seen: Vec<(String, Robots)> = Vec::new();
    for _ in 0..=MAX_REDIRECTS {
        let origin = url.origin().ascii_serialization();
        if !robots_seen.iter().any(|(o, _)| *o == origin) {
            let robots = robots_for(&client, &url).await;
            robots_seen.push((origin.clone(), robots));
        }
        let robots = robots_seen
            .iter()
            .find(|(o, _)| *o == origin)
            .map(|(_, r)| r);
        if let Some(Robots::Forbidden(why)) = robots {
            return Err(Fail(Class::Input, format!("robots.txt of {origin} {why}")));
        }
        if let Some(Robots::Rules(rules)) = robots {
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
        let response = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| Fail(Class::Input, format!("{url} cannot be reached: {e}")))?;
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
            .map(|s| s.to_ascii_lowercase());
        if let Some(ct) = &content_type
            && !(ct.starts_with("text/html") || ct.starts_with("application/xhtml+xml"))
        {
            return Err(Fail(
                Class::Conversion,
                format!("{url} is not an HTML page ({ct})"),
            ));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BYTES as u64)
        {
            return Err(Fail(
                Class::Conversion,
                format!("{url} is larger than 5 MiB"),
            ));
        }
        let body = read_limited(response, &url).await?;
        if content_type.is_none() && !looks_like_html(&body) {
            return Err(Fail(
                Class::Conversion,
                format!("{url} is not an HTML page"),
            ));
        }
        let text = String::from_utf8(body)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        return Ok((url, text));
    }
    Err(Fail(
        Class::Input,
        format!("more than {MAX_REDIRECTS} redirections (last: {url})"),
    ))
}

async fn read_limited(mut response: reqwest::Response, url: &Url) -> Result<Vec<u8>, Fail> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| Fail(Class::Input, format!("{url}: the download broke off: {e}")))?
    {
        if body.len() + chunk.len() > MAX_BYTES {
            return Err(Fail(
                Class::Conversion,
                format!("{url} is larger than 5 MiB"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let head = head.trim_start();
    head.starts_with("<!doctype html") || head.starts_with("<html") || head.contains("<body")
}

fn to_markdown(html: &str) -> std::io::Result<String> {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(REMOVED.to_vec())
        .build();
    let md = converter.convert(html)?;
    let md = md.trim_end();
    Ok(if md.is_empty() {
        String::new()
    } else {
        format!("{md}\n")
    })
}

/// What robots.txt says for one origin.
#[derive(Debug)]
enum Robots {
    Rules(Rules),
    /// A 5xx or unreachable robots.txt forbids everything.
    Forbidden(String),
}

async fn robots_for(client: &reqwest::Client, url: &Url) -> Robots {
    let Ok(robots_url) = url.join("/robots.txt") else {
        return Robots::Rules(Rules::default());
    };
    let response = match client.get(robots_url).send().await {
        Ok(r) => r,
        Err(e) => return Robots::Forbidden(format!("cannot be read ({e})")),
    };
    let status = response.status();
    if status.is_server_error() {
        return Robots::Forbidden(format!("answered HTTP {status}"));
    }
    if !status.is_success() {
        // 4xx (and an unexpected redirect): everything is allowed.
        return Robots::Rules(Rules::default());
    }
    match response.text().await {
        Ok(text) => Robots::Rules(Rules::parse(&text, ROBOTS_TOKEN)),
        Err(e) => Robots::Forbidden(format!("cannot be read ({e})")),
    }
}

/// The `Allow`/`Disallow` rules of the group that applies to us (RFC 9309).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// `(allow, pattern)`.
    rules: Vec<(bool, String)>,
}

impl Rules {
    /// The group naming `token`, else the `*` group.
    pub fn parse(text: &str, token: &str) -> Self {
        let mut ours: Vec<(bool, String)> = Vec::new();
        let mut star: Vec<(bool, String)> = Vec::new();
        let mut found_ours = false;
        let mut agents: Vec<String> = Vec::new();
        let mut in_rules = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim().to_ascii_lowercase();
            let value = value.trim();
            match key.as_str() {
                "user-agent" => {
                    if in_rules {
                        agents.clear();
                        in_rules = false;
                    }
                    agents.push(value.to_ascii_lowercase());
                }
                "allow" | "disallow" => {
                    in_rules = true;
                    if value.is_empty() {
                        continue;
                    }
                    let rule = (key == "allow", value.to_string());
                    if agents.iter().any(|a| a == &token.to_ascii_lowercase()) {
                        found_ours = true;
                        ours.push(rule.clone());
                    }
                    if agents.iter().any(|a| a == "*") {
                        star.push(rule);
                    }
                }
                _ => {}
            }
        }
        Self {
            rules: if found_ours { ours } else { star },
        }
    }

    /// Longest match wins; `Allow` wins a tie; nothing matching allows.
    pub fn allows(&self, path: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            if robots_match(pattern, path) {
                let len = pattern.len();
                best = match best {
                    Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                    _ => Some((len, *allow)),
                };
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// A robots.txt path pattern: a prefix match with `*` for any run and a final `$` for the end.
fn robots_match(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let Some(rest) = path.strip_prefix(parts[0]) else {
        return false;
    };
    let mut rest = rest;
    for (i, part) in parts.iter().enumerate().skip(1) {
        let last = i == parts.len() - 1;
        if last && anchored {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    !anchored || rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

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
