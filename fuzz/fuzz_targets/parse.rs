//! Fuzz target: parsing never panics, printing is lossless, and an edit re-analysed
//! incrementally gives the same tree as a full parse.
#![no_main]

use flemma_syntax::{apply_edits, parse, TextEdit, TextRange};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let doc = parse(text);
    assert_eq!(doc.print(), text);
    let _ = doc.outline();
    // Split the input: the first part is the document, the rest an insertion at a boundary.
    let cut = text.len() / 2;
    let Some(cut) = (0..=cut).rev().find(|i| text.is_char_boundary(*i)) else { return };
    let (head, tail) = text.split_at(cut);
    let mut incremental = parse(head);
    let at = head.len() / 3;
    let Some(at) = (0..=at).rev().find(|i| head.is_char_boundary(*i)) else { return };
    let edit = TextEdit::replace(TextRange::new(at, at), tail);
    incremental.edit(&edit);
    let (expected, _) = apply_edits(head, &[edit]);
    assert_eq!(incremental, parse(expected));
});
