//! A change someone else made to the writer's text, fed to the engine: what the store holds
//! of the engine's own changes is recognised as such (a three-way merge base), and the rest
//! becomes one edit per separate change, mapped through the edits the engine has not written
//! yet.

use flemma_syntax::{
    Assoc, TextEdit, TextRange, diff_to_edits, map_offset, single_edit, three_way_base,
};

use crate::{Input as EngineInput, Millis};

use super::{Effect, Session, Snapshot};

impl Session {
    /// Feeds a change someone else made (`current` instead of what was stored) to the engine,
    /// in the engine's coordinates; `false` when it cannot be merged (the session failed). A
    /// writer whose text is not known yet (a file just taken over) has nothing to merge.
    pub(super) fn merge(&mut self, now: Millis, current: &Snapshot, out: &mut Vec<Effect>) -> bool {
        let Some(stored) = self.writer.stored_mut() else {
            return true;
        };
        if current.text == stored.text {
            return true;
        }
        // What the store holds of the engine's own changes is not someone else's: an edit an
        // editor applied after all (its echo came after the bounded wait, and the edit was
        // taken for dropped), or the beginning of one.
        if let Ok(agreed) = three_way_base(&stored.text, self.engine.text(), &current.text)
            && agreed != stored.text
        {
            self.unwritten = vec![diff_to_edits(&agreed, self.engine.text())];
            stored.text = agreed;
            if current.text == stored.text {
                return true;
            }
        }
        // One edit per separate change (keystrokes at several places between two reads stay
        // several small edits, never one replacement spanning the text between them).
        let theirs = diff_to_edits(&stored.text, &current.text);
        let edits: Vec<TextEdit> = theirs
            .into_iter()
            .map(|edit| {
                let mut start = edit.range.start;
                let mut end = edit.range.end;
                for batch in &self.unwritten {
                    // Text inserted where the engine also inserted goes after the engine's text.
                    start = map_offset(start, batch, Assoc::After);
                    end = map_offset(end, batch, Assoc::Before);
                }
                TextEdit {
                    range: TextRange::new(start, end.max(start)),
                    new_text: edit.new_text,
                }
            })
            .collect();
        let refusals = self.refusals;
        let streaming = self.engine.request().is_some();
        self.feed(now, EngineInput::TextChanged { edits }, out);
        if streaming && self.engine.request().is_none() && self.refusals == refusals {
            // The change deleted the block being written (the engine cancelled the request):
            // the reply text not yet written went with it, not to wherever its anchor fell.
            let orphan = single_edit(self.engine.text(), &current.text);
            if !orphan.range.is_empty() || !orphan.new_text.is_empty() {
                self.feed(
                    now,
                    EngineInput::TextChanged {
                        edits: vec![orphan],
                    },
                    out,
                );
            }
        }
        if self.refusals > refusals {
            self.fail(
                "the document was changed by someone else in a way flemmad cannot merge with what it was writing; stopped without writing, so that change is kept. Look at it and send again".into(),
                out,
            );
            return false;
        }
        if let Some(stored) = self.writer.stored_mut() {
            stored.text = current.text.clone();
            self.unwritten = vec![diff_to_edits(&stored.text, self.engine.text())];
        }
        true
    }
}
