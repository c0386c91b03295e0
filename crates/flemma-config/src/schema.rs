//! The one declarative description of every option. Validation, the defaults layer, the JSON
//! Schema and the option reference in `docs/configuration.md` are all derived from it.

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::config::Provider;

/// How the items of a list-valued option are interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ItemKind {
    /// Tool names, globs (`slack.*`, expanded against registered tools) and `$preset` spreads.
    Tool,
    /// Tool names, globs (kept verbatim) and `$preset` spreads.
    Approval,
    /// Free text (paths, patterns, commands); `$HOME`-like items are plain text.
    Text,
}

/// Which keys a map-valued option accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyRule {
    /// Any non-empty key.
    Any,
    /// A preset name: `$` followed by a lowercase name.
    Preset,
}

/// The shape of one schema node.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// A table with fixed keys.
    Object {
        fields: Vec<Field>,
        /// `key = true|false` is short for `key.<field> = …`.
        bool_shorthand: Option<&'static str>,
        /// `key = [..]` is short for `key.<field> = [..]`.
        array_shorthand: Option<&'static str>,
    },
    /// A table with user-chosen keys, all described by `value`.
    Map { key: KeyRule, value: Box<Node> },
    /// Any string.
    String,
    /// One of a fixed set of strings.
    Enum(Vec<&'static str>),
    /// An integer in `min..=max`.
    Integer { min: i64, max: i64 },
    /// A number in `min..=max`.
    Number { min: f64, max: f64 },
    /// `true` or `false`.
    Bool,
    /// Only `false` (used inside `OneOf` for "off").
    False,
    /// A percentage string such as `"50%"` (1..=100).
    Percent,
    /// A list with op-prefix syntax; `allows_function` when a function may replace it.
    List {
        items: ItemKind,
        allows_function: bool,
    },
    /// An array of tables replaced as a whole by the highest layer that sets it.
    Records(Box<Node>),
    /// A plain array of strings (inside records).
    Strings,
    /// Any JSON object (for example a tool's input schema).
    AnyObject,
    /// The first alternative that accepts the value wins.
    OneOf(Vec<Node>),
}

/// One option (or group of options) with its documentation and default.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub kind: Kind,
    pub doc: &'static str,
    pub default: Option<Value>,
    /// Whether setting it can widen what a chat may do (the one declaration of it: resolution
    /// ignores such values from an untrusted chat's frontmatter, the reference lists it).
    pub power: Power,
}

/// What an option can do to a chat's power, declared with the option (`docs/security.md`).
/// A node that declares nothing takes the rule of the table it is in; the root is neutral.
#[derive(Debug, Clone)]
pub(crate) enum Power {
    /// The rule of the enclosing table.
    Inherit,
    /// Cannot widen what a chat may do (model, parameters, templates…): any layer sets it.
    Neutral,
    /// Can widen it (the sandbox, approvals, commands, endpoints, credentials): an untrusted
    /// chat's frontmatter may only narrow it, as [`Narrowing`] says; anything else it sets is
    /// ignored.
    Widens(Narrowing),
}

/// How an untrusted chat's frontmatter may still set an option that widens power.
#[derive(Debug, Clone)]
pub(crate) enum Narrowing {
    /// Not at all (commands, URLs, paths, approval functions, credentials).
    Never,
    /// Only to this value (`tools.require_approval = true`, `sandbox.enabled = true`).
    Only(Value),
    /// A list keeps only the items the trusted layers give it: removals apply, additions are
    /// ignored.
    Subset,
    /// Only to values this check accepts, described for the reference (a Vertex location
    /// that names a region, so the endpoint stays Google's).
    Check(fn(&Value) -> bool, &'static str),
    /// Only to a number on the cheaper side of the value the layers below give it: options
    /// that raise cost or load (turns, concurrent tools, timeouts, prices). Ignored when the
    /// layers below give none (nothing to compare with, as for a price of the built-in
    /// catalogue).
    Bound(Bound),
}

/// Which side of the value below is the cheaper one: the value below is a ceiling or a floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// At most the value below (`tools.autopilot.max_turns`, timeouts, a model's limits).
    Ceiling,
    /// At most the value below, where 0 means no limit (`tools.max_concurrent`): 0 is
    /// refused, and any positive value narrows an unlimited one.
    CeilingZeroUnlimited,
    /// At least the value below (prices: a chat cannot make its requests look cheaper).
    Floor,
    /// One of these values, listed from the widest to the strictest, at or after the value
    /// below (an asked agent's `permissions`: `run` → `ask` → `refuse`).
    Stricter(&'static [&'static str]),
}

impl Bound {
    /// Whether `value` is on the cheaper side of `below`.
    pub(crate) fn accepts(self, value: &Value, below: &Value) -> bool {
        if let Bound::Stricter(order) = self {
            let rank = |v: &Value| {
                v.as_str()
                    .and_then(|v| order.iter().position(|known| *known == v))
            };
            return matches!((rank(value), rank(below)), (Some(value), Some(below)) if value >= below);
        }
        let (Some(value), Some(below)) = (value.as_f64(), below.as_f64()) else {
            return false;
        };
        match self {
            Bound::Ceiling => value <= below,
            Bound::CeilingZeroUnlimited => value > 0.0 && (below == 0.0 || value <= below),
            Bound::Floor => value >= below,
            Bound::Stricter(_) => false,
        }
    }

    /// The reference's last column.
    pub(crate) fn column(self) -> &'static str {
        match self {
            Bound::Ceiling => "only lower",
            Bound::CeilingZeroUnlimited => "only lower (not 0)",
            Bound::Floor => "only higher",
            Bound::Stricter(_) => "only stricter",
        }
    }

    /// What an untrusted chat may do, for warnings.
    pub(crate) fn allowed(self) -> &'static str {
        match self {
            Bound::Ceiling => "an untrusted chat may only lower it, since it raises cost or load",
            Bound::CeilingZeroUnlimited => {
                "an untrusted chat may only lower it, to 1 or more (0 means unlimited), since it raises load"
            }
            Bound::Floor => {
                "an untrusted chat may only raise it, so that the cost a send reports is not lowered"
            }
            Bound::Stricter(_) => {
                "an untrusted chat may only make it stricter (`run` → `ask` → `refuse`)"
            }
        }
    }
}

/// A named member of an object node.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub name: &'static str,
    pub node: Node,
    /// Only meaningful inside records: the key must be present.
    pub required: bool,
}

impl Node {
    fn new(kind: Kind, doc: &'static str, default: Option<Value>) -> Self {
        Self {
            kind,
            doc,
            default,
            power: Power::Inherit,
        }
    }

    /// Declares that this option (and, unless they say otherwise, the options inside it)
    /// widens what a chat may do; `narrowing` is what an untrusted frontmatter may still set.
    pub fn widens(mut self, narrowing: Narrowing) -> Self {
        self.power = Power::Widens(narrowing);
        self
    }

    /// Whether this node holds a value (as opposed to a table of options).
    pub fn is_leaf(&self) -> bool {
        !matches!(self.kind, Kind::Object { .. } | Kind::Map { .. })
    }

    /// The field named `name` of an object node.
    pub fn field(&self, name: &str) -> Option<&Field> {
        match &self.kind {
            Kind::Object { fields, .. } => fields.iter().find(|field| field.name == name),
            _ => None,
        }
    }

    /// A short human description of the accepted values ("an integer from 0 to 10").
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Object { .. } | Kind::Map { .. } => "a table".into(),
            Kind::String => "a string".into(),
            Kind::Enum(values) => format!(
                "one of {}",
                values
                    .iter()
                    .map(|value| format!("'{value}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Kind::Integer { min, max } if *max == i64::MAX => {
                format!("an integer of at least {min}")
            }
            Kind::Integer { min, max } => format!("an integer from {min} to {max}"),
            Kind::Number { min, max } if max.is_infinite() => format!("a number of at least {min}"),
            Kind::Number { min, max } => format!("a number from {min} to {max}"),
            Kind::Bool => "true or false".into(),
            Kind::False => "false".into(),
            Kind::Percent => "a percentage such as \"50%\"".into(),
            Kind::List { .. } | Kind::Strings => "a list of strings".into(),
            Kind::Records(_) => "a list of tables".into(),
            Kind::AnyObject => "a table (JSON object)".into(),
            Kind::OneOf(alternatives) => alternatives
                .iter()
                .map(Node::describe)
                .collect::<Vec<_>>()
                .join(", or "),
        }
    }
}

// ---- builders ------------------------------------------------------------------------------

fn object(doc: &'static str, fields: Vec<Field>) -> Node {
    Node::new(
        Kind::Object {
            fields,
            bool_shorthand: None,
            array_shorthand: None,
        },
        doc,
        None,
    )
}

fn field(name: &'static str, node: Node) -> Field {
    Field {
        name,
        node,
        required: false,
    }
}

fn required(name: &'static str, node: Node) -> Field {
    Field {
        name,
        node,
        required: true,
    }
}

fn string(doc: &'static str, default: Option<&str>) -> Node {
    Node::new(Kind::String, doc, default.map(|text| json!(text)))
}

fn choice(values: &[&'static str], doc: &'static str, default: Option<&str>) -> Node {
    Node::new(
        Kind::Enum(values.to_vec()),
        doc,
        default.map(|text| json!(text)),
    )
}

fn integer(min: i64, max: i64, doc: &'static str, default: Option<i64>) -> Node {
    Node::new(Kind::Integer { min, max }, doc, default.map(|n| json!(n)))
}

fn count(doc: &'static str, default: Option<i64>) -> Node {
    integer(0, i64::MAX, doc, default)
}

/// A price: an untrusted chat may only raise it (the cost a send reports stays honest).
fn price(doc: &'static str) -> Node {
    Node::new(
        Kind::Number {
            min: 0.0,
            max: f64::INFINITY,
        },
        doc,
        None,
    )
    .widens(Narrowing::Bound(Bound::Floor))
}

fn boolean(doc: &'static str, default: Option<bool>) -> Node {
    Node::new(Kind::Bool, doc, default.map(|b| json!(b)))
}

fn list(items: ItemKind, doc: &'static str, default: &[&str]) -> Node {
    Node::new(
        Kind::List {
            items,
            allows_function: false,
        },
        doc,
        Some(json!(default)),
    )
}

fn one_of(alternatives: Vec<Node>, doc: &'static str, default: Option<Value>) -> Node {
    Node::new(Kind::OneOf(alternatives), doc, default)
}

fn alternative(kind: Kind) -> Node {
    Node::new(kind, "", None)
}

// ---- the schema ----------------------------------------------------------------------------

/// The harness tool the engine answers itself: the state of a background job.
pub const JOBS_STATUS_TOOL: &str = "flemma.jobs.status";
/// The harness parameter the model adds to a call to run it in the background.
pub const BACKGROUND_PARAMETER: &str = "flemma.background";
/// The harness parameter the model adds to a call to write its output to a file.
pub const SAVE_TO_PARAMETER: &str = "flemma.save_to";

/// Built-in tools that are always offered unless a layer removes them.
pub const UNCONDITIONAL_TOOLS: [&str; 8] = [
    "bash",
    "read",
    "write",
    "edit",
    "grep",
    "find",
    "ls",
    JOBS_STATUS_TOOL,
];

/// Every built-in tool name (the conditional ones are offered only when configured).
pub const BUILTIN_TOOLS: [&str; 12] = [
    "ask_agent",
    "bash",
    "read",
    "write",
    "edit",
    "grep",
    "find",
    "ls",
    "read_skill",
    "fetch_content",
    "lsp",
    JOBS_STATUS_TOOL,
];

/// Directory names `grep` and `find` never search unless configured otherwise.
pub const SEARCH_EXCLUDES: [&str; 8] = [
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    "target",
    "dist",
    "build",
    "vendor",
];

const THINKING_LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];

/// The aliases Flemma's schema declares: a key that stands for an option elsewhere, accepted
/// wherever the table that holds it is set (the config file, editor settings, a JSON or Rhai
/// frontmatter), and stored as the option it stands for (so resolution, trust and provenance
/// see only the option). Each: the alias's path and the option's.
pub(crate) const ALIASES: [(&str, &str); 5] = [
    ("thinking", "parameters.thinking"),
    ("timeout", "parameters.timeout"),
    ("max_tokens", "parameters.max_tokens"),
    ("temperature", "parameters.temperature"),
    ("tools.approve", "tools.auto_approve"),
];

/// `segments` with a leading alias replaced by the option it stands for (`["thinking"]` →
/// `["parameters", "thinking"]`); `None` when they start with no alias.
pub(crate) fn unalias(segments: &[String]) -> Option<Vec<String>> {
    ALIASES.iter().find_map(|(alias, target)| {
        let alias: Vec<&str> = alias.split('.').collect();
        let starts =
            segments.len() >= alias.len() && segments.iter().zip(&alias).all(|(s, a)| s == a);
        starts.then(|| {
            target
                .split('.')
                .map(str::to_owned)
                .chain(segments[alias.len()..].iter().cloned())
                .collect()
        })
    })
}

/// The root of the option schema (built once).
pub(crate) fn root() -> &'static Node {
    static ROOT: OnceLock<Node> = OnceLock::new();
    ROOT.get_or_init(build_root)
}

fn thinking_budget(doc: &'static str) -> Node {
    count(doc, None)
}

fn base_url(provider: &'static str) -> Field {
    let doc: &'static str = match provider {
        "anthropic" => {
            "Base URL of the Anthropic API (default `https://api.anthropic.com`, or `ANTHROPIC_BASE_URL`)."
        }
        "openai" => {
            "Base URL of the OpenAI API, with `/v1` (default `https://api.openai.com/v1`, or `OPENAI_BASE_URL`)."
        }
        "openai-compatible" => {
            "Base URL of the Chat Completions server, with `/v1` (default `http://127.0.0.1:11434/v1`, a local Ollama; llama.cpp `http://localhost:8080/v1`, vLLM, LM Studio, OpenRouter…; or `OPENAI_COMPATIBLE_BASE_URL`)."
        }
        "moonshot" => {
            "Base URL of the Moonshot API, with `/v1` (default `https://api.moonshot.ai/v1`, or `MOONSHOT_BASE_URL`)."
        }
        "gemini" => {
            "Base URL of the Gemini API (default `https://generativelanguage.googleapis.com`, or `GEMINI_BASE_URL`)."
        }
        "codex" => {
            "Base URL of the Codex backend of a ChatGPT subscription (default `https://chatgpt.com/backend-api/codex`, or `CODEX_BASE_URL`)."
        }
        _ => "Base URL of the Vertex AI API (default derived from `parameters.vertex.location`).",
    };
    field(
        provider,
        object(
            "Connection settings for this provider.",
            vec![field("base_url", string(doc, None))],
        ),
    )
}

fn search_tool(doc: &'static str, with_exclude: bool) -> Node {
    let mut fields = vec![field(
        "cwd",
        string(
            "Working directory; `urn:flemma:buffer:path` is the chat file's directory.",
            Some("urn:flemma:buffer:path"),
        )
        .widens(Narrowing::Never),
    )];
    if with_exclude {
        fields.push(field(
            "exclude",
            list(
                ItemKind::Text,
                "Directory names that are never searched.",
                &SEARCH_EXCLUDES,
            ),
        ));
    }
    object(doc, fields)
}

fn build_root() -> Node {
    object(
        "flemmad configuration.",
        vec![
            field(
                "provider",
                choice(&provider_names(), "The LLM provider.", Some("anthropic")),
            ),
            field(
                "model",
                string(
                    "Model id, or a model string: `provider/model` (`anthropic/claude-opus-4-8`) also selects the provider, `;key=value` sets a parameter (`vertex/gemini-2.5-pro;project_id=my-project;thinking=low`, the provider's own table first, then the general `parameters`), `;key=nil` clears one, and `$name` selects the model preset `[presets.\"$name\"]`. Unset, or set in a lower layer than `provider`, means the provider's default model (anthropic `claude-sonnet-4-6`, openai `gpt-5.4`, gemini/vertex `gemini-3.1-pro-preview`, moonshot `kimi-k2.6`, openai-compatible `llama3.2`, codex `gpt-5.5`).",
                    None,
                ),
            ),
            field(
                "mode",
                choice(
                    &MODES,
                    "What the chat's tools may change (docs/modes.md): `ask` only reads — the reading tools, and `bash` in a sandbox where nothing but its private `/tmp` is writable; a file tool's write, any other tool and `bash` without a sandbox are refused; `default` follows the approval settings; `auto-edit` also approves `write` and `edit` inside the project. A chat may make it stricter (`auto-edit` → `default` → `ask`); `flemmad send --mode`, `flemma.switch` and an ACP client's mode picker set it for a session.",
                    Some("default"),
                )
                .widens(Narrowing::Bound(Bound::Stricter(&MODES))),
            ),
            field("parameters", parameters_schema()),
            field(
                "providers",
                object(
                    "Per-provider connection settings.",
                    provider_names().iter().map(|name| base_url(name)).collect(),
                )
                .widens(Narrowing::Never),
            ),
            field(
                "models",
                Node::new(
                    Kind::Map {
                        key: KeyRule::Any,
                        value: Box::new(model_entry_schema()),
                    },
                    "Model catalogue overrides keyed by model id (`[models.\"gpt-5\"]`).",
                    None,
                ),
            ),
            field("tools", tools_schema()),
            field("agents", agents_schema()),
            field(
                "presets",
                Node::new(
                    Kind::Map {
                        key: KeyRule::Preset,
                        value: Box::new(preset_schema()),
                    },
                    "Presets keyed by `$name`: approval presets (`[presets.\"$yolo\"] auto_approve = [..]`, spread into `tools.auto_approve`; they override the built-ins `$readonly` and `$standard`) and model presets (`[presets.\"$fast\"] provider = \"vertex\"`, `model = \"gemini-2.5-flash\"`, `[presets.\"$fast\".parameters]`, `tools`), selected with `model = \"$fast\"`. A preset an untrusted chat defines serves only that chat's own `model = \"$name\"`, and what it selects is judged as that chat's frontmatter.",
                    None,
                ),
            ),
            field("sandbox", sandbox_schema()),
            field(
                "checkpoints",
                object(
                    "The checkpoints of the project's files around tool calls (`flemmad changes`, `flemmad rewind`; docs/review.md). Only the user's configuration and trusted chats set them.",
                    vec![
                        field(
                            "max_age_days",
                            count(
                                "Forget checkpoints older than this many days: all of another chat's when its last one is older, and the current chat's own older points (its last one stays); checked at most once an hour, after a call; 0 keeps them.",
                                Some(30),
                            )
                            .widens(Narrowing::Never),
                        ),
                        field(
                            "max_size_mb",
                            count(
                                "When a project's checkpoints take more than this many MiB, forget the other chats' checkpoints oldest first, then the older half of the current chat's points, until they fit (its last point stays); 0 sets no limit.",
                                Some(2048),
                            )
                            .widens(Narrowing::Never),
                        ),
                        field(
                            "max_file_mb",
                            integer(
                                1,
                                i64::MAX,
                                "Files larger than this many MiB are left out of checkpoints (a rewind neither restores nor removes them).",
                                Some(16),
                            )
                            .widens(Narrowing::Never),
                        ),
                    ],
                ),
            ),
            field("trust", trust_schema()),
            field(
                "templating",
                object(
                    "Template extensions (the Rhai counterparts of Flemma's populators and custom frontmatter parsers).",
                    vec![
                        field(
                            "modules",
                            list(
                                ItemKind::Text,
                                "Rhai files of `fn` definitions and `const`s loaded, in order, before every chat's frontmatter; their functions are available to the frontmatter, messages and included files (a later module overrides an earlier one's function of the same name and arity). `~` is expanded; relative paths resolve against the chat file's directory.",
                                &[],
                            ),
                        ),
                        field(
                            "frontmatter_parsers",
                            Node::new(
                                Kind::Map {
                                    key: KeyRule::Any,
                                    value: Box::new(Node::new(
                                        Kind::Strings,
                                        "The command (program, then arguments) that reads the frontmatter code on stdin and prints one JSON object on stdout; it runs in `/`, found on the absolute entries of `PATH`.",
                                        None,
                                    )),
                                },
                                "Commands keyed by frontmatter language (the fence's info string): `yaml = [\"yq\", \"-o\", \"json\"]`. Their JSON output is treated exactly like JSON frontmatter (variables, and options under `flemma`). They never run for an untrusted chat that is only opened (an editor, `parse`, `status`): its frontmatter is evaluated when it is sent.",
                                None,
                            ),
                        ),
                    ],
                )
                .widens(Narrowing::Never),
            ),
            field(
                "editing",
                object(
                    "How the daemon edits documents.",
                    vec![
                        field(
                            "compact_headers",
                            boolean("Write compact tool headers.", Some(true)),
                        ),
                        field(
                            "coalesce_ms",
                            count(
                                "Milliseconds over which streamed edits are coalesced into one edit.",
                                Some(100),
                            ),
                        ),
                    ],
                ),
            ),
            field(
                "secrets",
                object(
                    "Credential resolvers.",
                    vec![
                        field(
                            "gcloud",
                            object(
                                "The gcloud resolver (Vertex AI access tokens).",
                                vec![field(
                                    "path",
                                    string("The gcloud executable.", Some("gcloud")),
                                )],
                            ),
                        ),
                        field(
                            "chatgpt",
                            object(
                                "The ChatGPT login of the Codex CLI (provider `codex`).",
                                vec![field(
                                    "auth_file",
                                    string(
                                        "The `auth.json` `codex login` writes; flemmad reads the tokens there and writes refreshed ones back. Unset: `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`.",
                                        None,
                                    ),
                                )],
                            ),
                        ),
                    ],
                )
                .widens(Narrowing::Never),
            ),
            field(
                "context",
                object(
                    "The context window: the meter's warning and compaction (docs/context.md).",
                    vec![
                        field(
                            "warn_at",
                            Node::new(
                                Kind::Number { min: 0.0, max: 1.0 },
                                "The share of the model's context window past which the next request is warned about (a diagnostic, a line in `status`).",
                                Some(json!(0.8)),
                            ),
                        ),
                        field(
                            "compact_at",
                            one_of(
                                vec![
                                    alternative(Kind::Number { min: 0.0, max: 1.0 }),
                                    alternative(Kind::False),
                                ],
                                "The share of the window at which autopilot compacts the chat before its next request; `false` never.",
                                Some(json!(0.85)),
                            ),
                        ),
                        field(
                            "compact_model",
                            string(
                                "The model that writes a compaction's summary: a model string or `$preset`; unset, the chat's own model.",
                                None,
                            ),
                        ),
                        field(
                            "keep",
                            integer(
                                1,
                                i64::MAX,
                                "The exchanges (a `@You:` and the replies and tool results that answer it) a compaction keeps verbatim at the end of the chat.",
                                Some(2),
                            ),
                        ),
                        field(
                            "prune_after",
                            count(
                                "Leave the tool results older than this many tool cycles out of each request, each replaced by a short placeholder naming the chat line that holds it (the file keeps everything); 0 sends them all.",
                                Some(0),
                            ),
                        ),
                    ],
                ),
            ),
            field(
                "log",
                object(
                    "Daemon logging.",
                    vec![
                        field(
                            "level",
                            choice(
                                &["error", "warn", "info", "debug", "trace"],
                                "Log level (`RUST_LOG` wins when set).",
                                Some("info"),
                            ),
                        ),
                        field(
                            "file",
                            string("Log file; unset logs to stderr.", None)
                                .widens(Narrowing::Never),
                        ),
                    ],
                ),
            ),
        ],
    )
}

/// The providers' configuration names.
fn provider_names() -> Vec<&'static str> {
    Provider::ALL.iter().map(|p| p.as_str()).collect()
}

/// The model parameters (`parameters.*`, also a preset's).
fn parameters_schema() -> Node {
    object(
        "Request parameters. The provider-specific tables win over the general options.",
        vec![
            field(
                "thinking",
                one_of(
                    vec![
                        alternative(Kind::Enum(THINKING_LEVELS.to_vec())),
                        alternative(Kind::Integer {
                            min: 0,
                            max: i64::MAX,
                        }),
                        alternative(Kind::False),
                    ],
                    "Reasoning effort: a level (`minimal`, `low`, `medium`, `high`, `max`), a token budget, or `false` to turn thinking off.",
                    Some(json!("high")),
                ),
            ),
            field(
                "max_tokens",
                one_of(
                    vec![
                        alternative(Kind::Integer {
                            min: 1,
                            max: i64::MAX,
                        }),
                        alternative(Kind::Percent),
                    ],
                    "Maximum output tokens: a number, or a percentage of the model's output limit such as `\"50%\"`.",
                    Some(json!("50%")),
                ),
            ),
            field(
                "temperature",
                Node::new(
                    Kind::Number { min: 0.0, max: 2.0 },
                    "Sampling temperature; unset means the provider's default. Ignored while thinking is on for providers that forbid it.",
                    None,
                ),
            ),
            field(
                "timeout",
                integer(1, i64::MAX, "Whole-request timeout in seconds.", Some(600)),
            ),
            field(
                "connect_timeout",
                integer(1, i64::MAX, "Connection timeout in seconds.", Some(10)),
            ),
            field(
                "idle_timeout",
                integer(
                    1,
                    i64::MAX,
                    "The watchdog: seconds of silence after which a reply is stopped — no byte from the provider (before its answer or in the middle of the stream), or no sign of life from an agent `ask_agent` asked (text, thought, tool call, answered permission). The reply received so far stays in the file with the abort marker and the error saying so.",
                    Some(DEFAULT_IDLE_TIMEOUT),
                ),
            ),
            field(
                "cache_retention",
                choice(
                    &["short", "long", "none"],
                    "Prompt caching: `short` (provider default, 5 minutes on Anthropic), `long` (1 hour on Anthropic), `none`. What each provider does with it: docs/configuration.md, \"The prompt cache\".",
                    Some("short"),
                ),
            ),
            field(
                "anthropic",
                object(
                    "Anthropic-only parameters.",
                    vec![
                        field(
                            "thinking_budget",
                            thinking_budget(
                                "Thinking budget in tokens; overrides `parameters.thinking`.",
                            ),
                        ),
                        field(
                            "api_version",
                            string(
                                "Value of the `anthropic-version` header.",
                                Some("2023-06-01"),
                            ),
                        ),
                        field(
                            "beta",
                            list(ItemKind::Text, "Extra `anthropic-beta` feature flags.", &[]),
                        ),
                    ],
                ),
            ),
            field(
                "openai",
                object(
                    "OpenAI-only parameters (Responses API).",
                    vec![
                        field(
                            "reasoning",
                            choice(
                                &["minimal", "low", "medium", "high"],
                                "Reasoning effort; overrides `parameters.thinking`.",
                                None,
                            ),
                        ),
                        field(
                            "reasoning_summary",
                            choice(
                                &["auto", "concise", "detailed"],
                                "Reasoning summary style requested from the model.",
                                None,
                            ),
                        ),
                    ],
                ),
            ),
            field(
                "openai_compatible",
                object(
                    "Parameters for Chat Completions servers (`openai-compatible` and `moonshot`).",
                    vec![
                        field(
                            "reasoning_effort",
                            choice(
                                &["minimal", "low", "medium", "high"],
                                "`reasoning_effort` sent to servers that support it; overrides `parameters.thinking`.",
                                None,
                            ),
                        ),
                        field(
                            "api_key_required",
                            boolean(
                                "Whether a missing API key is an error (local servers usually need none).",
                                Some(false),
                            ),
                        ),
                    ],
                ),
            ),
            field(
                "vertex",
                object(
                    "Vertex AI parameters.",
                    vec![
                        field("project_id", string("Google Cloud project id.", None)),
                        field(
                            "location",
                            string("Vertex AI location.", Some("global")).widens(
                                Narrowing::Check(
                                    is_region_name,
                                    "a region name (letters, digits and `-`), which keeps the endpoint Google's",
                                ),
                            ),
                        ),
                        field(
                            "thinking_budget",
                            thinking_budget(
                                "Thinking budget in tokens; overrides `parameters.thinking`.",
                            ),
                        ),
                    ],
                ),
            ),
            field(
                "gemini",
                object(
                    "Gemini API parameters.",
                    vec![field(
                        "thinking_budget",
                        thinking_budget(
                            "Thinking budget in tokens; overrides `parameters.thinking`.",
                        ),
                    )],
                ),
            ),
        ],
    )
}

/// One `[[models]]` entry.
fn model_entry_schema() -> Node {
    object(
        "Catalogue entry for one model id; every field is optional and overrides the built-in catalogue.",
        vec![
            field("input", price("Price per million input tokens (USD).")),
            field("output", price("Price per million output tokens (USD).")),
            field(
                "cache_read",
                price("Price per million cache-read tokens (USD)."),
            ),
            field(
                "cache_write",
                price("Price per million cache-write tokens (USD)."),
            ),
            field(
                "context_window",
                count("Context window in tokens.", None).widens(Narrowing::Bound(Bound::Ceiling)),
            ),
            field(
                "max_output_tokens",
                count(
                    "Output limit in tokens (a `max_tokens` percentage is taken of it).",
                    None,
                )
                .widens(Narrowing::Bound(Bound::Ceiling)),
            ),
            field(
                "thinking",
                boolean("Whether the model supports thinking.", None),
            ),
        ],
    )
}

/// One custom tool (`[tools.custom.NAME]`).
fn custom_tool_schema() -> Node {
    object(
        "A tool backed by a command: the input is passed as JSON on stdin, stdout is the result.",
        vec![
            required("name", string("Tool name offered to the model.", None)),
            required(
                "description",
                string("Description offered to the model.", None),
            ),
            required(
                "command",
                string(
                    "Command line, run with `bash -c` in the chat's directory.",
                    None,
                ),
            ),
            field(
                "input_schema",
                Node::new(
                    Kind::AnyObject,
                    "JSON Schema of the tool's input.",
                    Some(json!({"type": "object", "properties": {}})),
                ),
            ),
            field(
                "capabilities",
                Node::new(
                    Kind::Strings,
                    "Capability tags (`disables_background`, `disables_save_to`, `auto_approves_if_sandboxed`, `emits_template`).",
                    Some(json!([])),
                ),
            ),
            field(
                "timeout",
                integer(
                    1,
                    i64::MAX,
                    "Timeout in seconds (default `tools.default_timeout`).",
                    None,
                ),
            ),
        ],
    )
}

/// One tool source.
fn tool_source_schema() -> Node {
    object(
        "A command that prints tool definitions (JSON) for discovery.",
        vec![
            required("command", string("Command line, run with `bash -c`.", None)),
            field(
                "timeout",
                integer(
                    1,
                    i64::MAX,
                    "Discovery timeout in seconds (default `tools.default_timeout`).",
                    None,
                ),
            ),
        ],
    )
}

/// `tools.autopilot`.
fn autopilot_schema() -> Node {
    let mut autopilot = object(
        "Autopilot: run approved tools and send their results automatically. `tools.autopilot = false` is short for `tools.autopilot.enabled = false`.",
        vec![
            field(
                "enabled",
                boolean("Whether autopilot runs.", Some(true))
                    .widens(Narrowing::Only(json!(false))),
            ),
            field(
                "max_turns",
                integer(1, i64::MAX, "Maximum automatic turns per send.", Some(100))
                    .widens(Narrowing::Bound(Bound::Ceiling)),
            ),
            field(
                "resume_delay",
                count(
                    "Milliseconds to wait before continuing when background jobs complete at idle.",
                    Some(2000),
                ),
            ),
        ],
    );
    if let Kind::Object { bool_shorthand, .. } = &mut autopilot.kind {
        *bool_shorthand = Some("enabled");
    }
    autopilot
}

/// `tools.store`.
fn store_schema() -> Node {
    object(
        "Tool result store (overflowing outputs, `flemma.save_to` redirects).",
        vec![
            field(
                "path_format",
                string(
                    "`$chat` (next to the chat file), `$state` (under `$XDG_STATE_HOME`), or a template path.",
                    Some("$chat"),
                )
                .widens(Narrowing::Never),
            ),
            field(
                "unnamed_path_format",
                string(
                    "Template path for documents that have no file yet.",
                    Some(
                        "${TMPDIR:-/tmp}/flemma/unnamed/{{ flemma.pid }}/{{ bufnr }}/{{ source }}_{{ name }}_{{ id }}.txt",
                    ),
                )
                .widens(Narrowing::Never),
            ),
            field(
                "materialize",
                boolean(
                    "Write every result to the store, not only overflow and redirects.",
                    Some(false),
                ),
            ),
            field(
                "preview",
                object(
                    "Preview kept in the document for redirected output.",
                    vec![
                        field("lines", count("Preview lines (0 = none).", Some(10))),
                        field("bytes", count("Preview size cap in bytes.", Some(2048))),
                    ],
                ),
            ),
            field(
                "backup",
                one_of(
                    vec![
                        alternative(Kind::Enum(vec!["version"])),
                        alternative(Kind::False),
                    ],
                    "Before overwriting a store file: `\"version\"` renames it to `<stem>.<n>.<ext>`; `false` overwrites in place.",
                    Some(json!("version")),
                ),
            ),
        ],
    )
}

/// `tools.*`.
fn tools_schema() -> Node {
    let mut tools = object(
        "Tools offered to the model and how they are approved. `tools = [..]` is short for `tools.enabled = [..]`.",
        vec![
            field(
                "enabled",
                list(
                    ItemKind::Tool,
                    "Tools offered to the model (names, globs such as `slack.*`, `$presets`). The default also gains `fetch_content` when `tools.fetch_content = true`, `read_skill` when `tools.skills_dir` is set, `lsp` when `tools.lsp.servers` is not empty, and every `tools.custom` tool.",
                    &UNCONDITIONAL_TOOLS,
                )
                .widens(Narrowing::Subset),
            ),
            field(
                "auto_approve",
                Node::new(
                    Kind::List {
                        items: ItemKind::Approval,
                        allows_function: true,
                    },
                    "Tools approved without asking: names, globs (kept verbatim, matched at approval time) and `$presets`. Frontmatter may assign a function instead.",
                    Some(json!(["$standard"])),
                )
                .widens(Narrowing::Subset),
            ),
            field(
                "require_approval",
                boolean(
                    "When `false`, every tool call is approved (catch-all resolver).",
                    Some(true),
                )
                .widens(Narrowing::Only(json!(true))),
            ),
            field(
                "auto_approve_sandboxed",
                boolean(
                    "Approve tools tagged `auto_approves_if_sandboxed` (bash) when a sandbox backend is active.",
                    Some(true),
                )
                .widens(Narrowing::Only(json!(false))),
            ),
            field(
                "max_concurrent",
                count(
                    "Tools executed at the same time per document (0 = unlimited).",
                    Some(2),
                )
                .widens(Narrowing::Bound(Bound::CeilingZeroUnlimited)),
            ),
            field(
                "default_timeout",
                integer(1, i64::MAX, "Default tool timeout in seconds.", Some(30))
                    .widens(Narrowing::Bound(Bound::Ceiling)),
            ),
            field("autopilot", autopilot_schema()),
            field("store", store_schema()),
            field(
                "skills_dir",
                string(
                    "Directory of skills (`<name>.md` or `<name>/SKILL.md`) for `read_skill`.",
                    None,
                )
                .widens(Narrowing::Never),
            ),
            field(
                "fetch_content",
                boolean("Offer the `fetch_content` tool.", Some(false))
                    .widens(Narrowing::Only(json!(false))),
            ),
            field(
                "fetch_private_addresses",
                boolean(
                    "Let `fetch_content` reach loopback, link-local and private addresses (`localhost`, `127.0.0.0/8`, `10.0.0.0/8`, `192.168.0.0/16`, `169.254.0.0/16` — cloud metadata —, `fc00::/7`, …). Off, every address a host name resolves to, and every redirection's, is checked before connecting.",
                    Some(false),
                )
                .widens(Narrowing::Only(json!(false))),
            ),
            field(
                "lsp",
                object(
                    "The `lsp` tool.",
                    vec![
                        field(
                            "servers",
                            list(
                                ItemKind::Text,
                                "Language server command lines (for example `rust-analyzer`, `pyright-langserver --stdio`); the tool is offered when at least one is on `PATH` (its absolute entries). A server starts in `/`, with the working directory as its workspace.",
                                &[],
                            )
                            .widens(Narrowing::Subset),
                        ),
                        field(
                            "extensions",
                            Node::new(
                                Kind::Map {
                                    key: KeyRule::Any,
                                    value: Box::new(Node::new(
                                        Kind::Strings,
                                        "File extensions without the dot (`[\"chat\"]`).",
                                        None,
                                    )),
                                },
                                "The file extensions each server handles, keyed by its program name (`flemmad = [\"chat\"]`); adds to, or for a known server replaces, the built-in table (rust-analyzer: rs, gopls: go, pyright-langserver/pylsp: py, typescript-language-server: ts/tsx/js/jsx, clangd: c/h/cpp/…, flemmad: chat, …).",
                                None,
                            ),
                        ),
                    ],
                ),
            ),
            field(
                "bash",
                object(
                    "The `bash` tool.",
                    vec![field(
                        "cwd",
                        string(
                            "Working directory of the tools, relative to the chat file's directory; `urn:flemma:buffer:path` is that directory. `flemmad acp` records an ACP session's `cwd` here.",
                            Some("urn:flemma:buffer:path"),
                        )
                        .widens(Narrowing::Check(
                            is_chat_dir_or_ancestor,
                            "`urn:flemma:buffer:path`, or `../..` for a chat `flemmad acp` keeps in `<project>/.flemma/sessions/`",
                        )),
                    )],
                ),
            ),
            field("grep", search_tool("The `grep` tool.", true)),
            field("find", search_tool("The `find` tool.", true)),
            field("ls", search_tool("The `ls` tool.", false)),
            field(
                "custom",
                Node::new(
                    Kind::Records(Box::new(custom_tool_schema())),
                    "Command-line tools (`[[tools.custom]]`). The highest layer that sets this list replaces it as a whole.",
                    Some(json!([])),
                )
                .widens(Narrowing::Never),
            ),
            field("mcp", mcp_schema()),
            field(
                "sources",
                Node::new(
                    Kind::Records(Box::new(tool_source_schema())),
                    "Tool sources (`[[tools.sources]]`): commands that print tool definitions. Replaced as a whole by the highest layer.",
                    Some(json!([])),
                )
                .widens(Narrowing::Never),
            ),
        ],
    );
    if let Kind::Object {
        array_shorthand, ..
    } = &mut tools.kind
    {
        *array_shorthand = Some("enabled");
    }
    tools
}

/// One preset (`[presets.NAME]`).
fn preset_schema() -> Node {
    object(
        "A preset: an approval preset (`auto_approve`, spread into `tools.auto_approve` by `$name`) and/or a model preset (`provider`, `model`, `parameters`, `tools`, selected by `model = \"$name\"`).",
        vec![
            field(
                "auto_approve",
                list(
                    ItemKind::Approval,
                    "Tool names, globs and other presets this preset approves. Selecting the preset with `model = \"$name\"` approves them too.",
                    &[],
                )
                .widens(Narrowing::Never),
            ),
            field(
                "provider",
                choice(
                    &provider_names(),
                    "The provider `model = \"$name\"` selects.",
                    None,
                ),
            ),
            field(
                "model",
                string(
                    "The model `model = \"$name\"` selects: a model id or a model string (`vertex/gemini-2.5-flash;thinking=minimal`).",
                    None,
                ),
            ),
            field("parameters", {
                let mut parameters = without_defaults(parameters_schema());
                parameters.doc = "Request parameters `model = \"$name\"` sets (the options of `parameters`), unless the layer that selects the preset sets them itself.";
                parameters
            }),
            field(
                "tools",
                list(
                    ItemKind::Tool,
                    "Tools `model = \"$name\"` offers (the items of `tools.enabled`, with the same op prefixes).",
                    &[],
                ),
            ),
        ],
    )
}

/// `sandbox.*`.
fn sandbox_schema() -> Node {
    object(
        "Sandboxing of tool processes.",
        vec![
            field(
                "enabled",
                boolean(
                    "Sandbox tool processes when a backend is available.",
                    Some(true),
                )
                .widens(Narrowing::Only(json!(true))),
            ),
            field(
                "backend",
                choice(
                    &["auto", "bwrap", "none"],
                    "`auto` picks `bwrap` on Linux when installed; `none` disables process sandboxing.",
                    Some("auto"),
                ),
            ),
            field(
                "policy",
                object(
                    "What sandboxed processes may touch. `write`, `edit` and `flemma.save_to` follow it even without a backend.",
                    vec![
                        field(
                            "rw_paths",
                            list(
                                ItemKind::Text,
                                "Writable paths; `urn:flemma:cwd`, `urn:flemma:buffer:path`, `urn:flemma:store` and `${VAR:-default}` are expanded. A URN that names your home folder or one above it is left out (the shell's start-up files would be writable). Besides these, sandboxed commands have a `/tmp` and a cache (`~/.cache`, `$XDG_CACHE_HOME`) of the chat's own, which the file tools see there too; chat files, every `.git` and flemmad's configuration and records stay read-only inside them (docs/security.md).",
                                &[
                                    "urn:flemma:cwd",
                                    "urn:flemma:buffer:path",
                                    "urn:flemma:store",
                                ],
                            )
                            .widens(Narrowing::Subset),
                        ),
                        field(
                            "network",
                            boolean(
                                "Give sandboxed commands the network. Off, they run in their own empty network namespace; on, a sandboxed `bash` call is no longer approved by the sandbox alone (`tools.auto_approve_sandboxed`): each call asks, unless `tools.auto_approve` names the tool.",
                                Some(false),
                            )
                            .widens(Narrowing::Only(json!(false))),
                        ),
                        field(
                            "allow_privileged",
                            boolean(
                                "Allow privilege escalation (setuid binaries, sudo).",
                                Some(false),
                            )
                            .widens(Narrowing::Only(json!(false))),
                        ),
                        field(
                            "git_writable",
                            boolean(
                                "Let tools write inside `.git` directories. Off, `.git` is read-only inside the sandbox and `write`/`edit` refuse it: a hook or `core.fsmonitor` written there would run outside the sandbox at your next git command.",
                                Some(false),
                            )
                            .widens(Narrowing::Only(json!(false))),
                        ),
                    ],
                ),
            ),
            field(
                "limits",
                object(
                    "What one sandboxed call (`bash`, a custom tool, foreground or background) may use; past a limit the whole call is stopped with an error result. Counted for the sandbox's own processes (as root too).",
                    vec![
                        field(
                            "processes",
                            integer(
                                0,
                                1_000_000,
                                "Processes alive at once inside the sandbox (`0`: no limit).",
                                Some(512),
                            ),
                        ),
                        field(
                            "memory",
                            integer(
                                0,
                                i64::MAX,
                                "Memory in MiB: the resident memory of all its processes together, and each process's data segment (`0`: no limit).",
                                Some(8192),
                            ),
                        ),
                    ],
                ),
            ),
        ],
    )
    .widens(Narrowing::Never)
}

/// `trust.*`.
fn trust_schema() -> Node {
    object(
        "Which chats' frontmatter is trusted (docs/security.md). A chat is trusted when it lies in a folder trusted with `flemmad trust` or matches `paths`; an untrusted chat's frontmatter cannot set the options that widen what a chat may do (the last column of this reference). Read from the layers below the frontmatter only.",
        vec![
            field(
                "paths",
                list(
                    ItemKind::Text,
                    "Chats whose frontmatter is trusted: absolute paths or `~/…`, with the path globs of \"Globs\" above (`*` within a name, `**` any folders, `?`, `[…]`, `{a,b}`) matching the chat or a folder it is in; a path without a wildcard trusts that folder and everything below it (`[\"~/notes/**\"]`, `[\"~/work/prompts\"]`).",
                    &[],
                ),
            ),
            field(
                "restricted",
                boolean(
                    "Restricted Mode: no chat's frontmatter is trusted, whatever `paths` and `flemmad trust` say. VS Code sets it while its workspace is not trusted (Workspace Trust).",
                    Some(false),
                ),
            ),
        ],
    )
    .widens(Narrowing::Never)
}

fn string_map(doc: &'static str, value_doc: &'static str) -> Node {
    Node::new(
        Kind::Map {
            key: KeyRule::Any,
            value: Box::new(string(value_doc, None)),
        },
        doc,
        None,
    )
}

/// `[tools.mcp]`: MCP servers as tool sources.
fn mcp_schema() -> Node {
    let server = object(
        "One MCP server: `command` (+ `args`, `env`, `cwd`) for a server over stdio, or `url` (+ `headers`) for a streamable-HTTP server. Only the user config file (and an ACP editor) may define what runs; a chat's frontmatter or client settings may only turn a server off (`enabled = false`) unless `tools.mcp.trust_chat_servers = true`.",
        vec![
            field(
                "command",
                string(
                    "The program that runs the server over stdio (found on the absolute entries of `PATH`; with a `/`, taken against `cwd`); runs outside the sandbox unless `sandbox = true`.",
                    None,
                ),
            ),
            field(
                "args",
                Node::new(Kind::Strings, "Arguments of `command`.", None),
            ),
            field(
                "env",
                string_map(
                    "Variables added to flemmad's environment for the server; `${VAR}` is expanded from flemmad's environment (values never reach logs, events or files).",
                    "The variable's value.",
                ),
            ),
            field(
                "cwd",
                string(
                    "Working directory of the server; default `/`, never the chat's folder by itself (a repository there would choose the code `python -m x` or `npx` runs); a relative path is taken against the chat's folder.",
                    None,
                ),
            ),
            field(
                "url",
                string(
                    "The endpoint of a streamable-HTTP server (`http://127.0.0.1:8000/mcp`).",
                    None,
                ),
            ),
            field(
                "headers",
                string_map(
                    "HTTP headers sent to a `url` server (`Authorization = \"Bearer ${GITHUB_TOKEN}\"`); `${VAR}` is expanded from flemmad's environment and never logged.",
                    "The header's value.",
                ),
            ),
            field(
                "sandbox",
                boolean(
                    "Run a stdio server inside the tool sandbox (`bwrap`, with `sandbox.policy`) instead of outside it.",
                    Some(false),
                ),
            ),
            field(
                "enabled",
                boolean(
                    "Whether this server starts and offers its tools; a chat may set `false`.",
                    Some(true),
                )
                .widens(Narrowing::Only(json!(false))),
            ),
        ],
    )
    .widens(Narrowing::Never);
    object(
        "MCP servers as tool sources: server NAME's tool TOOL is the tool `NAME.TOOL` (dots in NAME become hyphens). Servers start for a send, `flemmad tools`, `tools run`, `status` or in the daemon, never when a document is only opened.",
        vec![
            field(
                "enabled",
                boolean(
                    "Whether MCP servers are used at all (default: on when servers are configured).",
                    None,
                )
                .widens(Narrowing::Only(json!(false))),
            ),
            field(
                "include",
                list(
                    ItemKind::Text,
                    "Globs over full tool names (`github.*`) of the MCP tools offered to the model. A discovered tool that is not included stays available: a chat opts in with `tools.enabled` (`+github.search_issues`).",
                    &[],
                )
                .widens(Narrowing::Subset),
            ),
            field(
                "exclude",
                list(
                    ItemKind::Text,
                    "Globs over full tool names of MCP tools that are not registered at all: absent from `flemmad tools`, completion and `tools run`, whatever `include` and `tools.enabled` say.",
                    &[],
                ),
            ),
            field(
                "timeout",
                integer(
                    1,
                    i64::MAX,
                    "Seconds an MCP tool call may take before it is cancelled (default `tools.default_timeout`).",
                    None,
                )
                .widens(Narrowing::Bound(Bound::Ceiling)),
            ),
            field(
                "startup_timeout",
                integer(
                    1,
                    i64::MAX,
                    "Seconds a server may take to start and answer `initialize` and `tools/list`.",
                    Some(30),
                )
                .widens(Narrowing::Bound(Bound::Ceiling)),
            ),
            field(
                "trust_chat_servers",
                boolean(
                    "Let chats (frontmatter, client settings) define servers (`command`, `url`, …); only the user config file can turn this on.",
                    Some(false),
                )
                .widens(Narrowing::Never),
            ),
            field(
                "servers",
                Node::new(
                    Kind::Map {
                        key: KeyRule::Any,
                        value: Box::new(server),
                    },
                    "MCP servers keyed by name (`[tools.mcp.servers.github]`). The name `flemma` is reserved.",
                    None,
                ),
            ),
        ],
    )
}

/// The modes of a chat (`mode`), from the widest to the strictest.
pub const MODES: [&str; 3] = ["auto-edit", "default", "ask"];

/// The order of an asked agent's `permissions`, from the widest to the strictest.
pub const AGENT_PERMISSIONS: [&str; 3] = ["run", "ask", "refuse"];

/// The default of `parameters.idle_timeout`, in seconds.
pub const DEFAULT_IDLE_TIMEOUT: i64 = 300;

/// `[agents.NAME]`: the ACP agents `ask_agent` may ask.
fn agents_schema() -> Node {
    let agent = object(
        "One ACP agent `ask_agent` may ask: the program (`command`, `args`, `env`, `cwd`) that speaks the Agent Client Protocol on its stdin and stdout (`flemmad acp --no-daemon`, Gemini CLI's `gemini --experimental-acp`, an adapter for Claude Code or Codex), what it is for (`description`), and what happens when it asks permission for one of its own tool calls (`permissions`). Only the user config file may define an agent; a chat may only turn one off or make its permissions stricter, and a trusted chat may turn one on.",
        vec![
            field(
                "command",
                string(
                    "The program (found on the absolute entries of `PATH`; with a `/`, taken against `cwd`). It runs outside the sandbox, as MCP servers do.",
                    None,
                ),
            ),
            field(
                "args",
                Node::new(
                    Kind::Strings,
                    "Arguments of `command` (`[\"acp\", \"--no-daemon\", \"--config\", \"/home/me/.config/flemma/reviewer.toml\"]`); `${VAR}` is expanded from flemmad's environment.",
                    None,
                ),
            ),
            field(
                "env",
                string_map(
                    "Variables added to flemmad's environment for the agent; `${VAR}` is expanded from flemmad's environment (values never reach logs, events or files).",
                    "The variable's value.",
                ),
            ),
            field(
                "cwd",
                string(
                    "Working directory of the agent's process; default `/`, never the chat's folder by itself. The sessions it is asked to work in are given the chat's working directory (ACP `session/new`).",
                    None,
                ),
            ),
            field(
                "description",
                string(
                    "What the agent is for, as the model reads it in `ask_agent`'s description (else the title the agent gives at `initialize`).",
                    None,
                ),
            ),
            field(
                "permissions",
                choice(
                    &AGENT_PERMISSIONS,
                    "What happens when the agent asks permission for one of its own tool calls: `run` allows it, `ask` asks you (the editor, the ACP client driving the chat, or `flemmad send` stops with exit 3), `refuse` rejects it.",
                    Some("ask"),
                )
                .widens(Narrowing::Bound(Bound::Stricter(&AGENT_PERMISSIONS))),
            ),
            field(
                "enabled",
                boolean(
                    "Whether `ask_agent` offers this agent; a chat may set `false`, and a trusted chat `true`.",
                    Some(true),
                )
                .widens(Narrowing::Only(json!(false))),
            ),
        ],
    )
    .widens(Narrowing::Never);
    Node::new(
        Kind::Map {
            key: KeyRule::Any,
            value: Box::new(agent),
        },
        "ACP agents keyed by name (`[agents.reviewer]`, letters, digits, `_`, `-` and `.`): when at least one is configured the model is offered the tool `ask_agent`, which hands a self-contained task to one of them and returns its answer. Each runs as a child process of flemmad, started on its first call and reused, with a fresh session per call; its conversation is kept as a `.chat` file.",
        None,
    )
}

/// `node` with no defaults anywhere below it (a preset's `parameters` set only what they name).
fn without_defaults(mut node: Node) -> Node {
    node.default = None;
    if let Kind::Object { fields, .. } = &mut node.kind {
        for field in fields {
            field.node = without_defaults(field.node.clone());
        }
    }
    node
}

/// Built-in approval presets.
pub(crate) fn builtin_presets() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("$readonly", vec!["read", "find", "grep", "ls"]),
        (
            "$standard",
            vec!["read", "write", "edit", "find", "grep", "ls", "flemma.*"],
        ),
    ]
}

/// Every leaf path of the schema (maps contribute `<key>` placeholders), in schema order.
pub(crate) fn leaf_paths() -> Vec<(String, &'static Node)> {
    fn walk(prefix: &str, node: &'static Node, out: &mut Vec<(String, &'static Node)>) {
        match &node.kind {
            Kind::Object { fields, .. } => {
                for field in fields {
                    let path = join(prefix, field.name);
                    walk(&path, &field.node, out);
                }
            }
            Kind::Map { value, .. } => walk(&join(prefix, "<key>"), value, out),
            _ => out.push((prefix.to_string(), node)),
        }
    }
    let mut out = Vec::new();
    walk("", root(), &mut out);
    out
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// A Vertex AI location that is a plain region name (`us-central1`, `global`): the endpoint
/// `https://<location>-aiplatform.googleapis.com` then stays Google's.
/// What an untrusted chat's `tools.bash.cwd` may name: its own folder, or `../..` for an ACP
/// session's chat in `<cwd>/.flemma/sessions/` (the tool setup checks that the chat really lies
/// there, in real folders).
fn is_chat_dir_or_ancestor(value: &Value) -> bool {
    value.as_str().is_some_and(|dir| {
        matches!(
            dir.trim_end_matches('/'),
            "urn:flemma:buffer:path" | "." | "../.."
        )
    })
}

fn is_region_name(value: &Value) -> bool {
    value.as_str().is_some_and(|location| {
        !location.is_empty()
            && location.len() <= 64
            && location
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    })
}

/// The power rule of the option at `segments` (map keys included): the nearest declaration on
/// the way from the root, [`Power::Neutral`] when there is none. `None` for a path outside
/// the schema.
pub(crate) fn power_of(segments: &[String]) -> Option<Power> {
    let mut node = root();
    let mut rule = Power::Neutral;
    for segment in segments {
        node = match &node.kind {
            Kind::Object { .. } => &node.field(segment)?.node,
            Kind::Map { value, .. } => value,
            _ => return Some(rule),
        };
        if !matches!(node.power, Power::Inherit) {
            rule = node.power.clone();
        }
    }
    Some(rule)
}
