//! A simulated world around one document session: the file on disk (and another program that
//! writes it), up to three editors, each an LSP client of a known behaviour (a profile) with
//! the language server's mirror of its buffer in front of it, and the reply streaming in.
//! The session under test is the real one; the mirror's verdict on an engine edit is the real
//! `flemma_syntax::RemoteEdit` (as `flemma-lsp` uses it). Everything else is simulated as the
//! real parts behave (`/work/shared/reference/editors.md`).
//!
//! The property test (`session_properties.rs`) drives it with random interleavings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use flemma_engine::session::{
    Effect, Input, ReadOutcome, ReplaceOutcome, Session, SessionConfig, Snapshot, StoreId,
    StoreKind,
};
use flemma_engine::{
    EngineConfig, Input as EngineInput, Millis, RequestId, StopReason, StreamOutcome,
};
use flemma_syntax::{EditFate, RemoteEdit, TextEdit, apply_edits, single_edit};

use crate::common::{FakePolicy, text};

pub const FILE: StoreId = 0;

/// The first character of the reply's pieces (each piece a character of its own).
pub const REPLY_KEYS: u32 = 0x4E00;

/// How an editor behaves as an LSP client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Refuses an edit for a stale version (`applied: false`); reports its change before
    /// answering `applied: true`.
    Helix,
    /// Refuses a stale version (`applied: false`, no reason); answers before its change.
    VsCode,
    /// Neovim 0.7–0.11: a stale edit is dropped, "… newer than edits." printed, and still
    /// answered `applied: true`; changes are sent debounced (several keystrokes, or an applied
    /// edit and keystrokes, in one notification); an edit at the very end of the buffer comes
    /// back with one more line break (the buffer keeps its last one).
    Neovim,
    /// Emacs eglot: answers a version mismatch with an error.
    Eglot,
    /// Never answers `workspace/applyEdit` (the runner's timeout says it is gone).
    NeverAnswers,
}

/// What an editor's client sends to the server.
#[derive(Debug, Clone)]
enum ToServer {
    Changes {
        version: i32,
        changes: Vec<TextEdit>,
    },
    /// `Some(applied)`, or `None` for an error answer.
    Answer(Option<bool>),
}

/// One editor: its client's buffer, the messages in flight, and the server's mirror.
#[derive(Debug)]
pub struct Editor {
    pub id: StoreId,
    pub profile: Profile,
    pub open: bool,
    pub client: String,
    client_version: i32,
    /// Neovim's changes not yet sent (debounced).
    unsent: Vec<TextEdit>,
    to_server: VecDeque<ToServer>,
    /// `workspace/applyEdit` requests in flight to the client: (version, edit).
    to_client: VecDeque<(i32, TextEdit)>,
    pub mirror: String,
    mirror_version: i32,
    /// The engine edit in flight, as the server tracks it.
    pending: Option<RemoteEdit>,
    /// What the editor and the engine last agreed on (`SharedText`).
    base: String,
    /// Tokens its user typed.
    pub typed: Vec<String>,
    /// A switch to it was refused (its change conflicted): its unmerged typing may stay out.
    pub conflicted: bool,
    /// Neovim's dropped edits (the printed label).
    pub dropped: usize,
}

/// The world. See the module documentation.
pub struct World {
    pub session: Session,
    pub now: Millis,
    wake: Option<Millis>,
    pub disk: String,
    pub editors: Vec<Editor>,
    /// The opening of each slot's editor now (a document closed and opened again is another
    /// buffer, another store).
    slots: [Option<StoreId>; 3],
    next_store: StoreId,
    /// Editors by recent activity, the most recent last (the host's writer rule).
    active: Vec<StoreId>,
    /// The store work the session asked for, not answered yet.
    ops: VecDeque<Effect>,
    /// The session's replacement of an editor's buffer waiting for the server's verdict.
    replacing: Option<StoreId>,
    pub chunks: Vec<String>,
    next_chunk: usize,
    pub stream_ended: bool,
    pub foreign: Vec<String>,
    next_token: usize,
    /// Tokens in a text the session read from its writer (it must keep them).
    pub seen: BTreeSet<String>,
    pub failed: Option<String>,
    pub done: Option<StopReason>,
}

impl World {
    pub fn new(initial: &str, chunks: Vec<String>) -> Self {
        let config = SessionConfig {
            file: FILE,
            coalesce: 100,
            poll: 250,
            watched_poll: 2000,
            watched: true,
        };
        let mut world = Self {
            session: Session::new(
                flemma_engine::Engine::new(
                    EngineConfig::default(),
                    initial.to_owned(),
                    Arc::new(FakePolicy),
                ),
                FILE,
                &StoreKind::File,
                Snapshot::file(initial),
                config,
            ),
            now: 0,
            wake: None,
            disk: initial.to_owned(),
            editors: Vec::new(),
            slots: [None; 3],
            next_store: 1,
            active: Vec::new(),
            ops: VecDeque::new(),
            replacing: None,
            chunks,
            next_chunk: 0,
            stream_ended: false,
            foreign: Vec::new(),
            next_token: 0,
            seen: BTreeSet::new(),
            failed: None,
            done: None,
        };
        world.feed(Input::Engine(EngineInput::Advance));
        world
    }

    fn feed(&mut self, input: Input) {
        if self.failed.is_some() {
            return;
        }
        if !matches!(input, Input::Tick) {
            self.done = None;
        }
        let trace = std::env::var_os("SESSION_TRACE").is_some();
        if trace && !matches!(input, Input::Tick) {
            eprintln!("{:>6} IN  {}", self.now, short(&format!("{input:?}")));
        }
        let effects = self.session.handle(self.now, input);
        if trace {
            for effect in &effects {
                eprintln!("{:>6} OUT {}", self.now, short(&format!("{effect:?}")));
            }
        }
        for effect in effects {
            match effect {
                Effect::Read { .. } | Effect::Replace { .. } => self.ops.push_back(effect),
                Effect::Left { store, text } => {
                    if let Some(editor) = self.editor_mut(store) {
                        editor.base = text;
                    }
                }
                Effect::WakeAt(at) => self.wake = Some(at),
                Effect::Done(reason) => self.done = Some(reason),
                Effect::Failed(message) => self.failed = Some(message),
                Effect::Conflict { incoming, .. } => {
                    if let Some(editor) = self.editor_mut(incoming) {
                        editor.conflicted = true;
                    }
                }
                Effect::StartRequest { .. }
                | Effect::CancelRequest { .. }
                | Effect::StartTool { .. }
                | Effect::KillTool { .. }
                | Effect::SetTimer { .. }
                | Effect::CancelTimer { .. }
                | Effect::Emit(_)
                | Effect::Notice(_)
                | Effect::Saw { .. }
                | Effect::Synced => {}
            }
        }
    }

    /// The store of slot `slot`'s editor, when it has the document open.
    fn open_id(&self, slot: usize) -> Option<StoreId> {
        let id = self.slots[slot]?;
        self.editors
            .iter()
            .any(|e| e.id == id && e.open)
            .then_some(id)
    }

    fn editor_mut(&mut self, id: StoreId) -> Option<&mut Editor> {
        self.editors.iter_mut().find(|e| e.id == id)
    }

    /// A keystroke nobody else types: one character of its own (users' from U+4F00, the
    /// other program's from U+5F00), so that finding it in the text says where it went, with
    /// no two texts a diff could align in another way.
    fn token(&mut self, base: u32) -> String {
        self.next_token += 1;
        char::from_u32(base + self.next_token as u32)
            .map(String::from)
            .unwrap_or_default()
    }

    // ----- the reply -----

    pub fn stream_chunk(&mut self) {
        if self.next_chunk < self.chunks.len() {
            let chunk = self.chunks[self.next_chunk].clone();
            self.next_chunk += 1;
            self.feed(Input::Engine(EngineInput::Stream {
                request: RequestId(1),
                event: text(&chunk),
            }));
        } else if !self.stream_ended {
            self.stream_ended = true;
            self.feed(Input::Engine(EngineInput::StreamEnded {
                request: RequestId(1),
                outcome: StreamOutcome::Finished,
            }));
        }
    }

    // ----- time -----

    pub fn pass(&mut self, ms: Millis) {
        self.now += ms;
        if self.wake.is_some_and(|at| at <= self.now) {
            self.wake = None;
            self.feed(Input::Tick);
        }
    }

    // ----- the host: who writes -----

    fn writer_now(&self) -> (StoreId, StoreKind) {
        match self.active.last() {
            Some(&id) => {
                let editor = self.editors.iter().find(|e| e.id == id).unwrap();
                (
                    id,
                    StoreKind::Editor {
                        base: Arc::from(editor.base.as_str()),
                    },
                )
            }
            None => (FILE, StoreKind::File),
        }
    }

    fn tell_writer(&mut self) {
        let (store, kind) = self.writer_now();
        self.feed(Input::Writer { store, kind });
    }

    /// Opens (or reopens) editor `slot` with `profile`: it reads the file, becomes the writer.
    pub fn open(&mut self, slot: usize, profile: Profile) {
        if self.open_id(slot).is_some() {
            return self.touch(slot);
        }
        let id = self.next_store;
        self.next_store += 1;
        self.slots[slot] = Some(id);
        // Neovim's first version is 0, and it never checks an edit for version 0; start it at
        // 1 (as after the user's first keystroke) so the model stays within what it checks.
        let version = if profile == Profile::Neovim { 1 } else { 0 };
        self.editors.push(Editor {
            id,
            profile,
            open: true,
            client: self.disk.clone(),
            client_version: version,
            unsent: Vec::new(),
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            mirror: self.disk.clone(),
            mirror_version: version,
            pending: None,
            base: self.disk.clone(),
            typed: Vec::new(),
            conflicted: false,
            dropped: 0,
        });
        self.active.retain(|&a| a != id);
        self.active.push(id);
        self.tell_writer();
    }

    /// The user ran a command in editor `slot`: it becomes the writer.
    pub fn touch(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        self.active.retain(|&a| a != id);
        self.active.push(id);
        self.tell_writer();
    }

    /// Editor `slot` closes the document (what it sent so far reaches the server first).
    pub fn close(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        let Some(index) = self.editors.iter().position(|e| e.id == id && e.open) else {
            return;
        };
        self.flush(slot);
        while !self.editors[index].to_server.is_empty() {
            self.deliver_to_server(slot);
        }
        self.gone(index);
    }

    /// Editor `slot` disconnects: what is in flight is lost.
    pub fn disconnect(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        if let Some(index) = self.editors.iter().position(|e| e.id == id && e.open) {
            self.gone(index);
        }
    }

    fn gone(&mut self, index: usize) {
        let editor = &mut self.editors[index];
        editor.open = false;
        editor.to_server.clear();
        editor.to_client.clear();
        let had_pending = editor.pending.take().is_some();
        let id = editor.id;
        if had_pending && self.replacing == Some(id) {
            self.replacing = None;
            self.feed(Input::Replaced {
                store: id,
                outcome: ReplaceOutcome::Gone("closed".into()),
            });
        }
        self.active.retain(|&a| a != id);
        self.tell_writer();
    }

    // ----- typing -----

    /// The user of editor `slot` types a token at the start of a line (`pick` chooses which).
    pub fn type_in(&mut self, slot: usize, pick: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        let Some(index) = self.editors.iter().position(|e| e.id == id && e.open) else {
            return;
        };
        let Some(at) = typing_spot(&self.editors[index].client, pick) else {
            return;
        };
        let token = self.token(USER_KEYS);
        let editor = &mut self.editors[index];
        let change = TextEdit::insert(at, token.clone());
        editor.client = apply_edits(&editor.client, std::slice::from_ref(&change)).unwrap();
        editor.client_version += 1;
        editor.typed.push(token);
        if editor.profile == Profile::Neovim {
            editor.unsent.push(change);
        } else {
            editor.to_server.push_back(ToServer::Changes {
                version: editor.client_version,
                changes: vec![change],
            });
        }
    }

    /// Another program writes the file (a formatter, `git checkout` of a newer version): a
    /// token at the start of a line. Only while no editor has the document open: the file is
    /// then the document (while an editor writes it, the file is an older copy that the
    /// engine's text replaces when it becomes the writer again).
    pub fn foreign_write(&mut self, pick: usize) {
        if !self.active.is_empty() {
            return;
        }
        let Some(at) = typing_spot(&self.disk, pick) else {
            return;
        };
        let token = self.token(FOREIGN_KEYS);
        self.disk.insert_str(at, &token);
        self.foreign.push(token);
        if self.session.writer() == FILE {
            self.feed(Input::StoreChanged);
        }
    }

    /// Neovim's debounce ends: its changes go out in one notification.
    pub fn flush(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        if let Some(editor) = self.editors.iter_mut().find(|e| e.id == id && e.open)
            && !editor.unsent.is_empty()
        {
            let changes = std::mem::take(&mut editor.unsent);
            editor.to_server.push_back(ToServer::Changes {
                version: editor.client_version,
                changes,
            });
        }
    }

    // ----- the client: `workspace/applyEdit` -----

    /// The client of editor `slot` handles the next `workspace/applyEdit`.
    pub fn deliver_to_client(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        let Some(editor) = self.editors.iter_mut().find(|e| e.id == id && e.open) else {
            return;
        };
        let Some((version, edit)) = editor.to_client.pop_front() else {
            return;
        };
        let stale = version != editor.client_version;
        match (editor.profile, stale) {
            (Profile::NeverAnswers, _) => {}
            (Profile::Helix | Profile::VsCode, true) => {
                editor.to_server.push_back(ToServer::Answer(Some(false)));
            }
            (Profile::Eglot, true) => editor.to_server.push_back(ToServer::Answer(None)),
            (Profile::Neovim, true) => {
                editor.dropped += 1;
                editor.to_server.push_back(ToServer::Answer(Some(true)));
            }
            (profile, false) => {
                let before = editor.client.clone();
                let mut after = apply_edits(&before, std::slice::from_ref(&edit)).unwrap();
                if profile == Profile::Neovim
                    && edit.range.start == before.len()
                    && before.ends_with('\n')
                {
                    after.push('\n');
                }
                editor.client = after;
                editor.client_version += 1;
                let change = if profile == Profile::Neovim {
                    single_edit(&before, &editor.client)
                } else {
                    edit
                };
                match profile {
                    Profile::Helix => {
                        editor.to_server.push_back(ToServer::Changes {
                            version: editor.client_version,
                            changes: vec![change],
                        });
                        editor.to_server.push_back(ToServer::Answer(Some(true)));
                    }
                    Profile::Neovim => {
                        editor.unsent.push(change);
                        editor.to_server.push_back(ToServer::Answer(Some(true)));
                    }
                    _ => {
                        editor.to_server.push_back(ToServer::Answer(Some(true)));
                        editor.to_server.push_back(ToServer::Changes {
                            version: editor.client_version,
                            changes: vec![change],
                        });
                    }
                }
            }
        }
    }

    // ----- the server: the mirror and the engine edit in flight -----

    /// The server handles the next message from editor `slot`'s client.
    pub fn deliver_to_server(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        let Some(editor) = self.editors.iter_mut().find(|e| e.id == id && e.open) else {
            return;
        };
        let Some(message) = editor.to_server.pop_front() else {
            return;
        };
        match message {
            ToServer::Changes { version, changes } => {
                for change in changes {
                    if let Some(check) = editor.pending.as_mut() {
                        check.changed(&editor.mirror, &change);
                    }
                    editor.mirror =
                        apply_edits(&editor.mirror, std::slice::from_ref(&change)).unwrap();
                }
                editor.mirror_version = version;
                if let Some(check) = editor.pending.as_mut() {
                    check.batch_ended();
                }
            }
            ToServer::Answer(applied) => {
                if let Some(check) = editor.pending.as_mut() {
                    check.answered(applied.unwrap_or(false));
                }
            }
        }
        self.settle(id);
    }

    /// The server's bounded wait for the change that shows an `applied: true` edit ran out.
    /// The wait (seconds) is longer than any client takes to report a change it made (Neovim
    /// debounces by 150 ms): it runs out only when nothing more is on its way.
    pub fn expire(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        if let Some(editor) = self.editors.iter_mut().find(|e| e.id == id && e.open)
            && editor.unsent.is_empty()
            && !editor
                .to_server
                .iter()
                .any(|m| matches!(m, ToServer::Changes { .. }))
            && let Some(check) = editor.pending.as_mut()
            && check.awaits_echo()
        {
            check.expire();
        }
        self.settle(id);
    }

    /// The runner's timeout for an editor that never answers: it is gone for the session, and
    /// (as its user would) it is closed.
    pub fn time_out(&mut self, slot: usize) {
        let Some(id) = self.open_id(slot) else {
            return;
        };
        if let Some(index) = self.editors.iter().position(|e| {
            e.id == id && e.open && e.profile == Profile::NeverAnswers && e.pending.is_some()
        }) {
            self.gone(index);
        }
    }

    fn settle(&mut self, id: StoreId) {
        let Some(editor) = self.editors.iter_mut().find(|e| e.id == id) else {
            return;
        };
        let verdict = match editor.pending.as_ref() {
            Some(check) => check.fate(),
            None => return,
        };
        let outcome = match verdict {
            EditFate::Waiting => return,
            EditFate::Landed => ReplaceOutcome::Written,
            EditFate::Refused | EditFate::Dropped => ReplaceOutcome::Moved,
        };
        editor.pending = None;
        if self.replacing == Some(id) {
            self.replacing = None;
            self.feed(Input::Replaced { store: id, outcome });
        }
    }

    // ----- the stores: the runner performing the session's reads and replacements -----

    /// Answers the store work the session asked for (a replacement of an editor's buffer is
    /// sent to its client and answered when the server knows what became of it).
    pub fn answer_store(&mut self) {
        let Some(op) = self.ops.pop_front() else {
            return;
        };
        match op {
            Effect::Read { store } if store == FILE => {
                let text = self.disk.clone();
                self.see(&text);
                self.feed(Input::Read {
                    store,
                    outcome: ReadOutcome::Text(Snapshot::file(text)),
                });
            }
            Effect::Read { store } => {
                let snapshot = self
                    .editors
                    .iter()
                    .find(|e| e.id == store && e.open)
                    .map(|e| Snapshot {
                        text: e.mirror.clone(),
                        version: Some(e.mirror_version),
                    });
                let outcome = match snapshot {
                    Some(snapshot) => {
                        if self.session.writer() == store {
                            self.see(&snapshot.text);
                        }
                        ReadOutcome::Text(snapshot)
                    }
                    None => ReadOutcome::Gone("closed".into()),
                };
                self.feed(Input::Read { store, outcome });
            }
            Effect::Replace {
                store,
                current,
                next,
            } if store == FILE => {
                let outcome = if self.disk == current.text {
                    self.disk = next;
                    ReplaceOutcome::Written
                } else {
                    ReplaceOutcome::Moved
                };
                self.feed(Input::Replaced { store, outcome });
            }
            Effect::Replace {
                store,
                current,
                next,
            } => {
                let Some(editor) = self.editors.iter_mut().find(|e| e.id == store && e.open) else {
                    return self.feed(Input::Replaced {
                        store,
                        outcome: ReplaceOutcome::Gone("closed".into()),
                    });
                };
                if Some(editor.mirror_version) != current.version || editor.pending.is_some() {
                    return self.feed(Input::Replaced {
                        store,
                        outcome: ReplaceOutcome::Moved,
                    });
                }
                let edit = single_edit(&current.text, &next);
                editor
                    .to_client
                    .push_back((editor.mirror_version, edit.clone()));
                editor.pending = Some(RemoteEdit::new(edit));
                self.replacing = Some(store);
            }
            _ => {}
        }
    }

    fn see(&mut self, text: &str) {
        for token in tokens_in(text) {
            self.seen.insert(token);
        }
    }

    /// Whether anything is still in flight or due.
    pub fn busy(&self) -> bool {
        !self.ops.is_empty()
            || self.replacing.is_some()
            || self.editors.iter().any(|e| {
                e.open
                    && (!e.to_server.is_empty()
                        || !e.to_client.is_empty()
                        || !e.unsent.is_empty()
                        || e.pending.is_some())
            })
            || self.done.is_none()
    }

    /// Runs everything in flight to its end: the reply, messages, store work, waits.
    pub fn settle_all(&mut self) {
        for _ in 0..20_000 {
            if self.failed.is_some() {
                return;
            }
            if !self.stream_ended {
                self.stream_chunk();
                continue;
            }
            let mut moved = false;
            for slot in 0..self.slots.len() {
                let Some(id) = self.open_id(slot) else {
                    continue;
                };
                let index = self.editors.iter().position(|e| e.id == id).unwrap();
                let editor = &self.editors[index];
                if !editor.to_client.is_empty() {
                    if editor.profile == Profile::NeverAnswers {
                        self.time_out(slot);
                    } else {
                        self.deliver_to_client(slot);
                    }
                    moved = true;
                } else if !editor.unsent.is_empty() {
                    self.flush(slot);
                    moved = true;
                } else if !editor.to_server.is_empty() {
                    self.deliver_to_server(slot);
                    moved = true;
                } else if editor.pending.as_ref().is_some_and(RemoteEdit::awaits_echo) {
                    self.expire(slot);
                    moved = true;
                } else if editor.pending.is_some() && editor.profile == Profile::NeverAnswers {
                    self.time_out(slot);
                    moved = true;
                }
            }
            if moved {
                continue;
            }
            if !self.ops.is_empty() {
                self.answer_store();
                continue;
            }
            if !self.busy() {
                return;
            }
            self.pass(50);
        }
        panic!("the world did not settle: {:?}", self.session);
    }

    /// At the end: every open editor becomes the writer once (what its user typed while
    /// another wrote is merged then), the most recent last.
    pub fn finish(&mut self) {
        self.settle_all();
        let open: Vec<usize> = self
            .active
            .iter()
            .filter_map(|&id| self.slots.iter().position(|&s| s == Some(id)))
            .collect();
        for slot in open {
            self.touch(slot);
            self.settle_all();
        }
    }
}

/// A place a user may type at: any character boundary not on a role line, a fence or a tool
/// block line (a key typed into `@Assistant:` makes it another line, which is not the block
/// being written any more), and never inside the frontmatter (the chats here have none).
pub fn typing_spot(text: &str, pick: usize) -> Option<usize> {
    let mut spots = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let first = line.chars().next();
        if !matches!(first, Some('@' | '`' | '*' | '<')) {
            spots.extend(line.char_indices().map(|(i, _)| at + i));
            if !line.ends_with('\n') {
                spots.push(at + line.len());
            }
        }
        at += line.len();
    }
    (!spots.is_empty()).then(|| spots[pick % spots.len()])
}

/// The first character of users' keystrokes, and of the other program's.
const USER_KEYS: u32 = 0x4F00;
const FOREIGN_KEYS: u32 = 0x5F00;

/// The keystrokes (users' and the other program's) in `text`.
pub fn tokens_in(text: &str) -> Vec<String> {
    text.chars()
        .filter(|&c| (USER_KEYS..USER_KEYS + 0x2000).contains(&u32::from(c)))
        .map(String::from)
        .collect()
}

/// A debug line cut to a readable length (`SESSION_TRACE=1` prints every input and effect).
fn short(s: &str) -> String {
    if s.chars().count() > 400 {
        format!("{}…", s.chars().take(400).collect::<String>())
    } else {
        s.to_owned()
    }
}
