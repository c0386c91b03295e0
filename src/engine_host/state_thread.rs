//! The one thread that owns the host's state ([`HostState`]): every question and command about
//! it is a job run there, in the order it was sent, and the effects a command returns go from
//! there to the drivers' thread (`drivers.rs`) in that same order. The thread does nothing else
//! (no IO, no evaluation, no driver's work), so a caller waits for it only as long as the state
//! takes to decide the jobs queued before its own, whatever the drivers do.

use std::sync::mpsc::{Receiver, Sender};

use flemma_protocol::error::RequestError;
use tokio::sync::mpsc::UnboundedSender;

use crate::engine_host::state::{Command, Effect, HostState};

/// A job for the state's thread.
type Job = Box<dyn FnOnce(&mut Owned) + Send>;

/// The handle callers send the state's thread their jobs through. The thread ends once every
/// handle is dropped.
#[derive(Debug, Clone)]
pub(super) struct StateThread {
    jobs: Sender<Job>,
}

/// What a job is given on the state's thread: the state, and the way to the drivers' thread.
pub(super) struct Owned {
    pub state: HostState,
    effects: UnboundedSender<Effect>,
}

impl Owned {
    /// Hands `command` to the state and sends the effects it returns to the drivers' thread,
    /// in order; refused once the host is stopping (but what shutdown itself and the editors'
    /// comings and goings send).
    pub fn command(&mut self, command: Command) -> Result<(), RequestError> {
        let allowed_while_stopping = matches!(command, Command::Shutdown | Command::Writer { .. });
        if (self.state.stopping() || self.effects.is_closed()) && !allowed_while_stopping {
            return Err(super::shutting_down());
        }
        let effects = self.state.handle(command);
        self.send(effects)
    }

    /// Sends `effects` to the drivers' thread, in order.
    pub fn send(&self, effects: Vec<Effect>) -> Result<(), RequestError> {
        for effect in effects {
            self.effects
                .send(effect)
                .map_err(|_| super::shutting_down())?;
        }
        Ok(())
    }
}

impl StateThread {
    /// Starts the thread that makes and owns the host's state; the effects of its commands go
    /// to `effects`.
    pub fn start(effects: UnboundedSender<Effect>) -> std::io::Result<StateThread> {
        let (jobs, receiver) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("engine-state".into())
            .spawn(move || {
                let state = HostState::default();
                run(Owned { state, effects }, receiver)
            })?;
        Ok(StateThread { jobs })
    }

    /// Runs `job` on the state's thread and returns what it answers. Waits only for the jobs
    /// sent before it, which decide and return.
    pub fn ask<R: Send + 'static>(&self, job: impl FnOnce(&mut Owned) -> R + Send + 'static) -> R {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.tell(move |owned| {
            let _ = answer.send(job(owned));
        });
        match answered.recv() {
            Ok(answer) => answer,
            // The job panicked (the thread survives it, as a poisoned lock would be entered
            // again): the caller fails as it would have with the state in hand.
            Err(_) => panic!("the engine host's state failed while answering (a bug: see the log)"),
        }
    }

    /// Sends `job` to the state's thread without waiting for it (it runs after every job sent
    /// before it, before every job sent after it).
    pub fn tell(&self, job: impl FnOnce(&mut Owned) + Send + 'static) {
        // The thread runs as long as a handle exists: the send cannot fail.
        let _ = self.jobs.send(Box::new(job));
    }
}

fn run(mut owned: Owned, jobs: Receiver<Job>) {
    for job in jobs {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut owned)));
        if ran.is_err() {
            tracing::error!("a job on the engine host's state panicked; the state goes on");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::engine_host::CallOptions;

    fn chat() -> PathBuf {
        PathBuf::from("/w/c.chat")
    }

    /// Jobs run in the order they were sent, whichever waits for its answer, and the effects
    /// of a command reach the drivers' thread in that order too.
    #[test]
    fn jobs_run_in_order_and_their_effects_follow_in_order() {
        let (effects, mut received) = tokio::sync::mpsc::unbounded_channel();
        let thread = StateThread::start(effects).expect("the state's thread starts");
        thread.tell(|owned| {
            owned.state.attach(&chat(), 1);
        });
        let input = |n: &str| flemma_engine::Input::Approve { tool_id: n.into() };
        for id in ["a", "b"] {
            let input = input(id);
            thread
                .ask(move |owned| {
                    owned.command(Command::fed(chat(), input, CallOptions::default()))
                })
                .expect("fed");
        }
        assert_eq!(thread.ask(|owned| owned.state.writer(&chat())), Some(1));
        assert!(matches!(received.try_recv(), Ok(Effect::Start { .. })));
        assert!(received.try_recv().is_err(), "b waits for the driver");
        let backlog = thread.ask(|owned| owned.state.driver_running(&chat()));
        assert_eq!(backlog.inputs, vec![input("b")]);
    }

    /// Once the host is stopping, a command that would feed or start a driver is refused,
    /// saying so; shutdown's own goes through.
    #[test]
    fn commands_are_refused_once_the_host_stops() {
        let (effects, mut received) = tokio::sync::mpsc::unbounded_channel();
        let thread = StateThread::start(effects).expect("the state's thread starts");
        thread
            .ask(|owned| owned.command(Command::Shutdown))
            .expect("shutdown goes through");
        assert_eq!(received.try_recv().ok(), Some(Effect::Stop));
        let input = flemma_engine::Input::Advance;
        let refused = thread
            .ask(move |owned| owned.command(Command::fed(chat(), input, CallOptions::default())));
        let error = refused.expect_err("refused while stopping");
        assert!(error.to_string().contains("shutting down"), "{error}");
        assert!(received.try_recv().is_err(), "nothing started");
    }

    /// A job that panics fails its caller; the thread goes on with the next.
    #[test]
    fn a_job_that_panics_fails_its_caller_and_the_thread_goes_on() {
        let (effects, _received) = tokio::sync::mpsc::unbounded_channel();
        let thread = StateThread::start(effects).expect("the state's thread starts");
        let caller = thread.clone();
        let failed = std::thread::spawn(move || caller.ask(|_| -> bool { panic!("a bug") })).join();
        assert!(
            failed.is_err(),
            "the caller fails as with the state in hand"
        );
        assert!(!thread.ask(|owned| owned.state.is_running(&chat())));
    }
}
