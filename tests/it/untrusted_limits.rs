//! Options that raise cost or load only narrow in an untrusted chat (docs/security.md,
//! invariant I): `tools.max_concurrent` (where 0 means unlimited), `tools.autopilot.max_turns`,
//! the timeouts, and the `models.*` prices and limits. An untrusted chat that raises them (or
//! zeroes the prices, so that a send looks free) is ignored with the usual warning and sends
//! under the user's values; the same chat in a trusted folder does what it says (so the test
//! can fail), and lowering them is always allowed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use flemma_mock_provider::{MockProvider, MockUsage, Turn};
use serde_json::json;

use crate::common;

const USER: &str = "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nmax_concurrent = 1\n\n[tools.autopilot]\nmax_turns = 1\n";

fn frontmatter() -> String {
    let flemma = json!({
        "tools": {
            "max_concurrent": 0,
            "default_timeout": 5,
            "autopilot": {"max_turns": 5},
        },
        "models": {"claude-sonnet-4-5": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}},
    });
    format!(
        "```json\n{}\n```\n@You:\nCheck the jobs.\n",
        json!({ "flemma": flemma })
    )
}

fn usage() -> MockUsage {
    MockUsage {
        input_tokens: 100_000,
        output_tokens: 100_000,
        ..MockUsage::default()
    }
}

/// Three replies; the first two call an auto-approved tool.
fn three_turns(mock: &MockProvider) {
    for id in ["j1", "j2"] {
        mock.push(Turn::text("Checking.").tool_call_with_id(
            "flemma__jobs__status",
            id,
            json!({"label": "jobs"}),
        ));
    }
    mock.push(Turn::text("All done."));
}

/// Sends the chat (in a trusted folder or not) against `script`; the mock and stderr.
async fn send(trusted: bool, script: fn(&MockProvider)) -> (MockProvider, String) {
    let mock = MockProvider::start().await.unwrap();
    let chat = if trusted {
        common::trusted_chat(&frontmatter())
    } else {
        common::chat(&frontmatter())
    };
    common::write_user_config(&chat, USER);
    script(&mock);
    let out = common::send(&chat, &mock.base_url()).await;
    (mock, common::stderr(&out))
}

#[tokio::test]
async fn an_untrusted_chat_cannot_raise_turns_or_concurrency_nor_zero_prices() {
    // Untrusted: the user's values hold, and the chat is told what was ignored.
    let (mock, err) = send(false, three_turns).await;
    for ignored in [
        "`tools.max_concurrent = 0`",
        "`tools.autopilot.max_turns = 5`",
        ".input = 0`",
        ".output = 0`",
    ] {
        assert!(
            err.lines()
                .any(|line| line.contains("ignored in an untrusted chat") && line.contains(ignored)),
            "{ignored}: {err}"
        );
    }
    assert!(
        err.contains("may only lower it, since it raises cost or load")
            && err.contains("may only raise it"),
        "{err}"
    );
    // Lowering is narrowing: the lower timeout is taken without a word.
    assert!(!err.contains("default_timeout"), "{err}");
    assert_eq!(
        mock.requests().len(),
        2,
        "one automatic turn (the user's max_turns = 1): {err}"
    );
    assert!(err.contains("exceeded 1 consecutive turns"), "{err}");
    // The catalogue's prices: 100k tokens each way at $3 + $15 a million (under the
    // 200k-token prompt that switches Sonnet to its long-context prices).
    let (_, err) = send(false, |mock| {
        mock.push(Turn::text("Nothing to do.").usage(usage()));
    })
    .await;
    assert!(err.contains("$1.8000"), "{err}");

    // Trusted: the chat's values apply (so the above can fail).
    let (mock, err) = send(true, three_turns).await;
    assert!(!err.contains("ignored in an untrusted chat"), "{err}");
    assert_eq!(mock.requests().len(), 3, "{err}");
    let (_, err) = send(true, |mock| {
        mock.push(Turn::text("Nothing to do.").usage(usage()));
    })
    .await;
    assert!(err.contains("$0.0000"), "{err}");
}
