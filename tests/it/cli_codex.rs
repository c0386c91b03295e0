//! Provider `codex` (a ChatGPT subscription through the Codex backend) driven through the
//! binary against `flemma-mock-provider`, which plays the backend (credentials, the body it
//! takes, encrypted reasoning, rate-limit headers, a spent window) and the token endpoint:
//! a send, a tool cycle with reasoning items, an expired token refreshed (the file rewritten,
//! `0600`), not logged in, a spent window, the rate limits in `status`, the local count.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;
use std::time::Duration;

use common::{Chat, chat, codex_home, flemmad_command, read, send, stderr};
use flemma_mock_provider::{ChatGptLogin, MockProvider, Turn};
use serde_json::{Value, json};

const FRONTMATTER: &str = "```json\n{\"flemma\": {\"provider\": \"codex\", \"model\": \"gpt-5.5\", \"parameters\": {\"thinking\": \"low\"}}}\n```\n";

/// A chat on `codex`; with `login`, `codex login` was run (its `auth.json` written where the
/// Codex CLI keeps it: `$CODEX_HOME`).
fn codex_chat(body: &str, login: Option<&ChatGptLogin>) -> Chat {
    let chat = chat(&format!("{FRONTMATTER}{body}"));
    if let Some(login) = login {
        write_login(&chat, &login.auth_json());
    }
    chat
}

pub(crate) fn write_login(chat: &Chat, text: &str) {
    let home = codex_home(chat);
    std::fs::create_dir_all(&home).unwrap();
    let file = home.join("auth.json");
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn auth_json(chat: &Chat) -> Value {
    serde_json::from_str(&read(&codex_home(chat).join("auth.json"))).unwrap()
}

fn done_line(out: &Output) -> String {
    let err = stderr(out);
    err.lines()
        .rev()
        .find(|l| l.starts_with("flemmad: done in "))
        .unwrap_or_else(|| panic!("no summary line in {err:?}"))
        .to_owned()
}

#[tokio::test]
async fn a_send_uses_the_login_and_the_backends_form_and_shows_the_windows() {
    let mock = MockProvider::start().await.unwrap();
    let login = mock.chatgpt_login(false);
    let chat = codex_chat("@You:\nSay hello.\n", Some(&login));
    mock.push(Turn::text("Hello from Codex!"));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        read(&chat.path)
            .ends_with("@You:\nSay hello.\n\n@Assistant:\nHello from Codex!\n\n@You:\n\n"),
        "{}",
        read(&chat.path)
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/backend-api/codex/responses");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {}", login.access_token).as_str())
    );
    assert_eq!(
        request.header("chatgpt-account-id"),
        Some(login.account_id.as_str())
    );
    assert_eq!(request.header("originator"), Some("flemmad"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    let body = &request.body;
    assert_eq!(body["store"], json!(false));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["model"], json!("gpt-5.5"));
    assert!(body["instructions"].as_str().is_some_and(|i| !i.is_empty()));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["reasoning"]["effort"], json!("low"));
    for refused in ["max_output_tokens", "temperature"] {
        assert!(body.get(refused).is_none(), "{refused} sent: {body}");
    }

    // A subscription: no cost, the windows instead.
    let line = done_line(&out);
    assert!(!line.contains('$'), "{line}");
    assert!(
        line.contains("subscription: 5-hour window 12% used, resets in 2h 1")
            && line.contains("weekly window 3% used, resets in 4d 5h"),
        "{line}"
    );
    // Nothing was refreshed: the token was current.
    assert!(mock.chatgpt_refreshes().is_empty());
}

/// A tool call with reasoning before it: the reasoning item goes back with its encrypted
/// content (the mock backend refuses any it did not issue), the call and its output too.
#[tokio::test]
async fn a_tool_cycle_round_trips_the_reasoning_items() {
    let mock = MockProvider::start().await.unwrap();
    let login = mock.chatgpt_login(false);
    let chat = codex_chat("@You:\nWhat is in this folder?\n", Some(&login));
    std::fs::write(chat.path.parent().unwrap().join("notes.txt"), "milk\n").unwrap();
    mock.push(
        Turn::default()
            .thinking("I should list the folder.", "gAAAAB-encrypted-reasoning-1")
            .tool_call_with_id(
                "ls",
                "call_ls1",
                json!({"label": "list", "path": ".", "max_depth": null, "limit": null}),
            ),
    );
    mock.push(
        Turn::default()
            .thinking("notes.txt is there.", "gAAAAB-encrypted-reasoning-2")
            .and_text("There is notes.txt."),
    );
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(text.contains("There is notes.txt."), "{text}");
    assert!(text.contains("<thinking codex:signature="), "{text}");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{text}");
    let input = requests[1].body["input"].as_array().unwrap().clone();
    let kinds: Vec<&str> = input
        .iter()
        .map(|item| {
            item["type"]
                .as_str()
                .or(item["role"].as_str())
                .unwrap_or("?")
        })
        .collect();
    assert_eq!(
        kinds,
        ["user", "reasoning", "function_call", "function_call_output"],
        "{input:?}"
    );
    assert_eq!(
        input[1]["encrypted_content"],
        json!("gAAAAB-encrypted-reasoning-1")
    );
    assert_eq!(input[2]["call_id"], json!("call_ls1"));
    assert_eq!(input[3]["call_id"], json!("call_ls1"));
    assert!(
        input[3]["output"].as_str().unwrap().contains("notes.txt"),
        "{input:?}"
    );
}

/// An access token that expired is refreshed at the token endpoint first, and the file is
/// rewritten as the Codex CLI writes it: the new tokens, a new `last_refresh`, every other
/// field kept, mode `0600`. The next send uses the new token without refreshing again.
#[tokio::test]
async fn an_expired_token_is_refreshed_and_written_back() {
    let mock = MockProvider::start().await.unwrap();
    let login = mock.chatgpt_login(true);
    let chat = codex_chat("@You:\nHi.\n", None);
    let mut file: Value = serde_json::from_str(&login.auth_json()).unwrap();
    file["auth_mode"] = json!("chatgpt");
    file["some_future_field"] = json!({"kept": true});
    write_login(&chat, &serde_json::to_string_pretty(&file).unwrap());
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));

    let refreshes = mock.chatgpt_refreshes();
    assert_eq!(refreshes.len(), 1);
    let refresh: Value = serde_json::from_str(&refreshes[0]).unwrap();
    assert_eq!(refresh["grant_type"], json!("refresh_token"));
    assert_eq!(refresh["client_id"], json!("app_EMoamEEZ73f0CkXaXp7hrann"));
    assert_eq!(refresh["refresh_token"], json!(login.refresh_token));

    let written = auth_json(&chat);
    let new_access = written["tokens"]["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_access, login.access_token);
    assert_ne!(
        written["tokens"]["refresh_token"],
        json!(login.refresh_token)
    );
    assert_eq!(written["tokens"]["account_id"], json!(login.account_id));
    assert_eq!(written["auth_mode"], json!("chatgpt"));
    assert_eq!(written["some_future_field"], json!({"kept": true}));
    let last_refresh = written["last_refresh"].as_str().unwrap();
    assert_ne!(last_refresh, "2026-01-01T00:00:00.000000Z");
    assert!(
        last_refresh.ends_with('Z') && last_refresh.len() == 27,
        "{last_refresh}"
    );
    let mode = std::fs::metadata(codex_home(&chat).join("auth.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(codex_home(&chat))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["auth.json"]);
    let requests = mock.requests();
    assert_eq!(
        requests.last().unwrap().header("authorization"),
        Some(format!("Bearer {new_access}").as_str())
    );

    std::fs::write(&chat.path, format!("{}Again.\n", read(&chat.path))).unwrap();
    mock.push(Turn::text("Again."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        mock.chatgpt_refreshes().len(),
        1,
        "the fresh token is reused"
    );
}

/// A login another program replaced (the Codex CLI logged in again): the backend refuses the
/// token, the refresh token is used up, and the message says to log in again.
#[tokio::test]
async fn a_login_replaced_elsewhere_says_to_log_in_again() {
    let mock = MockProvider::start().await.unwrap();
    let old = mock.chatgpt_login(false);
    let chat = codex_chat("@You:\nHi.\n", Some(&old));
    let _newer = mock.chatgpt_login(false);
    let out = send(&chat, &mock.base_url()).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("could not be refreshed") && err.contains("run `codex login` again"),
        "{err}"
    );
    assert_eq!(mock.chatgpt_refreshes().len(), 1);
}

#[tokio::test]
async fn not_logged_in_says_to_run_codex_login() {
    let mock = MockProvider::start().await.unwrap();
    let chat = codex_chat("@You:\nHi.\n", None);
    mock.push(Turn::text("never sent"));
    let out = send(&chat, &mock.base_url()).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    let expected = codex_home(&chat).join("auth.json");
    assert!(
        err.contains("not logged in to ChatGPT")
            && err.contains(&expected.display().to_string())
            && err.contains("Run `codex login`"),
        "{err}"
    );
    assert!(mock.requests().is_empty());
    assert_eq!(read(&chat.path), format!("{FRONTMATTER}@You:\nHi.\n"));

    // A file with only an API key is not a ChatGPT login.
    write_login(&chat, r#"{"OPENAI_API_KEY": "sk-test"}"#);
    let out = send(&chat, &mock.base_url()).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("holds an OpenAI API key, not a ChatGPT login"),
        "{}",
        stderr(&out)
    );
}

/// A spent window: HTTP 429 `usage_limit_reached`, not retried, and the message says which
/// window and when it resets. `flemmad status` shows the windows afterwards.
#[tokio::test]
async fn a_spent_window_says_when_it_resets() {
    let mock = MockProvider::start().await.unwrap();
    let login = mock.chatgpt_login(false);
    let chat = codex_chat("@You:\nHi.\n", Some(&login));
    mock.set_codex_usage(100.0, 40.0);
    mock.push(Turn::text("never sent"));
    let out = tokio::time::timeout(Duration::from_secs(30), send(&chat, &mock.base_url()))
        .await
        .expect("a spent window is not retried");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("the usage limit of your ChatGPT plus plan is reached")
            && err.contains("its 5-hour window is 100% used")
            && err.contains("it resets in 2h 1")
            && err.contains("Z)"),
        "{err}"
    );
    assert_eq!(mock.requests().len(), 1, "not retried");

    let status = flemmad_command(&chat, &mock.base_url())
        .arg("status")
        .arg(&chat.path)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("rate limits (codex, as of 0m ago): 5-hour window 100% used, resets in 2h 1")
            && text.contains("weekly window 40% used"),
        "{text}"
    );
    let json = flemmad_command(&chat, &mock.base_url())
        .args(["status", "--json"])
        .arg(&chat.path)
        .output()
        .await
        .unwrap();
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    let windows = &json["rate_limits"]["windows"];
    assert_eq!(windows[0]["name"], json!("primary"));
    assert_eq!(windows[0]["usedPercent"], json!(100.0));
    assert_eq!(windows[0]["windowMinutes"], json!(300));
    assert_eq!(windows[1]["usedPercent"], json!(40.0));
}

/// `flemmad count` of a chat: what it printed.
async fn count(chat: &Chat, base: &str) -> String {
    let out = flemmad_command(chat, base)
        .arg("count")
        .arg(&chat.path)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Codex backend has no counting endpoint: `count` estimates locally and says so.
#[tokio::test]
async fn count_is_a_local_estimate_and_says_so() {
    let mock = MockProvider::start().await.unwrap();
    let chat = codex_chat("@You:\nHow many tokens is this question?\n", None);
    let stdout = count(&chat, &mock.base_url()).await;
    assert!(
        stdout.starts_with('≈')
            && stdout.contains(" / 272,000 input tokens (")
            && stdout.contains("% of gpt-5.5's context window)")
            && stdout.contains("(estimated locally: codex has no token counting endpoint)")
            && !stdout.contains("next request $"),
        "{stdout}"
    );
    assert!(mock.requests().is_empty(), "no request, no login needed");

    // A Chat Completions server has no counting endpoint either.
    let local = common::chat(&format!(
        "{}@You:\nHow many tokens is this question?\n",
        common::frontmatter("openai-compatible", "llama3.2")
    ));
    let stdout = count(&local, &mock.base_url()).await;
    assert!(
        stdout.starts_with('≈')
            && stdout.contains(" input tokens (window unknown")
            && stdout
                .contains("(estimated locally: openai-compatible has no token counting endpoint)"),
        "{stdout}"
    );
    assert!(mock.requests().is_empty());
}

/// `flemmad models codex` lists the catalogue's Codex models (the backend's own list depends
/// on the Codex CLI's version), their API prices for comparison only.
#[tokio::test]
async fn models_lists_the_codex_catalogue() {
    let mock = MockProvider::start().await.unwrap();
    let chat = codex_chat("@You:\nHi.\n", None);
    let out = flemmad_command(&chat, &mock.base_url())
        .args(["models", "codex"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "gpt-5.5  $5.00 in / $30.00 out per Mtok at API prices (your ChatGPT plan pays)"
        ) && stdout.contains("gpt-5.3-codex-spark"),
        "{stdout}"
    );
    assert!(mock.requests().is_empty());
}
