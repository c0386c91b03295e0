//! What flemmad reads for a chat (issue 26, invariant II, `docs/security.md`), through the
//! binary against the mock provider: an untrusted chat's `@` references and `include()`s read
//! nothing outside its project (links followed) — each refusal is a warning that says why and
//! how to allow it; no chat, trusted or not, reads `/proc`, `/sys`, `/dev` or the credentials in
//! the home directory; a `read` result attaches only the file `read` read; `~/` in a tool's
//! path is the home directory, for the tool and for the approval policy.
//!
//! Canaries: a home directory with a secret in every credential place, a file beside the
//! project, and flemmad's own environment (the provider key and a variable of the test's). The
//! request the mock received is searched for each.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use flemma_mock_provider::{MockProvider, RecordedRequest, Turn};
use serde_json::json;

use crate::common::{self, Chat, flemmad_command, read, stderr};

const ENV_CANARY: &str = "ENV-CANARY-5f0c2e";
const OUTSIDE_CANARY: &str = "OUTSIDE-CANARY-91ad";
const INSIDE_TEXT: &str = "INSIDE-THE-PROJECT-7c31";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0IMAGE-BYTES";

/// A chat in a git work tree (`repo/.git`, the chat in `repo/chats/`), a file beside the
/// repository, and a home directory with a canary in every credential place.
struct World {
    chat: Chat,
    home: PathBuf,
    repo: PathBuf,
    outside: PathBuf,
    /// The canary text of each credential file, with the path a chat names it by (`~/…`).
    credentials: Vec<(String, String)>,
}

impl World {
    fn new() -> Self {
        let mut chat = common::chat_outside_tmp("");
        let root = chat.path.parent().unwrap().to_owned();
        let home = root.join("home");
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("chats")).unwrap();
        std::fs::write(repo.join("README.md"), INSIDE_TEXT).unwrap();
        let outside = root.join("outside.txt");
        std::fs::write(&outside, OUTSIDE_CANARY).unwrap();
        let credentials = flemma_config::reach::HOME_CREDENTIALS
            .iter()
            .map(|place| {
                let is_file = place.ends_with(".toml")
                    || [".netrc", ".git-credentials", ".pgpass", ".pypirc"].contains(place);
                let relative = if is_file {
                    (*place).to_owned()
                } else {
                    format!("{place}/secret")
                };
                let file = home.join(&relative);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                let canary = format!("CRED-CANARY-{}", place.replace(['/', '.'], "_"));
                std::fs::write(&file, &canary).unwrap();
                (canary, format!("~/{relative}"))
            })
            .collect();
        // The chat lives in the repository; its config home and runtime folders stay beside.
        chat.path = repo.join("chats/talk.chat");
        Self {
            chat,
            home,
            repo,
            outside,
            credentials,
        }
    }

    fn write_chat(&self, text: &str) {
        std::fs::write(&self.chat.path, text).unwrap();
    }

    fn trust(&self) {
        common::trust_folder(self.chat.path.parent().unwrap(), &self.chat.config_home);
    }

    /// `flemmad ARGS… CHAT [MORE…]` with the test's home directory and environment canary.
    async fn flemmad_with(&self, mock: &MockProvider, args: &[&str], more: &[&str]) -> Output {
        let mut command = flemmad_command(&self.chat, &mock.base_url());
        // The state and runtime folders of `flemmad_command` are beside the chat: keep them in
        // the test's temp dir rather than the repository.
        let dir = self.chat.config_home.parent().unwrap();
        command
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", dir.join("run"))
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("READS_TEST_CANARY", ENV_CANARY)
            .args(args)
            .arg(&self.chat.path)
            .args(more);
        tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("flemmad finished in time")
            .unwrap()
    }

    async fn flemmad(&self, mock: &MockProvider, args: &[&str]) -> Output {
        self.flemmad_with(mock, args, &[]).await
    }
}

/// The request bodies the mock received, as sent.
fn sent(mock: &MockProvider) -> String {
    mock.requests()
        .iter()
        .map(|request: &RecordedRequest| request.raw_body.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// Every secret path a chat can name: each credential (by `~/`, by `../..` from the chat, by
/// an absolute path and through a link in the project), `/proc/self/environ`, a file beside
/// the project (by `../..` and through a link), and devices.
fn attack_lines(world: &World) -> String {
    let chats = world.chat.path.parent().unwrap();
    symlink(&world.outside, &chats.join("outside-link"));
    symlink(&world.home.join(".ssh/secret"), &chats.join("key-link"));
    symlink(Path::new("/proc/self"), &chats.join("me"));
    let mut lines = String::new();
    for (_, path) in &world.credentials {
        let absolute = world.home.join(path.trim_start_matches("~/"));
        lines.push_str(&format!(
            "@{path} @/{} {{{{ include(\"{path}\") }}}}\n",
            absolute.display()
        ));
    }
    lines.push_str(concat!(
        "@//proc/self/environ {{ include(\"/proc/self/environ\") }} @./me/environ\n",
        "{{ include(\"me/environ\") }} @//dev/fd/0 @//dev/stdin\n",
        "@./key-link {{ include(\"key-link\") }}\n",
    ));
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_chat_reads_nothing_outside_its_project() {
    let world = World::new();
    let text = format!(
        "{}@You:\nInside: @../README.md {{{{ include(\"../README.md\") }}}}\nOut: @../../outside.txt @./outside-link {{{{ include(\"../../outside.txt\") }}}} {{{{ include(\"outside-link\") }}}}\n{}",
        common::frontmatter("anthropic", "claude-sonnet-4-5"),
        attack_lines(&world),
    );
    world.write_chat(&text);
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Nothing to see."));
    let out = world.flemmad(&mock, &["send"]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "the chat still sends: {err}");
    let body = sent(&mock);
    assert_eq!(mock.requests().len(), 1, "{err}");
    // The project's own files are read (the repository holds the chat's folder).
    assert_eq!(body.matches(INSIDE_TEXT).count(), 2, "{body}");
    for (canary, path) in &world.credentials {
        assert!(!body.contains(canary.as_str()), "{path} was sent: {body}");
    }
    for secret in [
        OUTSIDE_CANARY,
        ENV_CANARY,
        "sk-ant-test-secret",
        "XDG_STATE_HOME=",
    ] {
        assert!(!body.contains(secret), "{secret} was sent");
    }
    // Each refusal is said, with the reason and the way to allow it.
    assert!(
        err.contains("outside.txt was not read: it is outside this chat's project")
            && err.contains(&format!("({})", world.repo.display()))
            && err.contains("flemmad trust "),
        "{err}"
    );
    assert!(
        err.contains("was not included: it is outside this chat's project"),
        "{err}"
    );
    assert!(
        err.contains("environ was not read: it is in /proc, which flemmad never reads"),
        "{err}"
    );
    assert!(err.contains("where credentials are kept"), "{err}");
    assert!(
        err.contains("it is in /dev, which flemmad never reads"),
        "{err}"
    );
    // `count` says the same without sending.
    let count = world.flemmad(&mock, &["count"]).await;
    assert!(
        stderr(&count).contains("outside.txt was not read"),
        "{}",
        stderr(&count)
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_chat_reads_outside_its_project_but_never_proc_or_credentials() {
    let world = World::new();
    let text = format!(
        "{}@You:\nOut: @../../outside.txt {{{{ include(\"outside-link\") }}}}\n{}",
        common::frontmatter("anthropic", "claude-sonnet-4-5"),
        attack_lines(&world),
    );
    world.write_chat(&text);
    world.trust();
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Read it."));
    let out = world.flemmad(&mock, &["send"]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let body = sent(&mock);
    assert_eq!(
        body.matches(OUTSIDE_CANARY).count(),
        2,
        "a trusted chat reads any file: {body}"
    );
    for (canary, path) in &world.credentials {
        assert!(!body.contains(canary.as_str()), "{path} was sent: {body}");
    }
    for secret in [ENV_CANARY, "sk-ant-test-secret", "XDG_STATE_HOME="] {
        assert!(!body.contains(secret), "{secret} was sent");
    }
    assert!(err.contains("which flemmad never reads"), "{err}");
}

/// The auto-approved `read` of a README that names `@~/.ssh/…` and a file beside the project
/// returns the README's text, which stays text; `read` of an image still attaches the image.
/// The chat is trusted, so that nothing but this rule keeps the file beside the project out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_result_attaches_the_image_read_and_nothing_a_file_names() {
    let world = World::new();
    let chats = world.chat.path.parent().unwrap();
    std::fs::write(
        chats.join("NOTES.md"),
        format!("# Setup\n@~/.ssh/secret\n@/{}\n", world.outside.display()),
    )
    .unwrap();
    std::fs::write(chats.join("ref.txt"), "@../../outside.txt").unwrap();
    std::fs::write(chats.join("shot.png"), PNG).unwrap();
    world.write_chat(&format!(
        "{}@You:\nLook at the notes and the screenshot.\n",
        common::frontmatter("anthropic", "claude-sonnet-4-5"),
    ));
    world.trust();
    let mock = MockProvider::start().await.unwrap();
    let read_call = |id: &str, path: &str| {
        Turn::text("Reading.").tool_call_with_id(
            "read",
            id,
            json!({"label": "look", "path": path, "offset": null, "limit": null}),
        )
    };
    mock.push(read_call("t1", "NOTES.md"));
    mock.push(read_call("t2", "ref.txt"));
    mock.push(read_call("t3", "shot.png"));
    mock.push(Turn::text("Done."));
    let out = world.flemmad(&mock, &["send"]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(mock.requests().len(), 4, "{err}");
    let body = sent(&mock);
    assert!(
        !body.contains(OUTSIDE_CANARY),
        "a reference in a file was followed"
    );
    assert!(!body.contains("CRED-CANARY"), "a credential was sent");
    assert!(
        body.contains("@~/.ssh/secret"),
        "the README's text is sent as text"
    );
    let requests = mock.requests();
    let images = |request: &RecordedRequest| request.raw_body.matches("\"image/png\"").count();
    assert_eq!(
        requests.iter().map(images).collect::<Vec<_>>(),
        [0, 0, 0, 1],
        "the image `read` returned is attached, and nothing before it"
    );
    assert!(read(&world.chat.path).contains("@./shot.png;type=image/png"));
}

/// `read ~/notes.txt` is the file in the home directory: outside the project, it waits for
/// approval (it passed as a file of a folder named `~` in the project); approved, it reads the
/// home's file. `write ~/x.txt` writes no folder named `~` into the project: the home directory
/// is not writable, and the call says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tilde_in_a_tool_path_is_the_home_directory() {
    let world = World::new();
    std::fs::create_dir_all(&world.home).unwrap();
    std::fs::write(world.home.join("notes.txt"), "HOME-NOTES-CANARY").unwrap();
    world.write_chat(&format!(
        "{}@You:\nRead my notes.\n",
        common::frontmatter("anthropic", "claude-sonnet-4-5"),
    ));
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Writing.").tool_call_with_id(
        "write",
        "w1",
        json!({"label": "note", "path": "~/x.txt", "content": "hello"}),
    ));
    mock.push(Turn::text("Reading.").tool_call_with_id(
        "read",
        "r1",
        json!({"label": "notes", "path": "~/notes.txt", "offset": null, "limit": null}),
    ));
    mock.push(Turn::text("Done."));
    let out = world.flemmad(&mock, &["send"]).await;
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the read waits for approval: {err}"
    );
    assert_eq!(mock.requests().len(), 2, "{err}");
    let chats = world.chat.path.parent().unwrap();
    assert!(!chats.join("~").exists(), "a folder named ~ was made");
    assert!(
        !world.home.join("x.txt").exists(),
        "the home directory was written"
    );
    let chat_text = read(&world.chat.path);
    assert!(
        chat_text.contains("Refused to write ~/x.txt"),
        "{chat_text}"
    );
    assert!(
        chat_text.contains("**Tool Result:** `r1` (pending)"),
        "{chat_text}"
    );
    assert!(!sent(&mock).contains("HOME-NOTES-CANARY"));

    let approved = world.flemmad_with(&mock, &["approve"], &["r1"]).await;
    assert!(approved.status.success(), "{}", stderr(&approved));
    let out = world.flemmad(&mock, &["send"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        sent(&mock).contains("HOME-NOTES-CANARY"),
        "approved, `read ~/notes.txt` reads the home's file"
    );
}

/// The reading tools run in flemmad's process: `read`, `grep`, `find` and `ls` refuse `/proc`,
/// `/sys` and `/dev`, named or through a link, with an error result that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reading_tools_refuse_proc_sys_and_dev() {
    let world = World::new();
    let chats = world.chat.path.parent().unwrap();
    symlink(Path::new("/proc/self"), &chats.join("me"));
    world.write_chat(&format!(
        "```json\n{}\n```\n@You:\nLook around.\n",
        json!({"flemma": {
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "tools": {"auto_approve": ["+read", "+grep", "+find", "+ls"]},
        }})
    ));
    world.trust();
    let calls = [
        (
            "read",
            json!({"label": "a", "path": "/proc/self/environ", "offset": null, "limit": null}),
        ),
        (
            "read",
            json!({"label": "b", "path": "me/environ", "offset": null, "limit": null}),
        ),
        (
            "grep",
            json!({"label": "c", "pattern": "sk-ant", "path": "/proc/self/environ", "glob": null, "limit": null}),
        ),
        (
            "find",
            json!({"label": "d", "pattern": "*", "path": "/sys/kernel", "limit": null}),
        ),
        (
            "ls",
            json!({"label": "e", "path": "/dev", "max_depth": null, "limit": null}),
        ),
    ];
    let mock = MockProvider::start().await.unwrap();
    for (index, (tool, input)) in calls.iter().enumerate() {
        mock.push(Turn::text("Looking.").tool_call_with_id(
            *tool,
            format!("c{index}"),
            input.clone(),
        ));
    }
    mock.push(Turn::text("Done."));
    let out = world.flemmad(&mock, &["send"]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let body = sent(&mock);
    for secret in [ENV_CANARY, "sk-ant-test-secret", "XDG_STATE_HOME="] {
        assert!(!body.contains(secret), "{secret} was sent");
    }
    let chat_text = read(&world.chat.path);
    assert_eq!(
        chat_text.matches("which flemmad never reads").count(),
        calls.len(),
        "{chat_text}"
    );
}
