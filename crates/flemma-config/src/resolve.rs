//! Merging layers into the typed configuration, with provenance.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::config::{Config, Provider, check_mcp_server_name, default_model, mcp_server_name};
use crate::error::{ConfigError, ConfigErrors, suggest};
use crate::glob::{check_tool_glob, glob_match, is_glob, literal_prefix};
use crate::layer::{
    ConfigLayer, Entry, FunctionRef, LayerKind, ListOp, display_path, insert_at, is_preset_ref,
    locate,
};
use crate::model_string;
use crate::schema::{self, BUILTIN_TOOLS, ItemKind, Kind, Narrowing, Power};

/// How tools are auto-approved after all layers are merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoApprove {
    /// A list: tool names and verbatim globs, presets expanded, exclusions already applied.
    Tools {
        /// Approved names and globs (`flemma.*`).
        tools: Vec<String>,
        /// Names removed with `!x` while a preset was in the list (kept for later expansions).
        exclusions: Vec<String>,
        /// The names and globs the list gives itself, not through a preset.
        direct: Vec<String>,
    },
    /// A function decides (the template crate owns the closure).
    Function(FunctionRef),
}

impl AutoApprove {
    /// Whether the list form approves `tool` (globs match here); `None` when a function decides.
    pub fn approves(&self, tool: &str) -> Option<bool> {
        match self {
            AutoApprove::Tools {
                tools, exclusions, ..
            } => Some(
                tools.iter().any(|pattern| glob_match(pattern, tool))
                    && !exclusions.iter().any(|pattern| glob_match(pattern, tool)),
            ),
            AutoApprove::Function(_) => None,
        }
    }

    /// Whether the list approves `tool` by naming it (or a glob matching it) itself, rather
    /// than through a preset; `false` for a function.
    pub fn names_directly(&self, tool: &str) -> bool {
        match self {
            AutoApprove::Tools {
                direct, exclusions, ..
            } => {
                direct.iter().any(|pattern| glob_match(pattern, tool))
                    && !exclusions.iter().any(|pattern| glob_match(pattern, tool))
            }
            AutoApprove::Function(_) => false,
        }
    }
}

/// The merged configuration plus where each value came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedConfig {
    /// The typed configuration.
    pub config: Config,
    sources: BTreeMap<String, LayerKind>,
    auto_approve: AutoApprove,
    ignored: Vec<IgnoredOption>,
}

/// A value an untrusted layer (the frontmatter of a chat that is not trusted) set on an option
/// that widens what a chat may do, which resolution ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredOption {
    /// The option, as a schema path (`sandbox.enabled`, `tools.auto_approve`).
    pub path: String,
    /// What was ignored: the value (`false`, `"http://…"`), the list items it would have added
    /// (`bash`, `/`), or `a function`.
    pub value: String,
    /// What an untrusted chat's frontmatter may still do with this option (`may only set it to
    /// true`, `may only remove items`, `cannot set it`).
    pub allowed: String,
    /// `value` lists items the chat added to a list (`+bash`, `.append("bash")`), not a value
    /// it set.
    pub added_items: bool,
}

impl std::fmt::Display for IgnoredOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.added_items {
            write!(f, "`{} += {}`", self.path, self.value)
        } else {
            write!(f, "`{} = {}`", self.path, self.value)
        }
    }
}

impl ResolvedConfig {
    /// The layer that set `path` (a leaf such as `parameters.thinking`); for a table
    /// (`tools.autopilot`) the highest layer that set anything inside it.
    pub fn source_of(&self, path: &str) -> Option<LayerKind> {
        let canonical = locate(path).map(|(segments, _)| display_path(&segments));
        let path = canonical.as_deref().unwrap_or(path);
        if let Some(kind) = self.sources.get(path) {
            return Some(*kind);
        }
        let prefix = format!("{path}.");
        self.sources
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .map(|(_, kind)| *kind)
            .max()
    }

    /// Every resolved leaf path with the layer that set it, sorted by path (for `flemma/status`).
    pub fn provenance(&self) -> Vec<(String, LayerKind)> {
        self.sources
            .iter()
            .map(|(path, kind)| (path.clone(), *kind))
            .collect()
    }

    /// The resolved value at a schema path (a leaf or a table), as JSON, for status output.
    pub fn value_at(&self, path: &str) -> Option<Value> {
        let (segments, _) = locate(path).ok()?;
        let mut value = serde_json::to_value(&self.config).ok()?;
        for segment in &segments {
            value = value.get_mut(segment.as_str())?.take();
        }
        Some(value)
    }

    /// The `[agents.NAME]` entries a chat may ask, by name: enabled, with a `command`, and
    /// defined by the user's file (a chat's frontmatter or an editor's settings may turn one off
    /// or make it stricter, never say what runs). Also what was ignored, one line each.
    pub fn agents(&self) -> (Vec<(&str, &crate::config::Agent)>, Vec<String>) {
        /// The options that say what runs and what the model is told.
        const DEFINING: [&str; 5] = ["command", "args", "env", "cwd", "description"];
        let mut agents = Vec::new();
        let mut notes = Vec::new();
        for (name, agent) in &self.config.agents {
            let quoted = format!("agents.\"{name}\"");
            let from_chat = DEFINING.iter().find_map(|option| {
                self.source_of(&format!("{quoted}.{option}"))
                    .filter(|layer| *layer > LayerKind::UserFile)
                    .map(|layer| (*option, layer))
            });
            if let Some((option, layer)) = from_chat {
                notes.push(format!(
                    "agent `{name}`: `{option}` is set by the {}, which may not define an agent; the agent is ignored (define it in your config file)",
                    layer.as_str()
                ));
                continue;
            }
            if !agent.enabled {
                continue;
            }
            if agent.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                notes.push(format!(
                    "agent `{name}` has no `command`; it is ignored (set [agents.{name}] command = \"…\")"
                ));
                continue;
            }
            agents.push((name.as_str(), agent));
        }
        (agents, notes)
    }

    /// The approval policy of `tools.auto_approve`.
    pub fn auto_approve(&self) -> AutoApprove {
        self.auto_approve.clone()
    }

    /// Tools offered to the model, in order (presets and globs expanded, exclusions applied).
    pub fn enabled_tools(&self) -> Vec<String> {
        self.config.tools.enabled.clone()
    }

    /// What untrusted layers set that widens power and was ignored, in path order.
    pub fn ignored(&self) -> &[IgnoredOption] {
        &self.ignored
    }
}

impl Narrowing {
    /// Whether an untrusted layer may set `value` (a value entry) over `below`, the value the
    /// layers below it give.
    fn accepts(&self, value: &Value, below: Option<&Value>) -> bool {
        match self {
            Narrowing::Never | Narrowing::Subset => false,
            Narrowing::Only(only) => value == only,
            Narrowing::Check(check, _) => check(value),
            Narrowing::Bound(bound) => below.is_some_and(|below| bound.accepts(value, below)),
        }
    }

    /// What an untrusted chat's frontmatter may still do, for messages.
    pub(crate) fn allowed(&self) -> String {
        match self {
            Narrowing::Never => "an untrusted chat cannot set it".to_owned(),
            Narrowing::Only(value) => format!("an untrusted chat may only set it to {value}"),
            Narrowing::Subset => {
                "an untrusted chat may only remove items from it, not add any".to_owned()
            }
            Narrowing::Check(_, accepted) => format!("an untrusted chat may only set {accepted}"),
            Narrowing::Bound(bound) => bound.allowed().to_owned(),
        }
    }
}

/// The narrowing rule of `path` when it widens power (`None`: neutral, any layer sets it).
fn widening(path: &[String]) -> Option<Narrowing> {
    match schema::power_of(path) {
        Some(Power::Widens(narrowing)) => Some(narrowing),
        _ => None,
    }
}

fn describe_entry(entry: &Entry) -> String {
    match entry {
        Entry::Value(Value::Array(items)) if items.iter().all(Value::is_object) => {
            let names: Vec<String> = items
                .iter()
                .map(|item| {
                    item.get("name")
                        .or_else(|| item.get("command"))
                        .and_then(Value::as_str)
                        .map_or_else(|| "…".to_owned(), str::to_owned)
                })
                .collect();
            format!("[{}]", names.join(", "))
        }
        Entry::Value(value) => value.to_string(),
        Entry::List(ops) => format!(
            "[{}]",
            crate::layer::render_ops(ops)
                .iter()
                .map(|item| format!("{item:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Entry::Function(func) => format!("a function ({})", func.description),
    }
}

/// Merges layers (sorted by kind, stable) against the built-in and config-declared tools. The
/// defaults layer is added when `layers` has none.
pub fn resolve(layers: &[ConfigLayer]) -> Result<ResolvedConfig, ConfigErrors> {
    resolve_with_tools(layers, &[])
}

/// Like [`resolve`], with extra registered tool names (for example from `tools.sources`) that
/// tool lists may name and globs may match.
pub fn resolve_with_tools(
    layers: &[ConfigLayer],
    extra_tools: &[String],
) -> Result<ResolvedConfig, ConfigErrors> {
    let defaults;
    let mut ordered: Vec<&ConfigLayer> = layers.iter().collect();
    if !layers
        .iter()
        .any(|layer| layer.kind() == LayerKind::Defaults)
    {
        defaults = ConfigLayer::defaults();
        ordered.push(&defaults);
    }
    ordered.sort_by_key(|layer| layer.kind());

    let mut errors = Vec::new();
    // Model strings (`provider/model;key=value`, `$preset`) become the values they stand for,
    // in the layer that set them.
    let expansion = model_string::expand(&ordered, &mut errors);
    let ordered: Vec<&ConfigLayer> = expansion.layers.iter().map(|layer| &**layer).collect();

    let path_of = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let enabled_path = path_of(&["tools", "enabled"]);
    let mut values: BTreeMap<&[String], (&Value, LayerKind)> = BTreeMap::new();
    let mut lists: BTreeMap<&[String], Vec<(Cow<'_, Entry>, LayerKind)>> = BTreeMap::new();
    // What untrusted layers do to lists that they may only narrow: merged below, keeping only
    // what the trusted layers give.
    let mut narrowing: BTreeMap<&[String], Vec<(Cow<'_, Entry>, LayerKind)>> = BTreeMap::new();
    let mut ignored: Vec<IgnoredOption> = Vec::new();
    // Tools and presets an untrusted layer declared and resolution ignored: its lists may name
    // them without an error (the names are then ignored with the rest of what it adds).
    let mut ignored_tools: Vec<String> = Vec::new();
    let mut ignored_presets: Vec<String> = Vec::new();
    for (index, layer) in ordered.iter().enumerate() {
        // `;key=nil`: what lower layers set there no longer counts; the default shows through.
        for cleared in &expansion.clears[index] {
            values.remove(cleared.as_slice());
            if let Some(Entry::Value(default)) = ordered
                .first()
                .filter(|first| first.kind() == LayerKind::Defaults)
                .and_then(|first| first.entries.get(cleared))
            {
                values.insert(cleared.as_slice(), (default, LayerKind::Defaults));
            }
        }
        for (path, entry) in &layer.entries {
            let rule = if layer.is_trusted() {
                None
            } else {
                widening(path)
            };
            let ignore = |ignored: &mut Vec<IgnoredOption>, rule: &Narrowing| {
                ignored.push(IgnoredOption {
                    path: display_path(path),
                    value: describe_entry(entry),
                    allowed: rule.allowed(),
                    added_items: false,
                });
            };
            match (entry, rule) {
                (Entry::Value(value), None) => {
                    values.insert(path.as_slice(), (value, layer.kind()));
                }
                (Entry::Value(value), Some(rule)) => {
                    let below = values.get(path.as_slice()).map(|(below, _)| *below);
                    if rule.accepts(value, below) {
                        values.insert(path.as_slice(), (value, layer.kind()));
                    } else {
                        ignore(&mut ignored, &rule);
                        if path.as_slice() == ["tools", "custom"] {
                            ignored_tools.extend(tool_names(value));
                        }
                    }
                }
                (Entry::List(_) | Entry::Function(_), None) => lists
                    .entry(path.as_slice())
                    .or_default()
                    .push((Cow::Borrowed(entry), layer.kind())),
                (Entry::List(_), Some(Narrowing::Subset)) => narrowing
                    .entry(path.as_slice())
                    .or_default()
                    .push((Cow::Borrowed(entry), layer.kind())),
                (Entry::List(_) | Entry::Function(_), Some(rule)) => {
                    ignore(&mut ignored, &rule);
                    if let [first, name, ..] = path.as_slice()
                        && first == "presets"
                    {
                        ignored_presets.push(name.clone());
                    }
                }
            }
        }
    }
    for path in narrowing.keys() {
        lists.entry(path).or_default();
    }

    // Presets: built-ins, overridden by user presets of the same name.
    let mut presets: BTreeMap<String, Vec<String>> = schema::builtin_presets()
        .into_iter()
        .map(|(name, items)| {
            (
                name.to_string(),
                items.into_iter().map(String::from).collect(),
            )
        })
        .collect();
    for (path, entries) in &lists {
        if let [first, name, last] = path
            && first == "presets"
            && last == "auto_approve"
        {
            let state = fold(entries, path, &mut errors);
            if let Folded::List { items, .. } = state {
                presets.insert(name.clone(), items);
            }
        }
    }

    // Registered tools: built-ins, custom tools from config, extra names.
    let custom_names: Vec<String> = values
        .get(path_of(&["tools", "custom"]).as_slice())
        .map(|(value, _)| tool_names(value))
        .unwrap_or_default();
    let mut known: Vec<String> = BUILTIN_TOOLS.iter().map(|s| s.to_string()).collect();
    for name in custom_names.iter().chain(extra_tools) {
        if !known.contains(name) {
            known.push(name.clone());
        }
    }

    // MCP servers: their tools are discovered at run time, so names and globs under
    // `NAME.` are kept verbatim (never an error while the server has not answered yet).
    let mcp_configured: BTreeSet<String> = values
        .keys()
        .filter_map(|path| match path {
            [a, b, c, name, ..] if a == "tools" && b == "mcp" && c == "servers" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    let mcp_servers: Vec<String> = mcp_configured.iter().map(|n| mcp_server_name(n)).collect();
    check_mcp_servers(&mcp_configured, &values, &mut errors);
    check_agents(&values, &mut errors);

    // Conditional tools join the default tools.enabled when their option is on.
    let lsp_path = path_of(&["tools", "lsp", "servers"]);
    let lsp_on = lists
        .get(lsp_path.as_slice())
        .map(|entries| matches!(fold(entries, &lsp_path, &mut Vec::new()), Folded::List { items, .. } if !items.is_empty()))
        .unwrap_or(false);
    let fetch_on = values
        .get(path_of(&["tools", "fetch_content"]).as_slice())
        .is_some_and(|(value, _)| **value == Value::Bool(true));
    let skills_on = values.contains_key(path_of(&["tools", "skills_dir"]).as_slice());
    // `ask_agent` joins when an agent is configured (`condition_holds` then asks whether one
    // is enabled).
    let agents_on = values
        .keys()
        .any(|path| matches!(path, [first, _, ..] if first == "agents"));
    let mut implicit: Vec<String> = Vec::new();
    if skills_on {
        implicit.push("read_skill".into());
    }
    if fetch_on {
        implicit.push("fetch_content".into());
    }
    if lsp_on {
        implicit.push("lsp".into());
    }
    if agents_on {
        implicit.push("ask_agent".into());
    }
    implicit.extend(custom_names.iter().cloned());
    if !implicit.is_empty() {
        let entries = lists.entry(enabled_path.as_slice()).or_default();
        let after_defaults = entries
            .iter()
            .position(|(_, kind)| *kind != LayerKind::Defaults)
            .unwrap_or(entries.len());
        let extra: Vec<(Cow<'_, Entry>, LayerKind)> = implicit
            .into_iter()
            .map(|name| {
                (
                    Cow::Owned(Entry::List(vec![ListOp::Append(name)])),
                    LayerKind::Defaults,
                )
            })
            .collect();
        entries.splice(after_defaults..after_defaults, extra);
    }

    let mut tree = skeleton(schema::root());
    let mut sources: BTreeMap<String, LayerKind> = BTreeMap::new();
    for (path, (value, kind)) in &values {
        insert_at(&mut tree, path, (*value).clone());
        sources.insert(display_path(path), *kind);
    }

    let approve_path = path_of(&["tools", "auto_approve"]);
    let mut auto_approve = AutoApprove::Tools {
        tools: Vec::new(),
        exclusions: Vec::new(),
        direct: Vec::new(),
    };
    for (path, entries) in &lists {
        let display = display_path(path);
        let item_kind = list_item_kind(path);
        let untrusted = narrowing.get(path);
        if matches!(item_kind, ItemKind::Tool | ItemKind::Approval) {
            check_names(
                entries,
                &display,
                &known,
                &mcp_servers,
                &presets,
                &mut errors,
            );
            if let Some(untrusted) = untrusted {
                let mut declared = known.clone();
                declared.extend(ignored_tools.iter().cloned());
                let mut declared_presets = presets.clone();
                for name in &ignored_presets {
                    declared_presets.entry(name.clone()).or_default();
                }
                check_names(
                    untrusted,
                    &display,
                    &declared,
                    &mcp_servers,
                    &declared_presets,
                    &mut errors,
                );
            }
        }
        let context = ListContext {
            path,
            display: &display,
            item_kind,
            is_auto_approve: *path == approve_path.as_slice(),
            known: &known,
            mcp_servers: &mcp_servers,
            presets: &presets,
        };
        let mut list = resolve_list(entries, &context, &mut errors);
        let mut top = entries.last().map(|(_, kind)| *kind);
        if let Some(untrusted) = untrusted {
            let mut all = entries.clone();
            all.extend(untrusted.iter().cloned());
            let wide = resolve_list(&all, &context, &mut errors);
            let (narrowed, dropped) = list.narrowed_by(wide);
            if !dropped.is_empty() {
                ignored.push(IgnoredOption {
                    path: display.clone(),
                    value: format!(
                        "[{}]",
                        dropped
                            .iter()
                            .map(|item| format!("{item:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    allowed: Narrowing::Subset.allowed(),
                    added_items: true,
                });
            }
            if narrowed != list {
                top = untrusted.last().map(|(_, kind)| *kind);
                list = narrowed;
            }
        }
        let Some(top_kind) = top else {
            continue;
        };
        sources.insert(display.clone(), top_kind);
        let resolved = match list {
            ListResolution::Function(func) => {
                if context.is_auto_approve {
                    auto_approve = AutoApprove::Function(func);
                }
                Vec::new()
            }
            ListResolution::Items {
                items,
                exclusions,
                direct,
            } => {
                if context.is_auto_approve {
                    auto_approve = AutoApprove::Tools {
                        tools: items.clone(),
                        exclusions,
                        direct,
                    };
                }
                items
            }
        };
        insert_at(
            &mut tree,
            path,
            Value::Array(resolved.into_iter().map(Value::String).collect()),
        );
    }

    // Model: the provider's default unless `model` was set at or above the layer of `provider`.
    let provider_entry = values.get(path_of(&["provider"]).as_slice());
    let provider = provider_entry
        .and_then(|(value, _)| value.as_str())
        .and_then(Provider::from_name)
        .unwrap_or(Provider::Anthropic);
    let provider_kind = provider_entry.map_or(LayerKind::Defaults, |(_, kind)| *kind);
    let model = match values.get(path_of(&["model"]).as_slice()) {
        Some((Value::String(model), kind)) if *kind >= provider_kind => model.clone(),
        _ => {
            sources.insert("model".into(), provider_kind);
            default_model(provider).to_string()
        }
    };
    insert_at(&mut tree, &path_of(&["model"]), Value::String(model));

    check_custom_tools(&custom_names, &mut errors);
    check_trust_paths(&tree, &mut errors);
    check_mcp_globs(&tree, &mut errors);
    ignored.sort_by(|a, b| a.path.cmp(&b.path));

    if !errors.is_empty() {
        return Err(ConfigErrors(dedupe(errors)));
    }
    let config: Config = serde_json::from_value(tree).map_err(|error| {
        ConfigError::new(
            "",
            format!(
                "internal error: the merged configuration does not match the typed tree ({error}); \
                 include the default layer when resolving, and report this as a bug"
            ),
        )
    })?;
    Ok(ResolvedConfig {
        config,
        sources,
        auto_approve,
        ignored,
    })
}

/// Every table of the schema as an empty object, so optional sections always exist.
fn skeleton(node: &schema::Node) -> Value {
    match &node.kind {
        Kind::Object { fields, .. } => Value::Object(
            fields
                .iter()
                .filter(|field| !field.node.is_leaf())
                .map(|field| (field.name.to_string(), skeleton(&field.node)))
                .collect(),
        ),
        _ => Value::Object(Map::new()),
    }
}

fn dedupe(errors: Vec<ConfigError>) -> Vec<ConfigError> {
    let mut seen = Vec::new();
    for error in errors {
        if !seen.contains(&error) {
            seen.push(error);
        }
    }
    seen
}

fn list_item_kind(path: &[String]) -> ItemKind {
    let mut node = schema::root();
    for segment in path {
        node = match &node.kind {
            Kind::Object { .. } => match node.field(segment) {
                Some(field) => &field.node,
                None => return ItemKind::Text,
            },
            Kind::Map { value, .. } => value,
            _ => return ItemKind::Text,
        };
    }
    match &node.kind {
        Kind::List { items, .. } => *items,
        _ => ItemKind::Text,
    }
}

/// What [`resolve_list`] needs to know about the list it resolves.
struct ListContext<'a> {
    path: &'a [String],
    display: &'a str,
    item_kind: ItemKind,
    is_auto_approve: bool,
    known: &'a [String],
    mcp_servers: &'a [String],
    presets: &'a BTreeMap<String, Vec<String>>,
}

/// A list option after every layer's operations: its items (tool lists expanded against the
/// presets and the known tools, the approval list expanded with its exclusions kept), or the
/// function that decides instead.
#[derive(Debug, Clone, PartialEq)]
enum ListResolution {
    Items {
        items: Vec<String>,
        exclusions: Vec<String>,
        /// The names and globs the list gives itself, not through a preset.
        direct: Vec<String>,
    },
    Function(FunctionRef),
}

impl ListResolution {
    /// `wide` (this list with an untrusted layer's operations) cut down to what this list (the
    /// trusted layers' result) allows: its items that this list has (a name this list matches
    /// with a glob counts), in `wide`'s order, and the exclusions of both. Also the items cut.
    fn narrowed_by(&self, wide: ListResolution) -> (ListResolution, Vec<String>) {
        let (
            ListResolution::Items {
                items,
                exclusions,
                direct,
            },
            ListResolution::Items {
                items: wide_items,
                exclusions: wide_exclusions,
                ..
            },
        ) = (self, wide)
        else {
            // A function below decides (only a frontmatter can set one): the untrusted layer
            // changes nothing.
            return (self.clone(), Vec::new());
        };
        let covered = |item: &String| {
            items.contains(item)
                || (!is_glob(item) && items.iter().any(|allowed| glob_match(allowed, item)))
        };
        let (kept, dropped): (Vec<String>, Vec<String>) =
            wide_items.into_iter().partition(|item| covered(item));
        let mut all_exclusions = wide_exclusions;
        for exclusion in exclusions {
            if !all_exclusions.contains(exclusion) {
                all_exclusions.push(exclusion.clone());
            }
        }
        // What the untrusted layer names itself does not count as named: a preset's limits
        // (reads inside the project) stay.
        let kept = ListResolution::Items {
            items: kept,
            exclusions: all_exclusions,
            direct: direct.clone(),
        };
        (kept, dropped)
    }
}

/// Folds and expands the operations of one list option.
fn resolve_list(
    entries: &[(Cow<'_, Entry>, LayerKind)],
    context: &ListContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> ListResolution {
    match fold(entries, context.path, errors) {
        Folded::Function(func) => ListResolution::Function(func),
        Folded::List { items, exclusions } => {
            let direct = items
                .iter()
                .filter(|item| !is_preset_ref(item))
                .cloned()
                .collect();
            let items = match context.item_kind {
                ItemKind::Tool => {
                    let mut tools = expand_tools(
                        &items,
                        &exclusions,
                        context.presets,
                        context.known,
                        context.mcp_servers,
                        context.display,
                        errors,
                    );
                    for excluded in mcp_exclusions(entries, context.mcp_servers) {
                        tools.push(format!("!{excluded}"));
                    }
                    tools
                }
                ItemKind::Approval if context.is_auto_approve => {
                    expand_approval(&items, &exclusions, context.presets)
                }
                _ => items,
            };
            ListResolution::Items {
                items,
                exclusions,
                direct,
            }
        }
    }
}

enum Folded {
    List {
        items: Vec<String>,
        exclusions: Vec<String>,
    },
    Function(FunctionRef),
}

/// Applies every layer's operations in order.
fn fold(
    entries: &[(Cow<'_, Entry>, LayerKind)],
    path: &[String],
    errors: &mut Vec<ConfigError>,
) -> Folded {
    let mut items: Vec<String> = Vec::new();
    let mut exclusions: Vec<String> = Vec::new();
    let mut function: Option<FunctionRef> = None;
    for (entry, kind) in entries {
        match &**entry {
            Entry::Function(func) => {
                function = Some(func.clone());
                items.clear();
                exclusions.clear();
            }
            Entry::List(ops) => {
                for op in ops {
                    if function.is_some() && !matches!(op, ListOp::Set(_)) {
                        let display = display_path(path);
                        errors.push(
                            ConfigError::new(
                                display.clone(),
                                format!(
                                    "cannot add to or remove from '{display}': a lower layer set it to a function; assign a full list instead"
                                ),
                            )
                            .in_layer(*kind),
                        );
                        continue;
                    }
                    match op {
                        ListOp::Set(set) => {
                            function = None;
                            items.clear();
                            exclusions.clear();
                            for item in set {
                                if !items.contains(item) {
                                    items.push(item.clone());
                                }
                            }
                        }
                        ListOp::Append(item) => {
                            items.retain(|existing| existing != item);
                            exclusions.retain(|existing| existing != item);
                            items.push(item.clone());
                        }
                        ListOp::Prepend(item) => {
                            items.retain(|existing| existing != item);
                            exclusions.retain(|existing| existing != item);
                            items.insert(0, item.clone());
                        }
                        ListOp::Remove(item) => {
                            let before = items.len();
                            items.retain(|existing| !glob_match(item, existing));
                            let removed_directly = items.len() != before;
                            let has_preset = items.iter().any(|existing| is_preset_ref(existing));
                            if (has_preset || !removed_directly) && !exclusions.contains(item) {
                                exclusions.push(item.clone());
                            }
                        }
                    }
                }
            }
            Entry::Value(_) => {}
        }
    }
    match function {
        Some(func) => Folded::Function(func),
        None => Folded::List { items, exclusions },
    }
}

fn op_items(op: &ListOp) -> Vec<&String> {
    match op {
        ListOp::Set(items) => items.iter().collect(),
        ListOp::Append(item) | ListOp::Prepend(item) | ListOp::Remove(item) => vec![item],
    }
}

/// Whether `item` (a name or a glob) may name a tool of one of the MCP servers `servers`
/// (their tool-name forms): `github.search`, `github.*`, `git*`, `*`.
pub(crate) fn names_mcp_tool(item: &str, servers: &[String]) -> bool {
    servers.iter().any(|server| {
        let prefix = format!("{server}.");
        if is_glob(item) {
            let literal = literal_prefix(item);
            prefix.starts_with(literal) || literal.starts_with(&prefix)
        } else {
            item.starts_with(&prefix)
        }
    })
}

/// The MCP names and globs a tool list removes (`!github.*`), in layer order: kept as `!x`
/// items of the resolved list, so they still apply once the servers' tools are discovered
/// (a later `+x` of the same item takes it back).
fn mcp_exclusions(entries: &[(Cow<'_, Entry>, LayerKind)], servers: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (entry, _) in entries {
        let Entry::List(ops) = &**entry else {
            out.clear();
            continue;
        };
        for op in ops {
            match op {
                ListOp::Set(_) => out.clear(),
                ListOp::Append(item) | ListOp::Prepend(item) => out.retain(|x| x != item),
                ListOp::Remove(item) if names_mcp_tool(item, servers) => {
                    if !out.contains(item) {
                        out.push(item.clone());
                    }
                }
                ListOp::Remove(_) => {}
            }
        }
    }
    out
}

/// The `[tools.mcp.servers]` names: the reserved `flemma`, names that are not tool-name
/// safe, two names that become the same tool-name form, and a server with both or neither of
/// `command` and `url`.
/// Every configured agent has a name `ask_agent` can say and write into a file name.
fn check_agents(values: &BTreeMap<&[String], (&Value, LayerKind)>, errors: &mut Vec<ConfigError>) {
    let names: BTreeSet<&String> = values
        .keys()
        .filter_map(|path| match path {
            [first, name, ..] if first == "agents" => Some(name),
            _ => None,
        })
        .collect();
    for name in names {
        if let Err(message) = crate::check_agent_name(name) {
            let path = format!("agents.{}", display_path(std::slice::from_ref(name)));
            errors.push(ConfigError::new(path, message));
        }
    }
}

fn check_mcp_servers(
    configured: &BTreeSet<String>,
    values: &BTreeMap<&[String], (&Value, LayerKind)>,
    errors: &mut Vec<ConfigError>,
) {
    let mut seen: BTreeMap<String, &String> = BTreeMap::new();
    for name in configured {
        let path = format!(
            "tools.mcp.servers.{}",
            display_path(std::slice::from_ref(name))
        );
        let normal = match check_mcp_server_name(name) {
            Ok(normal) => normal,
            Err(message) => {
                errors.push(ConfigError::new(path.clone(), message));
                continue;
            }
        };
        if let Some(other) = seen.insert(normal.clone(), name) {
            errors.push(ConfigError::new(
                path.clone(),
                format!("the MCP servers '{other}' and '{name}' both give the tool prefix '{normal}.' (dots become hyphens); rename one of them"),
            ));
        }
        let has = |leaf: &str| {
            values.keys().any(|key| {
                matches!(*key, [a, b, c, n, l] if a == "tools" && b == "mcp" && c == "servers" && n == name && l == leaf)
            })
        };
        match (has("command"), has("url")) {
            (true, true) => errors.push(ConfigError::new(
                path,
                format!("the MCP server '{name}' has both `command` and `url`; keep `command` for a stdio server or `url` for a streamable-HTTP server"),
            )),
            (false, false) => errors.push(ConfigError::new(
                path,
                format!("the MCP server '{name}' has neither `command` nor `url`; define it in your config file with `command = \"…\"` (stdio) or `url = \"http://…\"` (streamable HTTP)"),
            )),
            _ => {}
        }
    }
}

/// Unknown tool and preset names are errors with suggestions (globs are checked on expansion).
fn check_names(
    entries: &[(Cow<'_, Entry>, LayerKind)],
    path: &str,
    known: &[String],
    mcp_servers: &[String],
    presets: &BTreeMap<String, Vec<String>>,
    errors: &mut Vec<ConfigError>,
) {
    for (entry, kind) in entries {
        let Entry::List(ops) = &**entry else { continue };
        for op in ops {
            for item in op_items(op) {
                if is_preset_ref(item) {
                    if !presets.contains_key(item) {
                        errors.push(
                            ConfigError::new(
                                path,
                                format!("unknown preset '{item}' in '{path}'; define it under [presets.\"{item}\"] or use a built-in preset ($readonly, $standard)"),
                            )
                            .with_suggestion(suggest(item, presets.keys().map(String::as_str)))
                            .in_layer(*kind),
                        );
                    }
                } else if let Err(error) = check_tool_glob(item) {
                    errors.push(
                        ConfigError::new(path, glob_error(item, path, &error)).in_layer(*kind),
                    );
                } else if !is_glob(item)
                    && !known.contains(item)
                    && !names_mcp_tool(item, mcp_servers)
                {
                    errors.push(
                        ConfigError::new(
                            path,
                            format!("unknown value '{item}' in '{path}': no tool has that name"),
                        )
                        .with_suggestion(suggest(item, known.iter().map(String::as_str)))
                        .in_layer(*kind),
                    );
                }
            }
        }
    }
}

fn expand_preset(
    name: &str,
    presets: &BTreeMap<String, Vec<String>>,
    visiting: &mut BTreeSet<String>,
    out: &mut Vec<String>,
) {
    if !visiting.insert(name.to_string()) {
        return;
    }
    if let Some(items) = presets.get(name) {
        for item in items {
            if is_preset_ref(item) {
                expand_preset(item, presets, visiting, out);
            } else if !out.contains(item) {
                out.push(item.clone());
            }
        }
    }
    visiting.remove(name);
}

fn expand_approval(
    items: &[String],
    exclusions: &[String],
    presets: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for item in items {
        if is_preset_ref(item) {
            expand_preset(item, presets, &mut BTreeSet::new(), &mut out);
        } else if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out.retain(|item| !exclusions.iter().any(|excluded| glob_match(excluded, item)));
    out
}

fn expand_tools(
    items: &[String],
    exclusions: &[String],
    presets: &BTreeMap<String, Vec<String>>,
    known: &[String],
    mcp_servers: &[String],
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<String> {
    let mut out = Vec::new();
    for item in expand_approval(items, &[], presets) {
        if names_mcp_tool(&item, mcp_servers) && !out.contains(&item) {
            // Matched against the server's tools once it has listed them.
            out.push(item.clone());
        }
        if is_glob(&item) {
            if check_tool_glob(&item).is_err() {
                // Said by `check_names`.
                continue;
            }
            let matches: Vec<&String> = known
                .iter()
                .filter(|name| glob_match(&item, name))
                .collect();
            if matches.is_empty() && !names_mcp_tool(&item, mcp_servers) {
                errors.push(ConfigError::new(
                    path,
                    format!("glob pattern '{item}' in '{path}' matched no tools; check the pattern against the tool names"),
                ));
            }
            for name in matches {
                if !out.contains(name) {
                    out.push(name.clone());
                }
            }
        } else if !out.contains(&item) {
            out.push(item);
        }
    }
    out.retain(|item| !exclusions.iter().any(|excluded| glob_match(excluded, item)));
    out
}

/// The names of the `tools.custom` records in `value`.
fn tool_names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool.get("name").and_then(Value::as_str).map(String::from))
        .collect()
}

/// What a configuration error says of an item of `path` that is not a valid glob.
fn glob_error(item: &str, path: &str, error: &crate::glob::GlobError) -> String {
    format!(
        "'{item}' in '{path}' is not a valid glob ({}); see \"Globs\" in docs/configuration.md",
        error.reason
    )
}

/// The globs of `tools.mcp.include` and `tools.mcp.exclude` are valid.
fn check_mcp_globs(tree: &Value, errors: &mut Vec<ConfigError>) {
    for (pointer, path) in [
        ("/tools/mcp/include", "tools.mcp.include"),
        ("/tools/mcp/exclude", "tools.mcp.exclude"),
    ] {
        let items = tree.pointer(pointer).and_then(Value::as_array);
        for item in items.into_iter().flatten().filter_map(Value::as_str) {
            if let Err(error) = check_tool_glob(item) {
                errors.push(ConfigError::new(path, glob_error(item, path, &error)));
            }
        }
    }
}

fn check_trust_paths(tree: &Value, errors: &mut Vec<ConfigError>) {
    let paths = tree.pointer("/trust/paths").and_then(Value::as_array);
    for pattern in paths.into_iter().flatten().filter_map(Value::as_str) {
        if let Err(error) = crate::glob::PathGlob::new(pattern) {
            errors.push(ConfigError::new(
                "trust.paths",
                glob_error(pattern, "trust.paths", &error),
            ));
        } else if !crate::trust::is_trust_path(pattern) {
            errors.push(ConfigError::new(
                "trust.paths",
                format!(
                    "'{pattern}' in 'trust.paths' is not an absolute path; write '/…' or '~/…' (a relative path would trust chats wherever flemmad happens to run)"
                ),
            ));
        }
    }
}

fn check_custom_tools(names: &[String], errors: &mut Vec<ConfigError>) {
    let mut seen = BTreeSet::new();
    for name in names {
        if BUILTIN_TOOLS.contains(&name.as_str()) {
            errors.push(ConfigError::new(
                "tools.custom",
                format!("custom tool '{name}' has the name of a built-in tool; rename it"),
            ));
        } else if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            errors.push(ConfigError::new(
                "tools.custom",
                format!(
                    "custom tool name '{name}' may only contain letters, digits, '_', '-' and '.'"
                ),
            ));
        } else if !seen.insert(name.clone()) {
            errors.push(ConfigError::new(
                "tools.custom",
                format!("custom tool '{name}' is declared twice; keep one definition"),
            ));
        }
    }
}
