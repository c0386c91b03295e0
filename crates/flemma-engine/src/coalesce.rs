//! Coalescing streamed text into fewer writes: text is written at most `window` after its
//! oldest unwritten byte arrived, even when no further text arrives (the shell sets a timer at
//! [`Coalescer::deadline`]). The pure form of the loop in `src/cli/send.rs`.

use crate::Millis;

/// Text waiting to be written, and when its oldest byte arrived.
#[derive(Debug, Clone, Default)]
pub struct Coalescer {
    window: Millis,
    pending: String,
    since: Option<Millis>,
    /// The longest time a byte waited between arriving and being taken.
    max_delay: Millis,
}

impl Coalescer {
    pub fn new(window: Millis) -> Self {
        Self {
            window,
            ..Self::default()
        }
    }

    /// Adds text that arrived at `now`.
    pub fn push(&mut self, now: Millis, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.pending.is_empty() {
            self.since = Some(now);
        }
        self.pending.push_str(text);
    }

    /// When the pending text must be written (`None`: nothing pending).
    pub fn deadline(&self) -> Option<Millis> {
        self.since.map(|since| since.saturating_add(self.window))
    }

    /// Whether the pending text is due at `now`.
    pub fn is_due(&self, now: Millis) -> bool {
        self.deadline().is_some_and(|deadline| now >= deadline)
    }

    /// Takes the pending text (at a deadline, or at the end of the stream).
    pub fn take(&mut self, now: Millis) -> String {
        if let Some(since) = self.since.take() {
            self.max_delay = self.max_delay.max(now.saturating_sub(since));
        }
        std::mem::take(&mut self.pending)
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The longest wait so far between a byte arriving and its write.
    pub fn max_delay(&self) -> Millis {
        self.max_delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_byte_sets_the_deadline() {
        let mut c = Coalescer::new(100);
        assert_eq!(c.deadline(), None);
        c.push(10, "a");
        c.push(60, "b");
        assert_eq!(c.deadline(), Some(110));
        assert!(!c.is_due(109));
        assert!(c.is_due(110));
        assert_eq!(c.take(112), "ab");
        assert_eq!(c.max_delay(), 102);
        assert_eq!(c.deadline(), None);
        c.push(200, "");
        assert!(c.is_empty());
        c.push(200, "c");
        assert_eq!(c.deadline(), Some(300));
    }

    #[test]
    fn a_zero_window_flushes_every_push() {
        let mut c = Coalescer::new(0);
        c.push(5, "x");
        assert!(c.is_due(5));
    }
}
