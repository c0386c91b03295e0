//! The test harness: a fake policy, a driver with a fake clock, and effects as text.

use std::sync::Arc;

use flemma_conversation::StreamEvent;
use flemma_engine::*;
use flemma_syntax::edits_fit;
use serde_json::Value;

/// `read`, `ls`, `flemma.*` approved; `bash` asks; `rm` is denied; `bash` and `sleep` are async.
#[derive(Debug)]
pub struct FakePolicy;

impl ToolPolicy for FakePolicy {
    fn decide(&self, name: &str, _input: &Value) -> Decision {
        let (verdict, resolver) = match name {
            "read" | "ls" | "sleep" => (Verdict::Approve, "urn:flemma:approval:config"),
            n if n.starts_with("flemma.") => (Verdict::Approve, "urn:flemma:approval:config"),
            "rm" => (
                Verdict::Deny {
                    message: "rm is not allowed here".into(),
                },
                "urn:flemma:approval:config",
            ),
            _ => (Verdict::RequireApproval, "urn:flemma:approval:catch-all"),
        };
        Decision::new(verdict, resolver)
    }

    fn capabilities(&self, name: &str) -> Option<ToolInfo> {
        match name {
            "read" | "ls" | "rm" => Some(ToolInfo::default()),
            "bash" | "sleep" => Some(ToolInfo {
                is_async: true,
                disables_background: false,
            }),
            "flemma.jobs.status" => Some(ToolInfo {
                is_async: false,
                disables_background: true,
            }),
            _ => None,
        }
    }

    /// `bash` needs a `command` string; every other input fits.
    fn check(&self, name: &str, input: &Value) -> Result<(), String> {
        match name {
            "bash" if !input.get("command").is_some_and(Value::is_string) => Err(
                "the input does not fit the schema of `bash`: (root): missing required property `command`"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
}

pub fn engine_with(config: EngineConfig, text: &str) -> Engine {
    Engine::new(config, text.to_owned(), Arc::new(FakePolicy))
}

/// A one-line description of an effect (edits are checked through the text after).
pub fn describe(effect: &Effect) -> Option<String> {
    Some(match effect {
        Effect::Edit { .. } => return None,
        Effect::StartRequest { request } => format!("start request {}", request.0),
        Effect::CancelRequest { request } => format!("cancel request {}", request.0),
        Effect::StartTool {
            tool_id,
            name,
            input,
            background,
            job_id,
        } => format!(
            "start {name} {tool_id} {input}{}",
            if *background {
                format!(" background {}", job_id.as_deref().unwrap_or("?"))
            } else {
                String::new()
            }
        ),
        Effect::KillTool { tool_id } => format!("kill {tool_id}"),
        Effect::SetTimer { id, at } => format!("timer {} at {at}", id.0),
        Effect::CancelTimer { id } => format!("cancel timer {}", id.0),
        Effect::Emit(event) => format!("emit {}", event.name()),
        Effect::Stopped { reason } => format!("stopped {reason:?}"),
        Effect::Refused { message } => format!("refused {message}"),
        Effect::Saw {
            seen,
            tool_id,
            name,
            ..
        } => format!("saw {} {name} {tool_id}", seen.as_str()),
    })
}

/// Checks that each effect's edits fit the text the shell has, and applies them: the shell's
/// copy must equal the engine's view after every step.
pub fn shell_apply(shell: &mut String, effects: &[Effect]) {
    for effect in effects {
        if let Effect::Edit { edits } = effect {
            assert!(edits_fit(shell, edits), "edits do not fit: {edits:?}");
            *shell = flemma_syntax::apply_edits(shell, edits).expect("the effect's edits apply");
        }
    }
}

/// Drives an engine like a shell would: applies edits to its own copy, logs the effects.
#[derive(Debug)]
pub struct Driver {
    pub engine: Engine,
    pub shell: String,
    pub now: Millis,
    pub log: Vec<String>,
    pub effects: Vec<Effect>,
}

impl Driver {
    pub fn new(text: &str) -> Self {
        Self::with(EngineConfig::default(), text)
    }

    pub fn with(config: EngineConfig, text: &str) -> Self {
        Self {
            engine: engine_with(config, text),
            shell: text.to_owned(),
            now: 0,
            log: Vec::new(),
            effects: Vec::new(),
        }
    }

    pub fn send(&mut self, input: Input) -> Vec<String> {
        self.now += 1;
        if let Input::TextChanged { edits } = &input {
            if edits_fit(&self.shell, edits) {
                self.shell =
                    flemma_syntax::apply_edits(&self.shell, edits).expect("the edits apply");
            }
        }
        let effects = self.engine.handle(self.now, input);
        shell_apply(&mut self.shell, &effects);
        assert_eq!(self.shell, self.engine.text(), "shell and engine disagree");
        let lines: Vec<String> = effects.iter().filter_map(describe).collect();
        self.log.extend(lines.iter().cloned());
        self.effects.extend(effects);
        lines
    }

    /// Streams text deltas and a normal end into request `n`.
    pub fn reply(&mut self, n: u64, events: Vec<StreamEvent>) -> Vec<String> {
        let request = RequestId(n);
        let mut lines = Vec::new();
        for event in events {
            lines.extend(self.send(Input::Stream { request, event }));
        }
        lines.extend(self.send(Input::StreamEnded {
            request,
            outcome: StreamOutcome::Finished,
        }));
        lines
    }

    pub fn type_at_end(&mut self, text: &str) -> Vec<String> {
        let at = self.shell.len();
        self.send(Input::TextChanged {
            edits: vec![flemma_syntax::TextEdit::insert(at, text)],
        })
    }

    /// The events emitted, each as its JSON line carries it (the stable form tests check).
    pub fn events(&self) -> Vec<Told> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Emit(event) => {
                    let (name, data) = event.to_parts();
                    Some(Told { name, data })
                }
                _ => None,
            })
            .collect()
    }

    pub fn event(&self, name: &str) -> Option<Told> {
        self.events().into_iter().rev().find(|e| e.name == name)
    }
}

/// An emitted event's name and data, as the JSON line carries them.
#[derive(Debug, Clone, PartialEq)]
pub struct Told {
    pub name: &'static str,
    pub data: Value,
}

pub fn text(s: &str) -> StreamEvent {
    StreamEvent::TextDelta { text: s.into() }
}

pub fn call(index: usize, id: &str, name: &str, arguments: &str) -> Vec<StreamEvent> {
    vec![
        StreamEvent::ToolCallStart {
            index,
            id: id.into(),
            name: name.into(),
        },
        StreamEvent::ToolCallEnd {
            index,
            arguments: arguments.into(),
        },
    ]
}

pub fn finished(tool_id: &str, text: &str) -> Input {
    Input::ToolFinished {
        tool_id: tool_id.into(),
        text: text.into(),
        is_error: false,
    }
}

/// The final text must parse without error diagnostics.
pub fn assert_well_formed(text: &str) {
    let doc = flemma_syntax::parse(text);
    let errors: Vec<_> = doc
        .diagnostics()
        .into_iter()
        .filter(|d| d.severity == flemma_syntax::Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{text}");
}
