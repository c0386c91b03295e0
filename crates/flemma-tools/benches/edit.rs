//! `edit` figures: a 10 MB file with 100 exact edits, and the relaxed passes (indent match and
//! the closest-region search of a miss) on a 100,000-line file. Criterion reports the time of one
//! whole call; divide by the number of edits for the time per edit.

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_tools::builtin::edit::{Replacement, plan};

/// A tab-indented Go-like file of `blocks` three-line blocks.
fn go_file(blocks: usize) -> String {
    let mut s = String::new();
    for i in 0..blocks {
        s.push_str(&format!(
            "func item{i}() {{\n\tvalue{i} += {i} // some padding text to make the line longer\n}}\n"
        ));
    }
    s
}

fn bench(c: &mut Criterion) {
    // ~10 MB: 120,000 blocks of ~85 bytes.
    let big = go_file(120_000);
    assert!(big.len() > 10_000_000);
    let hundred: Vec<Replacement> = (0..100)
        .map(|k| {
            let i = k * 1_000 + 7;
            Replacement {
                old: format!("\tvalue{i} += {i} //"),
                new: format!("\tvalue{i} -= {i} //"),
            }
        })
        .collect();
    c.bench_function("edit/10MB file, 100 exact edits (one call)", |b| {
        b.iter(|| plan("big.go", &big, &hundred).map(|p| p.new_text.len()))
    });

    let lines_100k = go_file(33_334);
    let i = 30_001;
    let indent = vec![Replacement {
        // The model typed four spaces where the file has a tab: pass 3.
        old: format!(
            "func item{i}() {{\n    value{i} += {i} // some padding text to make the line longer\n}}"
        ),
        new: format!("func item{i}() {{\n    value{i} = 0\n}}"),
    }];
    c.bench_function("edit/100k lines, one indent-pass edit", |b| {
        b.iter(|| plan("f.go", &lines_100k, &indent).map(|p| p.new_text.len()))
    });
    let miss = vec![Replacement {
        old: format!(
            "func item{i}() {{\n    value{i} += {} // some padding\n}}",
            i + 1
        ),
        new: String::new(),
    }];
    c.bench_function("edit/100k lines, one miss with closest region", |b| {
        b.iter(|| plan("f.go", &lines_100k, &miss).err().map(|e| e.len()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
