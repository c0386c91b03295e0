//! HTML → Markdown for `fetch_content` (seed `002`): the page is parsed by the HTML5 parser
//! (through `htmd`), cleaned here (chrome removed, links and image sources made absolute,
//! attributes cut down to the few the conversion reads), then converted by `htmd` with our
//! handlers for tables, strikethrough, task-list checkboxes, emphasis and rules.

use std::rc::Rc;

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::options::{BrStyle, BulletListMarker, CodeBlockFence, CodeBlockStyle, HrStyle};
use htmd::{Element, HtmlToMarkdown};
use html5ever::serialize::{SerializeOpts, TraversalScope, serialize};
use html5ever::tendril::StrTendril;
use markup5ever_rcdom::{Node, NodeData, SerializableHandle};
use reqwest::Url;

/// Elements dropped with everything inside (scripts, navigation, forms and other chrome).
const REMOVED: [&str; 19] = [
    "script", "style", "noscript", "template", "meta", "link", "base", "title", "svg", "canvas",
    "iframe", "object", "embed", "nav", "aside", "dialog", "button", "select", "textarea",
];
/// ARIA roles of page chrome.
const CHROME_ROLES: [&str; 6] = [
    "navigation",
    "banner",
    "complementary",
    "search",
    "contentinfo",
    "dialog",
];
/// Words of a `class` or `id` (split at whitespace, `-` and `_`) that mark chrome.
const CHROME_WORDS: [&str; 30] = [
    "ad",
    "ads",
    "advert",
    "adverts",
    "advertisement",
    "sponsor",
    "sponsored",
    "promo",
    "cookie",
    "cookies",
    "consent",
    "gdpr",
    "newsletter",
    "subscribe",
    "popup",
    "modal",
    "share",
    "sharing",
    "social",
    "breadcrumb",
    "breadcrumbs",
    "nav",
    "navbar",
    "navigation",
    "menu",
    "sidebar",
    "skiplink",
    "skiplinks",
    "skipnav",
    "banner-ad",
];
/// Classes of text meant for screen readers only.
const SCREEN_READER_CLASSES: [&str; 3] = ["sr-only", "visually-hidden", "screen-reader-text"];
/// An element matched by class or id is kept when it holds one of these.
const CONTENT_TAGS: [&str; 3] = ["main", "article", "h1"];

/// What to do with a table that has `rowspan`/`colspan` or a nested table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// Keep it as (cleaned) raw HTML.
    Html,
    /// A GFM table, a spanned cell copied into every slot it covers.
    Flatten,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// The page's final URL (after redirections).
    pub page: Url,
    /// `baseUrl`: overrides the page URL and any `<base href>`.
    pub base: Option<Url>,
    pub tables: Tables,
    pub strikethrough: bool,
    pub task_list: bool,
}

/// The Markdown of `html`, ending with exactly one newline; empty when nothing is left.
pub fn convert(html: &str, options: &Options) -> std::io::Result<String> {
    let converter = converter(options);
    let tree = converter.html_to_tree(html)?;
    let base = options.base.clone().unwrap_or_else(|| {
        base_href(&tree)
            .and_then(|href| options.page.join(&href).ok())
            .unwrap_or_else(|| options.page.clone())
    });
    let cleaner = Cleaner {
        base,
        task_list: options.task_list,
    };
    cleaner.clean(&tree, false);
    let markdown = converter.tree_to_markdown(&tree);
    let markdown = markdown.trim_end();
    Ok(if markdown.trim().is_empty() {
        String::new()
    } else {
        format!("{markdown}\n")
    })
}

fn converter(options: &Options) -> HtmlToMarkdown {
    let tables = options.tables;
    let strikethrough = options.strikethrough;
    HtmlToMarkdown::builder()
        .options(htmd::options::Options {
            hr_style: HrStyle::Dashes,
            br_style: BrStyle::Backslash,
            bullet_list_marker: BulletListMarker::Dash,
            ul_bullet_spacing: 1,
            ol_number_spacing: 1,
            code_block_style: CodeBlockStyle::Fenced,
            code_block_fence: CodeBlockFence::Backticks,
            ..htmd::options::Options::default()
        })
        .add_handler(vec!["table"], move |h: &dyn Handlers, e: Element| {
            table(h, &e, tables)
        })
        .add_handler(
            vec!["del", "s", "strike"],
            move |h: &dyn Handlers, e: Element| {
                let inner = h.walk_children(e.node).content;
                Some(if strikethrough && !inner.trim().is_empty() {
                    wrap_inline(&inner, "~~").into()
                } else {
                    inner.into()
                })
            },
        )
        .add_handler(vec!["em", "i"], |h: &dyn Handlers, e: Element| {
            Some(wrap_inline(&h.walk_children(e.node).content, "*").into())
        })
        .add_handler(vec!["kbd", "samp", "tt"], |_: &dyn Handlers, e: Element| {
            Some(code_span(&text_of(e.node)).into())
        })
        .add_handler(vec!["hr"], |_: &dyn Handlers, _: Element| {
            Some("\n\n---\n\n".into())
        })
        .add_handler(vec!["input"], |_: &dyn Handlers, e: Element| {
            // Only task-list checkboxes survive cleaning.
            let checked = e.attrs.iter().any(|a| &*a.name.local == "checked");
            Some(if checked { "[x] " } else { "[ ] " }.into())
        })
        .build()
}

/// An inline code span whose backtick run is longer than any inside the text.
fn code_span(text: &str) -> String {
    let text = text.replace('\n', " ");
    if text.trim().is_empty() {
        return text;
    }
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// `marker` around the text, its surrounding whitespace left outside (`*a*` not `* a *`).
fn wrap_inline(inner: &str, marker: &str) -> String {
    let text = inner.trim();
    if text.is_empty() {
        return inner.to_string();
    }
    let lead = &inner[..inner.len() - inner.trim_start().len()];
    let trail = &inner[inner.trim_end().len()..];
    format!("{lead}{marker}{text}{marker}{trail}")
}

fn tag(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

fn attr(node: &Node, key: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == key)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

fn children(node: &Node) -> Vec<Rc<Node>> {
    node.children.borrow().clone()
}

fn has_descendant(node: &Node, tags: &[&str]) -> bool {
    node.children
        .borrow()
        .iter()
        .any(|c| tag(c).is_some_and(|t| tags.contains(&t)) || has_descendant(c, tags))
}

fn text_of(node: &Node) -> String {
    let mut out = String::new();
    collect_text(node, &mut out);
    out
}

fn collect_text(node: &Node, out: &mut String) {
    if let NodeData::Text { contents } = &node.data {
        out.push_str(&contents.borrow());
    }
    for child in node.children.borrow().iter() {
        collect_text(child, out);
    }
}

fn text_node(text: &str) -> Rc<Node> {
    Node::new(NodeData::Text {
        contents: std::cell::RefCell::new(StrTendril::from(text)),
    })
}

/// The first `<base href>` of the document.
fn base_href(node: &Node) -> Option<String> {
    if tag(node) == Some("base")
        && let Some(href) = attr(node, "href")
    {
        return Some(href);
    }
    node.children.borrow().iter().find_map(|c| base_href(c))
}

enum Treatment {
    Keep,
    Drop,
    /// Stands in for the element (a `javascript:` link's text, a `data:` image's alt).
    Replace(Vec<Rc<Node>>),
}

struct Cleaner {
    base: Url,
    task_list: bool,
}

impl Cleaner {
    fn clean(&self, node: &Rc<Node>, in_main: bool) {
        let mut kept: Vec<Rc<Node>> = Vec::new();
        for child in children(node) {
            match self.treatment(node, &child, &kept, in_main) {
                Treatment::Drop => {}
                Treatment::Keep => {
                    let main_here = in_main || matches!(tag(&child), Some("article" | "main"));
                    self.trim_attributes(&child);
                    self.clean(&child, main_here);
                    kept.push(child);
                }
                Treatment::Replace(nodes) => {
                    for n in nodes {
                        self.clean(&n, in_main);
                        kept.push(n);
                    }
                }
            }
        }
        for child in &kept {
            child.parent.set(Some(Rc::downgrade(node)));
        }
        *node.children.borrow_mut() = kept;
    }

    fn treatment(
        &self,
        parent: &Node,
        node: &Rc<Node>,
        before: &[Rc<Node>],
        in_main: bool,
    ) -> Treatment {
        let tag = match &node.data {
            NodeData::Comment { .. } | NodeData::ProcessingInstruction { .. } => {
                return Treatment::Drop;
            }
            NodeData::Element { name, .. } => name.local.to_string(),
            _ => return Treatment::Keep,
        };
        if REMOVED.contains(&tag.as_str()) || (tag == "footer" && !in_main) {
            return Treatment::Drop;
        }
        if tag == "input" {
            let checkbox = attr(node, "type").is_some_and(|t| t.eq_ignore_ascii_case("checkbox"));
            let starts_item = tag_is(parent, "li")
                && before.iter().all(|b| {
                    matches!(&b.data, NodeData::Text { contents } if contents.borrow().trim().is_empty())
                });
            return if checkbox && self.task_list && starts_item {
                Treatment::Keep
            } else {
                Treatment::Drop
            };
        }
        if attr(node, "role").is_some_and(|r| CHROME_ROLES.contains(&r.trim()))
            || attr(node, "aria-hidden").is_some_and(|v| v.trim() == "true")
            || attr(node, "hidden").is_some()
        {
            return Treatment::Drop;
        }
        let class = attr(node, "class").unwrap_or_default().to_ascii_lowercase();
        if class
            .split_whitespace()
            .any(|c| SCREEN_READER_CLASSES.contains(&c))
        {
            return Treatment::Drop;
        }
        let id = attr(node, "id").unwrap_or_default().to_ascii_lowercase();
        let chrome = class
            .split_whitespace()
            .chain(id.split_whitespace())
            .any(|name| {
                CHROME_WORDS.contains(&name)
                    || name
                        .split(['-', '_'])
                        .any(|word| CHROME_WORDS.contains(&word))
            });
        if chrome && !CONTENT_TAGS.contains(&tag.as_str()) && !has_descendant(node, &CONTENT_TAGS) {
            return Treatment::Drop;
        }
        match tag.as_str() {
            "a" => self.link(node),
            "img" => self.image(node),
            _ => Treatment::Keep,
        }
    }

    fn link(&self, node: &Rc<Node>) -> Treatment {
        let Some(href) = attr(node, "href") else {
            return Treatment::Keep;
        };
        if href
            .trim_start()
            .get(..11)
            .is_some_and(|s| s.eq_ignore_ascii_case("javascript:"))
        {
            return Treatment::Replace(children(node));
        }
        let absolute = self.absolute(&href);
        set_attr(node, "href", &absolute);
        if text_of(node).trim().is_empty() && !has_descendant(node, &["img"]) {
            *node.children.borrow_mut() = vec![text_node(&absolute)];
        }
        Treatment::Keep
    }

    fn image(&self, node: &Rc<Node>) -> Treatment {
        let Some(src) = attr(node, "src") else {
            return Treatment::Drop;
        };
        if src
            .trim_start()
            .get(..5)
            .is_some_and(|s| s.eq_ignore_ascii_case("data:"))
        {
            return match attr(node, "alt").filter(|a| !a.trim().is_empty()) {
                Some(alt) => Treatment::Replace(vec![text_node(&alt)]),
                None => Treatment::Drop,
            };
        }
        set_attr(node, "src", &self.absolute(&src));
        Treatment::Keep
    }

    fn absolute(&self, reference: &str) -> String {
        self.base
            .join(reference.trim())
            .map_or_else(|_| reference.to_string(), String::from)
    }

    /// Only the attributes the conversion reads survive (seed `002`).
    fn trim_attributes(&self, node: &Node) {
        let NodeData::Element { name, attrs, .. } = &node.data else {
            return;
        };
        let tag: &str = &name.local;
        attrs.borrow_mut().retain_mut(|a| {
            let key: &str = &a.name.local;
            match (tag, key) {
                ("a", "href")
                | ("img", "src" | "alt")
                | ("td" | "th", "colspan" | "rowspan")
                | ("ol", "start")
                | ("input", "type" | "checked") => true,
                ("pre" | "code", "class") => {
                    let languages: Vec<&str> = a
                        .value
                        .split_whitespace()
                        .filter(|w| w.starts_with("language-") || w.starts_with("lang-"))
                        .collect();
                    let kept = languages.join(" ");
                    a.value = StrTendril::from(kept.as_str());
                    !kept.is_empty()
                }
                _ => false,
            }
        });
    }
}

fn tag_is(node: &Node, name: &str) -> bool {
    tag(node) == Some(name)
}

fn set_attr(node: &Node, key: &str, value: &str) {
    if let NodeData::Element { attrs, .. } = &node.data {
        for a in attrs.borrow_mut().iter_mut() {
            if &*a.name.local == key {
                a.value = StrTendril::from(value);
            }
        }
    }
}

fn span(cell: &Node, key: &str) -> usize {
    attr(cell, key)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, 1000)
}

fn table(handlers: &dyn Handlers, element: &Element, mode: Tables) -> Option<HandlerResult> {
    let mut caption = String::new();
    let mut rows: Vec<Rc<Node>> = Vec::new();
    for child in children(element.node) {
        match tag(&child) {
            Some("caption") => caption = cell_text(handlers, &child),
            Some("thead" | "tbody" | "tfoot") => {
                rows.extend(children(&child).into_iter().filter(|r| tag_is(r, "tr")))
            }
            Some("tr") => rows.push(child),
            _ => {}
        }
    }
    let cells = |row: &Rc<Node>| -> Vec<Rc<Node>> {
        children(row)
            .into_iter()
            .filter(|c| matches!(tag(c), Some("td" | "th")))
            .collect()
    };
    let spanned = rows.iter().any(|r| {
        cells(r)
            .iter()
            .any(|c| span(c, "rowspan") > 1 || span(c, "colspan") > 1)
    });
    if (spanned || has_descendant(element.node, &["table"])) && mode == Tables::Html {
        let mut html = Vec::new();
        let opts = SerializeOpts {
            traversal_scope: TraversalScope::IncludeNode,
            ..SerializeOpts::default()
        };
        serialize(
            &mut html,
            &SerializableHandle::from(element.node.clone()),
            opts,
        )
        .ok()?;
        return Some(format!("\n\n{}\n\n", String::from_utf8_lossy(&html)).into());
    }
    // Rows of text, spans copied into every slot; `carry[col]` = (rows left, text).
    let mut grid: Vec<Vec<String>> = Vec::new();
    let mut carry: Vec<Option<(usize, String)>> = Vec::new();
    for row in &rows {
        let mut line: Vec<String> = Vec::new();
        let take_carried = |line: &mut Vec<String>, carry: &mut Vec<Option<(usize, String)>>| {
            while let Some(Some((left, text))) = carry.get_mut(line.len()) {
                line.push(text.clone());
                *left -= 1;
                if *left == 0 {
                    carry[line.len() - 1] = None;
                }
            }
        };
        for cell in cells(row) {
            take_carried(&mut line, &mut carry);
            let text = cell_text(handlers, &cell);
            let rowspan = span(&cell, "rowspan");
            for _ in 0..span(&cell, "colspan") {
                if rowspan > 1 {
                    if carry.len() <= line.len() {
                        carry.resize(line.len() + 1, None);
                    }
                    carry[line.len()] = Some((rowspan - 1, text.clone()));
                }
                line.push(text.clone());
            }
        }
        take_carried(&mut line, &mut carry);
        if !line.is_empty() {
            grid.push(line);
        }
    }
    let width = grid.iter().map(Vec::len).max().unwrap_or(0);
    if width == 0 {
        return Some(handlers.walk_children(element.node).content.into());
    }
    let format_row = |row: &[String]| {
        let mut out = String::from("|");
        for i in 0..width {
            out.push(' ');
            out.push_str(row.get(i).map_or("", String::as_str));
            out.push_str(" |");
        }
        out
    };
    let mut out = String::from("\n\n");
    if !caption.is_empty() {
        out.push_str(&caption);
        out.push_str("\n\n");
    }
    out.push_str(&format_row(&grid[0]));
    out.push('\n');
    out.push_str(&format_row(&vec!["---".to_string(); width]));
    for row in &grid[1..] {
        out.push('\n');
        out.push_str(&format_row(row));
    }
    out.push_str("\n\n");
    Some(out.into())
}

/// A cell's Markdown on one line: line breaks become `<br>`, `|` is escaped.
fn cell_text(handlers: &dyn Handlers, cell: &Rc<Node>) -> String {
    let content = handlers.walk_children(cell).content;
    let lines: Vec<&str> = content
        .split('\n')
        .map(|l| l.trim().trim_end_matches('\\').trim_end())
        .filter(|l| !l.is_empty())
        .collect();
    let mut out = String::new();
    let joined = lines.join("<br>");
    let mut escaped = false;
    for c in joined.chars() {
        if c == '|' && !escaped {
            out.push('\\');
        }
        escaped = c == '\\' && !escaped;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(html: &str) -> String {
        md_with(html, Tables::Html, false, false)
    }

    fn md_with(html: &str, tables: Tables, strikethrough: bool, task_list: bool) -> String {
        let page =
            Url::parse("https://example.org/docs/page.html").unwrap_or_else(|e| panic!("{e}"));
        convert(
            html,
            &Options {
                page,
                base: None,
                tables,
                strikethrough,
                task_list,
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn links_and_images_are_absolute() {
        assert_eq!(
            md(
                "<p><a href=\"other.html\">Other</a> <a href=\"/root\">Root</a> <img src=\"i.png\" alt=\"I\"></p>"
            ),
            "[Other](https://example.org/docs/other.html) [Root](https://example.org/root) ![I](https://example.org/docs/i.png)\n"
        );
        assert_eq!(
            md(
                "<head><base href=\"https://cdn.example.net/v2/\"></head><p><a href=\"x\">X</a></p>"
            ),
            "[X](https://cdn.example.net/v2/x)\n"
        );
        assert_eq!(
            md(
                "<p><a href=\"javascript:void(0)\">Click</a> <img src=\"data:image/png;base64,AA\" alt=\"dot\"></p>"
            ),
            "Click dot\n"
        );
    }

    #[test]
    fn chrome_is_removed_content_kept() {
        let page = "<body><div class=\"cookie-banner\">Accept cookies</div>\
<div role=\"navigation\">Menu</div><span aria-hidden=\"true\">x</span><p hidden>h</p>\
<span class=\"sr-only\">skip</span><!-- c --><footer>f</footer>\
<div id=\"sidebar\"><article><h1>Kept</h1></article></div>\
<article><p>Body</p><footer>Signed</footer></article><input type=\"text\" value=\"v\"></body>";
        assert_eq!(md(page), "# Kept\n\nBody\n\nSigned\n");
    }

    #[test]
    fn simple_table_is_gfm() {
        let html = "<table><caption>Prices</caption><tr><td>Item</td><td>Cost</td></tr>\
<tr><td>a|b</td><td>1<br>2</td></tr></table>";
        assert_eq!(
            md(html),
            "Prices\n\n| Item | Cost |\n| --- | --- |\n| a\\|b | 1<br>2 |\n"
        );
    }

    #[test]
    fn spanned_table_is_html_or_flattened() {
        let html = "<table class=\"x\"><tr><th colspan=\"2\">Both</th></tr>\
<tr><td rowspan=\"2\">L</td><td>r1</td></tr><tr><td>r2</td></tr></table>";
        let kept = md(html);
        assert!(
            kept.starts_with("<table><tbody><tr><th colspan=\"2\">Both</th>"),
            "{kept}"
        );
        assert_eq!(
            md_with(html, Tables::Flatten, false, false),
            "| Both | Both |\n| --- | --- |\n| L | r1 |\n| L | r2 |\n"
        );
    }

    #[test]
    fn conversion_rules_of_the_seed() {
        assert_eq!(
            md("<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>"),
            "- a\n  - b\n- c\n"
        );
        assert_eq!(
            md("<ol start=\"3\"><li>x<ul><li>in</li></ul></li><li>y</li></ol>"),
            "3. x\n   - in\n4. y\n"
        );
        assert_eq!(
            md("<pre><code class=\"language-rust foo\">let a = 1;\n```\nb</code></pre>"),
            "````rust\nlet a = 1;\n```\nb\n````\n"
        );
        assert_eq!(
            md("<p>use <code>x`y</code>, <kbd>Ctrl</kbd> <samp>a`b</samp></p>"),
            "use ``x`y``, `Ctrl` ``a`b``\n"
        );
        assert_eq!(
            md("<p>a<br>b</p><blockquote><p>q</p></blockquote><h2>T<em>i</em></h2><p><b>b</b></p>"),
            "a\\\nb\n\n> q\n\n## T*i*\n\n**b**\n"
        );
        assert_eq!(
            md("<p># not heading</p><p>1. not list</p><p>a*b [x]</p>"),
            "\\# not heading\n\n1\\. not list\n\na\\*b \\[x\\]\n"
        );
        assert_eq!(
            md("<p><a href=\"/x\"></a> <img src=\"/i.png\"> <a href=\"/y\" title=\"t\">Y</a></p>"),
            "[https://example.org/x](https://example.org/x) ![](https://example.org/i.png) [Y](https://example.org/y)\n"
        );
        assert_eq!(
            md("<custom><p>a</p><p>b</p></custom><p></p><p>x</p><span>inline</span> text"),
            "a\n\nb\n\nx\n\ninline text\n"
        );
    }

    #[test]
    fn strikethrough_task_lists_and_inline() {
        let html = "<ul><li><input type=\"checkbox\" checked> done</li><li><input type=\"checkbox\"> todo</li></ul><p><del>old</del> <em>new</em></p><hr>";
        assert_eq!(
            md_with(html, Tables::Html, true, true),
            "- [x] done\n- [ ] todo\n\n~~old~~ *new*\n\n---\n"
        );
        assert_eq!(
            md_with(html, Tables::Html, false, false),
            "- done\n- todo\n\nold *new*\n\n---\n"
        );
    }
}
