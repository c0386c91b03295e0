//! The main loop: one `select!` over a closed set of events, each handled on this thread.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, select};
use flemma_ide::{AnalysisHost, ConfigInput};
use lsp_server::{Connection, Message};

use crate::backend::{Backend, Outbox, Task};
use crate::session::Session;
use crate::{from_proto, handlers, tasks};

#[derive(Debug, thiserror::Error)]
pub enum LspError {
    #[error("the LSP handshake failed: {0}")]
    Handshake(#[from] lsp_server::ProtocolError),
    #[error("the client sent invalid initialize parameters: {0}")]
    InitializeParams(#[from] serde_json::Error),
}

/// Everything the main loop reacts to. Closed: a new source of work is a new variant.
#[derive(Debug)]
enum Event {
    /// A message from the client.
    Lsp(Message),
    /// Work handed over by the engine.
    Task(Task),
    /// A deadline passed: a diagnostics debounce ended.
    Deadline,
    /// The analysis worker finished a document.
    Analyzed(crate::analysis_pool::Finished),
    /// The client connection closed without `exit`.
    Disconnected,
}

/// Runs a session on `connection` until the client sends `exit` or goes away, analysing
/// documents with the real file system, no configuration file and no environment (a default
/// `FsHost`: no home, working directory or `PATH`; see [`run_with`]).
pub fn run(connection: Connection, backend: Box<dyn Backend>) -> Result<(), LspError> {
    let host = AnalysisHost::new(
        Arc::new(flemma_template::FsHost::default()),
        ConfigInput::default(),
    );
    run_with(connection, backend, host)
}

/// Runs a session on `connection` whose documents `host` analyses (its IO and configuration
/// are the caller's: the binary reads the user's config file).
pub fn run_with(
    connection: Connection,
    backend: Box<dyn Backend>,
    host: AnalysisHost,
) -> Result<(), LspError> {
    let (id, params) = connection.initialize_start()?;
    let params: lsp_types::InitializeParams = serde_json::from_value(params)?;
    let encoding = from_proto::negotiate_encoding(&params.capabilities);
    let result = handlers::initialize::result(encoding);
    // Answered directly (not `initialize_finish`, which insists on `initialized` coming next
    // and ends the session otherwise); `initialized` is handled like any notification.
    let answer = lsp_server::Response::new_ok(id, result);
    if connection.sender.send(Message::Response(answer)).is_err() {
        return Ok(());
    }
    tracing::info!(
        client = ?params.client_info.as_ref().map(|c| &c.name),
        ?encoding,
        "initialized"
    );
    let mut backend = backend;
    if let Some(client) = params.client_info.as_ref() {
        backend.client_name(&client.name);
    }
    let base_config = host.config().clone();
    let (task_tx, task_rx) = crossbeam_channel::unbounded();
    let (analyses, analyzed_rx) = crate::analysis_pool::Analyses::start();
    let mut session = Session {
        sender: connection.sender.clone(),
        encoding,
        root: handlers::initialize::root(&params),
        capabilities: params.capabilities,
        documents: HashMap::new(),
        base_config,
        host,
        analyses,
        requests: lsp_server::ReqQueue::default(),
        backend,
        outbox: Outbox::new(task_tx),
        shutdown_requested: false,
        progress_tokens: 0,
    };
    crate::settings::apply(
        &mut session,
        params
            .initialization_options
            .as_ref()
            .and_then(crate::settings::client_config),
    );
    loop {
        let event = next_event(&session, &connection.receiver, &task_rx, &analyzed_rx);
        let _span = tracing::debug_span!("event", kind = event_kind(&event)).entered();
        match event {
            Event::Lsp(Message::Request(request)) => handlers::on_request(&mut session, request),
            Event::Lsp(Message::Notification(notification)) => {
                if notification.method == "exit" {
                    break;
                }
                handlers::on_notification(&mut session, notification);
            }
            Event::Lsp(Message::Response(response)) => {
                handlers::on_response(&mut session, response)
            }
            Event::Task(task) => tasks::on_task(&mut session, task),
            Event::Deadline => {
                let now = Instant::now();
                tasks::expire_buffer_edits(&mut session, now);
                crate::analysis_worker::diagnostics_due(&mut session, now);
            }
            Event::Analyzed(finished) => crate::analysis_worker::finished(&mut session, finished),
            Event::Disconnected => {
                tracing::info!("the client went away without `exit`");
                break;
            }
        }
    }
    session.analyses.cancel_all();
    // The engine takes over the documents still open (their files are written on disk now).
    let open: Vec<String> = session.documents.keys().cloned().collect();
    for uri in open {
        if let Some(mut doc) = session.documents.remove(&uri)
            && let Some(reply) = doc.buffer_edit.as_mut().and_then(|e| e.reply.take())
        {
            reply.send(crate::backend::BufferAnswer::Closed);
        }
        session.backend.closed(&uri);
    }
    // Tasks still queued (reads, edits) are answered: the session is gone.
    while let Ok(task) = task_rx.try_recv() {
        match task {
            Task::ReadBuffer { reply, .. } => reply.send(None),
            Task::ReplaceBuffer { reply, .. } => reply.send(crate::backend::BufferAnswer::Closed),
            _ => {}
        }
    }
    Ok(())
}

fn next_event(
    session: &Session,
    lsp: &Receiver<Message>,
    tasks: &Receiver<Task>,
    analyzed: &Receiver<crate::analysis_pool::Finished>,
) -> Event {
    let deadline = session
        .documents
        .values()
        .filter_map(|d| d.diagnostics_at)
        .min();
    let echo_deadline = session
        .documents
        .values()
        .filter_map(|d| d.buffer_edit.as_ref()?.echo_deadline)
        .min();
    // A due deadline waits for the client's messages already queued: a burst of changes (a
    // paste sent as many edits, keys typed faster than an analysis) is analysed once, after
    // its last change, without waiting a fixed time after every keystroke; and a change that
    // shows an engine edit landing counts even when it arrives with the deadline.
    let deadline = deadline.into_iter().chain(echo_deadline).min();
    if deadline.is_some_and(|at| at <= Instant::now())
        && let Ok(message) = lsp.try_recv()
    {
        return Event::Lsp(message);
    }
    let timer = match deadline {
        Some(at) => crossbeam_channel::at(at),
        None => crossbeam_channel::never(),
    };
    select! {
        recv(lsp) -> message => match message {
            Ok(message) => Event::Lsp(message),
            Err(_) => Event::Disconnected,
        },
        recv(tasks) -> task => match task {
            Ok(task) => Event::Task(task),
            // The session holds a sender itself: this cannot happen.
            Err(_) => Event::Disconnected,
        },
        recv(timer) -> _ => Event::Deadline,
        recv(analyzed) -> finished => match finished {
            Ok(finished) => Event::Analyzed(finished),
            // The session holds the worker's input: it cannot end first.
            Err(_) => Event::Disconnected,
        },
    }
}

fn event_kind(event: &Event) -> &'static str {
    match event {
        Event::Lsp(Message::Request(_)) => "request",
        Event::Lsp(Message::Notification(_)) => "notification",
        Event::Lsp(Message::Response(_)) => "response",
        Event::Task(_) => "task",
        Event::Deadline => "deadline",
        Event::Analyzed(_) => "analyzed",
        Event::Disconnected => "disconnected",
    }
}
