//! `flemmad send` driven as a process against `flemma-mock-provider` over real HTTP, for every
//! provider wire format, with the failure cases of the brief.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{chat, frontmatter, read, send, send_command, stderr};
use flemma_mock_provider::{Failure, MockConfig, MockProvider, Turn};
use serde_json::json;

async fn two_turn_conversation(provider: &str, model: &str) {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(&format!(
        "{}@You:\nSay hello.\n",
        frontmatter(provider, model)
    ));
    mock.push(Turn::text("Hello there!"));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{provider}: {}", stderr(&out));
    let after_first = read(&chat.path);
    assert!(
        after_first.ends_with("@You:\nSay hello.\n\n@Assistant:\nHello there!\n\n@You:\n\n"),
        "{provider}: {after_first:?}"
    );

    // Second turn: the user types under the new @You: and sends again.
    std::fs::write(&chat.path, format!("{after_first}And goodbye?\n")).unwrap();
    mock.push(Turn::text("Goodbye!"));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{provider}: {}", stderr(&out));
    assert!(read(&chat.path).ends_with("And goodbye?\n\n@Assistant:\nGoodbye!\n\n@You:\n\n"));

    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{provider}");
    // The second request carries the first reply, and starts with the first request's messages
    // (the replay is stable for prompt caching).
    assert!(
        requests[1].raw_body.contains("Hello there!"),
        "{provider}: {}",
        requests[1].raw_body
    );
    assert!(requests[1].raw_body.contains("And goodbye?"), "{provider}");
    assert!(
        !requests[0].raw_body.contains("@Assistant"),
        "{provider}: role markers are not sent"
    );
}

#[tokio::test]
async fn anthropic_two_turns() {
    two_turn_conversation("anthropic", "claude-sonnet-4-5").await;
}

#[tokio::test]
async fn openai_two_turns() {
    two_turn_conversation("openai", "gpt-5").await;
}

#[tokio::test]
async fn openai_compatible_two_turns() {
    two_turn_conversation("openai-compatible", "llama3.2").await;
}

#[tokio::test]
async fn gemini_two_turns() {
    two_turn_conversation("gemini", "gemini-2.5-pro").await;
}

#[tokio::test]
async fn vertex_two_turns() {
    two_turn_conversation("vertex", "gemini-2.5-pro").await;
}

#[tokio::test]
async fn moonshot_two_turns() {
    two_turn_conversation("moonshot", "kimi-k2-thinking").await;
}

#[tokio::test]
async fn templates_are_evaluated_before_sending() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(
        "```json\n{\"team\": \"QA\"}\n```\n@System:\nBe brief.\n\n@You:\nHello {{ team }} team\n",
    );
    mock.push(Turn::text("ok"));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].body;
    assert_eq!(body["system"][0]["text"], "Be brief.", "{body}");
    // max_tokens defaults to "50%" of the model's output limit (64,000 for Sonnet 4.5).
    assert_eq!(body["max_tokens"], 32_000, "{body}");
    assert_eq!(
        body["messages"][0]["content"][0]["text"], "Hello QA team",
        "{body}"
    );
    // The file keeps the template, not its value.
    assert!(read(&chat.path).contains("Hello {{ team }} team"));
}

#[tokio::test]
async fn thinking_and_tool_calls_are_written_as_blocks() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nRun the tests.\n");
    mock.push(
        Turn::default()
            .thinking("I should run make test.", "sig-abc")
            .and_text("Running them now.")
            .tool_call(
                "bash",
                json!({"command": "make test", "label": "running tests"}),
            ),
    );
    // One advance: the reply is written and its tool call is left for the next `send`.
    let out = send_command(&chat, &mock.base_url())
        .arg("--no-autopilot")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = read(&chat.path);
    let doc = flemma_syntax::parse(text.as_str());
    let assistant = &doc.messages()[1];
    let (_, tool_use) = assistant.tool_uses().next().expect("a tool use block");
    assert_eq!(tool_use.name, "bash");
    assert!(tool_use.input_is_valid);
    assert!(
        text.contains(
            "<thinking anthropic:signature=\"sig-abc\">\nI should run make test.\n</thinking>\n"
        ),
        "{text}"
    );
    // Thinking goes at the end of the turn, after the tool use.
    assert!(text.find("**Tool Use:**").unwrap() < text.find("<thinking").unwrap());
    assert!(text.ends_with("</thinking>\n\n@You:\n\n"), "{text:?}");
}

#[tokio::test]
async fn overloaded_then_success_is_retried_visibly() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nhi\n");
    mock.push(Turn::failing(Failure::Http {
        status: 529,
        retry_after: Some("0".into()),
        retry_after_ms: None,
    }));
    mock.push(Turn::text("Recovered."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("retrying"), "{}", stderr(&out));
    assert!(read(&chat.path).contains("Recovered."));
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn an_html_error_page_is_explained_and_the_file_is_untouched() {
    let mock = MockProvider::start().await.unwrap();
    let original = "@You:\nhi\n";
    let chat = chat(original);
    mock.push(Turn::failing(Failure::Html { status: 403 }));
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Unexpected API response: 403"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&chat.path), original);
}

#[tokio::test]
async fn a_rejected_key_names_the_variable_and_never_prints_the_key() {
    let mock = MockProvider::start().await.unwrap();
    let original = "@You:\nhi\n";
    let chat = chat(original);
    mock.push(Turn::failing(Failure::Unauthorized));
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    assert!(!err.contains("sk-ant-test-secret"), "{err}");
    assert_eq!(read(&chat.path), original);
}

#[tokio::test]
async fn a_dropped_connection_after_content_leaves_the_abort_marker() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nTell me a long story.\n");
    let long = "Once upon a time ".repeat(40);
    mock.push(Turn::text(long).failure(Failure::DisconnectAfterBytes(1500)));
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(text.contains("@Assistant:\nOnce upon a time"), "{text}");
    assert!(
        text.contains("\n\n<!-- flemma:aborted: Response cut off by a provider error: "),
        "{text:?}"
    );
    assert!(!text.contains("interrupted by the user"), "{text:?}");
    assert!(text.ends_with(" -->\n\n@You:\n\n"), "{text:?}");
    assert_eq!(mock.requests().len(), 1, "no retry after content streamed");
}

#[tokio::test]
async fn text_appended_while_streaming_is_kept() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nStream slowly.\n");
    // The reply pauses in its middle (the request still streams): the text is typed then.
    mock.push(Turn::text("word ".repeat(60)).stall(2000));
    let child = send_command(&chat, &mock.base_url())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the reply to start landing and the file to rest (flemmad writes it in place,
    // and a write by someone else at the very moment flemmad writes is lost: none can close
    // that window, fsutil::replace_in_place), then append as an editor saving to disk would.
    let mut last = String::new();
    let mut quiet = 0;
    for _ in 0..600 {
        let now = read(&chat.path);
        quiet = if now.contains("@Assistant:\nword") && now == last {
            quiet + 1
        } else {
            0
        };
        if quiet == 4 {
            break;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(quiet, 4, "the stream started and paused: {last}");
    assert!(
        !last.contains(&"word ".repeat(60)),
        "the reply is not complete yet: {last}"
    );
    // Appended to the file as it is when written (`O_APPEND`), not read, changed and written
    // back: flemmad writes the reply meanwhile, and writing back the text read before would
    // delete what it wrote in between — the reply being written, which cancels the request.
    {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&chat.path)
            .unwrap();
        file.write_all(b"NOTE TYPED WHILE STREAMING\n").unwrap();
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let text = read(&chat.path);
    assert!(out.status.success(), "{}\n--- chat:\n{text}", stderr(&out));
    assert!(text.contains("NOTE TYPED WHILE STREAMING"), "{text}");
    assert!(
        text.contains(&"word ".repeat(60).trim_end().to_string()),
        "{text}"
    );
    let doc = flemma_syntax::parse(text.as_str());
    assert!(doc.print() == text);
}

#[tokio::test]
async fn ctrl_c_mid_stream_writes_the_abort_marker() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nStream slowly.\n");
    mock.push(Turn::text("slow ".repeat(400)).bytes_per_sec(2000));
    let child = send_command(&chat, &mock.base_url())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..400 {
        if read(&chat.path).contains("@Assistant:\nslow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(
        text.ends_with("<!-- flemma:aborted: Response interrupted by the user. -->\n\n@You:\n\n"),
        "{text:?}"
    );
}

#[tokio::test]
async fn a_blocking_template_error_sends_nothing() {
    let mock = MockProvider::start_with(MockConfig::default())
        .await
        .unwrap();
    let original = "@You:\n{% if undefined_variable { %}x{% } %}\n";
    let chat = chat(original);
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("talk.chat:2:"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was sent"),
        "{}",
        stderr(&out)
    );
    assert!(mock.requests().is_empty());
    assert_eq!(read(&chat.path), original);
}

#[tokio::test]
async fn nothing_to_send_is_explained() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nhi\n\n@Assistant:\nhello\n\n@You:\n\n");
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nothing to send"), "{}", stderr(&out));
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn an_unreadable_file_exits_two() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .args(["send", "/nonexistent/dir/x.chat"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn writes_follow_the_stream_within_the_coalescing_window() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nStream slowly.\n");
    // Events arrive about half a second apart (300 bytes/s), far longer than the 100 ms window:
    // a writer that only flushed when the next event arrived would hold text ~500 ms.
    mock.push(Turn::text("tick ".repeat(6)).bytes_per_sec(300));
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        send_command(&chat, &mock.base_url())
            .env("RUST_LOG", "flemmad=info")
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let max_delay: u64 = err
        .split("max_delay_ms=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no max_delay_ms in {err}"));
    eprintln!("longest wait before a write: {max_delay} ms (window 100 ms)");
    // The default window is 100 ms; allow for scheduling on a loaded machine.
    assert!(
        max_delay <= 300,
        "a byte waited {max_delay} ms before its write started"
    );
}

#[tokio::test]
async fn the_key_can_come_from_secret_tool_and_a_missing_key_lists_every_resolver() {
    use std::os::unix::fs::PermissionsExt as _;
    let mock = MockProvider::start_with(MockConfig {
        require_key: Some("key-from-keyring".into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let chat = chat("@You:\nhi\n");
    let bin = chat.config_home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("secret-tool");
    std::fs::write(
        &fake,
        "#!/bin/sh\n[ \"$1 $2 $3 $4 $5\" = \"lookup service anthropic key api_key\" ] && echo key-from-keyring\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();

    mock.push(Turn::text("From the keyring."));
    let out = send_command(&chat, &mock.base_url())
        .env_remove("ANTHROPIC_API_KEY")
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(read(&chat.path).contains("From the keyring."));

    // No key anywhere: one error that names every resolver tried.
    std::fs::remove_file(&fake).unwrap();
    std::fs::write(&chat.path, "@You:\nhi\n").unwrap();
    let out = send_command(&chat, &mock.base_url())
        .env_remove("ANTHROPIC_API_KEY")
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("ANTHROPIC_API_KEY not set"), "{err}");
    assert!(err.contains("secret-tool"), "{err}");
    assert_eq!(read(&chat.path), "@You:\nhi\n");
}

#[tokio::test]
async fn rhai_frontmatter_selects_the_provider_and_model() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(
        "```rhai\nflemma.opt.provider = \"openai\";\nflemma.opt.model = \"gpt-5\";\nflemma.opt.thinking = \"low\";\n```\n@You:\nhi\n",
    );
    mock.push(Turn::text("Hi from the Responses API."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(request.body["model"], "gpt-5");
    assert_eq!(request.body["reasoning"]["effort"], "low");
    assert_eq!(request.body["store"], false);
    assert!(read(&chat.path).contains("Hi from the Responses API."));
}

#[tokio::test]
async fn a_config_file_selects_the_provider_and_its_error_names_the_line() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nhi\n");
    std::fs::create_dir_all(chat.config_home.join("flemma")).unwrap();
    let config = chat.config_home.join("flemma/config.toml");
    std::fs::write(
        &config,
        "provider = \"gemini\"\nmodel = \"gemini-2.5-flash\"\n",
    )
    .unwrap();
    mock.push(Turn::text("Hi from Gemini."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        mock.requests()[0]
            .path
            .starts_with("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    );

    std::fs::write(
        &config,
        "provider = \"gemini\"\n[parameters]\nthinkng = \"high\"\n",
    )
    .unwrap();
    std::fs::write(&chat.path, "@You:\nhi\n").unwrap();
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("config.toml:3"), "{err}");
    assert!(
        err.contains("hint: did you mean 'parameters.thinking'?"),
        "{err}"
    );
}

#[tokio::test]
async fn template_modules_and_a_custom_frontmatter_parser_come_from_the_config_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("```yaml\nteam: QA\n```\n@You:\n{{ greet(team) }}\n");
    let flemma_dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&flemma_dir).unwrap();
    // A "YAML" parser: turns `key: value` lines into a JSON object.
    let parser = flemma_dir.join("yaml2json");
    std::fs::write(
        &parser,
        "#!/bin/sh\nexec awk -F': ' 'BEGIN{printf \"{\"} NF==2{printf \"%s\\\"%s\\\":\\\"%s\\\"\", (n++?\",\":\"\"), $1, $2} END{print \"}\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&parser, std::fs::Permissions::from_mode(0o755)).unwrap();
    let module = flemma_dir.join("helpers.rhai");
    std::fs::write(&module, "fn greet(who) { `Hello ${who} team!` }\n").unwrap();
    std::fs::write(
        flemma_dir.join("config.toml"),
        format!(
            "[templating]\nmodules = [\"{}\"]\n[templating.frontmatter_parsers]\nyaml = [\"{}\"]\n",
            module.display(),
            parser.display()
        ),
    )
    .unwrap();
    mock.push(Turn::text("ok"));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].body;
    assert_eq!(
        body["messages"][0]["content"][0]["text"], "Hello QA team!",
        "{body}"
    );
}

#[tokio::test]
async fn killing_flemmad_mid_write_leaves_a_whole_file() {
    let mock = MockProvider::start().await.unwrap();
    let original = "@You:\nStream slowly.\n";
    let chat = chat(original);
    let reply = "abcdefghij ".repeat(40);
    mock.push(Turn::text(reply.clone()).bytes_per_sec(3000));
    let mut child = send_command(&chat, &mock.base_url())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..400 {
        if read(&chat.path).contains("@Assistant:\nabcdefghij abcdefghij") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.start_kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().await.unwrap();
    let text = read(&chat.path);
    // Every write was atomic: the file is the original plus a prefix of the reply, never a
    // truncated or interleaved mix.
    let streamed = text
        .strip_prefix(&format!("{original}\n@Assistant:\n"))
        .unwrap_or_else(|| panic!("unexpected file: {text:?}"));
    assert!(!streamed.is_empty());
    assert!(reply.starts_with(streamed), "{streamed:?}");
    let doc = flemma_syntax::parse(text.as_str());
    assert_eq!(doc.messages().len(), 2);
}

#[tokio::test]
async fn a_base_url_without_v1_gets_a_404_that_names_the_url_and_the_missing_v1() {
    let mock = MockProvider::start().await.unwrap();
    let original = format!("{}@You:\nhi\n", frontmatter("openai", "gpt-5"));
    let chat = chat(&original);
    // The mock serves `/v1/responses`; a base URL without `/v1` calls `/responses`, which is
    // a 404 there, as on api.openai.com.
    let out = send_command(&chat, &mock.base_url())
        .env("OPENAI_BASE_URL", mock.base_url())
        .output()
        .await
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("404"), "{err}");
    assert!(
        err.contains(&format!("{}/responses", mock.base_url())),
        "the message names the URL called: {err}"
    );
    assert!(err.contains("has no `/v1`"), "{err}");
    assert!(
        err.contains(&format!("try {}/v1", mock.base_url())),
        "{err}"
    );
    assert_eq!(read(&chat.path), original, "nothing written");
}

/// The watchdog (`parameters.idle_timeout`): a provider that stalls in the middle of its reply
/// ends the send after that much silence (not after the whole-request timeout), with the reply
/// so far kept under the abort marker and the error saying what happened and what to do.
#[tokio::test]
async fn a_stalled_stream_is_ended_by_the_watchdog_and_the_reply_so_far_kept() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(
        "```json\n{\"flemma\": {\"parameters\": {\"idle_timeout\": 1}}}\n```\n@You:\nTell me a story.\n",
    );
    mock.push(Turn::text("Once upon a time there was a model that stopped talking.").stall(60_000));
    let started = std::time::Instant::now();
    let out = send(&chat, &mock.base_url()).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("sent nothing for 1 s in the middle of the reply")
            && err.contains("parameters.idle_timeout"),
        "{err}"
    );
    let text = read(&chat.path);
    assert!(text.contains("@Assistant:\nOnce upon"), "{text}");
    assert!(
        text.contains("\n\n<!-- flemma:aborted: Response cut off by a provider error: anthropic sent nothing for 1 s"),
        "{text}"
    );
    assert!(text.ends_with(" -->\n\n@You:\n\n"), "{text:?}");
}

/// A tool call whose streamed arguments repeat one pattern, or pass 256 KB, stops the
/// generation at once with the seed's error; the call never runs and the text before it stays.
#[tokio::test]
async fn runaway_tool_call_arguments_stop_the_generation() {
    let mock = MockProvider::start().await.unwrap();
    let counting: String = (0..50_000).map(|i| format!("{i:06}")).collect();
    for (content, said) in [
        (
            "la-di-da ".repeat(5000),
            "its arguments repeat the same pattern (",
        ),
        (counting, "its arguments passed 256 KB ("),
    ] {
        let chat = chat("@You:\nWrite the file.\n");
        mock.push(Turn::text("Writing it.").tool_call(
            "write",
            json!({"label": "w", "path": "x.txt", "content": content}),
        ));
        let out = send(&chat, &mock.base_url()).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("[error: the model's tool call ran away: ") && err.contains(said),
            "{err}"
        );
        assert!(
            err.contains("— generation stopped; rephrase the request, or try another model]"),
            "{err}"
        );
        let text = read(&chat.path);
        assert!(text.contains("@Assistant:\nWriting it."), "{text}");
        assert!(!text.contains("**Tool Use:**"), "{text}");
        assert!(
            text.contains(
                "<!-- flemma:aborted: Response cut off by a provider error: [error: the model's tool call ran away"
            ),
            "{text}"
        );
        assert!(!chat.path.parent().unwrap().join("x.txt").exists());
    }
}
