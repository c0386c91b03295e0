//! How the mock streams text: one delta per word. Its own file so that the scripts (which count
//! a turn's tokens by it) and the wire formats (which stream by it) need not name each other.

/// Number of word-deltas in `text` (a crude token estimate).
pub(crate) fn word_count(text: &str) -> u64 {
    split_deltas(text).len() as u64
}

/// Splits text into streaming deltas: one per word, each word carrying the whitespace before
/// it, so that concatenating the deltas gives back `text` exactly. Empty text gives no delta.
pub(crate) fn split_deltas(text: &str) -> Vec<String> {
    let mut deltas = Vec::new();
    let mut current = String::new();
    let mut previous_was_space = false;
    for ch in text.chars() {
        let is_space = ch.is_whitespace();
        if is_space && !previous_was_space && !current.is_empty() {
            deltas.push(std::mem::take(&mut current));
        }
        current.push(ch);
        previous_was_space = is_space;
    }
    if !current.is_empty() {
        deltas.push(current);
    }
    deltas
}
