//! One configuration layer: validated values and list operations, keyed by schema path.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::parse_percent;
use crate::error::{ConfigError, ConfigErrors, Location, suggest};
use crate::schema::{self, Field, ItemKind, KeyRule, Kind, Node};

/// Where a layer comes from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LayerKind {
    /// Built-in defaults from the schema.
    Defaults,
    /// The user config file (TOML).
    UserFile,
    /// Client settings (LSP `initializationOptions` / `workspace/configuration`).
    Client,
    /// Runtime changes (`flemma/switch`).
    Runtime,
    /// The document's frontmatter.
    Frontmatter,
}

impl LayerKind {
    /// A lowercase name for messages and status output.
    pub fn as_str(self) -> &'static str {
        match self {
            LayerKind::Defaults => "defaults",
            LayerKind::UserFile => "config file",
            LayerKind::Client => "client settings",
            LayerKind::Runtime => "runtime",
            LayerKind::Frontmatter => "frontmatter",
        }
    }
}

/// One operation on a list-valued option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListOp {
    /// Replace the list (items may be `$preset` spreads).
    Set(Vec<String>),
    /// Add at the end (`+x`).
    Append(String),
    /// Add at the front (`^x`).
    Prepend(String),
    /// Remove (`!x`); removing a tool that lives in a preset excludes it from the expansion.
    Remove(String),
}

/// An opaque reference to a function (a Rhai closure kept by the template crate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionRef {
    /// Identifier chosen by the owner of the closure.
    pub id: u64,
    /// Human description for status output.
    pub description: String,
}

/// What a layer holds for one leaf path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// A validated scalar, record list or object value.
    Value(Value),
    /// List operations in declaration order.
    List(Vec<ListOp>),
    /// A function deciding instead of a list.
    Function(FunctionRef),
}

/// One layer of configuration: validated values and list operations keyed by schema path.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigLayer {
    kind: LayerKind,
    /// Whether its values may widen what a chat may do (see [`ConfigLayer::set_trusted`]).
    trusted: bool,
    pub(crate) entries: BTreeMap<Vec<String>, Entry>,
    /// What this layer sets that flemmad reads differently or ignores (Flemma-only options,
    /// the pre-0.12 `:` separator in tool lists): worth a warning, never a refusal.
    warnings: Vec<ConfigError>,
}

impl ConfigLayer {
    /// An empty layer of the given kind.
    pub fn new(kind: LayerKind) -> Self {
        Self {
            kind,
            trusted: true,
            entries: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }

    /// Whether this layer is trusted (every new layer is).
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// Marks the layer trusted or not. The frontmatter of a chat that is not trusted
    /// (`docs/security.md`) is an untrusted layer: [`crate::resolve`] ignores what it sets on
    /// options that widen what a chat may do, except what only narrows them, and lists what
    /// it ignored ([`crate::ResolvedConfig::ignored`]).
    pub fn set_trusted(&mut self, trusted: bool) {
        self.trusted = trusted;
    }

    /// The defaults layer, derived from the schema.
    pub fn defaults() -> Self {
        let mut layer = Self::new(LayerKind::Defaults);
        fn walk(node: &Node, segments: &mut Vec<String>, layer: &mut ConfigLayer) {
            match &node.kind {
                Kind::Object { fields, .. } => {
                    for field in fields {
                        segments.push(field.name.to_string());
                        walk(&field.node, segments, layer);
                        segments.pop();
                    }
                }
                Kind::Map { .. } => {}
                Kind::List { .. } => {
                    if let Some(Value::Array(items)) = &node.default {
                        let items = items
                            .iter()
                            .filter_map(|item| item.as_str().map(str::to_string))
                            .collect();
                        layer
                            .entries
                            .insert(segments.clone(), Entry::List(vec![ListOp::Set(items)]));
                    }
                }
                _ => {
                    if let Some(default) = &node.default {
                        layer
                            .entries
                            .insert(segments.clone(), Entry::Value(default.clone()));
                    }
                }
            }
        }
        walk(schema::root(), &mut Vec::new(), &mut layer);
        layer
    }

    /// The kind of this layer.
    pub fn kind(&self) -> LayerKind {
        self.kind
    }

    /// Whether the layer sets nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What this layer sets that flemmad ignores or reads differently: Flemma-only options
    /// (each naming what flemmad does instead) and tool names with the pre-0.12 `:` separator
    /// (read with `.`). Warnings, not errors: the layer applies without them.
    pub fn warnings(&self) -> &[ConfigError] {
        &self.warnings
    }

    fn warn(&mut self, warning: ConfigError) {
        let warning = warning.in_layer(self.kind);
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    /// Parses and validates a TOML document. Errors carry line and column.
    pub fn from_toml_str(text: &str, kind: LayerKind) -> Result<Self, ConfigErrors> {
        let table = toml::de::DeTable::parse(text).map_err(|error| {
            let location = error
                .span()
                .map(|span| Location::from_offset(text, span.start));
            let mut config_error = ConfigError::new(
                "",
                format!(
                    "invalid TOML: {}; fix the syntax of the config file",
                    error.message().trim_end()
                ),
            )
            .in_layer(kind);
            config_error.location = location;
            ConfigErrors::from(config_error)
        })?;
        let mut spans = HashMap::new();
        let mut errors = Vec::new();
        let value = toml_table_to_json(table.get_ref(), &mut Vec::new(), &mut spans, &mut errors);
        let mut layer = Self::new(kind);
        if errors.is_empty() {
            layer.apply_root(&value, &mut errors);
        }
        for warning in &mut layer.warnings {
            warning.location = locate_span(&spans, &warning.path)
                .map(|span| Location::from_offset(text, span.start));
        }
        if errors.is_empty() {
            return Ok(layer);
        }
        for error in &mut errors {
            error.location = locate_span(&spans, &error.path)
                .map(|span| Location::from_offset(text, span.start));
        }
        Err(ConfigErrors(errors))
    }

    /// Reads and validates a TOML config file.
    pub fn from_toml_file(path: &Path, kind: LayerKind) -> Result<Self, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigError::new(
                "",
                format!(
                    "cannot read config file {}: {error}; check the path given by --config or FLEMMA_CONFIG",
                    path.display()
                ),
            )
            .in_layer(kind)
        })?;
        let file = path.display().to_string();
        let mut layer = Self::from_toml_str(&text, kind).map_err(|mut errors| {
            for error in &mut errors.0 {
                error.file = Some(file.clone());
            }
            errors
        })?;
        for warning in &mut layer.warnings {
            warning.file = Some(file.clone());
        }
        Ok(layer)
    }

    /// Validates the JSON form (the `flemma` object of JSON frontmatter, LSP settings).
    pub fn from_json(value: &Value, kind: LayerKind) -> Result<Self, ConfigErrors> {
        let mut layer = Self::new(kind);
        let mut errors = Vec::new();
        layer.apply_root(value, &mut errors);
        if errors.is_empty() {
            Ok(layer)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    fn apply_root(&mut self, value: &Value, errors: &mut Vec<ConfigError>) {
        let kind = self.kind;
        let start = errors.len();
        self.apply(&mut Vec::new(), schema::root(), value, errors);
        for error in &mut errors[start..] {
            error.layer = Some(kind);
        }
    }

    /// Sets the option at `path` (a schema path such as `parameters.thinking`, a table such as
    /// `tools.autopilot`, or a map entry such as `models."gpt-5"`). Arrays given for list-valued
    /// options use the op-prefix syntax and replace this layer's earlier operations on that list.
    /// `null` removes what this layer set at and below `path` (the lower layers show through).
    /// A Flemma-only option (see [`flemma_only_option`]) is accepted with a warning and ignored.
    pub fn set(&mut self, path: &str, value: Value) -> Result<(), ConfigError> {
        let (segments, node) = match locate(path) {
            Ok(found) => found,
            Err(error) => match crate::flemma_only::instead_of(path) {
                Some(instead) => {
                    self.warn(ConfigError::new(
                        path,
                        crate::flemma_only::warning(path, instead),
                    ));
                    return Ok(());
                }
                None => return Err(error),
            },
        };
        if value.is_null() {
            self.entries.retain(|key, _| !key.starts_with(&segments));
            return Ok(());
        }
        let mut errors = Vec::new();
        let mut scratch = self.clone();
        let mut segments = segments;
        scratch.apply(&mut segments, node, &value, &mut errors);
        match errors.into_iter().next() {
            Some(error) => Err(error.in_layer(self.kind)),
            None => {
                *self = scratch;
                Ok(())
            }
        }
    }

    /// Adds one list operation to the list-valued option at `path`.
    pub fn list_op(&mut self, path: &str, op: ListOp) -> Result<(), ConfigError> {
        let (segments, node) = locate(path)?;
        let display = display_path(&segments);
        let Kind::List { items, .. } = &node.kind else {
            return Err(ConfigError::new(
                display.clone(),
                format!(
                    "'{display}' is not a list, so it has no append/prepend/remove; assign it a value instead"
                ),
            )
            .in_layer(self.kind));
        };
        let items = *items;
        let mut op = op;
        if matches!(items, ItemKind::Tool | ItemKind::Approval) {
            let mut warnings = Vec::new();
            rewrite_colon_items(std::slice::from_mut(&mut op), &display, &mut warnings);
            for warning in warnings {
                self.warn(warning);
            }
        }
        let names: Vec<&String> = match &op {
            ListOp::Set(items) => items.iter().collect(),
            ListOp::Append(item) | ListOp::Prepend(item) | ListOp::Remove(item) => vec![item],
        };
        for name in names {
            if name.starts_with(['+', '^', '!']) {
                return Err(ConfigError::new(
                    display.clone(),
                    format!(
                        "'{name}' passed to a list operation on '{display}' carries an op prefix; pass the bare name (the operation already says append, prepend or remove)"
                    ),
                )
                .in_layer(self.kind));
            }
            check_list_item(name, items, &display).map_err(|error| error.in_layer(self.kind))?;
        }
        match self.entries.get_mut(&segments) {
            Some(Entry::List(ops)) => ops.push(op),
            Some(Entry::Function(_)) if !matches!(op, ListOp::Set(_)) => {
                return Err(ConfigError::new(
                    display.clone(),
                    format!(
                        "'{display}' was set to a function in this layer; assign a list before adding or removing items"
                    ),
                )
                .in_layer(self.kind));
            }
            _ => {
                self.entries.insert(segments, Entry::List(vec![op]));
            }
        }
        Ok(())
    }

    /// Lets a function decide instead of a list (only where the schema allows it:
    /// `tools.auto_approve`).
    pub fn set_function(&mut self, path: &str, func: FunctionRef) -> Result<(), ConfigError> {
        let (segments, node) = locate(path)?;
        let display = display_path(&segments);
        match &node.kind {
            Kind::List {
                allows_function: true,
                ..
            } => {
                self.entries.insert(segments, Entry::Function(func));
                Ok(())
            }
            _ => Err(ConfigError::new(
                display.clone(),
                format!("'{display}' cannot be a function; only 'tools.auto_approve' accepts one"),
            )
            .in_layer(self.kind)),
        }
    }

    /// This layer's own view of `path`: a value, a list of operations in op-prefix form
    /// (`["$standard", "!write", "+bash"]`), `{"function": {id, description}}`, or a table of
    /// everything the layer sets below `path`. `None` when the layer sets nothing there.
    pub fn get(&self, path: &str) -> Option<Value> {
        let (segments, _) = locate(path).ok()?;
        if let Some(entry) = self.entries.get(&segments) {
            return Some(render_entry(entry));
        }
        let mut tree = Value::Object(Map::new());
        let mut found = false;
        for (key, entry) in &self.entries {
            if key.len() > segments.len() && key.starts_with(&segments) {
                insert_at(&mut tree, &key[segments.len()..], render_entry(entry));
                found = true;
            }
        }
        found.then_some(tree)
    }

    /// Walks `value` alongside `node`, storing leaves and collecting errors.
    fn apply(
        &mut self,
        segments: &mut Vec<String>,
        node: &Node,
        value: &Value,
        errors: &mut Vec<ConfigError>,
    ) {
        match (&node.kind, value) {
            // `null` (common in editor settings) means "not set in this layer".
            (_, Value::Null) => {}
            (Kind::Object { fields, .. }, Value::Object(map)) => {
                for (key, child) in map {
                    match fields.iter().find(|field| field.name == key) {
                        Some(field) => {
                            segments.push(key.clone());
                            self.apply(segments, &field.node, child, errors);
                            segments.pop();
                        }
                        None => {
                            let mut full = segments.clone();
                            full.push(key.clone());
                            // An alias (`thinking`): set the option it stands for.
                            if let Some(mut target) = schema::unalias(&full)
                                && let Some(target_node) =
                                    descend(schema::root(), &target.clone(), &mut Vec::new())
                            {
                                // Problems are placed where the alias is written.
                                let (written, meant) = (display_path(&full), display_path(&target));
                                let start = errors.len();
                                self.apply(&mut target, target_node, child, errors);
                                for error in &mut errors[start..] {
                                    if let Some(rest) = error.path.strip_prefix(&meant) {
                                        error.path = format!("{written}{rest}");
                                    }
                                }
                                continue;
                            }
                            let path = display_path(&full);
                            match crate::flemma_only::instead_of(&path) {
                                Some(instead) => self.warn(ConfigError::new(
                                    path.clone(),
                                    crate::flemma_only::warning(&path, instead),
                                )),
                                None => errors.push(unknown_option(segments, key, fields)),
                            }
                        }
                    }
                }
            }
            (
                Kind::Object {
                    bool_shorthand: Some(name),
                    ..
                },
                Value::Bool(_),
            )
            | (
                Kind::Object {
                    array_shorthand: Some(name),
                    ..
                },
                Value::Array(_),
            ) => {
                if let Some(field) = node.field(name) {
                    segments.push(name.to_string());
                    self.apply(segments, &field.node, value, errors);
                    segments.pop();
                }
            }
            (
                Kind::Map {
                    key: rule,
                    value: child,
                },
                Value::Object(map),
            ) => {
                for (key, item) in map {
                    segments.push(key.clone());
                    match check_map_key(*rule, key, segments) {
                        Ok(()) => self.apply(segments, child, item, errors),
                        Err(error) => errors.push(error),
                    }
                    segments.pop();
                }
            }
            (Kind::Object { .. } | Kind::Map { .. }, other) => {
                let path = display_path(segments);
                errors.push(ConfigError::new(
                    path.clone(),
                    format!(
                        "'{}' must be {}, got {}",
                        if path.is_empty() {
                            "the configuration"
                        } else {
                            &path
                        },
                        node.describe(),
                        describe_value(other)
                    ),
                ));
            }
            (Kind::List { items, .. }, _) => {
                let path = display_path(segments);
                match value {
                    Value::Array(array) => match parse_list(array, *items, &path) {
                        Ok(mut ops) => {
                            if matches!(items, ItemKind::Tool | ItemKind::Approval) {
                                let mut warnings = Vec::new();
                                rewrite_colon_items(&mut ops, &path, &mut warnings);
                                for warning in warnings {
                                    self.warn(warning);
                                }
                            }
                            self.entries.insert(segments.clone(), Entry::List(ops));
                        }
                        Err(error) => errors.push(error),
                    },
                    other => errors.push(ConfigError::new(
                        path.clone(),
                        format!(
                            "'{path}' must be a list of strings, got {}; write [\"item\"]",
                            describe_value(other)
                        ),
                    )),
                }
            }
            _ => {
                let path = display_path(segments);
                match validate_value(node, value, &path) {
                    Ok(normalized) => {
                        self.entries
                            .insert(segments.clone(), Entry::Value(normalized));
                    }
                    Err(error) => errors.push(error),
                }
            }
        }
    }
}

fn render_entry(entry: &Entry) -> Value {
    match entry {
        Entry::Value(value) => value.clone(),
        Entry::List(ops) => Value::Array(render_ops(ops).into_iter().map(Value::String).collect()),
        Entry::Function(func) => serde_json::json!({
            "function": {"id": func.id, "description": func.description}
        }),
    }
}

/// Renders operations back into op-prefix items. Operations before the last set are moot and
/// left out; appends right after an empty set become bare items so the reset stays visible.
/// (An empty set followed only by removals renders as the removals: the reset is not expressible
/// in one op-prefix list.)
pub(crate) fn render_ops(ops: &[ListOp]) -> Vec<String> {
    let last_set = ops.iter().rposition(|op| matches!(op, ListOp::Set(_)));
    let mut rest = &ops[last_set.unwrap_or(0)..];
    let mut items: Vec<String> = Vec::new();
    if let Some((ListOp::Set(set), tail)) = rest.split_first() {
        items.extend(set.iter().cloned());
        rest = tail;
        if set.is_empty() {
            while let Some((op, tail)) = rest.split_first() {
                match op {
                    ListOp::Append(item) => {
                        items.retain(|existing| existing != item);
                        items.push(item.clone());
                    }
                    ListOp::Prepend(item) => {
                        items.retain(|existing| existing != item);
                        items.insert(0, item.clone());
                    }
                    _ => break,
                }
                rest = tail;
            }
        }
    }
    for op in rest {
        match op {
            ListOp::Set(_) => {}
            ListOp::Append(item) => items.push(format!("+{item}")),
            ListOp::Prepend(item) => items.push(format!("^{item}")),
            ListOp::Remove(item) => items.push(format!("!{item}")),
        }
    }
    items
}

pub(crate) fn insert_at(tree: &mut Value, segments: &[String], value: Value) {
    let Some((last, parents)) = segments.split_last() else {
        *tree = value;
        return;
    };
    let mut current = tree;
    for segment in parents {
        if !current.is_object() {
            *current = Value::Object(Map::new());
        }
        let Value::Object(map) = current else { return };
        current = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !current.is_object() {
        *current = Value::Object(Map::new());
    }
    if let Value::Object(map) = current {
        map.insert(last.clone(), value);
    }
}

// ---- paths ---------------------------------------------------------------------------------

/// Renders segments as a dotted path, quoting segments that contain dots or spaces.
pub(crate) fn display_path(segments: &[String]) -> String {
    segments
        .iter()
        .map(|segment| {
            if segment.is_empty()
                || segment
                    .chars()
                    .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$')))
            {
                format!("\"{segment}\"")
            } else {
                segment.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Splits a dotted path; `"..."` quotes a segment that contains dots.
fn split_path(path: &str) -> Result<Vec<String>, ConfigError> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    for c in path.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                if current.is_empty() && !was_quoted {
                    return Err(ConfigError::new(
                        path,
                        format!(
                            "option path '{path}' has an empty segment; write names separated by single dots"
                        ),
                    ));
                }
                segments.push(std::mem::take(&mut current));
                was_quoted = false;
            }
            _ => current.push(c),
        }
    }
    if quoted {
        return Err(ConfigError::new(
            path,
            format!("option path '{path}' has an unclosed quote; close it with '\"'"),
        ));
    }
    if current.is_empty() && !was_quoted {
        return Err(ConfigError::new(
            path,
            format!(
                "option path '{path}' is empty or ends with a dot; name an option such as 'parameters.thinking'"
            ),
        ));
    }
    segments.push(current);
    Ok(segments)
}

/// Finds the schema node for a path; map keys may contain dots (`models.gemini-2.5-pro.input`).
pub(crate) fn locate(path: &str) -> Result<(Vec<String>, &'static Node), ConfigError> {
    let written = split_path(path)?;
    let raw = schema::unalias(&written).unwrap_or(written);
    let mut resolved = Vec::new();
    match descend(schema::root(), &raw, &mut resolved) {
        Some(node) => Ok((resolved, node)),
        None => Err(unknown_path(path, &raw)),
    }
}

fn descend(
    node: &'static Node,
    rest: &[String],
    resolved: &mut Vec<String>,
) -> Option<&'static Node> {
    let Some((first, tail)) = rest.split_first() else {
        return Some(node);
    };
    match &node.kind {
        Kind::Object { fields, .. } => {
            let field = fields.iter().find(|field| field.name == *first)?;
            resolved.push(first.clone());
            let found = descend(&field.node, tail, resolved);
            if found.is_none() {
                resolved.pop();
            }
            found
        }
        Kind::Map { value, .. } => {
            // The shortest key whose remainder is a valid path inside the value wins.
            for take in 1..=rest.len() {
                let key = rest[..take].join(".");
                let mut inner = Vec::new();
                if let Some(found) = descend(value, &rest[take..], &mut inner) {
                    resolved.push(key);
                    resolved.extend(inner);
                    return Some(found);
                }
            }
            None
        }
        _ => None,
    }
}

fn unknown_path(path: &str, raw: &[String]) -> ConfigError {
    let candidates: Vec<String> = schema::leaf_paths()
        .into_iter()
        .map(|(path, _)| path)
        .chain(table_paths())
        .collect();
    let mut suggestion = suggest(path, candidates.iter().map(String::as_str));
    if suggestion.is_none()
        && let Some(last) = raw.last()
    {
        suggestion = candidates
            .iter()
            .find(|candidate| candidate.rsplit('.').next() == Some(last.as_str()))
            .cloned();
    }
    ConfigError::new(path, format!("unknown option '{path}'")).with_suggestion(suggestion)
}

fn table_paths() -> Vec<String> {
    fn walk(prefix: &str, node: &Node, out: &mut Vec<String>) {
        if let Kind::Object { fields, .. } = &node.kind {
            for field in fields {
                let path = if prefix.is_empty() {
                    field.name.to_string()
                } else {
                    format!("{prefix}.{}", field.name)
                };
                if !field.node.is_leaf() {
                    out.push(path.clone());
                }
                walk(&path, &field.node, out);
            }
        }
    }
    let mut out = Vec::new();
    walk("", schema::root(), &mut out);
    out
}

fn unknown_option(segments: &[String], key: &str, fields: &[Field]) -> ConfigError {
    let mut full = segments.to_vec();
    full.push(key.to_string());
    let path = display_path(&full);
    let suggestion = suggest(key, fields.iter().map(|field| field.name))
        .map(|name| {
            let mut suggested = segments.to_vec();
            suggested.push(name);
            display_path(&suggested)
        })
        .or_else(|| {
            // A key that exists elsewhere (`thinking` at the top level → `parameters.thinking`).
            schema::leaf_paths()
                .into_iter()
                .map(|(candidate, _)| candidate)
                .find(|candidate| candidate.rsplit('.').next() == Some(key))
        });
    ConfigError::new(path.clone(), format!("unknown option '{path}'")).with_suggestion(suggestion)
}

fn check_map_key(rule: KeyRule, key: &str, segments: &[String]) -> Result<(), ConfigError> {
    let path = display_path(segments);
    if key.is_empty() {
        return Err(ConfigError::new(path, "empty key; give the entry a name"));
    }
    if rule == KeyRule::Preset && !is_preset_ref(key) {
        let fixed = format!("${}", key.trim_start_matches('$').to_lowercase());
        return Err(ConfigError::new(
            path,
            format!("preset name '{key}' must be '$' followed by a lowercase name"),
        )
        .with_suggestion(is_preset_ref(&fixed).then_some(fixed)));
    }
    Ok(())
}

// ---- values --------------------------------------------------------------------------------

pub(crate) fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("\"{s}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a table".into(),
    }
}

/// Validates a leaf value (and whole records) and returns its normalized form.
pub(crate) fn validate_value(node: &Node, value: &Value, path: &str) -> Result<Value, ConfigError> {
    if let Some(normalized) = accept(node, value) {
        return Ok(normalized);
    }
    // Explain the most useful failure.
    let base = format!(
        "invalid value {} for '{path}': expected {}",
        describe_value(value),
        node.describe()
    );
    let mut suggestion = None;
    if let Value::String(text) = value {
        let values: Vec<&str> = enum_values(node);
        if !values.is_empty() {
            suggestion = suggest(text, values.iter().copied());
            let message = format!(
                "unknown value '{text}' for '{path}'; expected {}",
                node.describe()
            );
            return Err(ConfigError::new(path, message).with_suggestion(suggestion));
        }
    }
    match (&node.kind, value) {
        (Kind::Records(record), Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                validate_record(record, item, &format!("{path}[{index}]"))?;
            }
        }
        (Kind::Integer { .. }, Value::Number(_)) | (Kind::OneOf(_), Value::Number(_)) => {
            suggestion = None;
        }
        _ => {}
    }
    Err(ConfigError::new(path, base).with_suggestion(suggestion))
}

fn enum_values(node: &Node) -> Vec<&'static str> {
    match &node.kind {
        Kind::Enum(values) => values.clone(),
        Kind::OneOf(alternatives) => alternatives.iter().flat_map(enum_values).collect(),
        _ => Vec::new(),
    }
}

fn accept(node: &Node, value: &Value) -> Option<Value> {
    match (&node.kind, value) {
        (Kind::String, Value::String(_)) | (Kind::Bool, Value::Bool(_)) => Some(value.clone()),
        (Kind::False, Value::Bool(false)) => Some(value.clone()),
        (Kind::Enum(values), Value::String(text)) => {
            values.contains(&text.as_str()).then(|| value.clone())
        }
        (Kind::Integer { min, max }, Value::Number(n)) => {
            let integer = n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })?;
            (*min..=*max)
                .contains(&integer)
                .then(|| Value::from(integer))
        }
        (Kind::Number { min, max }, Value::Number(n)) => {
            let number = n.as_f64()?;
            (number >= *min && number <= *max).then(|| value.clone())
        }
        (Kind::Percent, Value::String(text)) => parse_percent(text).map(|_| value.clone()),
        (Kind::Strings, Value::Array(items)) => {
            items.iter().all(Value::is_string).then(|| value.clone())
        }
        (Kind::AnyObject, Value::Object(_)) => Some(value.clone()),
        (Kind::Records(record), Value::Array(items)) => {
            let mut normalized = Vec::with_capacity(items.len());
            for item in items {
                normalized.push(validate_record(record, item, "").ok()?);
            }
            Some(Value::Array(normalized))
        }
        (Kind::OneOf(alternatives), _) => alternatives.iter().find_map(|alt| accept(alt, value)),
        _ => None,
    }
}

fn validate_record(record: &Node, item: &Value, path: &str) -> Result<Value, ConfigError> {
    let Kind::Object { fields, .. } = &record.kind else {
        return Err(ConfigError::new(
            path,
            "internal: record schema is not a table",
        ));
    };
    let Value::Object(map) = item else {
        return Err(ConfigError::new(
            path,
            format!("'{path}' must be a table, got {}", describe_value(item)),
        ));
    };
    let mut normalized = Map::new();
    for (key, value) in map.iter().filter(|(_, value)| !value.is_null()) {
        let Some(field) = fields.iter().find(|field| field.name == key) else {
            let suggestion = suggest(key, fields.iter().map(|field| field.name));
            return Err(
                ConfigError::new(path, format!("unknown key '{key}' in '{path}'"))
                    .with_suggestion(suggestion),
            );
        };
        let child_path = format!("{path}.{key}");
        normalized.insert(
            key.clone(),
            validate_value(&field.node, value, &child_path)?,
        );
    }
    for field in fields {
        if field.required && map.get(field.name).is_none_or(Value::is_null) {
            return Err(ConfigError::new(
                path,
                format!("'{path}' is missing the required key '{}'", field.name),
            ));
        }
    }
    Ok(Value::Object(normalized))
}

// ---- op-prefix lists -----------------------------------------------------------------------

/// Flemma 0.11 named tools with a `:` namespace separator (`flemma:jobs.status`, `slack:*`);
/// since 0.12 the separator is `.`. A tool-list item with `:` matches no tool, so it is read
/// with `.`, and a warning says so (as a chat file's `flemma:` tool names are).
fn rewrite_colon_items(ops: &mut [ListOp], path: &str, warnings: &mut Vec<ConfigError>) {
    let mut rewrite = |item: &mut String| {
        if item.contains(':') {
            let dotted = item.replace(':', ".");
            warnings.push(ConfigError::new(
                path,
                format!(
                    "'{item}' in '{path}' uses the Flemma 0.11 `:` namespace separator, which matches no tool; it is read as '{dotted}' (write '{dotted}')"
                ),
            ));
            *item = dotted;
        }
    };
    for op in ops {
        match op {
            ListOp::Set(items) => items.iter_mut().for_each(&mut rewrite),
            ListOp::Append(item) | ListOp::Prepend(item) | ListOp::Remove(item) => rewrite(item),
        }
    }
}

/// `$` followed by a lowercase name (`$standard`, `$my-preset`); `$HOME` and `${X}` are not.
pub(crate) fn is_preset_ref(item: &str) -> bool {
    let Some(name) = item.strip_prefix('$') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn check_list_item(item: &str, kind: ItemKind, path: &str) -> Result<(), ConfigError> {
    if item.is_empty() {
        return Err(ConfigError::new(
            path,
            format!("empty item in '{path}'; remove it or name a value"),
        ));
    }
    if kind == ItemKind::Text && is_preset_ref(item) {
        return Err(ConfigError::new(
            path,
            format!(
                "'{item}' in '{path}' looks like a preset, but presets only apply to tool lists; write it as \"${{{}}}\" if you meant a variable",
                &item[1..]
            ),
        ));
    }
    Ok(())
}

/// Parses op-prefix items: bare items and `$preset` spreads seed a new list, then the `+ ^ !`
/// operations apply in declaration order. `[]` sets the list to empty.
pub(crate) fn parse_list(
    array: &[Value],
    kind: ItemKind,
    path: &str,
) -> Result<Vec<ListOp>, ConfigError> {
    let mut set_items = Vec::new();
    let mut ops = Vec::new();
    for item in array {
        let Value::String(text) = item else {
            return Err(ConfigError::new(
                path,
                format!(
                    "'{path}' must contain only strings, got {}",
                    describe_value(item)
                ),
            ));
        };
        let (prefix, rest) = match text.chars().next() {
            Some(c @ ('+' | '^' | '!')) => (Some(c), &text[1..]),
            _ => (None, text.as_str()),
        };
        let Some(prefix) = prefix else {
            check_list_item(text, kind, path)?;
            set_items.push(text.clone());
            continue;
        };
        let combined = rest.starts_with(['+', '^', '!']) || is_preset_ref(rest);
        if combined {
            return Err(ConfigError::new(
                path,
                format!(
                    "'{text}' in '{path}' combines operators; use one prefix per item (+x append, ^x prepend, !x remove, $preset spread)"
                ),
            ));
        }
        check_list_item(rest, kind, path)?;
        let name = rest.to_string();
        ops.push(match prefix {
            '+' => ListOp::Append(name),
            '^' => ListOp::Prepend(name),
            _ => ListOp::Remove(name),
        });
    }
    if array.is_empty() || !set_items.is_empty() {
        ops.insert(0, ListOp::Set(set_items));
    }
    Ok(ops)
}

// ---- TOML ----------------------------------------------------------------------------------

fn toml_table_to_json(
    table: &toml::de::DeTable<'_>,
    segments: &mut Vec<String>,
    spans: &mut HashMap<Vec<String>, Range<usize>>,
    errors: &mut Vec<ConfigError>,
) -> Value {
    let mut map = Map::new();
    for (key, value) in table {
        segments.push(key.get_ref().to_string());
        spans.insert(segments.clone(), key.span());
        let converted = toml_value_to_json(value.get_ref(), segments, spans, errors);
        segments.pop();
        map.insert(key.get_ref().to_string(), converted);
    }
    Value::Object(map)
}

fn toml_value_to_json(
    value: &toml::de::DeValue<'_>,
    segments: &mut Vec<String>,
    spans: &mut HashMap<Vec<String>, Range<usize>>,
    errors: &mut Vec<ConfigError>,
) -> Value {
    use toml::de::DeValue;
    match value {
        DeValue::String(text) => Value::String(text.to_string()),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Integer(integer) => {
            let digits = integer.as_str();
            match i64::from_str_radix(digits, integer.radix()) {
                Ok(n) => Value::from(n),
                Err(_) => {
                    let path = display_path(segments);
                    errors.push(ConfigError::new(
                        path.clone(),
                        format!("integer {digits} for '{path}' is too large"),
                    ));
                    Value::Null
                }
            }
        }
        DeValue::Float(float) => {
            let text = float.as_str().replace('_', "");
            match text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Some(number) => Value::Number(number),
                None => {
                    let path = display_path(segments);
                    errors.push(ConfigError::new(
                        path.clone(),
                        format!("'{path}' must be a finite number, got {text}"),
                    ));
                    Value::Null
                }
            }
        }
        DeValue::Datetime(datetime) => {
            let path = display_path(segments);
            errors.push(ConfigError::new(
                path.clone(),
                format!(
                    "'{path}' does not accept a date ({datetime}); quote it if you meant a string"
                ),
            ));
            Value::Null
        }
        DeValue::Array(array) => {
            let mut items = Vec::with_capacity(array.len());
            for (index, item) in array.iter().enumerate() {
                // Items are addressed as `key[index]`, the form record errors use.
                let key = segments.pop().unwrap_or_default();
                segments.push(format!("{key}[{index}]"));
                spans.insert(segments.clone(), item.span());
                items.push(toml_value_to_json(item.get_ref(), segments, spans, errors));
                segments.pop();
                segments.push(key);
            }
            Value::Array(items)
        }
        DeValue::Table(table) => toml_table_to_json(table, segments, spans, errors),
    }
}

/// The span of the deepest recorded key that is a prefix of the error's path.
fn locate_span(spans: &HashMap<Vec<String>, Range<usize>>, path: &str) -> Option<Range<usize>> {
    let mut segments = split_path(path).ok()?;
    while !segments.is_empty() {
        if let Some(span) = spans.get(&segments) {
            return Some(span.clone());
        }
        match segments.last_mut() {
            Some(last) if last.contains('[') => {
                let bracket = last.find('[').unwrap_or(last.len());
                last.truncate(bracket);
            }
            _ => {
                segments.pop();
            }
        }
    }
    None
}

// ---- option shapes -------------------------------------------------------------------------

/// What kind of value lives at a schema path (for frontmatter proxies such as `flemma.opt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionShape {
    /// A table of options (`parameters`, `tools.autopilot`, a `models` entry).
    Table,
    /// A list with op-prefix syntax; `accepts_function` where a function may replace it.
    List {
        /// Whether [`ConfigLayer::set_function`] is allowed here.
        accepts_function: bool,
    },
    /// A single value (string, number, boolean, record list…).
    Value,
}

/// The shape of the option at a schema path (use [`opt_path`] first for frontmatter aliases).
pub fn option_shape(path: &str) -> Result<OptionShape, ConfigError> {
    let (_, node) = locate(path)?;
    Ok(match &node.kind {
        Kind::Object { .. } | Kind::Map { .. } => OptionShape::Table,
        Kind::List {
            allows_function, ..
        } => OptionShape::List {
            accepts_function: *allows_function,
        },
        _ => OptionShape::Value,
    })
}

// ---- frontmatter aliases and file locations ------------------------------------------------

/// Parameters `flemma.opt` also reaches by their short names, beyond the schema's aliases
/// (`schema::ALIASES`: `thinking`, `timeout`, `max_tokens`, `temperature`, which every layer
/// accepts and `locate` resolves).
const OPT_PARAMETER_SHORT_NAMES: [&str; 2] = ["connect_timeout", "cache_retention"];

const PROVIDER_PARAMETER_TABLES: [&str; 5] = [
    "anthropic",
    "openai",
    "openai_compatible",
    "vertex",
    "gemini",
];

/// Maps a frontmatter option path (`flemma.opt.<path>`) onto the schema path:
/// `thinking` → `parameters.thinking`, `anthropic.thinking_budget` →
/// `parameters.anthropic.thinking_budget`, `tools` → `tools.enabled`. Schema paths pass through.
pub fn opt_path(path: &str) -> Result<String, ConfigError> {
    let segments = split_path(path)?;
    let mapped: Vec<String> = match segments.as_slice() {
        [only] if OPT_PARAMETER_SHORT_NAMES.contains(&only.as_str()) => {
            vec!["parameters".into(), only.clone()]
        }
        [only] if only == "tools" => vec!["tools".into(), "enabled".into()],
        [first, ..] if PROVIDER_PARAMETER_TABLES.contains(&first.as_str()) => {
            let mut mapped = vec!["parameters".to_string()];
            mapped.extend(segments.iter().cloned());
            mapped
        }
        _ => segments.clone(),
    };
    let display = display_path(&mapped);
    match locate(&display) {
        Ok((resolved, _)) => Ok(display_path(&resolved)),
        Err(_) => {
            let mut candidates: Vec<String> = schema::leaf_paths()
                .into_iter()
                .map(|(path, _)| path)
                .chain(table_paths())
                .collect();
            candidates.extend(
                OPT_PARAMETER_SHORT_NAMES
                    .iter()
                    .map(|name| name.to_string()),
            );
            candidates.extend(schema::ALIASES.iter().map(|(alias, _)| alias.to_string()));
            for table in PROVIDER_PARAMETER_TABLES {
                candidates.push(table.to_string());
            }
            let suggestion = suggest(path, candidates.iter().map(String::as_str)).or_else(|| {
                let last = segments.last()?;
                candidates
                    .iter()
                    .find(|candidate| candidate.rsplit('.').next() == Some(last.as_str()))
                    .cloned()
            });
            Err(ConfigError::new(path, format!("unknown option '{path}'"))
                .with_suggestion(suggestion))
        }
    }
}

/// The user config file location: `FLEMMA_CONFIG`, else `$XDG_CONFIG_HOME/flemma/config.toml`
/// (when absolute), else `$HOME/.config/flemma/config.toml`. `--config` is handled by the caller.
pub fn default_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let non_empty = |name: &str| env(name).filter(|value| !value.is_empty());
    if let Some(explicit) = non_empty("FLEMMA_CONFIG") {
        return Some(PathBuf::from(explicit));
    }
    if let Some(xdg) = non_empty("XDG_CONFIG_HOME").filter(|dir| Path::new(dir).is_absolute()) {
        return Some(Path::new(&xdg).join("flemma").join("config.toml"));
    }
    non_empty("HOME").map(|home| {
        Path::new(&home)
            .join(".config")
            .join("flemma")
            .join("config.toml")
    })
}
