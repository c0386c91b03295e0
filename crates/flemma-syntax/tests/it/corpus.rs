//! The fixture corpus (`tests/fixtures/chat/*.chat` at the workspace root): every file round
//! trips, re-analyses incrementally to the same tree, and matches its outline snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use flemma_syntax::{Document, parse};

fn fixtures() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/chat");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "chat"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("read fixture"))
        })
        .collect();
    out.sort();
    assert!(out.len() >= 10, "fixture corpus is missing");
    out
}

#[test]
fn every_fixture_round_trips() {
    for (name, text) in fixtures() {
        assert_eq!(parse(text.as_str()).print(), text, "{name}");
    }
}

#[test]
fn every_fixture_matches_its_outline_snapshot() {
    for (name, text) in fixtures() {
        insta::assert_snapshot!(name.as_str(), parse(text.as_str()).outline());
    }
}

#[test]
fn appending_line_by_line_gives_the_same_tree() {
    for (name, text) in fixtures() {
        let mut doc = Document::parse("");
        for piece in text.split_inclusive('\n') {
            doc.append(piece);
        }
        assert_eq!(doc, parse(text.as_str()), "{name}");
    }
}

#[test]
fn appending_byte_by_byte_gives_the_same_tree() {
    for (name, text) in fixtures() {
        let mut doc = Document::parse("");
        let mut start = 0;
        for (i, _) in text.char_indices().skip(1) {
            doc.append(&text[start..i]);
            start = i;
        }
        doc.append(&text[start..]);
        assert_eq!(doc, parse(text.as_str()), "{name}");
    }
}
