//! [`Parts`]: the parts of one message, shared between the conversations that hold it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Part;

/// The parts of a [`crate::Message`], behind a shared pointer.
///
/// Cloning copies the pointer: an evaluation that reuses a cached message (the language server
/// re-evaluating after a keystroke elsewhere) costs no copy of its text. Reading goes through
/// `Deref<Target = Vec<Part>>`; changing it (`push`, `&mut parts[i]`, passing `&mut parts` as
/// `&mut Vec<Part>`) copies the parts first when another conversation still shares them, so a
/// change never shows in anyone else's conversation.
#[derive(Debug, Clone, Default)]
pub struct Parts(Arc<Vec<Part>>);

impl Parts {
    /// Whether `self` and `other` are the same shared parts (not just equal ones).
    pub fn ptr_eq(&self, other: &Parts) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The parts as an owned list (a copy only when they are shared).
    pub fn into_vec(self) -> Vec<Part> {
        Arc::unwrap_or_clone(self.0)
    }
}

impl Deref for Parts {
    type Target = Vec<Part>;
    fn deref(&self) -> &Vec<Part> {
        &self.0
    }
}

impl DerefMut for Parts {
    fn deref_mut(&mut self) -> &mut Vec<Part> {
        Arc::make_mut(&mut self.0)
    }
}

impl From<Vec<Part>> for Parts {
    fn from(parts: Vec<Part>) -> Self {
        Self(Arc::new(parts))
    }
}

impl FromIterator<Part> for Parts {
    fn from_iter<I: IntoIterator<Item = Part>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<'p> IntoIterator for &'p Parts {
    type Item = &'p Part;
    type IntoIter = std::slice::Iter<'p, Part>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq for Parts {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.0 == other.0
    }
}

impl PartialEq<Vec<Part>> for Parts {
    fn eq(&self, other: &Vec<Part>) -> bool {
        *self.0 == *other
    }
}

impl Serialize for Parts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Parts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Part>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_and_a_change_copies_first() {
        let original = Parts::from(vec![Part::text("a")]);
        let mut changed = original.clone();
        assert!(changed.ptr_eq(&original));
        changed.push(Part::text("b"));
        assert!(!changed.ptr_eq(&original));
        assert_eq!(original, vec![Part::text("a")]);
        assert_eq!(changed, vec![Part::text("a"), Part::text("b")]);
    }

    #[test]
    fn serialises_as_the_list() {
        let parts = Parts::from(vec![Part::text("hi")]);
        let json = serde_json::to_value(&parts).unwrap_or_default();
        assert_eq!(json, serde_json::json!([{"type": "text", "text": "hi"}]));
        let back: Parts = serde_json::from_value(json).unwrap_or_default();
        assert_eq!(back, parts);
    }
}
