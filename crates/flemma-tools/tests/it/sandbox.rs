//! The process sandbox with real `bwrap` (when usable here) and the write policy from config.

use std::path::PathBuf;
use std::sync::Arc;

use flemma_tools::builtin::bash;
use flemma_tools::sandbox::{
    Bwrap, CallLimits, PathPolicy, PolicyPlaces, PrivatePlaces, bwrap_availability,
};
use flemma_tools::{PathGuard, RunContext};
use serde_json::json;

#[test]
fn policy_from_default_config_allows_chat_dir_and_store_only() {
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
    // The host's cache and /tmp are not the sandbox's: it has private ones (tool_setup).
    assert!(policy.check_write(&root.join("home/.cache/x")).is_err());
    assert!(policy.check_write(&PathBuf::from("/tmp/flemma-x")).is_err());
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

/// Invariant I against a real bwrap: what holds a chat's authority stays as it is whatever a
/// sandboxed command does — the chat and its neighbours (written, renamed, their folder renamed
/// and replaced), a nested repository's `.git` (and its folder), a `.git` at the root, the
/// protected places; `/tmp` is the chat's own; no capability, as root too.
#[test]
fn a_sandboxed_command_cannot_touch_what_holds_authority() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let project = root.join("project");
    let chats = project.join("chats");
    std::fs::create_dir_all(chats.join(".flemma")).expect("chats");
    std::fs::create_dir_all(project.join("vendor/lib/.git")).expect("nested repository");
    std::fs::write(project.join("vendor/lib/.git/config"), "[core]\n").expect("git config");
    std::fs::create_dir_all(project.join("config/flemma")).expect("protected");
    std::fs::write(project.join("config/flemma/config.toml"), "").expect("config");
    let chat = chats.join("talk.chat");
    std::fs::write(&chat, "@You:\nhi\n").expect("chat");
    std::fs::write(chats.join("other.chat"), "@You:\nother\n").expect("chat");
    let private = PrivatePlaces::create(&root.join("private"), vec![]).expect("private");
    let policy = PathPolicy::new([project.clone()])
        .protect([chat.clone(), project.join("config/flemma")])
        .with_private(private.clone());
    let sandbox = match Bwrap::for_policy(&policy, false) {
        Ok(sandbox) => sandbox.with_limits(CallLimits {
            processes: Some(64),
            memory_bytes: None,
        }),
        Err(reason) => {
            assert!(bwrap_availability().is_err());
            eprintln!("note: bwrap not usable here, sandbox test skipped: {reason}");
            return;
        }
    };
    let mut ctx = RunContext::new(&chats, Arc::new(policy));
    ctx.sandbox = Some(Arc::new(sandbox));
    let run = |command: &str| {
        bash::run(
            &ctx,
            &json!({"label": "t", "command": command, "timeout": 20}),
        )
    };
    let attacks = [
        "echo evil > talk.chat",
        "sed -i s/hi/evil/ talk.chat",
        "mv talk.chat moved.chat",
        "rm -f other.chat",
        "cd .. && mv chats chats-away && mkdir chats && echo evil > chats/talk.chat",
        "cd ../vendor && mv lib lib-away && mkdir -p lib/.git && echo evil > lib/.git/config",
        "echo '[core] fsmonitor = evil' >> ../vendor/lib/.git/config",
        "mkdir -p ../.git/hooks && echo evil > ../.git/config",
        "echo evil > ../config/flemma/config.toml",
        "mv ../config ../config-away",
        "mount -o remount,rw / || cat /proc/self/status",
    ];
    for attack in attacks {
        run(attack);
    }
    assert_eq!(std::fs::read_to_string(&chat).expect("chat"), "@You:\nhi\n");
    assert_eq!(
        std::fs::read_to_string(chats.join("other.chat")).expect("chat"),
        "@You:\nother\n"
    );
    assert!(!chats.join("moved.chat").exists());
    assert!(!project.join("chats-away").exists());
    assert!(!project.join("vendor/lib-away").exists());
    assert_eq!(
        std::fs::read_to_string(project.join("vendor/lib/.git/config")).expect("config"),
        "[core]\n"
    );
    assert!(
        !project.join(".git").exists(),
        "no .git at the root, not even the placeholder once the call ended"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("config/flemma/config.toml")).expect("config"),
        ""
    );
    // Writing elsewhere in the project still works.
    let ok = run("echo fine > notes.txt && cat notes.txt");
    assert_eq!(ok.text, "fine\n", "{ok:?}");
    // No capability inside, as root too.
    let caps = run("grep CapEff /proc/self/status");
    assert!(caps.text.contains("0000000000000000"), "{caps:?}");
    // `/tmp` is the chat's own: what a command writes there is in the private folder.
    let tmp = run("echo mine > /tmp/flemma-private-probe && ls /tmp");
    assert!(!tmp.is_error, "{tmp:?}");
    assert!(private.tmp.join("flemma-private-probe").exists());
    assert!(!std::path::Path::new("/tmp/flemma-private-probe").exists());
    // The limits stop a call that starts too many processes.
    let forks = run("for i in $(seq 1 200); do sleep 30 & done; wait");
    assert!(forks.is_error, "{forks:?}");
    assert!(
        forks.text.contains("sandbox.limits.processes"),
        "{}",
        forks.text
    );
}

/// Calls running at once in one root share its `.git` placeholder: none fails because another
/// ended (and removed it), and none is left once they all ended (found by the issue 27 test of
/// ten calls approved at once).
#[test]
fn calls_at_once_share_the_git_placeholder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let project = root.join("project");
    std::fs::create_dir_all(&project).expect("project");
    let private = PrivatePlaces::create(&root.join("private"), vec![]).expect("private");
    let policy = PathPolicy::new([project.clone()]).with_private(private);
    let sandbox = match Bwrap::for_policy(&policy, false) {
        Ok(sandbox) => Arc::new(sandbox),
        Err(reason) => {
            assert!(bwrap_availability().is_err());
            eprintln!("note: bwrap not usable here, sandbox test skipped: {reason}");
            return;
        }
    };
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let mut ctx = RunContext::new(&project, Arc::new(policy.clone()));
            ctx.sandbox = Some(sandbox.clone());
            std::thread::spawn(move || {
                let mut outcomes = Vec::new();
                for n in 0..6 {
                    let sleep = if (i + n) % 2 == 0 { "0.05" } else { "0" };
                    outcomes.push(bash::run(
                        &ctx,
                        &json!({"label": "t", "command": format!("sleep {sleep}; echo ok"), "timeout": 20}),
                    ));
                }
                outcomes
            })
        })
        .collect();
    for thread in threads {
        for outcome in thread.join().expect("thread") {
            assert_eq!(outcome.text, "ok\n", "{outcome:?}");
        }
    }
    assert!(!project.join(".git").exists(), "the placeholder went");
}
