//! Provider-style random ids (not cryptographic: only unique enough for a test server).

use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const LOWER_ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
const HEX: &[u8] = b"0123456789abcdef";

/// A splitmix64 generator seeded from the clock and a process-wide counter.
struct SplitMix(u64);

impl SplitMix {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        SplitMix(nanos ^ count.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn random_from(alphabet: &[u8], len: usize) -> String {
    let mut rng = SplitMix::new();
    (0..len)
        .map(|_| char::from(alphabet[(rng.next() % alphabet.len() as u64) as usize]))
        .collect()
}

/// `len` random base62 characters.
pub(crate) fn base62(len: usize) -> String {
    random_from(BASE62, len)
}

/// `len` random lowercase letters and digits (Gemini 3 call ids).
pub(crate) fn lower_alnum(len: usize) -> String {
    random_from(LOWER_ALNUM, len)
}

/// `len` random lowercase hex digits (OpenAI Responses item ids).
pub(crate) fn hex(len: usize) -> String {
    random_from(HEX, len)
}

/// An Anthropic tool-use id: `toolu_01` + 22 base62 characters.
pub(crate) fn anthropic_tool_id() -> String {
    format!("toolu_01{}", base62(22))
}

/// An Anthropic message id: `msg_01` + 22 base62 characters.
pub(crate) fn anthropic_message_id() -> String {
    format!("msg_01{}", base62(22))
}

/// An Anthropic request id.
pub(crate) fn anthropic_request_id() -> String {
    format!("req_011C{}", base62(20))
}

/// An OpenAI tool call id: `call_` + 24 base62 characters.
pub(crate) fn openai_call_id() -> String {
    format!("call_{}", base62(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_provider_shapes_and_differ() {
        let a = anthropic_tool_id();
        assert!(a.starts_with("toolu_01"));
        assert_eq!(a.len(), 8 + 22);
        assert_ne!(a, anthropic_tool_id());
        let c = openai_call_id();
        assert_eq!(c.len(), 5 + 24);
        assert!(c[5..].chars().all(|ch| ch.is_ascii_alphanumeric()));
        let g = lower_alnum(8);
        assert!(
            g.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit())
        );
    }
}
