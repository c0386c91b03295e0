//! Hover: what the node under the cursor is. A tool use shows its tool, its input pretty-printed
//! and the approval decision with its resolver; a tool result shows its status and, with `job=`,
//! the job's live state; a file reference shows the resolved path and what is there.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use flemma_syntax::{Document, NodeAt, SegmentKind, Status, TextRange};

use super::{
    ApprovalDecision, Approvals, FileKind, FileSystem, JobState, JobStates, include_path_at,
    job_id_of, resolve_path, template_code_at,
};

/// The inputs hover needs besides the document.
#[derive(Clone, Copy)]
pub struct HoverContext<'a> {
    /// The chat's directory, for resolving relative paths.
    pub chat_dir: &'a Path,
    pub fs: &'a dyn FileSystem,
    pub jobs: JobStates<'a>,
    pub approvals: &'a Approvals,
}

impl std::fmt::Debug for HoverContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoverContext")
            .field("chat_dir", &self.chat_dir)
            .finish_non_exhaustive()
    }
}

/// What is under the cursor, and the range it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hover {
    pub range: TextRange,
    pub info: HoverInfo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoverInfo {
    ToolUse {
        name: String,
        id: String,
        /// The input pretty-printed (as written when it is not valid JSON).
        input: String,
        decision: Option<ApprovalDecision>,
    },
    ToolResult {
        tool_use_id: String,
        status: Option<Status>,
        /// The job id and its live state (`None`: the engine does not know the job).
        job: Option<(String, Option<JobState>)>,
    },
    JobResult {
        job_id: String,
    },
    File {
        written: String,
        path: PathBuf,
        kind: FileKind,
    },
}

impl Hover {
    /// The hover as Markdown, for front ends that show text.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        match &self.info {
            HoverInfo::ToolUse {
                name,
                id,
                input,
                decision,
            } => {
                let _ = writeln!(out, "**Tool** `{name}` (call `{id}`)\n");
                let _ = writeln!(out, "```json\n{input}\n```");
                if let Some(decision) = decision {
                    let _ = writeln!(
                        out,
                        "\nApproval: {} by {}",
                        decision.verdict.describe(),
                        decision.resolver
                    );
                }
            }
            HoverInfo::ToolResult {
                tool_use_id,
                status,
                job,
            } => {
                let _ = write!(out, "**Tool result** of `{tool_use_id}`");
                if let Some(status) = status {
                    let _ = write!(out, ": {status}");
                }
                if let Some((job_id, state)) = job {
                    let state = state.map_or("unknown to the daemon", JobState::as_str);
                    let _ = write!(out, "\n\nJob `{job_id}`: {state}");
                }
            }
            HoverInfo::JobResult { job_id } => {
                let _ = write!(out, "**Job result** of `{job_id}`");
            }
            HoverInfo::File {
                written,
                path,
                kind,
            } => {
                let _ = write!(
                    out,
                    "`{written}` → `{}` ({})",
                    path.display(),
                    kind.as_str()
                );
            }
        }
        out
    }
}

/// The hover at `offset`, or `None` when the cursor is on nothing hover explains.
pub fn hover(doc: &Document, offset: usize, context: &HoverContext<'_>) -> Option<Hover> {
    if let Some(code) = template_code_at(doc, offset) {
        let (range, written) = include_path_at(doc.text(), code, offset)?;
        return Some(file_hover(range, written, context));
    }
    let NodeAt::Segment(_, segment) = doc.node_at(offset)? else {
        return None;
    };
    let info = match &segment.kind {
        SegmentKind::ToolUse(tool_use) => {
            let raw = tool_use.fence.as_ref().map_or("", |f| doc.slice(f.content));
            let input = serde_json::from_str::<serde_json::Value>(raw)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| raw.trim_end().to_owned());
            HoverInfo::ToolUse {
                name: tool_use.name.clone(),
                id: tool_use.id.clone(),
                input,
                decision: context.approvals.get(&tool_use.id).cloned(),
            }
        }
        SegmentKind::ToolResult(result) => HoverInfo::ToolResult {
            tool_use_id: result.tool_use_id.clone(),
            status: result.suffix.as_ref().and_then(|s| s.status()),
            job: job_id_of(result).map(|id| (id.to_owned(), (context.jobs)(id))),
        },
        SegmentKind::JobResult(job) => HoverInfo::JobResult {
            job_id: job.job_id.clone(),
        },
        SegmentKind::FileReference(reference) => {
            return Some(file_hover(segment.range, &reference.path, context));
        }
        _ => return None,
    };
    Some(Hover {
        range: segment.range,
        info,
    })
}

fn file_hover(range: TextRange, written: &str, context: &HoverContext<'_>) -> Hover {
    let path = resolve_path(written, context.chat_dir, context.fs);
    Hover {
        range,
        info: HoverInfo::File {
            written: written.to_owned(),
            kind: context.fs.kind(&path),
            path,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Verdict;
    use crate::features::fixture::{MemoryFs, cursor};

    fn hover_at(fixture: &str, jobs: JobStates<'_>, approvals: &Approvals) -> Option<Hover> {
        let (text, offset) = cursor(fixture);
        let fs = MemoryFs::new(&["/chats/notes.md", "/chats/src/"]);
        let context = HoverContext {
            chat_dir: Path::new("/chats"),
            fs: &fs,
            jobs,
            approvals,
        };
        hover(&flemma_syntax::parse(text), offset, &context)
    }

    const TOOL_CALL: &str = r#"@You:
run the tests

@Assistant:
**Tool Use:** `bash` (`t1`)
```json
{"command": "make test", "label": "running tests"}
```

@You:
**Tool Result:** `t1` (pending job=job_abcdefgh)
```
```
"#;

    #[test]
    fn a_tool_use_shows_tool_input_and_decision() {
        let fixture = TOOL_CALL.replace("`bash` (", "`ba$0sh` (");
        let mut approvals = Approvals::new();
        approvals.insert(
            "t1".into(),
            ApprovalDecision::new(Verdict::Approve, "config: tools.auto_approve"),
        );
        let hover = hover_at(&fixture, &|_| None, &approvals).unwrap();
        let HoverInfo::ToolUse {
            name,
            input,
            decision,
            ..
        } = &hover.info
        else {
            panic!("{hover:?}")
        };
        assert_eq!(name, "bash");
        assert_eq!(
            input,
            "{\n  \"command\": \"make test\",\n  \"label\": \"running tests\"\n}"
        );
        assert_eq!(decision.as_ref().unwrap().verdict, Verdict::Approve);
        assert!(
            hover
                .markdown()
                .contains("approved by config: tools.auto_approve")
        );
    }

    #[test]
    fn a_job_result_placeholder_shows_the_live_job_state() {
        let fixture = TOOL_CALL.replace("(pending job", "(pen$0ding job");
        for (state, word) in [
            (Some(JobState::Running), "running"),
            (Some(JobState::Completed), "completed"),
            (Some(JobState::Lost), "lost"),
            (None, "unknown"),
        ] {
            let jobs = move |id: &str| (id == "job_abcdefgh").then_some(state).flatten();
            let hover = hover_at(&fixture, &jobs, &Approvals::new()).unwrap();
            assert_eq!(
                hover.info,
                HoverInfo::ToolResult {
                    tool_use_id: "t1".into(),
                    status: Some(Status::Pending),
                    job: Some(("job_abcdefgh".into(), state)),
                }
            );
            let markdown = hover.markdown();
            assert!(markdown.contains("`job_abcdefgh`") && markdown.contains(word));
        }
    }

    #[test]
    fn a_file_reference_shows_the_resolved_path_and_kind() {
        let hover = hover_at(
            "@You:\nsee @./no$0tes.md please\n",
            &|_| None,
            &Approvals::new(),
        )
        .unwrap();
        assert_eq!(
            hover.info,
            HoverInfo::File {
                written: "./notes.md".into(),
                path: PathBuf::from("/chats/notes.md"),
                kind: FileKind::File,
            }
        );
        let hover = hover_at(
            "@You:\n{{ include(\"src/gone$0.md\") }}\n",
            &|_| None,
            &Approvals::new(),
        )
        .unwrap();
        assert!(matches!(
            hover.info,
            HoverInfo::File {
                kind: FileKind::Missing,
                ..
            }
        ));
    }

    #[test]
    fn plain_text_has_no_hover() {
        assert_eq!(
            hover_at("@You:\nhel$0lo\n", &|_| None, &Approvals::new()),
            None
        );
    }
}
