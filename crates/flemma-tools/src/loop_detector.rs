//! The loop detector: the same (tool, input, output) three times in a row gets a notice; six in
//! a row stops the turn.

use serde_json::Value;

/// Calls in a row that trigger the notice.
pub const NOTICE_AT: u32 = 3;
/// Calls in a row that stop the turn.
pub const STOP_AT: u32 = 6;
/// Appended to the output from the third identical call on.
pub const NOTICE: &str = "[LOOP_DETECTED: You have attempted the same action multiple times with the same result. Please try a different approach or provide more information.]";

/// What to do with the latest call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopVerdict {
    /// Nothing unusual.
    Fine,
    /// Append [`NOTICE`] to the output.
    Notice,
    /// Replace the output with this error and stop the turn.
    Stop(String),
}

/// Fed every finished call of one conversation, in order.
#[derive(Debug, Clone, Default)]
pub struct LoopDetector {
    last: Option<(String, String, String)>,
    repeats: u32,
}

impl LoopDetector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a call and says what to do with it. Inputs are compared as canonical JSON.
    pub fn record(&mut self, tool: &str, input: &Value, output: &str) -> LoopVerdict {
        let key = (tool.to_string(), input.to_string(), output.to_string());
        if self.last.as_ref() == Some(&key) {
            self.repeats += 1;
        } else {
            self.last = Some(key);
            self.repeats = 1;
        }
        if self.repeats >= STOP_AT {
            LoopVerdict::Stop(format!(
                "[error: the model repeated the same {tool} call {} times in a row with the same failing result — turn stopped by the loop detector; rephrase the request, or fix what the tool kept reporting]",
                self.repeats
            ))
        } else if self.repeats >= NOTICE_AT {
            LoopVerdict::Notice
        } else {
            LoopVerdict::Fine
        }
    }

    /// Forgets the history (a new conversation).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn third_gets_notice_sixth_stops_different_resets() {
        let mut detector = LoopDetector::new();
        let input = json!({"path": "a"});
        let verdicts: Vec<LoopVerdict> = (0..6)
            .map(|_| detector.record("edit", &input, "not found"))
            .collect();
        assert_eq!(verdicts[0], LoopVerdict::Fine);
        assert_eq!(verdicts[1], LoopVerdict::Fine);
        assert_eq!(verdicts[2], LoopVerdict::Notice);
        assert_eq!(verdicts[4], LoopVerdict::Notice);
        assert!(matches!(&verdicts[5], LoopVerdict::Stop(text) if text.contains("6 times")));
        assert_eq!(detector.record("edit", &input, "other"), LoopVerdict::Fine);
        assert_eq!(detector.record("edit", &input, "other"), LoopVerdict::Fine);
    }
}
