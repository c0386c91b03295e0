//! The approval chain: resolvers by priority, highest first; the first that decides wins; when
//! none does, the call needs approval.

use std::path::{Path, PathBuf};

use serde_json::Value;

use flemma_config::{AutoApprove, Mode, ResolvedConfig};

use crate::context::ToolPaths;
use crate::spec::{Capability, ToolSpec};

pub use flemma_protocol::approval::{Decision, Verdict};

pub const MODE_URN: &str = "urn:flemma:approval:mode";
pub const CONFIG_URN: &str = "urn:flemma:approval:config";
pub const SANDBOX_URN: &str = "urn:flemma:approval:sandbox";
pub const CATCH_ALL_URN: &str = "urn:flemma:approval:catch-all";
pub const DEFAULT_URN: &str = "urn:flemma:approval:default";

/// A function deciding instead of the `tools.auto_approve` list (the Rhai closure of
/// `flemma.opt.tools.auto_approve = |tool, input, ctx| …`, filled by the template crate).
/// `Ok(None)` passes to the next resolver; `Err` (the function failed: what to fix) makes the
/// call require approval — a failing function never approves.
pub trait ApprovalFunction: Send + Sync + std::fmt::Debug {
    fn decide(&self, tool: &str, input: &Value) -> Result<Option<Verdict>, String>;
}

/// A user-defined resolver (priority 50).
pub trait Resolver: Send + Sync + std::fmt::Debug {
    /// Its urn, shown as the deciding resolver.
    fn urn(&self) -> String;
    fn decide(&self, tool: &ToolSpec, input: &Value) -> Option<Verdict>;
}

/// The chain for one resolved config.
#[derive(Debug)]
pub struct ApprovalChain {
    auto_approve: AutoApprove,
    function: Option<Box<dyn ApprovalFunction>>,
    user_resolvers: Vec<Box<dyn Resolver>>,
    sandbox_active: bool,
    auto_approve_sandboxed: bool,
    require_approval: bool,
    read_scope: Option<ReadScope>,
    mode: ModePolicy,
}

/// What the chat's `mode` decides before any other resolver (docs/modes.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModePolicy {
    pub mode: Mode,
    /// Whether `bash` runs in a sandbox that leaves the project read-only (`ask` lets it run
    /// only then).
    pub read_only_sandbox: bool,
    /// Where `auto-edit` approves `write` and `edit` without asking: the project (paths
    /// resolve as the tools resolve them, links followed).
    pub edits: Option<EditScope>,
}

/// The tools `ask` lets run: they only read (and `flemma.jobs.status`, which the engine
/// answers).
pub const READING_TOOLS: [&str; 6] = ["read", "grep", "find", "ls", "fetch", "flemma.jobs.status"];

/// Where `auto-edit` approves file edits: the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditScope {
    paths: ToolPaths,
    project: PathBuf,
}

impl EditScope {
    /// Paths resolve as `paths` says; `project` is where edits are approved.
    pub fn new(paths: ToolPaths, project: &Path) -> Self {
        let project =
            crate::sandbox::resolve_path(project).unwrap_or_else(|_| project.to_path_buf());
        Self { paths, project }
    }

    /// Whether the `path` of a `write` or `edit` call lies inside the project.
    fn holds(&self, input: &Value) -> bool {
        let Some(written) = input.get("path").and_then(Value::as_str) else {
            return false;
        };
        self.paths
            .resolve(written)
            .and_then(|path| crate::sandbox::resolve_path(&path))
            .is_ok_and(|path| path.starts_with(&self.project))
    }
}

impl ModePolicy {
    /// The mode's verdict on a call of `tool`, when it decides one.
    fn decide(&self, tool: &str, input: &Value) -> Option<Verdict> {
        match self.mode {
            Mode::Default => None,
            Mode::AutoEdit => (matches!(tool, "write" | "edit")
                && self.edits.as_ref().is_some_and(|scope| scope.holds(input)))
            .then_some(Verdict::Approve),
            Mode::Ask if READING_TOOLS.contains(&tool) => None,
            Mode::Ask if tool == "bash" && self.read_only_sandbox => None,
            Mode::Ask => {
                let why = if tool == "bash" {
                    "`bash` runs in ask mode only in a sandbox, and none is active here (see `flemmad doctor`)".to_owned()
                } else {
                    format!("`{tool}` can change things, and ask mode only reads")
                };
                Some(Verdict::Deny {
                    message: format!(
                        "the chat is in ask mode (read-only): {why}. To let it run, switch the mode to `default` or `auto-edit`: `flemmad send --mode default`, the editor's mode picker, or `mode` in the configuration"
                    ),
                })
            }
        }
    }
}

/// Where the reading tools (`read`, `grep`, `find`, `ls`) look without asking when only a
/// preset (`$standard`, `$readonly`) approves them: the project (the working directory), the
/// chat's directory and its store — but never a credential place of the home directory
/// (`flemma_config::reach::HOME_CREDENTIALS`), even when the project is the home directory. A
/// path elsewhere (`~/.ssh/id_rsa`) needs approval, unless `tools.auto_approve` names the tool
/// itself. Paths resolve as the tools resolve them ([`ToolPaths`]: `~/` is the home
/// directory), links followed, before the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadScope {
    paths: ToolPaths,
    roots: Vec<PathBuf>,
    /// The home directory as given and as its real path.
    homes: Vec<PathBuf>,
}

impl ReadScope {
    /// Paths resolve as `paths` says (relative ones against the working directory); `roots`
    /// are the places reads stay approved in.
    pub fn new(paths: ToolPaths, roots: impl IntoIterator<Item = PathBuf>) -> Self {
        let roots = roots
            .into_iter()
            .filter_map(|root| crate::sandbox::resolve_path(&root).ok())
            .collect();
        let mut homes: Vec<PathBuf> = paths.home.iter().cloned().collect();
        if let Some(real) = paths
            .home
            .as_deref()
            .and_then(|home| crate::sandbox::resolve_path(home).ok())
            .filter(|real| !homes.contains(real))
        {
            homes.push(real);
        }
        Self {
            paths,
            roots,
            homes,
        }
    }

    /// The path a call of a reading tool looks at, when it lies outside the scope (or cannot
    /// be resolved, or is a credential place); `None` for a path inside, or a tool that reads
    /// no path.
    pub fn outside(&self, tool: &str, input: &Value) -> Option<String> {
        if !matches!(tool, "read" | "grep" | "find" | "ls") {
            return None;
        }
        let written = input
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .unwrap_or(".");
        let homes: Vec<&Path> = self.homes.iter().map(PathBuf::as_path).collect();
        // `grep` reads what is below its path too: a search that would reach a credential
        // place (`grep -r key ~`, or `.` when the project is the home directory) waits.
        let reaches_credentials = |path: &Path| {
            tool == "grep"
                && homes.iter().any(|home| {
                    flemma_config::reach::HOME_CREDENTIALS
                        .iter()
                        .any(|place| home.join(place).starts_with(path))
                })
        };
        let inside = |path: &Path| {
            self.roots.iter().any(|root| path.starts_with(root))
                && flemma_config::reach::never_read(path, &homes).is_none()
                && !reaches_credentials(path)
        };
        match self.paths.resolve(written).map(|path| {
            let resolved = crate::sandbox::resolve_path(&path);
            (path, resolved)
        }) {
            Ok((path, Ok(resolved)))
                if inside(&resolved)
                    && flemma_config::reach::never_read(&path, &homes).is_none() =>
            {
                None
            }
            _ => Some(written.to_owned()),
        }
    }
}

impl ApprovalChain {
    /// The chain from `config`. `function` is the closure when `tools.auto_approve` is a
    /// function (`AutoApprove::Function`); `sandbox_active` says whether a process sandbox
    /// backend is in use.
    pub fn new(
        config: &ResolvedConfig,
        function: Option<Box<dyn ApprovalFunction>>,
        user_resolvers: Vec<Box<dyn Resolver>>,
        sandbox_active: bool,
    ) -> Self {
        Self::from_parts(
            config.auto_approve(),
            &config.config.tools,
            function,
            user_resolvers,
            sandbox_active,
        )
    }

    /// The chain from an approval policy and the tool settings (for callers holding only a
    /// `Config`: its `tools.auto_approve` list is already expanded, so
    /// `AutoApprove::Tools { tools: config.tools.auto_approve.clone(), exclusions: vec![],
    /// direct: vec![] }`).
    pub fn from_parts(
        auto_approve: AutoApprove,
        tools: &flemma_config::Tools,
        function: Option<Box<dyn ApprovalFunction>>,
        user_resolvers: Vec<Box<dyn Resolver>>,
        sandbox_active: bool,
    ) -> Self {
        Self {
            auto_approve,
            function,
            user_resolvers,
            sandbox_active,
            auto_approve_sandboxed: tools.auto_approve_sandboxed,
            require_approval: tools.require_approval,
            read_scope: None,
            mode: ModePolicy::default(),
        }
    }

    /// Lets the chat's mode decide first (see [`ModePolicy`]).
    pub fn set_mode(&mut self, mode: ModePolicy) {
        self.mode = mode;
    }

    /// The chat's mode.
    pub fn mode(&self) -> Mode {
        self.mode.mode
    }

    /// Limits what a preset approves for the reading tools to `scope` (see [`ReadScope`]).
    pub fn set_read_scope(&mut self, scope: ReadScope) {
        self.read_scope = Some(scope);
    }

    /// Makes `function` the deciding config resolver (when `tools.auto_approve` is a function).
    pub fn set_function(&mut self, function: Box<dyn ApprovalFunction>) {
        self.function = Some(function);
    }

    /// Decides a call of `tool` with `input`.
    pub fn decide(&self, tool: &ToolSpec, input: &Value) -> Decision {
        let decided = |verdict, urn: &str| Decision {
            verdict,
            resolver: urn.to_string(),
            note: None,
        };
        // 200: the mode (`ask` refuses what can change things; `auto-edit` approves edits).
        if let Some(verdict) = self.mode.decide(&tool.name, input) {
            return decided(verdict, MODE_URN);
        }
        // Set when a preset approves a reading tool but not at this path.
        let mut outside_note: Option<String> = None;
        // 100: config (list or function).
        match (&self.auto_approve, &self.function) {
            (AutoApprove::Function(_), Some(function)) => {
                match function.decide(&tool.name, input) {
                    Ok(Some(verdict)) => return decided(verdict, CONFIG_URN),
                    Ok(None) => {}
                    Err(problem) => {
                        return Decision {
                            verdict: Verdict::RequireApproval,
                            resolver: CONFIG_URN.to_string(),
                            note: Some(problem),
                        };
                    }
                }
            }
            (list @ AutoApprove::Tools { .. }, _) => {
                if list.approves(&tool.name) == Some(true) {
                    let outside = self
                        .read_scope
                        .as_ref()
                        .filter(|_| !list.names_directly(&tool.name))
                        .and_then(|scope| scope.outside(&tool.name, input));
                    match outside {
                        None => return decided(Verdict::Approve, CONFIG_URN),
                        Some(path) => {
                            outside_note = Some(format!(
                                "{path} is outside the project and the chat's store, or holds credentials; a preset approves `{}` only inside them, and never in a credential place",
                                tool.name
                            ));
                        }
                    }
                }
            }
            (AutoApprove::Function(_), None) => {}
        }
        // 50: user resolvers.
        for resolver in &self.user_resolvers {
            if let Some(verdict) = resolver.decide(tool, input) {
                return Decision {
                    verdict,
                    resolver: resolver.urn(),
                    note: None,
                };
            }
        }
        // 25: sandbox.
        if self.sandbox_active
            && self.auto_approve_sandboxed
            && tool.has(Capability::AutoApprovesIfSandboxed)
        {
            return decided(Verdict::Approve, SANDBOX_URN);
        }
        // 0: catch-all.
        if !self.require_approval {
            return decided(Verdict::Approve, CATCH_ALL_URN);
        }
        Decision {
            verdict: Verdict::RequireApproval,
            resolver: DEFAULT_URN.to_string(),
            note: outside_note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_config::{ConfigLayer, LayerKind, resolve};
    use serde_json::json;

    fn config(toml: &str) -> ResolvedConfig {
        let user = ConfigLayer::from_toml_str(toml, LayerKind::UserFile).expect("layer");
        resolve(&[user]).expect("resolve")
    }

    #[derive(Debug)]
    struct DenyWrites;
    impl Resolver for DenyWrites {
        fn urn(&self) -> String {
            "urn:user:deny-writes".into()
        }
        fn decide(&self, tool: &ToolSpec, _: &Value) -> Option<Verdict> {
            (tool.name == "bash").then(|| Verdict::Deny {
                message: "no shell".into(),
            })
        }
    }

    #[derive(Debug)]
    struct OnlyRead;
    impl ApprovalFunction for OnlyRead {
        fn decide(&self, tool: &str, _: &Value) -> Result<Option<Verdict>, String> {
            match tool {
                "broken" => Err("the function failed; fix it".into()),
                _ => Ok((tool == "read").then_some(Verdict::Approve)),
            }
        }
    }

    #[test]
    fn chain_order_and_resolver_names() {
        let bash = crate::builtin::bash::spec();
        let read = crate::builtin::read::spec();
        let standard = config("");
        let chain = ApprovalChain::new(&standard, None, vec![], false);
        assert_eq!(chain.decide(&read, &json!({})).resolver, CONFIG_URN);
        assert_eq!(
            chain.decide(&bash, &json!({})).verdict,
            Verdict::RequireApproval
        );
        let sandboxed = ApprovalChain::new(&standard, None, vec![], true);
        assert_eq!(sandboxed.decide(&bash, &json!({})).resolver, SANDBOX_URN);
        let user = ApprovalChain::new(&standard, None, vec![Box::new(DenyWrites)], true);
        let decision = user.decide(&bash, &json!({}));
        assert_eq!(decision.resolver, "urn:user:deny-writes");
        assert!(matches!(decision.verdict, Verdict::Deny { .. }));
        let open = config("[tools]\nrequire_approval = false\nauto_approve = []\n");
        let chain = ApprovalChain::new(&open, None, vec![], false);
        assert_eq!(chain.decide(&bash, &json!({})).resolver, CATCH_ALL_URN);
        let globbed = config("[tools]\nauto_approve = [\"$readonly\", \"+bash\"]\n");
        let chain = ApprovalChain::new(&globbed, None, vec![], false);
        assert_eq!(chain.decide(&bash, &json!({})).verdict, Verdict::Approve);
        let write = crate::builtin::write::spec();
        assert_eq!(
            chain.decide(&write, &json!({})).verdict,
            Verdict::RequireApproval
        );
    }

    #[test]
    fn presets_approve_reads_inside_the_project_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().canonicalize().expect("canonical");
        let outside = tempfile::tempdir().expect("tempdir");
        let secret = outside.path().join("id_rsa");
        std::fs::write(&secret, "key").expect("write");
        std::os::unix::fs::symlink(&secret, project.join("link")).expect("symlink");
        let scope = ReadScope::new(
            ToolPaths {
                cwd: project.clone(),
                home: None,
                store: None,
            },
            [project.clone()],
        );
        let read = crate::builtin::read::spec();
        let grep = crate::builtin::grep::spec();
        let mut chain = ApprovalChain::new(&config(""), None, vec![], true);
        chain.set_read_scope(scope.clone());
        let inside = chain.decide(&read, &json!({"path": "notes.txt"}));
        assert_eq!(inside.verdict, Verdict::Approve);
        assert_eq!(
            chain
                .decide(&grep, &json!({"pattern": "x", "path": null}))
                .verdict,
            Verdict::Approve
        );
        for path in [secret.display().to_string(), "link".into(), "../x".into()] {
            let decision = chain.decide(&read, &json!({"path": path}));
            assert_eq!(decision.verdict, Verdict::RequireApproval, "{path}");
            assert!(
                decision
                    .note
                    .as_deref()
                    .is_some_and(|n| n.contains("outside")),
                "{decision:?}"
            );
        }
        // Naming the tool itself approves it everywhere.
        let mut named = ApprovalChain::new(
            &config("[tools]\nauto_approve = [\"$standard\", \"+read\"]\n"),
            None,
            vec![],
            true,
        );
        named.set_read_scope(scope);
        assert_eq!(
            named
                .decide(&read, &json!({"path": secret.display().to_string()}))
                .verdict,
            Verdict::Approve
        );
    }

    /// `~/` is the home directory for the policy as for the tool: `read ~/.ssh/id_rsa` waits
    /// for approval, instead of passing as a file under a folder named `~` of the project; and
    /// a credential place waits even when the project is the home directory itself.
    #[test]
    fn reads_are_judged_on_the_path_they_read() {
        let home = tempfile::tempdir().expect("tempdir");
        let home = home.path().canonicalize().expect("canonical");
        let project = home.join("project");
        std::fs::create_dir_all(home.join(".ssh")).expect("dirs");
        std::fs::create_dir_all(&project).expect("dirs");
        std::fs::write(home.join(".ssh/id_rsa"), "key").expect("key");
        std::fs::write(home.join("notes.txt"), "notes").expect("notes");
        let read = crate::builtin::read::spec();
        let chain_for = |cwd: &std::path::Path| {
            let mut chain = ApprovalChain::new(&config(""), None, vec![], true);
            chain.set_read_scope(ReadScope::new(
                ToolPaths {
                    cwd: cwd.to_path_buf(),
                    home: Some(home.clone()),
                    store: None,
                },
                [cwd.to_path_buf()],
            ));
            chain
        };
        let in_project = chain_for(&project);
        let verdict =
            |chain: &ApprovalChain, path: &str| chain.decide(&read, &json!({"path": path})).verdict;
        assert_eq!(verdict(&in_project, "README.md"), Verdict::Approve);
        assert_eq!(
            verdict(&in_project, "~/.ssh/id_rsa"),
            Verdict::RequireApproval
        );
        assert_eq!(
            verdict(&in_project, "~/notes.txt"),
            Verdict::RequireApproval
        );
        assert_eq!(verdict(&in_project, "~"), Verdict::RequireApproval);
        // The project is the home directory: all of it but the credentials.
        let in_home = chain_for(&home);
        assert_eq!(verdict(&in_home, "~/notes.txt"), Verdict::Approve);
        assert_eq!(verdict(&in_home, "notes.txt"), Verdict::Approve);
        for path in [
            "~/.ssh/id_rsa",
            ".ssh/id_rsa",
            ".ssh",
            "project/../.ssh/id_rsa",
        ] {
            assert_eq!(verdict(&in_home, path), Verdict::RequireApproval, "{path}");
        }
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), home.join("key")).expect("link");
        assert_eq!(verdict(&in_home, "key"), Verdict::RequireApproval);
        // A search below the home directory would read the credentials too.
        let grep = crate::builtin::grep::spec();
        let search = |path: &str| {
            in_home
                .decide(&grep, &json!({"pattern": "x", "path": path}))
                .verdict
        };
        assert_eq!(search("."), Verdict::RequireApproval);
        assert_eq!(search("~"), Verdict::RequireApproval);
        assert_eq!(search("project"), Verdict::Approve);
    }

    #[test]
    fn function_passes_on_unit() {
        let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
        layer
            .set_function(
                "tools.auto_approve",
                flemma_config::FunctionRef {
                    id: 1,
                    description: "closure".into(),
                },
            )
            .expect("function");
        let resolved = resolve(&[layer]).expect("resolve");
        let chain = ApprovalChain::new(&resolved, Some(Box::new(OnlyRead)), vec![], false);
        assert_eq!(
            chain
                .decide(&crate::builtin::read::spec(), &json!({}))
                .verdict,
            Verdict::Approve
        );
        assert_eq!(
            chain
                .decide(&crate::builtin::write::spec(), &json!({}))
                .verdict,
            Verdict::RequireApproval
        );
    }

    #[test]
    fn failing_function_requires_approval_with_its_reason() {
        let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
        layer
            .set_function(
                "tools.auto_approve",
                flemma_config::FunctionRef {
                    id: 1,
                    description: "closure".into(),
                },
            )
            .expect("function");
        let resolved = resolve(&[layer]).expect("resolve");
        // Even with every fallback approving, a failing function does not approve.
        let open = ApprovalChain::new(&resolved, Some(Box::new(OnlyRead)), vec![], true);
        let mut broken = crate::builtin::bash::spec();
        broken.name = "broken".into();
        let decision = open.decide(&broken, &json!({}));
        assert_eq!(decision.verdict, Verdict::RequireApproval);
        assert_eq!(decision.resolver, CONFIG_URN);
        assert_eq!(
            decision.note.as_deref(),
            Some("the function failed; fix it")
        );
    }
}
