//! The docs, run: in `README.md`, `docs/*.md` and `docs/editors/*.md`, every fenced `sh` block
//! and every transcript (a block whose first line starts with `$ `) marked `<!-- tested -->`
//! runs in order, one page per temporary directory holding a copy of `examples/`, with the
//! built `flemmad` and `flemma-mock-provider` on `PATH` (and in `target/debug/`) and nothing of
//! the developer's environment (no key, no configuration). A block fails the test when it stops
//! with another status than its marker says, or when the key lines of its output (a transcript's
//! lines that are not commands, or the `<!-- output -->` block after it) are not in what it
//! printed. Every shell block and transcript is marked, tested or `not tested: why`. The
//! conventions are spelt out at the end of docs/quickstart.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one block may run.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    Tested { exit: i32 },
    NotTested,
    Output,
}

/// A tested block of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    /// 1-based line of its opening fence.
    line: usize,
    exit: i32,
    script: String,
    /// The key lines it must print, in order (`…` matches any text within a line).
    expected: Vec<String>,
}

fn marker(line: &str) -> Option<Result<Marker, String>> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if inner == "tested" {
        return Some(Ok(Marker::Tested { exit: 0 }));
    }
    if let Some(status) = inner.strip_prefix("tested: exit ") {
        return Some(
            status
                .trim()
                .parse()
                .map(|exit| Marker::Tested { exit })
                .map_err(|_| format!("`{inner}`: the exit status is not a number")),
        );
    }
    if let Some(why) = inner.strip_prefix("not tested:") {
        return Some(if why.trim().is_empty() {
            Err("`not tested:` needs a reason".to_owned())
        } else {
            Ok(Marker::NotTested)
        });
    }
    if inner == "output" {
        return Some(Ok(Marker::Output));
    }
    None
}

/// An opening fence: its indentation, its backtick count and its info string.
fn fence_open(line: &str) -> Option<(usize, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let ticks = rest.len() - rest.trim_start_matches('`').len();
    (ticks >= 3).then(|| (indent, ticks, rest[ticks..].trim()))
}

fn is_shell(info: &str) -> bool {
    matches!(
        info.split_whitespace().next(),
        Some("sh" | "bash" | "shell" | "console")
    )
}

/// The tested blocks of `markdown`, or what is wrong with its markers (with line numbers).
fn parse(markdown: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks: Vec<Block> = Vec::new();
    let mut pending: Option<(usize, Marker)> = None;
    // Whether the fence before was a tested block (which an output block may follow).
    let mut after_tested = false;
    let mut n = 0;
    while n < lines.len() {
        let line = lines[n];
        if line.trim() == "<!-- setup" {
            let start = n + 1;
            let mut script = String::new();
            n += 1;
            loop {
                let Some(inner) = lines.get(n) else {
                    return Err(format!(
                        "line {start}: `<!-- setup` is never closed by `-->`"
                    ));
                };
                n += 1;
                if inner.trim() == "-->" {
                    break;
                }
                script.push_str(inner);
                script.push('\n');
            }
            if let Some((at, _)) = pending {
                return Err(format!(
                    "line {at}: a marker not followed directly by a fenced block"
                ));
            }
            blocks.push(Block {
                line: start,
                exit: 0,
                script,
                expected: Vec::new(),
            });
            after_tested = false;
            continue;
        }
        if let Some(found) = marker(line) {
            let found = found.map_err(|e| format!("line {}: {e}", n + 1))?;
            if let Some((at, _)) = pending {
                return Err(format!(
                    "line {at}: a marker not followed directly by a fenced block"
                ));
            }
            pending = Some((n + 1, found));
            n += 1;
            continue;
        }
        let Some((indent, ticks, info)) = fence_open(line) else {
            if let Some((at, _)) = pending {
                return Err(format!(
                    "line {at}: a marker not followed directly by a fenced block"
                ));
            }
            n += 1;
            continue;
        };
        let open_line = n + 1;
        let mut body = Vec::new();
        n += 1;
        loop {
            let Some(inner) = lines.get(n) else {
                return Err(format!("line {open_line}: the fence is never closed"));
            };
            n += 1;
            let trimmed = inner.trim();
            if trimmed.len() >= ticks && trimmed.chars().all(|c| c == '`') {
                break;
            }
            let strip = inner.len() - inner.trim_start_matches(' ').len();
            body.push(&inner[strip.min(indent)..]);
        }
        let marker = pending.take().map(|(_, m)| m);
        let transcript = body.first().is_some_and(|first| first.starts_with("$ "));
        match marker {
            Some(Marker::Tested { exit }) if transcript => {
                // The commands run one after the other whatever their status (the last one's
                // is the block's); the other lines are what they print.
                let mut script = String::from("set +e\n");
                let mut expected = Vec::new();
                for line in &body {
                    match line.strip_prefix("$ ") {
                        Some(command) => {
                            script.push_str(command);
                            script.push('\n');
                        }
                        None if line.trim().is_empty() => {}
                        None => expected.push(line.trim_end().to_owned()),
                    }
                }
                blocks.push(Block {
                    line: open_line,
                    exit,
                    script,
                    expected,
                });
            }
            Some(Marker::Tested { exit }) => {
                if !is_shell(info) {
                    return Err(format!(
                        "line {open_line}: `<!-- tested -->` on a `{info}` block (only sh blocks and `$ ` transcripts run)"
                    ));
                }
                blocks.push(Block {
                    line: open_line,
                    exit,
                    script: body.join("\n") + "\n",
                    expected: Vec::new(),
                });
                after_tested = true;
                continue;
            }
            Some(Marker::Output) => {
                if info != "text" {
                    return Err(format!(
                        "line {open_line}: `<!-- output -->` on a `{info}` block (use text)"
                    ));
                }
                match blocks.last_mut() {
                    Some(block) if after_tested => {
                        block.expected = body
                            .iter()
                            .filter(|l| !l.trim().is_empty())
                            .map(|l| l.trim_end().to_owned())
                            .collect();
                    }
                    _ => {
                        return Err(format!(
                            "line {open_line}: `<!-- output -->` does not follow a tested block"
                        ));
                    }
                }
            }
            Some(Marker::NotTested) => {}
            None if is_shell(info) || transcript => {
                return Err(format!(
                    "line {open_line}: a `{}` block without `<!-- tested -->` or `<!-- not tested: why -->` before it",
                    if transcript { "$ transcript" } else { info }
                ));
            }
            None => {}
        }
        after_tested = false;
    }
    if let Some((at, _)) = pending {
        return Err(format!(
            "line {at}: a marker not followed directly by a fenced block"
        ));
    }
    Ok(blocks)
}

/// Whether `line` matches `pattern`, where `…` stands for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The first expected line missing from `output` (in order), if any.
fn missing_line<'a>(expected: &'a [String], output: &str) -> Option<&'a str> {
    let mut lines = output.lines().map(str::trim_end);
    expected
        .iter()
        .find(|pattern| !lines.any(|line| line_matches(pattern, line)))
        .map(String::as_str)
}

/// The process groups of the blocks, stopped at the end (a block may leave a server running).
struct Groups(Vec<u32>);

impl Drop for Groups {
    fn drop(&mut self) {
        for pgid in &self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{pgid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A clean environment in `root`: the binaries in `bin`, home and XDG directories of its own.
struct Sandbox {
    _dir: tempfile::TempDir,
    clone: PathBuf,
    /// The folder pages show as `/tmp/demo` (`$DEMO` in their blocks).
    demo: PathBuf,
    env: Vec<(String, String)>,
    state: PathBuf,
    cwd: PathBuf,
    logs: PathBuf,
}

fn sandbox(examples: Option<&Path>, bins: &[(&str, PathBuf)]) -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let clone = root.join("flemmad");
    std::fs::create_dir_all(&clone).unwrap();
    if let Some(examples) = examples {
        copy_dir(examples, &clone.join("examples"));
    }
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // On PATH, and where a clone's `cargo build` puts them (the README runs `target/debug/…`).
    let built = clone.join("target/debug");
    std::fs::create_dir_all(&built).unwrap();
    for (name, target) in bins {
        std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
        std::os::unix::fs::symlink(target, built.join(name)).unwrap();
    }
    let demo = root.join("demo");
    std::fs::create_dir_all(&demo).unwrap();
    let home = root.join("home");
    for sub in [".config", ".local/state", ".local/share", ".cache", "run"] {
        std::fs::create_dir_all(home.join(sub)).unwrap();
    }
    std::fs::set_permissions(
        home.join("run"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let path = |sub: &str| home.join(sub).display().to_string();
    let env = vec![
        (
            "PATH".to_owned(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
        ),
        ("HOME".to_owned(), home.display().to_string()),
        ("XDG_CONFIG_HOME".to_owned(), path(".config")),
        ("XDG_STATE_HOME".to_owned(), path(".local/state")),
        ("XDG_DATA_HOME".to_owned(), path(".local/share")),
        ("XDG_CACHE_HOME".to_owned(), path(".cache")),
        ("XDG_RUNTIME_DIR".to_owned(), path("run")),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TERM".to_owned(), "dumb".to_owned()),
        ("DEMO".to_owned(), demo.display().to_string()),
    ];
    let state = root.join("state.sh");
    std::fs::write(&state, "").unwrap();
    let cwd = root.join("cwd");
    std::fs::write(&cwd, clone.display().to_string()).unwrap();
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    Sandbox {
        clone,
        demo,
        env,
        state,
        cwd,
        logs,
        _dir: dir,
    }
}

/// Runs the tested blocks of `markdown` (the page `page`) in `sandbox`; the first failure,
/// explained.
fn run_document(page: &str, markdown: &str, sandbox: &Sandbox) -> Result<usize, String> {
    let blocks = parse(markdown).map_err(|e| format!("{page}: {e}"))?;
    let mut groups = Groups(Vec::new());
    for (index, block) in blocks.iter().enumerate() {
        // Each block is its own `bash -e`, starting from the environment and directory the
        // block before it left.
        let script = format!(
            "__qs_state='{state}'\n__qs_cwd='{cwd}'\n. \"$__qs_state\"\ncd \"$(cat \"$__qs_cwd\")\"\n\
             trap 'export -p > \"$__qs_state\"; pwd > \"$__qs_cwd\"' EXIT\n{body}",
            state = sandbox.state.display(),
            cwd = sandbox.cwd.display(),
            body = block.script,
        );
        let script_path = sandbox.logs.join(format!("block-{index}.sh"));
        std::fs::write(&script_path, script).unwrap();
        let output_path = sandbox.logs.join(format!("block-{index}.out"));
        let output = File::create(&output_path).unwrap();
        let mut child = Command::new("bash")
            .arg("-e")
            .arg(&script_path)
            .env_clear()
            .envs(sandbox.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&sandbox.clone)
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run bash: {e}"))?;
        groups.0.push(child.id());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > BLOCK_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break std::process::ExitStatus::default();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let printed = std::fs::read_to_string(&output_path).unwrap_or_default();
        let explain = |what: String| {
            format!(
                "{page}:{line}: {what}\n--- the block:\n{script}--- what it printed:\n{printed}",
                line = block.line,
                script = block.script,
            )
        };
        if started.elapsed() > BLOCK_TIMEOUT {
            return Err(explain(format!(
                "did not finish in {}s",
                BLOCK_TIMEOUT.as_secs()
            )));
        }
        match status.code() {
            Some(code) if code == block.exit => {}
            Some(code) => {
                return Err(explain(format!(
                    "exit status {code}, expected {}",
                    block.exit
                )));
            }
            None => return Err(explain("killed by a signal".to_owned())),
        }
        let expected: Vec<String> = block
            .expected
            .iter()
            .map(|line| line.replace("/tmp/demo", &sandbox.demo.display().to_string()))
            .collect();
        if let Some(missing) = missing_line(&expected, &printed) {
            return Err(explain(format!(
                "the output lacks the line `{missing}` (or has it out of order)"
            )));
        }
    }
    Ok(blocks.len())
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The pages whose examples run: the README and every page under docs/.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned()];
    for dir in ["docs", "docs/editors"] {
        let mut found: Vec<String> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".md"))
            .map(|name| format!("{dir}/{name}"))
            .collect();
        found.sort();
        pages.extend(found);
    }
    pages
}

fn run_page(page: &str) -> Result<usize, String> {
    let flemmad = PathBuf::from(env!("CARGO_BIN_EXE_flemmad"));
    let mock = flemmad.with_file_name("flemma-mock-provider");
    assert!(
        mock.is_file(),
        "{} is not built: run `cargo build -p flemma-mock-provider` (`cargo test --workspace` builds it)",
        mock.display()
    );
    let markdown = std::fs::read_to_string(repo().join(page)).unwrap();
    let sandbox = sandbox(
        Some(&repo().join("examples")),
        &[("flemmad", flemmad), ("flemma-mock-provider", mock)],
    );
    run_document(page, &markdown, &sandbox)
}

#[test]
fn every_tested_command_of_the_quickstart_works_as_shown() {
    match run_page("docs/quickstart.md") {
        Ok(ran) => assert!(ran >= 10, "only {ran} tested blocks in docs/quickstart.md"),
        Err(failure) => panic!("{failure}"),
    }
}

/// Every other page: its shell examples are marked, and the tested ones print what they show.
#[test]
fn every_tested_example_of_the_other_pages_works_as_shown() {
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in pages() {
        if page == "docs/quickstart.md" {
            continue;
        }
        match run_page(&page) {
            Ok(count) => ran += count,
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 10, "only {ran} tested blocks outside the quickstart");
}

#[test]
fn the_readme_links_the_quickstart_on_its_first_screen() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let first_screen: String = readme.lines().take(25).collect::<Vec<_>>().join("\n");
    assert!(
        first_screen.contains("(docs/quickstart.md)"),
        "README.md's first 25 lines do not link docs/quickstart.md"
    );
}

/// A document for the harness's own tests.
fn run_snippet(markdown: &str) -> Result<usize, String> {
    run_document("docs/quickstart.md", markdown, &sandbox(None, &[]))
}

#[test]
fn the_harness_keeps_the_environment_and_directory_between_blocks() {
    let doc = "<!-- tested -->\n```sh\nexport GREETING=hello\nmkdir -p sub && cd sub\n```\n\n\
               <!-- tested -->\n```sh\necho \"$GREETING from $(basename \"$PWD\")\"\n```\n\
               <!-- output -->\n```text\nhello from sub\n```\n";
    assert_eq!(run_snippet(doc), Ok(2));
}

#[test]
fn the_harness_fails_on_a_wrong_status_or_a_missing_line() {
    let failing = "<!-- tested -->\n```sh\ntrue\nfalse\necho never\n```\n";
    let error = run_snippet(failing).unwrap_err();
    assert!(
        error.contains("docs/quickstart.md:2: exit status 1, expected 0"),
        "{error}"
    );
    let expected_status = "<!-- tested: exit 3 -->\n```sh\nexit 3\n```\n";
    assert_eq!(run_snippet(expected_status), Ok(1));
    let wrong_status = "<!-- tested: exit 3 -->\n```sh\ntrue\n```\n";
    assert!(
        run_snippet(wrong_status)
            .unwrap_err()
            .contains("exit status 0, expected 3")
    );
    let missing = "<!-- tested -->\n```sh\necho 'done in 0.1s'\necho second\n```\n\
                   <!-- output -->\n```text\nsecond\ndone in …s\n```\n";
    let error = run_snippet(missing).unwrap_err();
    assert!(error.contains("lacks the line `done in …s`"), "{error}");
}

#[test]
fn a_transcript_runs_its_commands_and_expects_the_other_lines() {
    let doc = "<!-- tested -->\n```\n$ echo one; false\none\n$ echo two\ntwo\n```\n";
    assert_eq!(run_snippet(doc), Ok(1));
    let wrong = "<!-- tested -->\n```\n$ echo one\nuno\n```\n";
    assert!(
        run_snippet(wrong)
            .unwrap_err()
            .contains("lacks the line `uno`")
    );
    let unmarked = "```\n$ rm -rf /\n```\n";
    assert!(
        parse(unmarked)
            .unwrap_err()
            .contains("line 1: a `$ transcript` block without")
    );
}

#[test]
fn a_hidden_setup_runs_before_the_blocks_after_it() {
    let doc = "<!-- setup\nprintf 'hi\\n' > note.txt\n-->\n<!-- tested -->\n```\n$ cat note.txt\nhi\n```\n";
    assert_eq!(run_snippet(doc), Ok(2));
    let unclosed = "<!-- setup\ntrue\n";
    assert!(parse(unclosed).unwrap_err().contains("never closed"));
}

#[test]
fn every_shell_block_is_marked_and_markers_sit_on_fences() {
    let unmarked = "Run:\n\n```sh\nrm -rf /\n```\n";
    assert!(
        parse(unmarked)
            .unwrap_err()
            .contains("line 3: a `sh` block without")
    );
    let stray = "<!-- tested -->\n\n```sh\ntrue\n```\n";
    assert!(
        parse(stray)
            .unwrap_err()
            .contains("line 1: a marker not followed directly")
    );
    let orphan_output = "<!-- output -->\n```text\nhi\n```\n";
    assert!(
        parse(orphan_output)
            .unwrap_err()
            .contains("does not follow")
    );
    let no_reason = "<!-- not tested: -->\n```sh\ntrue\n```\n";
    assert!(parse(no_reason).unwrap_err().contains("needs a reason"));
    // Longer fences hold shorter ones; indented fences (in list items) lose their indentation.
    let nested = "<!-- tested -->\n````sh\ncat <<'X'\n```json\n{}\n```\nX\n````\n\n  \
                  <!-- not tested: interactive -->\n  ```sh\n  nvim\n  ```\n";
    let blocks = parse(nested).unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].script, "cat <<'X'\n```json\n{}\n```\nX\n");
}

#[test]
fn ellipses_match_any_text_within_a_line() {
    assert!(line_matches("flemmad …", "flemmad 0.1.0"));
    assert!(line_matches(
        "done in …, … input",
        "done in 0.0s, 2173 input"
    ));
    assert!(!line_matches("done in …, … input", "done in 0.0s"));
    assert!(!line_matches("exact", "exactly"));
    assert!(line_matches("…", ""));
}

/// GitHub's anchor for a Markdown heading: lower case, spaces to `-`, other punctuation gone.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn the_quickstart_links_only_to_files_and_headings_that_exist() {
    let docs = repo().join("docs");
    let markdown = std::fs::read_to_string(docs.join("quickstart.md")).unwrap();
    let mut checked = 0;
    for (at, _) in markdown.match_indices("](") {
        let rest = &markdown[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = &rest[..end];
        if target.contains("://") {
            continue;
        }
        let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
        let file = docs.join(path);
        assert!(
            file.exists(),
            "docs/quickstart.md links to {target}, which does not exist"
        );
        if !fragment.is_empty() {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                text.lines()
                    .filter(|l| l.starts_with('#'))
                    .filter_map(|l| l.trim_start_matches('#').strip_prefix(' '))
                    .any(|heading| anchor(heading) == fragment),
                "docs/quickstart.md links to {target}: no heading with that anchor"
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} links found");
}
