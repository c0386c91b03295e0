//! Flemma 0.13–0.14 chats under `flemmad send` (issue 16): model strings, parameters and
//! presets, the model catalogue and its per-model request shapes, thinking from another
//! provider, OpenAI streams that stay open, Flemma-only options and Vertex service accounts.
//! Every request is checked on the wire, as `flemma-mock-provider` received it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{Chat, chat, read, send, send_command, stderr};
use flemma_mock_provider::{MockConfig, MockProvider, Turn};
use serde_json::json;

/// Writes the user configuration file the chat's `flemmad` reads.
fn config_file(chat: &Chat, toml: &str) {
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

fn json_chat(flemma: serde_json::Value, body: &str) -> Chat {
    chat(&format!(
        "```json\n{}\n```\n{body}",
        json!({ "flemma": flemma })
    ))
}

#[tokio::test]
async fn a_model_string_selects_the_provider_model_and_parameters() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(
        json!({"model": "vertex/gemini-2.5-pro;project_id=proj-x;location=us-east5;thinking=low"}),
        "@You:\nHello.\n",
    );
    mock.push(Turn::text("Hi."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let request = &mock.requests()[0];
    // The provider came from the string: a Vertex path with the project and location.
    assert_eq!(
        request.path,
        "/v1beta1/projects/proj-x/locations/us-east5/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    // `thinking=low` (the default is high): Gemini 2.5's low budget.
    assert_eq!(
        request.body["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        flemma_provider::gemini_level_budget(flemma_config::ThinkingLevel::Low),
        "{}",
        request.body["generationConfig"]
    );
}

/// Issue 31, fault 2: Flemma's schema aliases (`thinking`, `timeout`, `max_tokens`,
/// `temperature` at the top level) send as the options they stand for, in the frontmatter as
/// Flemma accepts them, and in the config file.
#[tokio::test]
async fn flemmas_top_level_aliases_send() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(
        json!({"thinking": "low", "max_tokens": 4000, "timeout": 30}),
        "@You:\nHello.\n",
    );
    mock.push(Turn::text("Hi."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].body;
    assert_eq!(body["max_tokens"], 4000, "{body}");
    assert_eq!(body["output_config"]["effort"], "low", "{body}");

    // `temperature` in the config file, `thinking = false` beside it in the frontmatter.
    config_file(&chat, "temperature = 0.5\n");
    let text = read(&chat.path);
    let rest = &text[text.find("@You:").unwrap()..];
    std::fs::write(
        &chat.path,
        format!("```json\n{{\"flemma\": {{\"thinking\": false}}}}\n```\n{rest}Again.\n"),
    )
    .unwrap();
    mock.push(Turn::text("Hi again."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[1].body;
    assert_eq!(body["temperature"], 0.5, "{body}");
    // This model's way of no thinking: no thinking and no effort in the request.
    assert!(
        body["thinking"].is_null() && body["output_config"].is_null(),
        "{body}"
    );
}

#[tokio::test]
async fn a_model_string_in_the_config_file_and_nil_in_the_frontmatter() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nHello.\n");
    config_file(
        &chat,
        "model = \"anthropic/claude-opus-4-8;thinking=false;temperature=0.7\"\n",
    );
    mock.push(Turn::text("Hi."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].body;
    // The whole string is no longer posted as the model.
    assert_eq!(body["model"], "claude-opus-4-8", "{body}");
    assert_eq!(body["temperature"], 0.7, "{body}");

    // `;temperature=nil` in the frontmatter clears what the config file set.
    let text = read(&chat.path);
    std::fs::write(
        &chat.path,
        format!(
            "```json\n{{\"flemma\": {{\"model\": \"anthropic/claude-opus-4-8;thinking=false;temperature=nil\"}}}}\n```\n{text}Again.\n"
        ),
    )
    .unwrap();
    mock.push(Turn::text("Hi again."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[1].body;
    assert_eq!(body["model"], "claude-opus-4-8");
    assert!(body.get("temperature").is_none(), "{body}");
}

#[tokio::test]
async fn a_model_preset_selects_provider_model_parameters_and_tools() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(json!({"model": "$fast"}), "@You:\nQuick one.\n");
    config_file(
        &chat,
        r#"
[presets."$fast"]
provider = "openai"
model = "gpt-5.4-mini"
tools = ["read", "grep"]

[presets."$fast".parameters]
thinking = "low"
"#,
    );
    mock.push(Turn::text("Done."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    let body = &request.body;
    assert_eq!(body["model"], "gpt-5.4-mini", "{body}");
    assert_eq!(body["reasoning"]["effort"], "low", "{body}");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["grep", "read"], "{body}");
    assert!(
        stderr(&out).contains("openai (gpt-5.4-mini)"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn an_unknown_preset_blocks_with_a_suggestion() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(json!({"model": "$fsat"}), "@You:\nQuick one.\n");
    config_file(
        &chat,
        "[presets.\"$fast\"]\nprovider = \"openai\"\nmodel = \"gpt-5.4-mini\"\n",
    );
    let out = send(&chat, &mock.base_url()).await;
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("'$fsat'") && text.contains("'$fast'"),
        "{text}"
    );
    assert!(mock.requests().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn catalogue_defaults_and_per_model_shapes() {
    let mock = MockProvider::start().await.unwrap();
    // Moonshot without a model: Flemma's default, Kimi K2.6 (no longer kimi-k2-thinking).
    let chat = json_chat(
        json!({"provider": "moonshot", "parameters": {"thinking": false}}),
        "@You:\nHi.\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].body;
    assert_eq!(body["model"], "kimi-k2.6", "{body}");
    // K2.6 thinks unless told not to.
    assert_eq!(body["thinking"], json!({"type": "disabled"}), "{body}");

    // Kimi K3: a top-level `reasoning_effort` (medium runs as its `high`), and it always thinks.
    let chat = json_chat(
        json!({"model": "moonshot/kimi-k3;thinking=medium"}),
        "@You:\nHi.\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[1].body;
    assert_eq!(body["model"], "kimi-k3");
    assert!(
        !stderr(&out).contains("not in flemmad's"),
        "{}",
        stderr(&out)
    );
    assert_eq!(body["reasoning_effort"], "high", "{body}");
    assert!(body.get("thinking").is_none(), "{body}");

    let chat = json_chat(
        json!({"model": "moonshot/kimi-k3;thinking=false"}),
        "@You:\nHi.\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mock.requests()[2].body["reasoning_effort"], "low");
    assert!(
        stderr(&out).contains("kimi-k3 always thinks"),
        "{}",
        stderr(&out)
    );

    // Claude Sonnet 5 is told to stop thinking; an unknown model keeps "did you mean".
    let chat = json_chat(
        json!({"model": "anthropic/claude-sonet-5;thinking=false"}),
        "@You:\nHi.\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did you mean `claude-sonnet-5`?"),
        "{}",
        stderr(&out)
    );
    let chat = json_chat(
        json!({"model": "anthropic/claude-sonnet-5;thinking=false"}),
        "@You:\nHi.\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("did you mean"), "{}", stderr(&out));
    assert_eq!(
        mock.requests()[4].body["thinking"],
        json!({"type": "disabled"})
    );
}

#[tokio::test]
async fn thinking_from_another_provider_is_prose_ending_with_a_rule() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(
        json!({"provider": "openai-compatible", "model": "llama3.2"}),
        "@You:\nHi.\n\n@Assistant:\n<thinking anthropic:signature=\"c2ln\">\nThe user greets me; greet back.\n</thinking>\nHello!\n\n@You:\nHow are you?\n",
    );
    mock.push(Turn::text("Fine."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].body;
    let assistant = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(
        assistant["content"], "The user greets me; greet back.\n\n---\n\nHello!",
        "{body}"
    );
    assert!(!mock.requests()[0].raw_body.contains("<thinking>"));
}

#[tokio::test]
async fn an_openai_stream_held_open_after_completed_does_not_hold_up_the_send() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(
        json!({"provider": "openai", "model": "gpt-5.4"}),
        "@You:\nHi.\n",
    );
    // The server keeps the connection open 30 s after `response.completed`.
    mock.push(Turn::text("Hello.").hold_open(30_000));
    let started = Instant::now();
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(read(&chat.path).contains("Hello."));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "send waited {:?} for a reply that was complete",
        started.elapsed()
    );
}

#[tokio::test]
async fn flemma_only_options_are_warnings_and_the_chat_sends() {
    let mock = MockProvider::start().await.unwrap();
    let chat = json_chat(
        json!({"tools": {"mcporter": {"enabled": true, "include": ["slack:*"]}}}),
        "@You:\nHi.\n",
    );
    config_file(
        &chat,
        "[tools.mcporter]\nenabled = true\n\n[editing]\nauto_write = true\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("warning"), "{text}");
    assert!(text.contains("`tools.mcporter`"), "{text}");
    assert!(text.contains("[tools.mcp]"), "{text}");
    assert!(text.contains("config.toml"), "{text}");
    assert!(text.contains("`editing.auto_write`"), "{text}");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_colon_in_auto_approve_is_read_with_a_dot_and_a_warning() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nHi.\n");
    config_file(
        &chat,
        "[tools]\nauto_approve = [\"$readonly\", \"flemma:*\"]\n",
    );
    mock.push(Turn::text("Hello."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("'flemma:*'") && text.contains("'flemma.*'"),
        "{text}"
    );
}

const TEST_KEY: &str = include_str!("../fixtures/vertex/test-only-service-account-key.pem");

#[tokio::test]
async fn vertex_authenticates_with_a_service_account_key_file() {
    let key = flemma_mock_provider::oauth::public_key_of(TEST_KEY).unwrap();
    let mock = MockProvider::start_with(MockConfig {
        service_account_key: Some(key),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let chat = json_chat(
        json!({"model": "vertex/gemini-2.5-flash;project_id=sa-project"}),
        "@You:\nHi.\n",
    );
    let key_file = chat.path.with_file_name("key.json");
    std::fs::write(
        &key_file,
        json!({
            "type": "service_account",
            "project_id": "sa-project",
            "private_key_id": "0123abcd",
            "private_key": TEST_KEY,
            "client_email": "flemmad-test@sa-project.iam.gserviceaccount.com",
            "token_uri": format!("{}/token", mock.base_url()),
        })
        .to_string(),
    )
    .unwrap();
    mock.push(Turn::text("Hello."));
    mock.push(Turn::text("Again."));
    let mut command = send_command(&chat, &mock.base_url());
    command
        .env_remove("VERTEX_ACCESS_TOKEN")
        .env("GOOGLE_APPLICATION_CREDENTIALS", &key_file);
    let out = command.output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // One JWT exchange at the key's token_uri, no gcloud (PATH has none here).
    let exchanges = mock.token_requests();
    assert_eq!(exchanges.len(), 1);
    assert!(exchanges[0].starts_with(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
    ));
    let request = &mock.requests()[0];
    assert_eq!(request.header("authorization"), Some("Bearer ya29.mock-1"));

    // A token endpoint that refuses the key: the error says which key and why.
    let refusing = MockProvider::start_with(MockConfig {
        service_account_key: Some(b"another account's key".to_vec()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    std::fs::write(
        &key_file,
        json!({"type": "service_account", "private_key": TEST_KEY, "client_email": "x@y.iam.gserviceaccount.com", "token_uri": format!("{}/token", refusing.base_url())}).to_string(),
    )
    .unwrap();
    std::fs::write(&chat.path, read(&chat.path) + "More.\n").unwrap();
    let mut command = send_command(&chat, &refusing.base_url());
    command
        .env_remove("VERTEX_ACCESS_TOKEN")
        .env("GOOGLE_APPLICATION_CREDENTIALS", &key_file);
    let out = command.output().await.unwrap();
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(text.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{text}");
    assert!(
        text.contains("invalid_grant: invalid JWT signature"),
        "{text}"
    );
    assert!(
        refusing.requests().is_empty(),
        "nothing was sent without a token"
    );
}
