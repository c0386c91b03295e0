//! `flemma.opt`: the per-file configuration proxy of Rhai frontmatter.
//!
//! Every write goes straight to a [`ConfigLayer`] of kind `Frontmatter` through `flemma-config`
//! (`opt_path` maps the frontmatter aliases, so Rhai and JSON share them). Reading an option
//! that holds a single value returns what this frontmatter set (or `()`); reading a table or a
//! list returns a proxy for further writes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use flemma_config::{ConfigError, ConfigLayer, FunctionRef, LayerKind, ListOp, OptionShape};
use rhai::{Dynamic, Engine, EvalAltResult, FnPtr, ImmutableString, Position};

/// What the frontmatter's `flemma.opt` writes collect into.
#[derive(Debug)]
pub(crate) struct OptState {
    pub layer: ConfigLayer,
    pub functions: BTreeMap<u64, FnPtr>,
}

pub(crate) type SharedOpt = Arc<Mutex<OptState>>;

pub(crate) fn new_state() -> SharedOpt {
    Arc::new(Mutex::new(OptState {
        layer: ConfigLayer::new(LayerKind::Frontmatter),
        functions: BTreeMap::new(),
    }))
}

fn lock(state: &SharedOpt) -> MutexGuard<'_, OptState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The `flemma` variable of the frontmatter.
#[derive(Debug, Clone)]
pub(crate) struct FlemmaHandle {
    state: SharedOpt,
}

impl FlemmaHandle {
    pub(crate) fn new(state: SharedOpt) -> Self {
        Self { state }
    }
}

/// A position in the option tree (`""` is `flemma.opt` itself, `tools`, `anthropic`…).
#[derive(Debug, Clone)]
pub(crate) struct OptProxy {
    state: SharedOpt,
    path: String,
}

impl OptProxy {
    fn child(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn schema_path(&self, path: &str) -> Result<String, Box<EvalAltResult>> {
        flemma_config::opt_path(path).map_err(|error| config_error(&error))
    }

    fn list_op(&self, op: ListOp) -> Result<(), Box<EvalAltResult>> {
        if flemma_config::opt_path(&self.path).is_err()
            && flemma_config::flemma_only_option(&self.path).is_some()
        {
            return lock(&self.state)
                .layer
                .set(&self.path, serde_json::Value::Bool(true))
                .map_err(|error| config_error(&error));
        }
        let path = self.schema_path(&self.path)?;
        if let ListOp::Append(name) | ListOp::Prepend(name) | ListOp::Remove(name) = &op {
            check_tool_name(&path, name)?;
        }
        lock(&self.state)
            .layer
            .list_op(&path, op)
            .map_err(|error| config_error(&error))
    }

    fn get(&self, key: &str) -> Result<Dynamic, Box<EvalAltResult>> {
        let path = self.child(key);
        if flemma_config::opt_path(&path).is_err()
            && flemma_config::flemma_only_option(&path).is_some()
        {
            // A Flemma option flemmad ignores (`flemma.opt.tools.mcporter.enabled = true`):
            // writes below it are accepted with a warning.
            return Ok(Dynamic::from(OptProxy {
                state: self.state.clone(),
                path,
            }));
        }
        let schema_path = self.schema_path(&path)?;
        let shape =
            flemma_config::option_shape(&schema_path).map_err(|error| config_error(&error))?;
        match shape {
            OptionShape::Value => {
                let value = lock(&self.state).layer.get(&schema_path);
                match value {
                    Some(value) => rhai::serde::to_dynamic(value),
                    None => Ok(Dynamic::UNIT),
                }
            }
            OptionShape::Table | OptionShape::List { .. } => Ok(Dynamic::from(OptProxy {
                state: self.state.clone(),
                path,
            })),
        }
    }

    fn set(&self, key: &str, value: Dynamic) -> Result<(), Box<EvalAltResult>> {
        let path = self.child(key);
        if let Some(proxy) = value.read_lock::<OptProxy>() {
            // Rhai writes a modified property back after `flemma.opt.tools.append(…)` or
            // `+=`; the change already went to the layer.
            if proxy.path == path {
                return Ok(());
            }
            return Err(runtime(format!(
                "cannot assign 'flemma.opt.{}' to 'flemma.opt.{path}'; assign a value or a list",
                proxy.path
            )));
        }
        if flemma_config::opt_path(&path).is_err()
            && flemma_config::flemma_only_option(&path).is_some()
        {
            return lock(&self.state)
                .layer
                .set(&path, serde_json::Value::Bool(true))
                .map_err(|error| config_error(&error));
        }
        let schema_path = self.schema_path(&path)?;
        if let Some(function) = value.read_lock::<FnPtr>() {
            let mut state = lock(&self.state);
            let id = state.functions.len() as u64 + 1;
            let reference = FunctionRef {
                id,
                // A closure's name is Rhai's internal `anon$…` hash: not a name to show.
                description: if function.fn_name().starts_with("anon$") {
                    "a closure written in the frontmatter".to_owned()
                } else {
                    format!(
                        "Rhai function `{}` from the frontmatter",
                        function.fn_name()
                    )
                },
            };
            state
                .layer
                .set_function(&schema_path, reference)
                .map_err(|error| config_error(&error))?;
            state.functions.insert(id, function.clone());
            return Ok(());
        }
        let json: serde_json::Value = rhai::serde::from_dynamic(&value).map_err(|error| {
            runtime(format!(
                "'flemma.opt.{path}' cannot hold this value ({error}); use strings, numbers, booleans, arrays or maps"
            ))
        })?;
        if let serde_json::Value::Array(items) = &json {
            for item in items.iter().filter_map(serde_json::Value::as_str) {
                check_tool_name(&schema_path, item.trim_start_matches(['+', '^', '!']))?;
            }
        }
        lock(&self.state)
            .layer
            .set(&schema_path, json)
            .map_err(|error| config_error(&error))
    }
}

/// Catches typos of built-in tool names in tool lists (`"raed"` → did you mean `read`).
///
/// Only names close to a built-in tool are refused here: other names may be custom or MCP
/// tools that only the resolved configuration knows (it reports them when it resolves).
fn check_tool_name(schema_path: &str, name: &str) -> Result<(), Box<EvalAltResult>> {
    if !matches!(schema_path, "tools.enabled" | "tools.auto_approve")
        || name.starts_with('$')
        || name.contains(['.', '*'])
        || flemma_config::BUILTIN_TOOLS.contains(&name)
    {
        return Ok(());
    }
    let closest = flemma_config::BUILTIN_TOOLS
        .iter()
        .map(|tool| (strsim::jaro_winkler(name, tool), *tool))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((score, tool)) if score >= 0.85 => Err(runtime(format!(
            "flemma.opt: unknown tool '{name}' in '{schema_path}'. Did you mean '{tool}'?"
        ))),
        _ => Ok(()),
    }
}

fn runtime(message: String) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(
        Dynamic::from(message),
        Position::NONE,
    ))
}

fn config_error(error: &ConfigError) -> Box<EvalAltResult> {
    runtime(format!("flemma.opt: {error}"))
}

fn item_name(value: &Dynamic) -> Result<String, Box<EvalAltResult>> {
    value
        .read_lock::<ImmutableString>()
        .map(|name| name.to_string())
        .ok_or_else(|| {
            runtime(format!(
                "list items of flemma.opt must be strings, not {}; quote the name",
                value.type_name()
            ))
        })
}

/// Registers `flemma`, `flemma.opt` and the proxy's indexers, methods and operators.
pub(crate) fn register(engine: &mut Engine) {
    engine.register_type_with_name::<FlemmaHandle>("Flemma");
    engine.register_type_with_name::<OptProxy>("FlemmaOpt");
    engine.register_get("opt", |handle: &mut FlemmaHandle| OptProxy {
        state: handle.state.clone(),
        path: String::new(),
    });
    engine.register_set(
        "opt",
        |_handle: &mut FlemmaHandle, value: Dynamic| -> Result<(), Box<EvalAltResult>> {
            match value.read_lock::<OptProxy>() {
                Some(proxy) if proxy.path.is_empty() => Ok(()),
                _ => Err(runtime(
                    "flemma.opt cannot be replaced; set individual options such as flemma.opt.thinking = \"medium\"".into(),
                )),
            }
        },
    );
    engine.register_indexer_get(|proxy: &mut OptProxy, key: &str| proxy.get(key));
    engine.register_indexer_set(|proxy: &mut OptProxy, key: &str, value: Dynamic| {
        proxy.set(key, value)
    });
    engine.register_fn("append", |proxy: &mut OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Append(item_name(&item)?))
    });
    engine.register_fn("prepend", |proxy: &mut OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Prepend(item_name(&item)?))
    });
    engine.register_fn("remove", |proxy: &mut OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Remove(item_name(&item)?))
    });
    engine.register_fn("+=", |proxy: &mut OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Append(item_name(&item)?))
    });
    engine.register_fn("-=", |proxy: &mut OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Remove(item_name(&item)?))
    });
    engine.register_fn("+", |proxy: OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Append(item_name(&item)?))?;
        Ok::<_, Box<EvalAltResult>>(proxy)
    });
    engine.register_fn("-", |proxy: OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Remove(item_name(&item)?))?;
        Ok::<_, Box<EvalAltResult>>(proxy)
    });
    engine.register_fn("^", |proxy: OptProxy, item: Dynamic| {
        proxy.list_op(ListOp::Prepend(item_name(&item)?))?;
        Ok::<_, Box<EvalAltResult>>(proxy)
    });
    engine.register_fn("to_string", |proxy: &mut OptProxy| {
        let value = proxy
            .schema_path(&proxy.path)
            .ok()
            .and_then(|path| lock(&proxy.state).layer.get(&path));
        value.map_or_else(String::new, |value| value.to_string())
    });
}
