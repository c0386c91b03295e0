//! Any interleaving of user edits, stream events, tool and job completions, approvals and
//! timers, request cancellations and placeholder blocks deleted by the user (running tools
//! included) keeps every byte the user typed and every tool output, and ends in a text the
//! format can express (it parses without error diagnostics).

use std::collections::VecDeque;

use flemma_conversation::StreamEvent;
use flemma_engine::*;
use flemma_syntax::{TextEdit, TextRange};
use proptest::prelude::*;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    /// Type a line: at the end (0), before a role line (1), into a placeholder's fence (2).
    Type(u8, usize),
    StreamStep,
    FinishTool(usize),
    FinishJob(usize),
    ApproveAll,
    Advance,
    FireTimer,
    CancelRequest,
    /// Delete an empty placeholder block (of a running, waiting or pending tool).
    DeletePlaceholder(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u8..3, any::<usize>()).prop_map(|(k, i)| Op::Type(k, i)),
        4 => Just(Op::StreamStep),
        2 => any::<usize>().prop_map(Op::FinishTool),
        1 => any::<usize>().prop_map(Op::FinishJob),
        1 => Just(Op::ApproveAll),
        1 => Just(Op::Advance),
        1 => Just(Op::FireTimer),
        1 => Just(Op::CancelRequest),
        1 => any::<usize>().prop_map(Op::DeletePlaceholder),
    ]
}

/// The scripted model: reply `n` is text and, for early requests, tool calls chosen by `shape`.
fn reply(n: u64, shape: u8) -> VecDeque<StreamEvent> {
    let mut events: VecDeque<StreamEvent> = VecDeque::new();
    events.push_back(text(&format!("reply {n} ")));
    events.push_back(text("more text\nsecond line"));
    if n <= 4 {
        let tools = ["read", "bash", "sleep", "ls"];
        for i in 0..(shape % 3) as usize {
            let name = tools[(shape as usize + i + n as usize) % tools.len()];
            let background = name == "sleep" && shape % 2 == 0;
            let args = if background {
                format!(r#"{{"flemma.background":true,"n":"{n}-{i}"}}"#)
            } else {
                format!(r#"{{"n":"{n}-{i}"}}"#)
            };
            events.extend(call(i, &format!("c{n}_{i}"), name, &args));
        }
    }
    events
}

#[derive(Debug)]
struct World {
    d: Driver,
    /// The line break the user types (and the start text has): `\n` or `\r\n`.
    eol: &'static str,
    shape: u8,
    script: Option<(RequestId, VecDeque<StreamEvent>)>,
    running: Vec<String>,
    jobs: Vec<String>,
    timers: Vec<TimerId>,
    typed: Vec<String>,
    outputs: Vec<String>,
    seen: usize,
}

impl World {
    fn observe(&mut self) {
        for effect in &self.d.effects[self.seen..] {
            match effect {
                Effect::Edit { edits } if self.eol == "\r\n" => {
                    for edit in edits {
                        assert!(
                            !has_bare_lf(&edit.new_text),
                            "the engine wrote a bare LF into a CRLF chat: {edit:?}"
                        );
                    }
                }
                Effect::StartRequest { request } => {
                    self.script = Some((*request, reply(request.0, self.shape)));
                }
                Effect::StartTool {
                    tool_id, job_id, ..
                } => match job_id {
                    Some(job) => self.jobs.push(job.clone()),
                    None => self.running.push(tool_id.clone()),
                },
                Effect::SetTimer { id, .. } => self.timers.push(*id),
                _ => {}
            }
        }
        self.seen = self.d.effects.len();
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Type(kind, pick) => {
                let eol = self.eol;
                let word = format!("typed{}{eol}", self.typed.len());
                let text = self.d.shell.clone();
                let at = match kind {
                    1 => {
                        let starts: Vec<usize> = text
                            .match_indices(&format!("{eol}@"))
                            .map(|(i, _)| i + eol.len())
                            .collect();
                        if starts.is_empty() {
                            text.len()
                        } else {
                            starts[pick % starts.len()]
                        }
                    }
                    2 => {
                        let empty_fence = format!("){eol}```{eol}```{eol}");
                        let fences: Vec<usize> = text
                            .match_indices(&empty_fence)
                            .map(|(i, _)| i + 1 + 2 * eol.len() + 3)
                            .collect();
                        if fences.is_empty() {
                            text.len()
                        } else {
                            fences[pick % fences.len()]
                        }
                    }
                    _ => text.len(),
                };
                let word = if at == text.len() && !text.ends_with('\n') && !text.is_empty() {
                    format!("{eol}{word}")
                } else {
                    word
                };
                self.typed.push(word.trim().to_owned());
                self.d.send(Input::TextChanged {
                    edits: vec![TextEdit::insert(at, word)],
                });
            }
            Op::StreamStep => {
                if let Some((request, events)) = &mut self.script {
                    let request = *request;
                    match events.pop_front() {
                        Some(event) => {
                            self.d.send(Input::Stream { request, event });
                        }
                        None => {
                            self.script = None;
                            self.d.send(Input::StreamEnded {
                                request,
                                outcome: StreamOutcome::Finished,
                            });
                        }
                    }
                }
            }
            Op::FinishTool(pick) => {
                if !self.running.is_empty() {
                    let id = self.running.remove(pick % self.running.len());
                    let output = format!("output-of-{id}\nsecond line of {id}");
                    self.outputs.push(output.clone());
                    self.d.send(finished(&id, &output));
                }
            }
            Op::FinishJob(pick) => {
                if !self.jobs.is_empty() {
                    let job = self.jobs.remove(pick % self.jobs.len());
                    let output = format!("output-of-{job}\nsecond line of {job}");
                    self.outputs.push(output.clone());
                    self.d.send(Input::JobFinished {
                        job_id: job,
                        text: output,
                        is_error: false,
                    });
                }
            }
            Op::ApproveAll => {
                self.d.send(Input::ApproveAll);
            }
            Op::Advance => {
                self.d.send(Input::Advance);
            }
            Op::CancelRequest => {
                if self.d.engine.request().is_some() {
                    self.script = None;
                    self.d.send(Input::Cancel {
                        scope: CancelScope::Request,
                    });
                }
            }
            Op::DeletePlaceholder(pick) => {
                let doc = self.d.engine.document();
                let empty: Vec<TextRange> = doc
                    .placeholders(None)
                    .into_iter()
                    .filter(|(_, _, r)| {
                        r.fence
                            .as_ref()
                            .is_some_and(|f| doc.slice(f.content).trim().is_empty())
                    })
                    .map(|(_, segment, _)| segment.range)
                    .collect();
                if !empty.is_empty() {
                    let range = empty[pick % empty.len()];
                    self.d.send(Input::TextChanged {
                        edits: vec![TextEdit::replace(range, "")],
                    });
                }
            }
            Op::FireTimer => {
                if let Some(id) = self.timers.pop() {
                    self.d.send(Input::Timer { id });
                }
            }
        }
        self.observe();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_keep_user_text_and_tool_output(shape in 0u8..6, ops in proptest::collection::vec(op(), 0..60)) {
        check_interleaving(shape, &ops, "\n")?;
    }

    /// The same on a CRLF chat: every edit the engine makes and the final text hold `\r\n` line
    /// breaks only.
    #[test]
    fn interleavings_on_a_crlf_chat_write_only_crlf(shape in 0u8..6, ops in proptest::collection::vec(op(), 0..60)) {
        check_interleaving(shape, &ops, "\r\n")?;
    }
}

fn has_bare_lf(text: &str) -> bool {
    text.bytes()
        .enumerate()
        .any(|(i, b)| b == b'\n' && (i == 0 || text.as_bytes()[i - 1] != b'\r'))
}

fn check_interleaving(shape: u8, ops: &[Op], eol: &'static str) -> Result<(), TestCaseError> {
    {
        let mut w = World {
            d: Driver::new(&format!("@You:{eol}start{eol}")),
            eol,
            shape,
            script: None,
            running: Vec::new(),
            jobs: Vec::new(),
            timers: Vec::new(),
            typed: Vec::new(),
            outputs: Vec::new(),
            seen: 0,
        };
        w.d.send(Input::Advance);
        w.observe();
        for op in ops {
            w.apply(op);
        }
        // Drain: let everything finish.
        for _ in 0..400 {
            if !w.d.engine.is_busy() && w.d.engine.pending_calls().is_empty() {
                break;
            }
            for op in [
                Op::StreamStep,
                Op::FinishTool(0),
                Op::FinishJob(0),
                Op::ApproveAll,
                Op::FireTimer,
            ] {
                w.apply(&op);
            }
        }
        let text = w.d.shell.clone();
        for word in &w.typed {
            prop_assert_eq!(
                text.matches(&format!("{word}{eol}")).count(),
                1,
                "{} lost in\n{}",
                word,
                text
            );
        }
        for output in &w.outputs {
            let written = output.replace('\n', eol);
            prop_assert!(
                text.contains(written.as_str()),
                "{} lost in\n{}",
                output,
                text
            );
        }
        if eol == "\r\n" {
            prop_assert!(
                !has_bare_lf(&text),
                "a bare LF in the CRLF chat:\n{:?}",
                text
            );
        }
        assert_well_formed(&text);
    }
    Ok(())
}
