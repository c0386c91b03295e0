//! The host's decisions as data: (what happened before, a command) → (effects, new phase).

use super::decisions::DECIDED_KEPT;
use super::*;
use flemma_engine::{CancelScope, StopReason};
use flemma_protocol::engine::JobState;

const CHAT: &str = "/w/c.chat";

fn path() -> PathBuf {
    PathBuf::from(CHAT)
}

/// What happens to the host, in order.
#[derive(Debug)]
enum Step {
    Do(Command),
    /// The driver of the chat is set up.
    Running,
    /// The driver of the chat ended so.
    Ended(Result<StopReason, String>),
    /// The driver of the chat reports what its engine does.
    Driver(Box<DriverState>),
}

fn input(input: Input) -> Step {
    Step::Do(Command::Input {
        path: path(),
        input,
        send: false,
        options: CallOptions::default(),
    })
}

fn send() -> Step {
    Step::Do(Command::Input {
        path: path(),
        input: Input::Advance,
        send: true,
        options: CallOptions::default(),
    })
}

fn approve(id: &str) -> Input {
    Input::Approve { tool_id: id.into() }
}

fn cancel() -> Input {
    Input::Cancel {
        scope: CancelScope::All,
    }
}

fn apply(state: &mut HostState, step: Step) -> Vec<Effect> {
    match step {
        Step::Do(command) => state.handle(command),
        Step::Running => {
            let backlog = state.driver_running(&path());
            let mut effects: Vec<Effect> = backlog
                .inputs
                .into_iter()
                .map(|input| Effect::Feed(path(), input, None))
                .collect();
            effects.extend(
                backlog
                    .revisions
                    .into_iter()
                    .map(|(id, input)| Effect::Revise(path(), id, input)),
            );
            if backlog.leave {
                effects.push(Effect::Leave(path()));
            }
            effects
        }
        Step::Ended(outcome) => state.driver_ended(&path(), &outcome),
        Step::Driver(driver) => {
            state.driver_state(&path(), *driver);
            Vec::new()
        }
    }
}

fn state_after(steps: Vec<Step>) -> HostState {
    let mut state = HostState::default();
    for step in steps {
        apply(&mut state, step);
    }
    state
}

fn phase(state: &HostState) -> &'static str {
    match state.document(&path()).map(|d| &d.phase) {
        None | Some(Phase::Idle) => "idle",
        Some(Phase::Starting { .. }) => "starting",
        Some(Phase::Running) => "running",
    }
}

fn start(first: First, send: bool) -> Effect {
    Effect::Start {
        path: path(),
        first,
        send,
        options: CallOptions::default(),
    }
}

/// A driver's failure to start, with the one approval that waited for it.
const WAITED: &str =
    "the file is gone (1 request made while the driver started was not done: make it again)";

/// A case: its name, what happened before, the step, the effects it has and the phase after.
type Row = (&'static str, Vec<Step>, Step, Vec<Effect>, &'static str);

#[test]
fn commands_start_queue_or_feed_a_driver() {
    let revise = || Command::Revise {
        path: path(),
        tool_id: "t1".into(),
        input: serde_json::json!({"a": 1}),
    };
    let compact = || Command::Compact {
        path: path(),
        order: ByHand::Undo { line: None },
    };
    let if_running = || {
        Step::Do(Command::IfRunning {
            path: path(),
            input: cancel(),
        })
    };
    #[rustfmt::skip]
    let table: Vec<Row> = vec![
        ("a send starts a driver", vec![], send(),
            vec![start(First::Input(Input::Advance), true)], "starting"),
        ("an approval starts one that may not send", vec![], input(approve("t1")),
            vec![start(First::Input(approve("t1")), false)], "starting"),
        ("an input waits while the driver is set up", vec![send()], input(approve("t1")),
            vec![], "starting"),
        ("then goes to the running driver", vec![send(), Step::Running], input(approve("t1")),
            vec![Effect::Feed(path(), approve("t1"), Some(StartAs { send: false, options: CallOptions::default() }))], "running"),
        ("what waited is fed once it runs", vec![send(), input(approve("t1")), Step::Do(revise())],
            Step::Running,
            vec![Effect::Feed(path(), approve("t1"), None),
                 Effect::Revise(path(), "t1".into(), serde_json::json!({"a": 1}))], "running"),
        ("a cancel with no driver does nothing", vec![], if_running(), vec![], "idle"),
        ("a cancel waits for a driver being set up", vec![send()], if_running(), vec![], "starting"),
        ("a cancel goes to a running driver", vec![send(), Step::Running], if_running(),
            vec![Effect::Feed(path(), cancel(), None)], "running"),
        ("a revision starts a driver", vec![], Step::Do(revise()),
            vec![start(First::Revise("t1".into(), serde_json::json!({"a": 1})), false)], "starting"),
        ("a revision goes to the running driver", vec![send(), Step::Running], Step::Do(revise()),
            vec![Effect::Revise(path(), "t1".into(), serde_json::json!({"a": 1}))], "running"),
        ("a compaction starts a driver of its own", vec![], Step::Do(compact()),
            vec![start(First::Compact(ByHand::Undo { line: None }), false)], "starting"),
        ("not while a send runs", vec![send()], Step::Do(compact()),
            vec![Effect::Notice(path(), "not compacted: a send started on the chat meanwhile".into())],
            "starting"),
        ("a writer change reaches a running driver", vec![send(), Step::Running],
            Step::Do(Command::Writer { path: path() }), vec![Effect::SetWriter(path())], "running"),
        ("and is nobody's business otherwise", vec![],
            Step::Do(Command::Writer { path: path() }), vec![], "idle"),
        ("a driver that ends is told", vec![send(), Step::Running],
            Step::Ended(Ok(StopReason::Idle)),
            vec![Effect::Publish(path(), EngineEvent::EngineStopped(EngineStopped {
                reason: StopLabel::Idle, message: None }))], "idle"),
        ("an error is told to the editors too", vec![send()],
            Step::Ended(Err("the file is gone".into())),
            vec![Effect::Failed(path(), "the file is gone".into()),
                 Effect::Publish(path(), EngineEvent::EngineStopped(EngineStopped {
                reason: StopLabel::Error, message: Some("the file is gone".into()) }))], "idle"),
        ("what waited for a driver that could not start is said", vec![send(), input(approve("t1"))],
            Step::Ended(Err("the file is gone".into())),
            vec![Effect::Failed(path(), WAITED.into()),
                 Effect::Publish(path(), EngineEvent::EngineStopped(EngineStopped {
                reason: StopLabel::Error, message: Some(WAITED.into()) }))], "idle"),
        ("shutdown makes running drivers leave", vec![send(), Step::Running],
            Step::Do(Command::Shutdown), vec![Effect::Leave(path()), Effect::Stop], "running"),
        ("a driver set up during shutdown leaves at once", vec![send(), Step::Do(Command::Shutdown)],
            Step::Running, vec![Effect::Leave(path())], "running"),
        ("nothing starts once stopping", vec![Step::Do(Command::Shutdown)], send(), vec![], "idle"),
        ("nor is compacted", vec![Step::Do(Command::Shutdown)], Step::Do(compact()), vec![], "idle"),
    ];
    for (name, before, step, effects, after) in table {
        let mut state = state_after(before);
        assert_eq!(apply(&mut state, step), effects, "{name}");
        assert_eq!(phase(&state), after, "{name}");
    }
}

/// A caller's options reach the driver a command starts, and only that one: a driver already
/// set up or running keeps how it runs.
#[test]
fn options_go_with_the_driver_a_command_starts() {
    let step = CallOptions { no_autopilot: true };
    let marked = |input| {
        Step::Do(Command::Input {
            path: path(),
            input,
            send: false,
            options: step,
        })
    };
    let mut state = state_after(vec![]);
    assert_eq!(
        apply(&mut state, marked(approve("t1"))),
        vec![Effect::Start {
            path: path(),
            first: First::Input(approve("t1")),
            send: false,
            options: step,
        }]
    );
    let mut state = state_after(vec![send(), Step::Running]);
    assert_eq!(
        apply(&mut state, marked(approve("t1"))),
        vec![Effect::Feed(
            path(),
            approve("t1"),
            Some(StartAs {
                send: false,
                options: step
            })
        )]
    );
}

#[test]
fn a_driver_counts_its_epoch_and_how_it_stopped() {
    let mut state = state_after(vec![send(), Step::Running, Step::Ended(Err("boom".into()))]);
    let doc = state.document(&path()).cloned().unwrap_or_default();
    assert_eq!((doc.epoch, doc.last_failed), (1, true));
    apply(&mut state, send());
    let doc = state.document(&path()).cloned().unwrap_or_default();
    assert_eq!((doc.epoch, doc.running()), (2, true));
}

fn awaiting() -> StopReason {
    StopReason::AwaitingApproval {
        tool_ids: vec!["t1".into()],
    }
}

#[test]
fn the_status_label_follows_the_phase_and_the_driver() {
    let with = |driver| Step::Driver(Box::new(driver));
    #[rustfmt::skip]
    let table: Vec<(&str, Vec<Step>, &str)> = vec![
        ("nothing ran", vec![], "idle"),
        ("a driver is being set up", vec![send()], "working"),
        ("it streams", vec![send(), Step::Running,
            with(DriverState { streaming: true, ..DriverState::default() })], "streaming"),
        ("a tool runs", vec![send(), Step::Running,
            with(DriverState { running_tools: vec!["t1".into()], ..DriverState::default() })], "tools"),
        ("a job runs", vec![send(), Step::Running, with(DriverState {
            jobs: vec![flemma_protocol::engine::EngineJob { job_id: "j".into(), tool_id: "t".into(),
                tool_name: "bash".into(), state: JobState::Running }],
            ..DriverState::default() })], "tools"),
        ("it stopped for an approval", vec![send(), Step::Running, Step::Ended(Ok(awaiting()))],
            "awaiting-approval"),
        ("it stopped on an error", vec![send(), Step::Ended(Err("x".into()))], "idle"),
    ];
    for (name, steps, label) in table {
        let state = state_after(steps);
        assert_eq!(state.status(&path(), Vec::new()).state, label, "{name}");
    }
}

/// Two calls, both waiting for approval in the text.
const PENDING: &str = "@You:\nrun\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"pwd\"}\n```\n\n@You:\n**Tool Result:** `t1` (pending)\n```\n```\n\n**Tool Result:** `t2` (pending)\n```\n```\n";

/// What a decision is checked on besides the running driver's pending calls: the text above,
/// or nothing known (another editor's buffer).
#[derive(Debug, Clone, Copy)]
enum On {
    Text,
    Unknown,
}

fn decide(
    state: &mut HostState,
    id: Option<&str>,
    how: Decided,
    on: On,
) -> Result<Vec<String>, String> {
    let doc = flemma_syntax::Document::parse(PENDING.to_owned());
    let checked = match on {
        On::Text => Checked::text(&doc, id),
        On::Unknown => Checked::Unknown,
    };
    state
        .decide(&path(), id, how, checked)
        .map(|accepted| accepted.tool_ids)
        .map_err(|error| error.to_string())
}

fn running_with(pending: &[&str]) -> Vec<Step> {
    vec![
        send(),
        Step::Running,
        Step::Driver(Box::new(DriverState {
            pending: pending.iter().map(|id| (*id).to_owned()).collect(),
            ..DriverState::default()
        })),
    ]
}

/// A decision: on this call (or every pending one), how, checked on what.
type Decision = (Option<&'static str>, Decided, On);
/// A case: its name, what happened before, the decisions taken before, the decision, and the
/// calls it decides or a part of its refusal.
type DecisionRow = (
    &'static str,
    Vec<Step>,
    Vec<Decision>,
    Decision,
    Result<Vec<&'static str>, &'static str>,
);

#[test]
fn the_first_decision_on_a_call_is_the_one_that_counts() {
    use Decided::{Approved, Rejected};
    let t1 = Some("t1");
    #[rustfmt::skip]
    let table: Vec<DecisionRow> = vec![
        ("a pending call is decided", vec![], vec![], (t1, Approved, On::Text), Ok(vec!["t1"])),
        ("approveAll takes every pending call", vec![], vec![], (None, Approved, On::Text),
            Ok(vec!["t1", "t2"])),
        ("a call not in the chat is refused", vec![], vec![], (Some("t9"), Approved, On::Text),
            Err("t9")),
        ("a second decision is refused", vec![], vec![(t1, Approved, On::Text)],
            (t1, Rejected, On::Text), Err("was already approved")),
        ("even from a front end that knows nothing", vec![], vec![(t1, Rejected, On::Unknown)],
            (t1, Approved, On::Text), Err("was already rejected")),
        ("the running driver's pending calls decide", running_with(&["t2"]), vec![],
            (t1, Approved, On::Unknown), Err("pending: t2")),
        ("whatever the caller's text says", running_with(&["t1"]), vec![],
            (t1, Approved, On::Text), Ok(vec!["t1"])),
        ("approveAll with nothing pending is refused", running_with(&[]), vec![],
            (None, Approved, On::Unknown), Err("waits for approval")),
        ("another editor's buffer: its driver decides", vec![], vec![],
            (t1, Approved, On::Unknown), Ok(vec!["t1"])),
        ("a decision in flight still counts after a driver ended well",
            vec![send(), Step::Running, Step::Ended(Ok(awaiting()))],
            vec![], (t1, Approved, On::Text), Ok(vec!["t1"])),
    ];
    for (name, before, earlier, (id, how, on), expected) in table {
        let mut state = state_after(before);
        for (id, how, on) in earlier {
            assert!(
                decide(&mut state, id, how, on).is_ok(),
                "{name}: the earlier decision"
            );
        }
        let got = decide(&mut state, id, how, on);
        match expected {
            Ok(ids) => assert_eq!(
                got,
                Ok(ids.iter().map(|id| (*id).to_owned()).collect()),
                "{name}"
            ),
            Err(part) => {
                let message = got.expect_err(name);
                assert!(message.contains(part), "{name}: {message}");
            }
        }
    }
}

#[test]
fn a_decision_a_failed_driver_dropped_may_be_taken_again() {
    let mut state = state_after(vec![send(), Step::Running]);
    let first = decide(&mut state, Some("t1"), Decided::Approved, On::Unknown);
    assert_eq!(first, Ok(vec!["t1".to_owned()]));
    // The driver that was to apply it ended on an error, the call still pending in the text.
    apply(&mut state, Step::Ended(Err("the file is gone".into())));
    let again = decide(&mut state, Some("t1"), Decided::Rejected, On::Text);
    assert_eq!(again, Ok(vec!["t1".to_owned()]));
    // A driver that ended well applied what it got: the record stands.
    let mut state = state_after(vec![send(), Step::Running]);
    let _ = decide(&mut state, Some("t1"), Decided::Approved, On::Unknown);
    apply(&mut state, Step::Ended(Ok(awaiting())));
    assert!(decide(&mut state, Some("t1"), Decided::Rejected, On::Text).is_err());
}

#[test]
fn refusals_while_a_driver_works() {
    let idle = HostState::default();
    let busy = state_after(vec![send()]);
    let undo = ByHand::Undo { line: None };
    assert_eq!(idle.by_hand(&path(), &undo).map(|a| a.started), Ok(true));
    let refused = busy.by_hand(&path(), &undo).map_err(|e| e.to_string());
    assert!(refused.is_err_and(|m| m.contains("undo the compaction once it stops")));
    assert!(idle.rewind(&path()).is_ok() && busy.rewind(&path()).is_err());
    let cancel = idle
        .running_only(&path(), "request", "cancel")
        .map_err(|e| e.to_string());
    assert!(cancel.is_err_and(|m| m.contains("there is no request to cancel")));
    assert!(busy.running_only(&path(), "request", "cancel").is_ok());
}

#[test]
fn only_evaluations_and_git_work_are_answered_off_the_callers_thread() {
    use flemma_protocol::methods::{FlemmaRequest as R, Method as M};
    let uri = || CHAT.to_owned();
    let decode = |method: M, params: serde_json::Value| {
        R::decode(method.name(), params).unwrap_or_else(|error| panic!("{method:?}: {error}"))
    };
    #[rustfmt::skip]
    let table = [
        (decode(M::Switch, serde_json::json!({"uri": uri(), "model": "openai"})), true),
        (decode(M::Mode, serde_json::json!({"uri": uri(), "mode": "plan"})), true),
        (decode(M::Rewind, serde_json::json!({"uri": uri(), "toolId": "t1"})), true),
        (decode(M::Changes, serde_json::json!({"uri": uri()})), true),
        (decode(M::Send, serde_json::json!({"uri": uri()})), false),
        (decode(M::Approve, serde_json::json!({"uri": uri(), "toolId": "t1"})), false),
        (decode(M::Status, serde_json::json!({"uri": uri()})), false),
    ];
    for (request, off) in table {
        assert_eq!(answered_off_thread(&request), off, "{}", request.method());
    }
}

/// Past `DECIDED_KEPT` decisions (an `approveAll` of many calls at once), the table keeps the
/// newest ones, however many one request added: the oldest go, and a call decided last still
/// refuses a second decision.
#[test]
fn the_decisions_kept_are_bounded_and_the_newest() {
    let ids: Vec<String> = (0..DECIDED_KEPT + 100).map(|n| format!("c{n}")).collect();
    let pending: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut state = state_after(running_with(&pending));
    let decided = decide(&mut state, None, Decided::Approved, On::Unknown).expect("approveAll");
    assert_eq!(decided.len(), DECIDED_KEPT + 100);
    let kept = &state.docs[&path()].decided;
    assert_eq!(kept.len(), DECIDED_KEPT);
    assert!(!kept.contains_key("c0") && !kept.contains_key("c99"));
    assert!(kept.contains_key("c100") && kept.contains_key(&format!("c{}", DECIDED_KEPT + 99)));
    let last = format!("c{}", DECIDED_KEPT + 99);
    let again = decide(&mut state, Some(&last), Decided::Rejected, On::Unknown);
    assert!(
        again.is_err_and(|refusal| refusal.contains("was already approved")),
        "the newest decision was forgotten"
    );
}

/// A case of who writes: its name, the editors' steps, whether each changed the writer, and
/// the writer after.
type WriterRow = (&'static str, Vec<i64>, Vec<bool>, Option<u64>);

/// Who writes a document: each row is what editors did (`+N` opened or was active on it,
/// `-N` closed it), whether each step changed the writer, and the writer after (`None`: the
/// file on disk).
#[test]
fn the_most_recently_active_editor_writes_else_the_file() {
    #[rustfmt::skip]
    let table: Vec<WriterRow> = vec![
        ("nobody has it open", vec![], vec![], None),
        ("an editor opens it", vec![1], vec![true], Some(1)),
        ("a second one opens it", vec![1, 2], vec![true, true], Some(2)),
        ("the first is active again", vec![1, 2, 1], vec![true, true, true], Some(1)),
        ("the writer active again changes nothing", vec![1, 1], vec![true, false], Some(1)),
        ("the writer closes it: the one before writes", vec![1, 2, -2], vec![true, true, true], Some(1)),
        ("another closes it: the writer stays", vec![1, 2, -1], vec![true, true, false], Some(2)),
        ("the last closes it: the file writes", vec![1, -1], vec![true, true], None),
        ("closing what was never open changes nothing", vec![-3], vec![false], None),
    ];
    for (name, steps, changes, writer) in table {
        let mut state = HostState::default();
        let changed: Vec<bool> = steps
            .iter()
            .map(|&step| {
                let session = step.unsigned_abs();
                if step > 0 {
                    state.attach(&path(), session)
                } else {
                    state.detach(&path(), session)
                }
            })
            .collect();
        assert_eq!(changed, changes, "{name}");
        assert_eq!(state.writer(&path()), writer, "{name}");
        assert_eq!(state.has_editor(&path()), writer.is_some(), "{name}");
    }
}

#[test]
fn a_writer_change_reaches_only_a_running_driver() {
    let mut state = state_after(vec![send(), Step::Running]);
    assert!(state.attach(&path(), 7));
    assert_eq!(
        state.handle(Command::Writer { path: path() }),
        vec![Effect::SetWriter(path())]
    );
    let mut idle = HostState::default();
    assert!(idle.attach(&path(), 7));
    assert_eq!(idle.handle(Command::Writer { path: path() }), Vec::new());
}

/// A decision is checked on the file only when no driver runs and no editor has the chat open;
/// the driver's number tells the caller, who read the file meanwhile, whether a driver started
/// or ended since (then it reads the file again).
#[test]
fn the_file_decides_only_when_nothing_else_holds_the_chat_and_says_which_driver_left_it() {
    let mut state = HostState::default();
    assert_eq!(state.decided_on_file(&path()), Some(0));
    state.attach(&path(), 7);
    assert_eq!(
        state.decided_on_file(&path()),
        None,
        "an editor has it open"
    );
    state.detach(&path(), 7);
    assert_eq!(state.decided_on_file(&path()), Some(0));
    apply(&mut state, send());
    assert_eq!(state.decided_on_file(&path()), None, "a driver starts");
    apply(&mut state, Step::Running);
    assert_eq!(state.decided_on_file(&path()), None, "a driver runs");
    apply(&mut state, Step::Ended(Ok(StopReason::Idle)));
    assert_eq!(
        state.decided_on_file(&path()),
        Some(1),
        "read before this driver, the file is read again"
    );
}

/// The state counts the drivers its commands started and says whether one runs: two decisions
/// whose first driver ended in between started two.
#[test]
fn the_state_counts_the_drivers_its_commands_started() {
    let mut state = HostState::default();
    let before = state.drivers(&path());
    assert_eq!(before, Drivers::default());
    for step in [
        input(approve("t1")),
        Step::Running,
        Step::Ended(Ok(StopReason::StepDone)),
        input(approve("t2")),
    ] {
        apply(&mut state, step);
    }
    let after = state.drivers(&path());
    assert_eq!(
        after,
        Drivers {
            started: 2,
            running: true
        }
    );
    assert_eq!(after.stops_since(before), 2);
}

/// An input fed to a running driver that ended before reading it is handed back and decided
/// again as the command that decided it said: a send still may not start a driver with
/// nothing to send, a marked approval still runs without autopilot.
#[test]
fn an_input_handed_back_is_decided_again_as_its_command_said() {
    let step = CallOptions { no_autopilot: true };
    for (input, sends) in [(Input::Advance, true), (approve("t1"), false)] {
        let mut state = state_after(vec![send(), Step::Running]);
        let effects = apply(
            &mut state,
            Step::Do(Command::Input {
                path: path(),
                input: input.clone(),
                send: sends,
                options: step,
            }),
        );
        let [Effect::Feed(fed_path, fed, Some(start_as))] = effects.as_slice() else {
            panic!("fed to the running driver with how to start again: {effects:?}");
        };
        apply(&mut state, Step::Ended(Ok(StopReason::Idle)));
        let again = start_as.command(fed_path.clone(), fed.clone());
        assert_eq!(
            state.handle(again),
            vec![Effect::Start {
                path: path(),
                first: First::Input(input),
                send: sends,
                options: step,
            }]
        );
    }
}
