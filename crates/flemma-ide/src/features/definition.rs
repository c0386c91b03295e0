//! Go-to-definition: a tool use → its tool result; a `job=` tool result → its job result (a
//! plain tool result → its tool use); a job result → the tool result that started it; `@./`
//! references and `include("…")` paths → the file. An `ask_agent` result that names the asked
//! agent's conversation (its first line, [`flemma_syntax::write::agent_conversation`]) → that
//! `.chat`, from the result's text or from the call's input. A compaction summary's first line
//! → the archive holding the turns it replaced.

use std::path::{Path, PathBuf};

use flemma_syntax::{Document, NodeAt, SegmentKind, TextRange, ToolResult};

use super::{FileSystem, include_path_at, job_id_of, resolve_path, template_code_at};

/// Where a definition is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Definition {
    /// A range of the same document: the target block's header line.
    InDocument(TextRange),
    File(PathBuf),
}

/// The definition of the node at `offset`, or `None`.
pub fn definition(
    doc: &Document,
    offset: usize,
    chat_dir: &Path,
    fs: &dyn FileSystem,
) -> Option<Definition> {
    if let Some(archive) = compaction_archive_at(doc.text(), offset) {
        return Some(Definition::File(PathBuf::from(archive)));
    }
    if let Some(code) = template_code_at(doc, offset) {
        let (_, written) = include_path_at(doc.text(), code, offset)?;
        return Some(Definition::File(resolve_path(written, chat_dir, fs)));
    }
    let NodeAt::Segment(_, segment) = doc.node_at(offset)? else {
        return None;
    };
    let header = match &segment.kind {
        SegmentKind::ToolUse(tool_use) => {
            let in_input = !tool_use.header.contains(offset);
            if let Some((_, _, result)) = doc.tool_result(&tool_use.id).filter(|_| in_input)
                && let Some(file) = conversation(doc, result, chat_dir, fs)
            {
                return Some(file);
            }
            result_after(doc, offset, &tool_use.id)?
        }
        SegmentKind::ToolResult(result)
            if !result.header.contains(offset)
                && conversation(doc, result, chat_dir, fs).is_some() =>
        {
            return conversation(doc, result, chat_dir, fs);
        }
        SegmentKind::ToolResult(result) => match job_id_of(result) {
            Some(job_id) => doc.job_result(job_id)?.2.header,
            None => doc.tool_use(&result.tool_use_id)?.2.header,
        },
        SegmentKind::JobResult(job) => doc.tool_result_for_job(&job.job_id)?.2.header,
        SegmentKind::FileReference(reference) => {
            return Some(Definition::File(resolve_path(
                &reference.path,
                chat_dir,
                fs,
            )));
        }
        _ => return None,
    };
    Some(Definition::InDocument(header))
}

/// The archive named by the compaction marker on the line holding `offset`, if it is one.
fn compaction_archive_at(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset)?;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    flemma_syntax::write::compacted_archive_path(&text[start..end])
}

/// The asked agent's conversation an `ask_agent` result names.
fn conversation(
    doc: &Document,
    result: &ToolResult,
    chat_dir: &Path,
    fs: &dyn FileSystem,
) -> Option<Definition> {
    let fence = result.fence.as_ref()?;
    let path = flemma_syntax::write::agent_conversation_path(doc.slice(fence.content))?;
    Some(Definition::File(resolve_path(path, chat_dir, fs)))
}

/// The header of the first tool result answering `id` after the message holding `offset`: a
/// forward search from the use, so a long chat costs the distance to the answer, not its length.
fn result_after(doc: &Document, offset: usize, id: &str) -> Option<TextRange> {
    let index = doc.message_index_at(offset)?;
    doc.messages()[index + 1..].iter().find_map(|m| {
        m.tool_results()
            .find(|(_, r)| r.tool_use_id == id)
            .map(|(_, r)| r.header)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::fixture::{MemoryFs, cursor};

    const JOB_CHAT: &str = r#"@Assistant:
**Tool Use:** `bash` (`t1`)
```json
{"command": "make test", "label": "tests"}
```

@You:
**Tool Result:** `t1` (job=job_abcdefgh)
```
started in the background
```

@Assistant:
Waiting.

@You:
**Job Result:** `job_abcdefgh`
```
ok
```
"#;

    fn definition_at(fixture: &str) -> Option<(String, Definition)> {
        let (text, offset) = cursor(fixture);
        let doc = flemma_syntax::parse(text.as_str());
        let fs = MemoryFs::new(&[]);
        let found = definition(&doc, offset, Path::new("/chats"), &fs)?;
        let target = match &found {
            Definition::InDocument(range) => doc.slice(*range).to_owned(),
            Definition::File(path) => path.display().to_string(),
        };
        Some((target, found))
    }

    #[test]
    fn tool_use_goes_to_its_result_and_the_result_to_its_job() {
        let fixture = JOB_CHAT.replace("(`t1`)", "(`t$01`)");
        assert_eq!(
            definition_at(&fixture).unwrap().0,
            "**Tool Result:** `t1` (job=job_abcdefgh)"
        );
        let fixture = JOB_CHAT.replace("started in", "sta$0rted in");
        assert_eq!(
            definition_at(&fixture).unwrap().0,
            "**Job Result:** `job_abcdefgh`"
        );
        let fixture = JOB_CHAT.replace("ok\n", "o$0k\n");
        assert_eq!(
            definition_at(&fixture).unwrap().0,
            "**Tool Result:** `t1` (job=job_abcdefgh)"
        );
    }

    #[test]
    fn a_plain_result_goes_to_its_tool_use() {
        let fixture = "@Assistant:\n**Tool Use:** `ls` (`a`)\n```json\n{}\n```\n@You:\n**Tool Result:** `$0a`\n```\nx\n```\n";
        assert_eq!(
            definition_at(fixture).unwrap().0,
            "**Tool Use:** `ls` (`a`)"
        );
    }

    #[test]
    fn paths_go_to_files() {
        assert_eq!(
            definition_at("@You:\nsee @./docs/a$0.md\n").unwrap().1,
            Definition::File(PathBuf::from("/chats/docs/a.md"))
        );
        assert_eq!(
            definition_at("@You:\n{{ include(\"~/p$0.md\") }}\n")
                .unwrap()
                .1,
            Definition::File(PathBuf::from("/home/me/p.md"))
        );
        assert_eq!(
            definition_at("```rhai\nlet x = include('/etc/$0x');\n```\n@You:\nhi\n")
                .unwrap()
                .1,
            Definition::File(PathBuf::from("/etc/x"))
        );
    }

    #[test]
    fn an_ask_agent_result_and_its_call_go_to_the_agents_conversation() {
        let chat = "@Assistant:\n**Tool Use:** `ask_agent` (`a`)\n```json\n{\"agent\":\"py\",\"prompt\":\"P\"}\n```\n@You:\n**Tool Result:** `a`\n```\n[ask_agent: py's conversation is in .flemma/t.chat/agents/py-1.chat]\nThe answer.\n```\n";
        let file = Definition::File(PathBuf::from("/chats/.flemma/t.chat/agents/py-1.chat"));
        for at in ["The a$0nswer.", "[ask_$0agent: py", "\"pro$0mpt\""] {
            let needle = at.replace("$0", "");
            let fixture = chat.replacen(&needle, at, 1);
            assert_eq!(definition_at(&fixture).unwrap().1, file, "{at}");
        }
        // The headers keep going to each other.
        let fixture = chat.replace("(`a`)", "(`$0a`)");
        assert_eq!(definition_at(&fixture).unwrap().0, "**Tool Result:** `a`");
        let fixture = chat.replace("Result:** `a`", "Result:** `$0a`");
        assert_eq!(
            definition_at(&fixture).unwrap().0,
            "**Tool Use:** `ask_agent` (`a`)"
        );
    }

    #[test]
    fn a_compaction_summarys_marker_goes_to_its_archive() {
        let chat = "@You:\n<!-- flemma:compacted archive=\"/state/flemma/compacted/k/1.chat\" sha256=\"ab\" from=\"0\" -->\nThe 4 messages before this one were compacted.\n\nWe did X.\n";
        let fixture = chat.replace("flemma:compacted", "flemma:$0compacted");
        assert_eq!(
            definition_at(&fixture).unwrap().1,
            Definition::File(PathBuf::from("/state/flemma/compacted/k/1.chat"))
        );
        // The rest of the summary is text.
        assert_eq!(definition_at(&chat.replace("We did", "We $0did")), None);
    }

    #[test]
    fn unanswered_tool_use_has_no_definition() {
        assert_eq!(
            definition_at("@Assistant:\n**Tool Use:** `ls` (`$0a`)\n```json\n{}\n```\n"),
            None
        );
    }
}
