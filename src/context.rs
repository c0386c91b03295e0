//! The context meter, said one way everywhere (`status`, `count`, the language server's hint,
//! the check before a request): the next request's input tokens against the model's window,
//! and what that input costs (docs/context.md).
//!
//! The tokens come from the provider's counting endpoint when the caller has asked it (exact),
//! else from `flemma_wire::Meter`'s local estimate; the window and the prices from the
//! catalogue entry `provider_setup` found (the user's `models.<id>` wins there).

use flemma_config::Context;
use flemma_conversation::Usage;
use flemma_protocol::status::ContextStatus;
use flemma_provider::catalogue::cost_with;

use crate::provider_setup::ProviderSetup;

/// How the tokens were counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The provider's counting endpoint.
    Exact,
    /// `flemma_wire::Meter` or `estimate_input_tokens`.
    Estimate,
}

/// The meter for a next request of `used` input tokens to the model of `setup`.
pub fn status(
    used: u64,
    counted: Counted,
    setup: &ProviderSetup,
    context: &Context,
) -> ContextStatus {
    let window = setup
        .model
        .as_ref()
        .map(|model| model.context_window)
        .filter(|window| *window > 0);
    let share = window.map(|window| used as f64 / window as f64);
    let next_cost = setup
        .model
        .as_ref()
        .filter(|model| !model.subscription && model.input > 0.0)
        .map(|model| {
            let usage = Usage {
                input_tokens: used,
                ..Usage::default()
            };
            cost_with(&usage, model, setup.options.cache_retention)
        });
    let state = match share {
        None => "unknown",
        Some(share) if share > 1.0 => "full",
        Some(share) if share >= context.warn_at => "warn",
        Some(_) => "ok",
    };
    ContextStatus {
        model: setup.options.model.clone(),
        used,
        counted: match counted {
            Counted::Exact => "exact",
            Counted::Estimate => "estimate",
        }
        .to_owned(),
        window,
        share,
        next_cost,
        warn_at: context.warn_at,
        compact_at: context.compact_at,
        state: state.to_owned(),
    }
}

/// The meter of the chat `analysis` is of, estimated with `meter` (each message's count kept
/// between calls) for a request offering `tools`; `None` when the configuration does not
/// resolve or names no provider flemmad can set up.
pub fn estimate(
    meter: &mut flemma_provider::Meter,
    analysis: &flemma_ide::Analysis,
    path: &std::path::Path,
    tools: &[flemma_provider::ToolDefinition],
    process: &crate::process_context::ProcessContext,
) -> Option<ContextStatus> {
    let config = &analysis.config.as_ref()?.config;
    let environment = process.credentials();
    let setup = crate::provider_setup::provider_setup(config, Some(path), &environment).ok()?;
    let used = meter.estimate(&request_conversation(analysis), tools);
    Some(status(used, Counted::Estimate, &setup, &config.context))
}

/// The conversation a request of the chat `analysis` is of sends: its tool results older than
/// `context.prune_after` tool cycles left out (`flemma_wire::prune`).
pub fn request_conversation(
    analysis: &flemma_ide::Analysis,
) -> std::borrow::Cow<'_, flemma_conversation::Conversation> {
    let conversation = &analysis.evaluation.conversation;
    match analysis
        .config
        .as_ref()
        .map_or(0, |resolved| resolved.config.context.prune_after)
    {
        0 => std::borrow::Cow::Borrowed(conversation),
        keep => std::borrow::Cow::Owned(flemma_provider::prune_tool_results(
            conversation,
            usize::try_from(keep).unwrap_or(usize::MAX),
            analysis.document.text(),
        )),
    }
}

/// `≈12,345 / 200,000 input tokens (6.2% of claude-sonnet-4-6's context window) · next
/// request $0.037`: the meter in one line.
pub fn line(status: &ContextStatus) -> String {
    let approximately = if status.counted == "exact" { "" } else { "≈" };
    let mut out = match (status.window, status.share) {
        (Some(window), Some(share)) => format!(
            "{approximately}{} / {} input tokens ({:.1}% of {}'s context window)",
            thousands(status.used),
            thousands(window),
            share * 100.0,
            status.model
        ),
        _ => format!(
            "{approximately}{} input tokens (window unknown: set `models.\"{}\".context_window`)",
            thousands(status.used),
            status.model
        ),
    };
    if let Some(cost) = status.next_cost {
        out.push_str(&format!(" · next request ${cost:.3}"));
    }
    out
}

/// What the meter says beyond its line: a warning past `warn_at`, the refusal past the window.
pub fn advice(status: &ContextStatus) -> Option<String> {
    let window = status.window?;
    match status.state.as_str() {
        "full" => Some(too_long(
            status.used,
            window,
            &status.model,
            &status.counted,
        )),
        "warn" => Some(format!(
            "the next request fills {:.0}% of {}'s {}-token context window (`context.warn_at` is {:.0}%): compact the chat (`flemmad compact FILE`) before it no longer fits",
            status.share.unwrap_or(0.0) * 100.0,
            status.model,
            thousands(window),
            status.warn_at * 100.0
        )),
        _ => None,
    }
}

/// [`advice`] for a diagnostic republished as the user types: an estimate is said to three
/// significant digits, so that a key (a token more or less) leaves the message as it was and
/// the editor is not sent the document's diagnostics again (at 10 MB, Neovim spends 40–60 ms
/// handling a publish; docs/benchmarks.md, "Typing in Neovim"). The inlay hint keeps the
/// exact estimate.
pub fn advice_while_typing(status: &ContextStatus) -> Option<String> {
    if status.counted == "exact" {
        return advice(status);
    }
    let mut rounded = status.clone();
    rounded.used = three_digits(status.used);
    advice(&rounded)
}

/// `n` to three significant digits (`2,531,234` → `2,530,000`, `2,345` → `2,350`).
fn three_digits(n: u64) -> u64 {
    let mut unit = 1u64;
    while n / unit >= 1000 {
        unit *= 10;
    }
    (n + unit / 2) / unit * unit
}

/// The refusal of a request that cannot fit, with what to do (the same advice as a provider's
/// "too long" answer, `flemma_provider::explain::CONTEXT_FIX`).
pub fn too_long(used: u64, window: u64, model: &str, counted: &str) -> String {
    let approximately = if counted == "exact" { "" } else { "about " };
    format!(
        "the next request holds {approximately}{} input tokens, more than {model}'s {}-token context window, so it was not sent. {}",
        thousands(used),
        thousands(window),
        flemma_provider::explain::CONTEXT_FIX
    )
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_estimate_while_typing_keeps_three_digits() {
        assert_eq!(super::three_digits(2_531_234), 2_530_000);
        assert_eq!(super::three_digits(2_535_000), 2_540_000);
        assert_eq!(super::three_digits(2_345), 2_350);
        assert_eq!(super::three_digits(999), 999);
        assert_eq!(super::three_digits(0), 0);
    }

    #[test]
    fn a_key_typed_leaves_the_editors_warning_as_it_was() {
        let status = |used: u64| flemma_protocol::status::ContextStatus {
            model: "claude-sonnet-4-5".into(),
            used,
            counted: "estimate".into(),
            window: Some(200_000),
            share: Some(used as f64 / 200_000.0),
            next_cost: None,
            warn_at: 0.8,
            compact_at: Some(0.85),
            state: "full".into(),
        };
        let before = super::advice_while_typing(&status(2_531_234)).unwrap();
        assert_eq!(
            super::advice_while_typing(&status(2_531_236)),
            Some(before.clone())
        );
        assert!(before.contains("about 2,530,000 input tokens"), "{before}");
        // `status` and `count` say it to the token.
        assert!(
            super::advice(&status(2_531_234))
                .unwrap()
                .contains("2,531,234")
        );
    }

    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
