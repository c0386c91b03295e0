//! The loop detector (seed `002`): the same (tool, input, output) several times in a row.

/// What the detector says about one finished call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopVerdict {
    /// Nothing unusual.
    Fine,
    /// The 3rd identical call in a row or later: append this notice to the result.
    Notice(String),
    /// The 6th identical call in a row: the result becomes this error and autopilot stops.
    Stop(String),
}

/// The notice appended to the output of the 3rd identical call and later (seed `002` wording).
pub const LOOP_NOTICE: &str = "[LOOP_DETECTED: You have attempted the same action multiple times with the same result. Please try a different approach or provide more information.]";

/// Calls in a row at which the notice starts.
pub const NOTICE_AT: u32 = 3;
/// Calls in a row at which autopilot stops.
pub const STOP_AT: u32 = 6;

/// Remembers the last call's fingerprint and how often it repeated.
#[derive(Debug, Clone, Default)]
pub struct LoopDetector {
    last: Option<(String, String, String)>,
    repeats: u32,
}

impl LoopDetector {
    /// Records a finished call (`input` in canonical JSON).
    pub fn record(&mut self, tool: &str, input: &str, output: &str) -> LoopVerdict {
        let same = self
            .last
            .as_ref()
            .is_some_and(|(t, i, o)| t == tool && i == input && o == output);
        if same {
            self.repeats += 1;
        } else {
            self.last = Some((tool.to_owned(), input.to_owned(), output.to_owned()));
            self.repeats = 1;
        }
        match self.repeats {
            n if n >= STOP_AT => LoopVerdict::Stop(format!(
                "[error: the model repeated the same {tool} call {n} times in a row with the same result — turn stopped by the loop detector; rephrase the request, or fix what the tool kept reporting]"
            )),
            n if n >= NOTICE_AT => LoopVerdict::Notice(LOOP_NOTICE.to_owned()),
            _ => LoopVerdict::Fine,
        }
    }

    /// Forgets the history (a user turn breaks a loop).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn third_call_notices_sixth_stops_and_a_different_call_resets() {
        let mut d = LoopDetector::default();
        assert_eq!(d.record("bash", "{}", "x"), LoopVerdict::Fine);
        assert_eq!(d.record("bash", "{}", "x"), LoopVerdict::Fine);
        assert!(matches!(d.record("bash", "{}", "x"), LoopVerdict::Notice(n) if n == LOOP_NOTICE));
        assert!(matches!(
            d.record("bash", "{}", "x"),
            LoopVerdict::Notice(_)
        ));
        assert!(matches!(
            d.record("bash", "{}", "x"),
            LoopVerdict::Notice(_)
        ));
        assert!(
            matches!(d.record("bash", "{}", "x"), LoopVerdict::Stop(e) if e.contains("same bash call 6 times"))
        );
        assert_eq!(d.record("bash", "{}", "y"), LoopVerdict::Fine);
    }
}
