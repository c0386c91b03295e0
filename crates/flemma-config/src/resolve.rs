//! Merging layers into the typed configuration, with provenance.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::config::{Config, Provider, default_model};
use crate::error::{ConfigError, ConfigErrors, suggest};
use crate::layer::{
    ConfigLayer, Entry, FunctionRef, LayerKind, ListOp, display_path, insert_at, is_preset_ref,
    locate,
};
use crate::model_string;
use crate::schema::{self, BUILTIN_TOOLS, ItemKind, Kind};

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

/// Matches `*` wildcards (any run of characters, dots included); other characters are literal.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == name;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return false,
    };
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(index) => remaining = &remaining[index + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// The merged configuration plus where each value came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedConfig {
    /// The typed configuration.
    pub config: Config,
    sources: BTreeMap<String, LayerKind>,
    auto_approve: AutoApprove,
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

    /// The approval policy of `tools.auto_approve`.
    pub fn auto_approve(&self) -> AutoApprove {
        self.auto_approve.clone()
    }

    /// Tools offered to the model, in order (presets and globs expanded, exclusions applied).
    pub fn enabled_tools(&self) -> Vec<String> {
        self.config.tools.enabled.clone()
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
            match entry {
                Entry::Value(value) => {
                    values.insert(path.as_slice(), (value, layer.kind()));
                }
                Entry::List(_) | Entry::Function(_) => lists
                    .entry(path.as_slice())
                    .or_default()
                    .push((Cow::Borrowed(entry), layer.kind())),
            }
        }
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
        .and_then(|(value, _)| value.as_array())
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool.get("name").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut known: Vec<String> = BUILTIN_TOOLS.iter().map(|s| s.to_string()).collect();
    for name in custom_names.iter().chain(extra_tools) {
        if !known.contains(name) {
            known.push(name.clone());
        }
    }

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
        if matches!(item_kind, ItemKind::Tool | ItemKind::Approval) {
            check_names(entries, &display, &known, &presets, &mut errors);
        }
        let Some((_, top_kind)) = entries.last() else {
            continue;
        };
        sources.insert(display.clone(), *top_kind);
        let resolved = match fold(entries, path, &mut errors) {
            Folded::Function(func) => {
                if *path == approve_path.as_slice() {
                    auto_approve = AutoApprove::Function(func);
                }
                Vec::new()
            }
            Folded::List { items, exclusions } => match item_kind {
                ItemKind::Tool => {
                    expand_tools(&items, &exclusions, &presets, &known, &display, &mut errors)
                }
                ItemKind::Approval if *path == approve_path.as_slice() => {
                    let tools = expand_approval(&items, &exclusions, &presets);
                    let direct = items
                        .iter()
                        .filter(|item| !is_preset_ref(item))
                        .cloned()
                        .collect();
                    auto_approve = AutoApprove::Tools {
                        tools: tools.clone(),
                        exclusions,
                        direct,
                    };
                    tools
                }
                _ => items,
            },
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

/// Unknown tool and preset names are errors with suggestions (globs are checked on expansion).
fn check_names(
    entries: &[(Cow<'_, Entry>, LayerKind)],
    path: &str,
    known: &[String],
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
                } else if !item.contains('*') && !known.contains(item) {
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
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<String> {
    let mut out = Vec::new();
    for item in expand_approval(items, &[], presets) {
        if item.contains('*') {
            let matches: Vec<&String> = known
                .iter()
                .filter(|name| glob_match(&item, name))
                .collect();
            if matches.is_empty() {
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
