//! Truncation of outputs that overflow the document budget: 2000 lines / 50 KB, keeping the head
//! (`read`) or the tail (`bash`).

/// Lines kept at most.
pub const MAX_LINES: usize = 2000;
/// Bytes kept at most.
pub const MAX_BYTES: usize = 50 * 1024;

/// Which end of an overflowing output is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Head,
    Tail,
}

/// Whether `text` exceeds the limits.
pub fn overflows(text: &str) -> bool {
    text.len() > MAX_BYTES || text.lines().count() > MAX_LINES
}

/// The part of `text` kept within the limits (whole lines; a single over-long line is cut at a
/// character boundary), and the number of lines kept.
pub fn keep(text: &str, keep: Keep) -> (String, usize) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut bytes = 0;
    let ordered: Box<dyn Iterator<Item = &&str>> = match keep {
        Keep::Head => Box::new(lines.iter()),
        Keep::Tail => Box::new(lines.iter().rev()),
    };
    for line in ordered {
        if kept.len() == MAX_LINES || bytes + line.len() > MAX_BYTES {
            if kept.is_empty() {
                // One line longer than the byte budget: cut it.
                let cut = cut_at_boundary(line, MAX_BYTES, keep);
                return (cut, 1);
            }
            break;
        }
        bytes += line.len();
        kept.push(line);
    }
    if keep == Keep::Tail {
        kept.reverse();
    }
    (kept.concat(), kept.len())
}

fn cut_at_boundary(line: &str, budget: usize, keep: Keep) -> String {
    match keep {
        Keep::Head => {
            let mut end = budget.min(line.len());
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line[..end].to_string()
        }
        Keep::Tail => {
            let mut start = line.len().saturating_sub(budget);
            while !line.is_char_boundary(start) {
                start += 1;
            }
            line[start..].to_string()
        }
    }
}

/// Human size: `512B`, `50.0KB`, `1.2MB`, `3.4GB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// `text` truncated with the notice ending `Full output: <path>`.
pub fn truncated_with_notice(
    text: &str,
    keep_end: Keep,
    total_lines: u64,
    total_bytes: u64,
    full_output: &std::path::Path,
) -> String {
    let (kept, kept_lines) = keep(text, keep_end);
    let which = match keep_end {
        Keep::Head => "first",
        Keep::Tail => "last",
    };
    let notice = format!(
        "[Output truncated: showing the {which} {kept_lines} of {total_lines} lines ({} of {}). Full output: {}]",
        human_size(kept.len() as u64),
        human_size(total_bytes),
        full_output.display()
    );
    // The notice follows the kept part on a line of its own, whichever end was kept.
    let mut out = kept;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&notice);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        let text: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
        let (kept, n) = keep(&text, Keep::Tail);
        assert_eq!(n, MAX_LINES);
        assert!(kept.starts_with("line 1001\n"));
        assert!(kept.ends_with("line 3000\n"));
    }

    #[test]
    fn head_respects_bytes() {
        let text = "é".repeat(40_000);
        let (kept, _) = keep(&text, Keep::Head);
        assert!(kept.len() <= MAX_BYTES);
        assert!(kept.chars().all(|c| c == 'é'));
    }

    #[test]
    fn sizes_are_human() {
        assert_eq!(human_size(10), "10B");
        assert_eq!(human_size(1_258_291), "1.2MB");
    }
}
