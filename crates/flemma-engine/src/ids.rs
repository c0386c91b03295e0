//! Job ids: `job_` + 8 characters of `[a-z0-9]`, from a seedable source (tests fix the seed; the
//! shell seeds from the clock or the OS).

/// A small deterministic generator (xorshift64*), enough for ids that only need to be unique
/// within one file (the engine checks the file for collisions).
#[derive(Debug, Clone)]
pub struct IdSource {
    state: u64,
}

const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

impl IdSource {
    pub fn new(seed: u64) -> Self {
        // Zero is a fixed point of xorshift.
        Self {
            state: seed ^ 0x9E37_79B9_7F4A_7C15 | 1,
        }
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The next candidate job id.
    pub fn job_id(&mut self) -> String {
        let mut value = self.next_u64();
        let mut id = String::with_capacity(12);
        id.push_str("job_");
        for _ in 0..8 {
            id.push(ALPHABET[(value % 36) as usize] as char);
            value /= 36;
        }
        id
    }
}

/// Whether `id` has the job id form.
pub fn is_job_id(id: &str) -> bool {
    id.strip_prefix("job_").is_some_and(|rest| {
        rest.len() == 8
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_format_and_repeat_per_seed() {
        let mut a = IdSource::new(7);
        let mut b = IdSource::new(7);
        let first = a.job_id();
        assert!(is_job_id(&first), "{first}");
        assert_eq!(first, b.job_id());
        assert_ne!(a.job_id(), first);
        assert!(!is_job_id("job_ABCDEFGH"));
    }
}
