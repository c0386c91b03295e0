//! Configuration errors: what went wrong, where, and what the user probably meant.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::LayerKind;

/// A 1-based line/column position inside a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column number (in characters).
    pub column: u32,
}

impl Location {
    /// Computes the line and column of a byte offset in `text`.
    pub fn from_offset(text: &str, offset: usize) -> Self {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |index| index + 1);
        let column = before
            .get(line_start..)
            .map_or(0, |rest| rest.chars().count())
            + 1;
        Self {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }
}

/// One configuration problem.
///
/// `Display` renders `line 3, column 1: unknown option 'parameters.thinkng'. Did you mean
/// 'parameters.thinking'?` (the location only when known; `path/config.toml:3:1: …` when the
/// file is known).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ConfigError {
    /// The schema path the problem is about (`parameters.thinking`), empty for file-level errors.
    pub path: String,
    /// What happened, without the suggestion.
    pub message: String,
    /// The closest valid key, value, tool or preset name, when one is close enough.
    pub suggestion: Option<String>,
    /// Where in the TOML file the problem is (TOML layers only).
    pub location: Option<Location>,
    /// The layer the offending value came from, when known.
    pub layer: Option<LayerKind>,
    /// The config file the error is in (set by `ConfigLayer::from_toml_file`).
    pub file: Option<String>,
}

impl ConfigError {
    /// Creates an error about `path` with a message and no suggestion.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            suggestion: None,
            location: None,
            layer: None,
            file: None,
        }
    }

    /// Adds a "did you mean" suggestion.
    #[must_use]
    pub fn with_suggestion(mut self, suggestion: Option<String>) -> Self {
        self.suggestion = suggestion;
        self
    }

    /// Says where the problem was found, before the message (`in model string 'x': …`).
    #[must_use]
    pub(crate) fn with_context(mut self, context: &str) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// Records which layer the offending value came from.
    #[must_use]
    pub fn in_layer(mut self, layer: LayerKind) -> Self {
        self.layer = Some(layer);
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.location) {
            (Some(file), Some(location)) => {
                write!(f, "{file}:{}:{}: ", location.line, location.column)?
            }
            (Some(file), None) => write!(f, "{file}: ")?,
            (None, Some(location)) => {
                write!(f, "line {}, column {}: ", location.line, location.column)?
            }
            (None, None) => {}
        }
        f.write_str(&self.message)?;
        if let Some(suggestion) = &self.suggestion {
            write!(f, ". Did you mean '{suggestion}'?")?;
        }
        Ok(())
    }
}

/// Every problem found while reading or resolving configuration (never empty).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The individual errors.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self(vec![error])
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Returns the candidate closest to `input`, if it is close enough to be a plausible typo.
pub(crate) fn suggest<'a, I>(input: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let lowered = input.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        if candidate == input {
            continue;
        }
        let similarity = strsim::jaro_winkler(&lowered, &candidate.to_lowercase());
        let distance = strsim::damerau_levenshtein(&lowered, &candidate.to_lowercase());
        let close = similarity >= 0.82 || (distance <= 2 && distance < candidate.len());
        if close && best.is_none_or(|(score, _)| similarity > score) {
            best = Some((similarity, candidate));
        }
    }
    best.map(|(_, candidate)| candidate.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["read", "write", "edit", "bash"];
        assert_eq!(suggest("raed", names), Some("read".to_string()));
        assert_eq!(suggest("bsah", names), Some("bash".to_string()));
        assert_eq!(suggest("kubernetes", names), None);
    }

    #[test]
    fn location_counts_lines_and_columns() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(
            Location::from_offset(text, 0),
            Location { line: 1, column: 1 }
        );
        assert_eq!(
            Location::from_offset(text, 8),
            Location { line: 2, column: 3 }
        );
    }

    #[test]
    fn display_joins_message_and_suggestion() {
        let error = ConfigError::new("parameters.thinkng", "unknown option 'parameters.thinkng'")
            .with_suggestion(Some("parameters.thinking".into()));
        assert_eq!(
            error.to_string(),
            "unknown option 'parameters.thinkng'. Did you mean 'parameters.thinking'?"
        );
    }
}
