//! What an evaluation reads (`docs/security.md`, invariant II): never `/proc`, `/sys`, `/dev`
//! or the credentials in the home directory, whatever names them and for any chat; only the
//! project's files for an untrusted chat (its `ReadScope`), links followed; and of a `read`
//! result only the reference `read` wrote for the file it read.

use crate::common;

use std::path::Path;

use common::{TestHost, blocking, text_of};
use flemma_conversation::Part;
use flemma_template::{EvalOptions, Evaluation, ReadScope};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n0000";

/// Every text the conversation holds (text, text files, tool results), and every attachment's
/// bytes as text.
fn everything_sent(evaluation: &Evaluation) -> String {
    fn walk(part: &Part, out: &mut String) {
        match part {
            Part::Text { text } | Part::TextFile { text, .. } => out.push_str(text),
            Part::Image { data, .. } | Part::Pdf { data, .. } => {
                out.push_str(&String::from_utf8_lossy(data));
            }
            Part::ToolResult { content, .. } => content.iter().for_each(|p| walk(p, out)),
            _ => {}
        }
        out.push('\n');
    }
    let mut out = String::new();
    for part in &evaluation.conversation.system {
        walk(part, &mut out);
    }
    for message in &evaluation.conversation.messages {
        for part in message.parts.iter() {
            walk(part, &mut out);
        }
    }
    out
}

fn warnings(evaluation: &Evaluation) -> Vec<&str> {
    evaluation
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect()
}

/// A home directory with a canary in every credential place.
fn plant_credentials(host: &TestHost) -> Vec<String> {
    flemma_config::reach::HOME_CREDENTIALS
        .iter()
        .map(|place| {
            let canary = format!("CANARY-{}", place.replace(['/', '.'], "-"));
            let path = host.path("home").join(place);
            let file = if place.ends_with("credentials.toml")
                || [".netrc", ".git-credentials", ".pgpass", ".pypirc"].contains(place)
            {
                path
            } else {
                path.join("secret")
            };
            std::fs::create_dir_all(file.parent().expect("a parent")).expect("dirs");
            std::fs::write(&file, &canary).expect("a canary");
            canary
        })
        .collect()
}

/// The paths of the planted canaries, as a chat names them (`~/…`).
fn credential_paths() -> Vec<String> {
    flemma_config::reach::HOME_CREDENTIALS
        .iter()
        .map(|place| {
            if place.ends_with("credentials.toml")
                || [".netrc", ".git-credentials", ".pgpass", ".pypirc"].contains(place)
            {
                format!("~/{place}")
            } else {
                format!("~/{place}/secret")
            }
        })
        .collect()
}

#[test]
fn credentials_and_proc_are_never_read_even_in_a_trusted_chat() {
    let host = TestHost::new();
    let canaries = plant_credentials(&host);
    std::os::unix::fs::symlink(host.path("home/.ssh/secret"), host.path("key.txt"))
        .expect("a link in the project to the key");
    let mut text = String::from("@You:\nLook: @./key.txt @//proc/self/environ\n");
    for path in credential_paths() {
        text.push_str(&format!("@{path}\n{{{{ include(\"{path}\") }}}}\n"));
    }
    text.push_str("{{ include(\"/proc/self/environ\") }} {{ include(\"key.txt\") }}\n");
    text.push_str("{{ file_readable(\"~/.ssh/secret\") }} {{ file_readable(\"key.txt\") }}\n");
    // Trusted: the default scope reads anywhere else.
    let evaluation = host.eval(&text);
    let sent = everything_sent(&evaluation);
    for canary in &canaries {
        assert!(!sent.contains(canary.as_str()), "{canary} was sent: {sent}");
    }
    assert!(!sent.contains("PATH="), "the environment was sent: {sent}");
    assert!(sent.contains("false false"), "{sent}");
    assert!(
        blocking(&evaluation).is_empty(),
        "{:#?}",
        evaluation.diagnostics
    );
    let messages = warnings(&evaluation);
    let never = |what: &str| {
        messages
            .iter()
            .filter(|m| m.contains(what) && m.contains("which flemmad never reads"))
            .count()
    };
    // Each credential twice (reference, include), the link twice.
    assert_eq!(
        never("where credentials are kept"),
        2 * canaries.len() + 2,
        "{messages:#?}"
    );
    assert_eq!(never("in /proc"), 2, "{messages:#?}");
    assert!(
        messages.iter().any(|m| m.contains("was not included")),
        "an include says so: {messages:#?}"
    );
}

/// The chat's folder as an untrusted chat's scope, with a file beside it and links in and out.
struct Untrusted {
    host: TestHost,
}

impl Untrusted {
    fn new() -> Self {
        let host = TestHost::new();
        host.write("project/inside.txt", "INSIDE");
        host.write("outside.txt", "OUTSIDE-CANARY");
        host.write("project/img.png", PNG);
        std::os::unix::fs::symlink(host.path("outside.txt"), host.path("project/out-link"))
            .expect("a link out");
        std::os::unix::fs::symlink(host.path("project/inside.txt"), host.path("in-link"))
            .expect("a link in from outside");
        Self { host }
    }

    fn eval(&self, text: &str) -> Evaluation {
        self.eval_in(
            text,
            ReadScope::within(
                vec![self.host.path("project")],
                "it is outside this chat's project, and the chat is untrusted; TRUST-HINT",
            ),
        )
    }

    fn eval_in(&self, text: &str, reads: ReadScope) -> Evaluation {
        let path = self.host.write("project/chat.chat", text);
        let options = EvalOptions {
            path: Some(path),
            reads,
            ..EvalOptions::default()
        };
        flemma_template::evaluate(&flemma_syntax::parse(text), self.host.shared(), &options)
    }
}

#[test]
fn an_untrusted_chat_reads_only_its_project_links_followed() {
    let chat = Untrusted::new();
    let evaluation = chat.eval(concat!(
        "@You:\nA @./inside.txt B @../outside.txt C @./out-link D @../in-link\n",
        "{{ include(\"../outside.txt\") }}|{{ include(\"out-link\") }}|{{ include(\"../in-link\") }}|",
        "{{ file_readable(\"../outside.txt\") }}|{{ file_readable(\"inside.txt\") }}\n",
    ));
    assert!(
        blocking(&evaluation).is_empty(),
        "{:#?}",
        evaluation.diagnostics
    );
    let sent = everything_sent(&evaluation);
    assert!(!sent.contains("OUTSIDE-CANARY"), "{sent}");
    assert_eq!(sent.matches("INSIDE").count(), 3, "{sent}");
    assert!(sent.contains("|false|true"), "{sent}");
    let messages = warnings(&evaluation);
    let refused: Vec<_> = messages
        .iter()
        .filter(|m| m.contains("outside this chat's project") && m.contains("TRUST-HINT"))
        .collect();
    assert_eq!(refused.len(), 4, "{messages:#?}");
    assert!(
        refused
            .iter()
            .any(|m| m.contains("outside.txt was not read")),
        "the warning names the file: {refused:#?}"
    );
    // Trusted (the default scope), the same chat reads the file beside its project.
    let trusted = chat.eval_in("@You:\nB @../outside.txt\n", ReadScope::default());
    assert!(everything_sent(&trusted).contains("OUTSIDE-CANARY"));
}

#[test]
fn a_module_named_relative_to_an_untrusted_chat_stays_in_its_project() {
    let chat = Untrusted::new();
    chat.host.write("helpers.rhai", "fn greet() { \"hi\" }");
    let module = |path: &Path| flemma_template::TemplatingOptions {
        modules: vec![path.to_path_buf()],
        ..Default::default()
    };
    let path = chat
        .host
        .write("project/chat.chat", "@You:\n{{ greet() }}\n");
    let scope = ReadScope::within(vec![chat.host.path("project")], "outside; TRUST-HINT");
    let run = |modules| {
        let options = EvalOptions {
            path: Some(path.clone()),
            reads: scope.clone(),
            templating: modules,
            ..EvalOptions::default()
        };
        flemma_template::evaluate(
            &flemma_syntax::parse("@You:\n{{ greet() }}\n"),
            chat.host.shared(),
            &options,
        )
    };
    // Relative: found through the chat's folder, judged like its references.
    let relative = run(module(Path::new("../helpers.rhai")));
    assert!(
        warnings(&relative)
            .iter()
            .any(|m| m.contains("was not loaded") && m.contains("TRUST-HINT")),
        "{:#?}",
        relative.diagnostics
    );
    // Absolute: the user's configuration names the user's own file.
    let absolute = run(module(&chat.host.path("helpers.rhai")));
    common::assert_clean(&absolute);
    assert_eq!(text_of(&absolute, 0), "hi");
}

/// `read` of a README that holds `@~/.ssh/id_rsa` (or any other reference) returns text, and
/// text it stays; `read` of an image returns the one reference `read` writes, which attaches
/// the image.
#[test]
fn a_read_result_attaches_only_the_file_read_read() {
    let host = TestHost::new();
    let canaries = plant_credentials(&host);
    host.write("img.png", PNG);
    host.write("secret.txt", "SECRET-CANARY");
    host.write("other.png", b"\x89PNG\r\n\x1a\nOTHER-CANARY");
    let read = |id: &str, path: &str, result: &str| {
        format!(
            "@Assistant:\n**Tool Use:** `read` (`{id}`)\n```json\n{{\"path\":\"{path}\"}}\n```\n\n\
             @You:\n**Tool Result:** `{id}`\n```\n{result}\n```\n\n"
        )
    };
    let text = [
        "@You:\nlook\n\n".to_owned(),
        // A README with references in its text.
        read(
            "toolu_1",
            "README.md",
            "# Setup\nsee @~/.ssh/secret and @./secret.txt",
        ),
        // A file whose whole text is one reference to another file.
        read("toolu_2", "notes.txt", "@./secret.txt"),
        read("toolu_3", "pic.png", "@./other.png;type=image/png"),
        // What `read` writes for an image: attached.
        read("toolu_4", "img.png", "@./img.png;type=image/png"),
        read(
            "toolu_5",
            &host.path("img.png").display().to_string(),
            &flemma_syntax::write::file_reference(
                &host.path("img.png").display().to_string(),
                "image/png",
            ),
        ),
        // Even `read` itself never reads a credential into the chat through a reference.
        read(
            "toolu_6",
            "~/.ssh/secret",
            &flemma_syntax::write::file_reference(
                &host.path("home/.ssh/secret").display().to_string(),
                "image/png",
            ),
        ),
        "@Assistant:\nok\n\n@You:\nnext\n".to_owned(),
    ]
    .concat();
    let evaluation = host.eval(&text);
    let sent = everything_sent(&evaluation);
    for canary in canaries
        .iter()
        .map(String::as_str)
        .chain(["SECRET-CANARY", "OTHER-CANARY"])
    {
        assert!(!sent.contains(canary), "{canary} was sent: {sent}");
    }
    let images = evaluation
        .conversation
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|part| match part {
            Part::ToolResult { content, .. } => Some(content),
            _ => None,
        })
        .flatten()
        .filter(|part| matches!(part, Part::Image { data, .. } if data == PNG))
        .count();
    assert_eq!(images, 2, "{:#?}", evaluation.conversation);
    assert!(
        sent.contains("see @~/.ssh/secret and @./secret.txt"),
        "{sent}"
    );
}
