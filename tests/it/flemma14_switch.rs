//! `flemma.switch` with Flemma 0.13–0.14 model strings and presets (issue 16), end to end over
//! stdio against `flemmad lsp` and `flemma-mock-provider`: the next send goes where the string
//! or the preset says, with its parameters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use flemma_mock_provider::{Turn, WireFormat};
use serde_json::{Value, json};

use crate::common;
use crate::lsp::lsp_client::{Client, Flavor};
use crate::lsp_engine::Mock;

fn command(client: &mut Client, name: &str, arguments: Value) -> Result<Value, Value> {
    client.request(
        "workspace/executeCommand",
        json!({"command": name, "arguments": arguments}),
    )
}

fn wait_stopped(client: &mut Client) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        while let Some(n) = client.notifications.pop_front() {
            if n["method"] == "flemma/event" && n["params"]["name"] == "engine:stopped" {
                return n["params"]["data"].clone();
            }
        }
        assert!(Instant::now() < deadline, "no engine:stopped in time");
        client.pump(Duration::from_millis(50));
    }
}

#[test]
fn a_switch_to_a_preset_or_a_model_string_moves_the_next_send() {
    let mock = Mock::start();
    let original = "@You:\nwho are you?\n";
    let chat = common::chat(original);
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[presets.\"$fast\"]\nprovider = \"openai\"\nmodel = \"gpt-5.4-mini\"\n\n[presets.\"$fast\".parameters]\nthinking = \"low\"\n",
    )
    .unwrap();
    let uri = format!("file://{}", chat.path.display());
    let mut client = Client::start_with_env(Flavor::VsCode, &["--no-daemon"], &mock.env(&chat));
    client.initialize_with_options(chat.path.parent().unwrap(), Value::Null);
    client.open(&uri, original);

    let answer = command(&mut client, "flemma.switch", json!([uri, "$fast"])).unwrap();
    assert_eq!(
        answer["next"],
        json!({"provider": "openai", "model": "gpt-5.4-mini"}),
        "{answer}"
    );
    mock.provider().push(Turn::text("A fast model."));
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    assert_eq!(wait_stopped(&mut client)["reason"], "idle");
    let requests = mock.provider().requests();
    assert_eq!(requests[0].format, WireFormat::OpenAiResponses);
    assert_eq!(requests[0].body["model"], "gpt-5.4-mini");
    assert_eq!(requests[0].body["reasoning"]["effort"], "low");

    let answer = command(
        &mut client,
        "flemma.switch",
        json!([
            uri,
            "anthropic/claude-haiku-4-5;thinking=false;temperature=0.2"
        ]),
    )
    .unwrap();
    assert_eq!(
        answer["next"],
        json!({"provider": "anthropic", "model": "claude-haiku-4-5"}),
        "{answer}"
    );
    let end = client.text(&uri).len();
    client.type_at(&uri, end, "And now?\n");
    mock.provider().push(Turn::text("A small model."));
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    assert_eq!(wait_stopped(&mut client)["reason"], "idle");
    let requests = mock.provider().requests();
    assert_eq!(requests[1].format, WireFormat::Anthropic);
    assert_eq!(requests[1].body["model"], "claude-haiku-4-5");
    assert_eq!(requests[1].body["temperature"], 0.2);
}
