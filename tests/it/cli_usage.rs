//! The usage line of `flemmad send` against `flemma-mock-provider`: the cost (one cost function,
//! cached input billed once, at its own price: issue 31) and the prompt cache's figures (the
//! share of the input read from it and what it saved) for the providers that report them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{chat, frontmatter, send, send_command, stderr};
use flemma_mock_provider::{MockProvider, MockUsage, Turn};

/// The last line of a send (`flemmad: done in …`).
fn done_line(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("flemmad: done in "))
        .unwrap_or_else(|| panic!("no summary line in {stderr:?}"))
        .to_owned()
}

async fn send_with_usage(provider: &str, model: &str, usage: MockUsage) -> String {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(&format!("{}@You:\nHi.\n", frontmatter(provider, model)));
    mock.push(Turn::text("Hello.").usage(usage));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{provider}: {}", stderr(&out));
    done_line(&stderr(&out))
}

/// Issue 31's request: 120 input tokens, 2,048 read from the cache, 57 output, on Claude
/// Sonnet 4.5 ($3 / $15 per million, cache reads $0.30). Flemma says $0.0018; billing the
/// cached tokens as input and then again as cache reads said $0.0080.
#[tokio::test]
async fn anthropic_cached_input_is_billed_once_and_the_cache_is_shown() {
    let line = send_with_usage(
        "anthropic",
        "claude-sonnet-4-5",
        MockUsage {
            input_tokens: 120,
            output_tokens: 57,
            cache_read_tokens: 2048,
            ..MockUsage::default()
        },
    )
    .await;
    // 2,168 prompt tokens in all (Anthropic's input_tokens excludes the cache).
    assert!(
        line.contains("2168 input (2048 from the cache, 94%), 57 output tokens, $0.0018"),
        "{line}"
    );
    assert!(!line.contains("$0.0080"), "{line}");
    // 2,048 tokens at $2.70 less than the input price.
    assert!(line.contains("(the cache saved $0.0055)"), "{line}");
}

/// Cache writes are billed at Anthropic's write price (1.25× input for the default 5 minutes),
/// which costs more than it saves on the request that writes.
#[tokio::test]
async fn anthropic_cache_writes_are_shown_with_their_surcharge() {
    let line = send_with_usage(
        "anthropic",
        "claude-sonnet-4-5",
        MockUsage {
            input_tokens: 100,
            output_tokens: 10,
            cache_write_tokens: 4000,
            ..MockUsage::default()
        },
    )
    .await;
    // 100 × $3 + 4,000 × $3.75 + 10 × $15 = $0.01545.
    assert!(
        line.contains("4100 input (4000 written to it), 10 output tokens, $0.0155"),
        "{line}"
    );
    assert!(
        line.contains("(writing the cache cost $0.0030 more)"),
        "{line}"
    );
}

/// OpenAI's input_tokens include the cached ones (`input_tokens_details.cached_tokens`): GPT-5
/// at $1.25 / $10 per million, cached input $0.125.
#[tokio::test]
async fn openai_cached_input_is_shown_and_billed_at_the_cached_price() {
    let line = send_with_usage(
        "openai",
        "gpt-5",
        MockUsage {
            input_tokens: 2000,
            output_tokens: 100,
            cache_read_tokens: 8000,
            ..MockUsage::default()
        },
    )
    .await;
    // (2,000 × 1.25 + 8,000 × 0.125 + 100 × 10) / 1e6 = $0.0045.
    assert!(
        line.contains("10000 input (8000 from the cache, 80%), 100 output tokens, $0.0045"),
        "{line}"
    );
    // 8,000 × (1.25 − 0.125) / 1e6 = $0.009.
    assert!(line.contains("(the cache saved $0.0090)"), "{line}");
}

/// The same figures come with the events: `request:finished` has the request's cost and what
/// the cache saved.
#[tokio::test]
async fn the_events_carry_the_cost_and_the_savings() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(&format!(
        "{}@You:\nHi.\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    ));
    mock.push(Turn::text("Hello.").usage(MockUsage {
        input_tokens: 120,
        output_tokens: 57,
        cache_read_tokens: 2048,
        ..MockUsage::default()
    }));
    let out = send_command(&chat, &mock.base_url())
        .arg("--events")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let finished: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["name"] == "request:finished")
        .unwrap_or_else(|| panic!("no request:finished in {stdout}"));
    let cost = finished["data"]["costUsd"].as_f64().unwrap();
    assert!((cost - 0.0018294).abs() < 1e-9, "{finished}");
    let saved = finished["data"]["cacheSavedUsd"].as_f64().unwrap();
    assert!((saved - 0.0055296).abs() < 1e-9, "{finished}");
}
