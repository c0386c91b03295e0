//! Checkpoints (issue 35): the first one, one that finds nothing changed and one after 10 files
//! changed (each with the monitor of the project's folders and with a scan of the whole tree),
//! a rewind of 10 files, and the space a checkpoint takes. Run by hand (docs/benchmarks.md,
//! "Checkpoints"):
//!
//! ```sh
//! cargo bench -p flemma-tools --bench checkpoints                       # 50,000 generated files
//! FLEMMA_BENCH_FILES=5000 cargo bench -p flemma-tools --bench checkpoints
//! FLEMMA_BENCH_TREE=/path/to/repo cargo bench -p flemma-tools --bench checkpoints  # a copy of it
//! ```
//!
//! The generated tree is FILES files of 1 KiB of random hex in folders of 100; a real tree is
//! copied into a temporary folder first (without its `.git` and `target/`), so that changing 10
//! of its files touches nothing of yours.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use flemma_tools::checkpoints::{Checkpoints, Phase, directory_size};

/// The project to record: generated, or a copy of `FLEMMA_BENCH_TREE`.
fn project(root: &Path) -> (PathBuf, Vec<PathBuf>) {
    let project = root.join("project");
    if let Ok(tree) = std::env::var("FLEMMA_BENCH_TREE") {
        copy_tree(Path::new(&tree), &project);
    } else {
        let files: usize = std::env::var("FLEMMA_BENCH_FILES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(50_000);
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for n in 0..files {
            let folder = project.join(format!("d{}/s{}", n / 5000, n / 100));
            if n % 100 == 0 {
                std::fs::create_dir_all(&folder).expect("mkdir");
            }
            let mut text = String::with_capacity(1024);
            while text.len() < 1024 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(&format!("{seed:016x}"));
            }
            std::fs::write(folder.join(format!("f{n}.txt")), text).expect("write");
        }
    }
    let mut files = Vec::new();
    let mut stack = vec![project.clone()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("read_dir").flatten() {
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && files.len() < 10_000 && recorded(&entry.path()) {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    (project, files)
}

/// A file a checkpoint records, and changing it changes nothing else: not a chat, not in
/// flemmad's store, not an ignore file (a changed `.gitignore` sends the monitor back to a
/// whole scan).
fn recorded(path: &Path) -> bool {
    path.extension().is_none_or(|ext| ext != "chat")
        && path.file_name().is_none_or(|name| name != ".gitignore")
        && !path.components().any(|part| part.as_os_str() == ".flemma")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let name = entry.file_name();
        if name == ".git" || name == "target" || name == "node_modules" {
            continue;
        }
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name));
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name)).expect("copy");
        }
    }
}

/// Ten of `files`, changed (a line appended), a different ten each round.
fn change_ten(files: &[PathBuf], round: &mut usize) {
    for i in 0..10 {
        let file = &files[(*round * 10 + i) * 7 % files.len()];
        let mut text = std::fs::read(file).expect("read");
        text.extend_from_slice(format!("\nround {round}\n").as_bytes());
        std::fs::write(file, text).expect("write");
    }
    *round += 1;
}

fn checkpoints(c: &mut Criterion) {
    let root = tempfile::tempdir().expect("tempdir");
    let (project, files) = project(root.path());
    let shadow = root.path().join("shadow.git");
    let chat = |key: &str, monitored: bool| {
        let checkpoints = Checkpoints::new(shadow.clone(), project.clone(), key.to_owned());
        if monitored {
            checkpoints
        } else {
            checkpoints.without_monitor()
        }
    };
    let mut group = c.benchmark_group("checkpoint");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));

    let mut first = 0;
    group.bench_function("first (every file hashed into a new repository)", |b| {
        b.iter_batched(
            || {
                first += 1;
                Checkpoints::new(
                    root.path().join(format!("first-{first}.git")),
                    project.clone(),
                    "first".into(),
                )
                .without_monitor()
            },
            |fresh| {
                fresh.record(Phase::Before, "call", "bash").expect("record");
                fresh
            },
            BatchSize::PerIteration,
        )
    });
    for n in 1..=first {
        let _ = std::fs::remove_dir_all(root.path().join(format!("first-{n}.git")));
    }

    let mut round = 0;
    for monitored in [true, false] {
        let how = if monitored { "monitor" } else { "scan" };
        let recorder = chat(how, monitored);
        recorder
            .record(Phase::After, "start", "bash")
            .expect("record");
        let mut call = 0;
        group.bench_function(format!("nothing changed ({how})"), |b| {
            b.iter(|| {
                call += 1;
                recorder
                    .record(Phase::Before, &format!("c{call}"), "bash")
                    .expect("record")
            })
        });
        group.bench_function(format!("10 files changed ({how})"), |b| {
            b.iter_batched(
                || change_ten(&files, &mut round),
                |()| {
                    call += 1;
                    recorder
                        .record(Phase::After, &format!("c{call}"), "bash")
                        .expect("record")
                },
                BatchSize::PerIteration,
            )
        });
    }

    // A rewind of 10 files: each round a call changes 10 files, and is rewound.
    let rewinder = chat("rewind", true);
    rewinder
        .record(Phase::After, "start", "bash")
        .expect("record");
    let mut call = 0;
    group.bench_function("rewind of 10 files", |b| {
        b.iter_batched(
            || {
                call += 1;
                let id = format!("r{call}");
                rewinder.record(Phase::Before, &id, "bash").expect("record");
                change_ten(&files, &mut round);
                rewinder.record(Phase::After, &id, "bash").expect("record");
                id
            },
            |id| {
                let plan = rewinder.rewind(&id, false, false).expect("rewind");
                assert_eq!(plan.restored.len(), 10);
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    // Space: the shadow repository before and after 20 checkpoints of 10 changed files.
    let spender = chat("space", true);
    spender
        .record(Phase::After, "start", "bash")
        .expect("record");
    let before = directory_size(&shadow);
    for n in 0..20 {
        change_ten(&files, &mut round);
        spender
            .record(Phase::After, &format!("s{n}"), "bash")
            .expect("record");
    }
    let per = (directory_size(&shadow) - before) / 20;
    println!(
        "space: the shadow repository held {:.1} MB after the runs above, then took {per} bytes per checkpoint of 10 changed files",
        before as f64 / 1e6
    );
}

criterion_group!(benches, checkpoints);
criterion_main!(benches);
