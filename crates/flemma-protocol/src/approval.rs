//! What the approval chain decides for a tool call: one [`Verdict`] and one [`Decision`] for the
//! chain (`flemma-tools`), the engine's policy port (`flemma-engine`) and the editor's hover
//! (`flemma-ide`), so no front end converts one into another.

/// What the approval chain decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    /// Nobody decided: the user is asked.
    RequireApproval,
    Deny {
        message: String,
    },
}

impl Verdict {
    /// The verdict as the approval chain's settings and `flemmad tools` name it
    /// (`approve`, `require_approval`, `deny`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::RequireApproval => "require_approval",
            Verdict::Deny { .. } => "deny",
        }
    }

    /// How a hover or a listing says it (`approved`, `asks the user`, `denied`).
    pub fn describe(&self) -> &'static str {
        match self {
            Verdict::Approve => "approved",
            Verdict::RequireApproval => "asks the user",
            Verdict::Deny { .. } => "denied",
        }
    }
}

/// A verdict and the resolver (urn) that gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// `urn:flemma:approval:config`, …
    pub resolver: String,
    /// Why the resolver could not decide as asked (a failing approval function: the call then
    /// requires approval), shown next to the decision.
    pub note: Option<String>,
}

impl Decision {
    /// A decision without a note.
    pub fn new(verdict: Verdict, resolver: impl Into<String>) -> Self {
        Self {
            verdict,
            resolver: resolver.into(),
            note: None,
        }
    }
}
