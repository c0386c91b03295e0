//! The process sandbox with real `bwrap` (when usable here) and the write policy from config.

use std::path::PathBuf;
use std::sync::Arc;

use flemma_tools::builtin::bash;
use flemma_tools::sandbox::{Bwrap, PathPolicy, PolicyPlaces, bwrap_availability};
use flemma_tools::{PathGuard, RunContext};
use serde_json::json;

#[test]
fn policy_from_default_config_allows_chat_dir_store_and_tmp_only() {
    // Outside /tmp, which the default policy allows as a whole (a checkout under /tmp puts the
    // target directory there too; /var/tmp is outside it).
    let target_tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let base = if target_tmp.starts_with("/tmp") {
        PathBuf::from("/var/tmp")
    } else {
        target_tmp
    };
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let chat = root.join("notes/x.chat");
    let config = flemma_config::resolve(&[]).expect("defaults").config;
    let places = PolicyPlaces {
        cwd: root.join("notes"),
        chat_path: Some(chat),
        store_dir: Some(root.join("notes/.flemma/x.chat")),
    };
    let env = |name: &str| match name {
        "HOME" => Some(root.join("home").display().to_string()),
        _ => None,
    };
    let policy = PathPolicy::from_config(&config.sandbox.policy, &places, &env);
    assert!(policy.check_write(&root.join("notes/a.txt")).is_ok());
    assert!(policy.check_write(&root.join("home/.cache/x")).is_ok());
    assert!(policy.check_write(&PathBuf::from("/tmp/flemma-x")).is_ok());
    let refused = policy
        .check_write(&root.join("home/.bashrc"))
        .expect_err("outside");
    assert!(
        refused.contains("add it to sandbox.policy.rw_paths"),
        "{refused}"
    );
    assert!(policy.check_write(&PathBuf::from("relative")).is_err());
}

#[test]
fn bwrap_keeps_writes_inside_the_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let inside = root.join("inside");
    let outside = root.join("outside");
    std::fs::create_dir_all(&inside).expect("dir");
    std::fs::create_dir_all(&outside).expect("dir");
    let policy = PathPolicy::new([inside.clone()]);
    let sandbox = match Bwrap::for_policy(&policy, false) {
        Ok(sandbox) => sandbox,
        Err(reason) => {
            // Not a pass in disguise: the reason must be the detector's explanation.
            assert!(bwrap_availability().is_err());
            eprintln!("note: bwrap not usable here, sandbox test skipped: {reason}");
            return;
        }
    };
    let mut ctx = RunContext::new(&inside, Arc::new(policy));
    ctx.sandbox = Some(Arc::new(sandbox));
    let run = |command: &str| {
        bash::run(
            &ctx,
            &json!({"label": "t", "command": command, "timeout": 10}),
        )
    };
    let ok = run("echo hi > ok.txt && cat ok.txt");
    assert_eq!(ok.text, "hi\n", "{ok:?}");
    let refused = run(&format!("echo no > {}/x.txt", outside.display()));
    assert!(refused.is_error, "{refused:?}");
    assert!(
        refused.text.contains("Read-only file system"),
        "{}",
        refused.text
    );
    assert!(!outside.join("x.txt").exists());
    // In its own network namespace only the loopback interface exists.
    let no_net = run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    assert_eq!(no_net.text, "lo\n", "network not unshared");
    // A timeout inside the sandbox still kills everything.
    let hung = bash::run(
        &ctx,
        &json!({"label": "t", "command": "sleep 300", "timeout": 1}),
    );
    assert!(
        hung.text.ends_with("[error: 1s timeout exceeded]"),
        "{hung:?}"
    );
}

#[test]
fn lsp_is_declared_only_when_a_server_is_on_path() {
    let mut config = flemma_config::resolve(&[]).expect("defaults").config;
    config.tools.lsp.servers = vec!["no-such-language-server-xyz --stdio".into()];
    assert!(!flemma_tools::registry::condition_holds("lsp", &config));
    config.tools.lsp.servers = vec!["bash".into()];
    assert!(flemma_tools::registry::condition_holds("lsp", &config));
    assert!(!flemma_tools::registry::condition_holds(
        "read_skill",
        &config
    ));
    let skills = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(skills.path().join("deploy")).expect("dir");
    std::fs::write(skills.path().join("deploy/SKILL.md"), "# Deploy").expect("skill");
    config.tools.skills_dir = Some(skills.path().display().to_string());
    assert!(flemma_tools::registry::condition_holds(
        "read_skill",
        &config
    ));
}
