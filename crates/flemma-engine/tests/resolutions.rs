//! One resolution per call (issue 27): whatever interleaving of approve, reject, approve-all,
//! cancel, advance and tool completions several clients send, the first decision on a call is
//! the one that counts, later ones are refused, and the file and what ran agree — a call that
//! ran is never recorded `rejected`, a call recorded `rejected` never ran.

use std::collections::{HashMap, HashSet};

use flemma_engine::*;
use proptest::prelude::*;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    Approve(usize),
    Reject(usize),
    ApproveAll,
    Cancel,
    Advance,
    Finish(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..4).prop_map(Op::Approve),
        3 => (0usize..4).prop_map(Op::Reject),
        1 => Just(Op::ApproveAll),
        1 => Just(Op::Cancel),
        1 => Just(Op::Advance),
        2 => (0usize..4).prop_map(Op::Finish),
    ]
}

/// A reply asking for four `bash` calls, each waiting for approval.
fn four_pending() -> Driver {
    let mut d = Driver::new("@You:\nGo\n");
    d.send(Input::Advance);
    let mut events = Vec::new();
    for i in 0..4 {
        events.extend(call(
            i,
            &format!("c{i}"),
            "bash",
            &format!("{{\"command\":\"echo {i}\"}}"),
        ));
    }
    d.reply(1, events);
    d
}

fn status_of(text: &str, id: &str) -> Option<String> {
    let header = format!("**Tool Result:** `{id}`");
    let at = text.find(&header)? + header.len();
    let rest = &text[at..];
    let line = rest.lines().next().unwrap_or_default();
    Some(
        line.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .to_owned(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_first_decision_wins_and_the_file_says_what_ran(ops in prop::collection::vec(op(), 1..30)) {
        let mut d = four_pending();
        let mut decided: HashMap<String, &'static str> = HashMap::new();
        let mut started: HashSet<String> = HashSet::new();
        let mut finished: HashSet<String> = HashSet::new();
        for op in ops {
            let id = |i: usize| format!("c{i}");
            let (input, decision) = match &op {
                Op::Approve(i) => (Input::Approve { tool_id: id(*i) }, Some((id(*i), "approved"))),
                Op::Reject(i) => (
                    Input::Reject { tool_id: id(*i), reason: Some("no".into()) },
                    Some((id(*i), "rejected")),
                ),
                Op::ApproveAll => (Input::ApproveAll, None),
                Op::Cancel => (Input::Cancel { scope: CancelScope::All }, None),
                Op::Advance => (Input::Advance, None),
                Op::Finish(i) => {
                    if !started.contains(&id(*i)) || finished.contains(&id(*i)) {
                        continue;
                    }
                    finished.insert(id(*i));
                    (
                        Input::ToolFinished { tool_id: id(*i), text: format!("ran {i}"), is_error: false },
                        None,
                    )
                }
            };
            let pending_before: HashSet<String> = d
                .engine
                .pending_calls()
                .into_iter()
                .map(|c| c.tool_id)
                .collect();
            let lines = d.send(input);
            let refused = lines.iter().any(|l| l.starts_with("refused"));
            if let Some((id, what)) = decision {
                match decided.get(id.as_str()) {
                    // A second decision is refused, saying what the first was.
                    Some(first) => {
                        prop_assert!(refused, "a second decision on {id} was taken: {lines:?}");
                        let said = lines.iter().any(|l| l.contains(&format!("`{id}` was already {first}")));
                        prop_assert!(said || !pending_before.contains(&id), "{lines:?}");
                    }
                    None if pending_before.contains(&id) => {
                        prop_assert!(!refused, "the first decision on {id} was refused: {lines:?}");
                        decided.insert(id.clone(), what);
                    }
                    None => {}
                }
            }
            if matches!(op, Op::ApproveAll) {
                for id in &pending_before {
                    decided.entry(id.clone()).or_insert("approved");
                }
            }
            for line in &lines {
                if let Some(rest) = line.strip_prefix("start bash ") {
                    let id = rest.split_whitespace().next().unwrap_or_default().to_owned();
                    prop_assert_eq!(decided.get(id.as_str()).copied(), Some("approved"), "{} ran without approval", id);
                    prop_assert!(started.insert(id.clone()), "{} started twice", id);
                }
            }
        }
        // The file and what ran agree.
        for i in 0..4 {
            let id = format!("c{i}");
            let status = status_of(&d.shell, &id);
            if started.contains(&id) {
                prop_assert_ne!(status.as_deref(), Some("rejected"), "{} ran but the file says rejected\n{}", id, d.shell);
            }
            if status.as_deref() == Some("rejected") || d.shell.contains(&format!("`{id}` (rejected)")) {
                prop_assert!(!started.contains(&id), "{} is rejected but ran", id);
            }
        }
    }
}
