//! The little logic the conversation has: joined text, tool uses in order, usage totals, and
//! parts shared between conversations.

use flemma_conversation::{Conversation, Message, Part, Parts, Role, Usage};
use serde_json::json;

fn tool_use(id: &str) -> Part {
    Part::ToolUse {
        id: id.into(),
        name: "bash".into(),
        input: json!({"command": "ls"}),
        raw_input: "{\"command\":\"ls\"}".into(),
    }
}

fn message(role: Role, parts: Vec<Part>) -> Message {
    Message {
        role,
        parts: Parts::from(parts),
        span: None,
    }
}

#[test]
fn joined_text_takes_text_and_text_files_and_skips_attachments() {
    let parts = [
        Part::text("see "),
        Part::Image {
            mime: "image/png".into(),
            data: vec![1, 2, 3],
            path: "./a.png".into(),
        },
        Part::TextFile {
            mime: "text/markdown".into(),
            text: "# notes".into(),
            path: "./notes.md".into(),
        },
        Part::Pdf {
            data: vec![4],
            path: "./b.pdf".into(),
        },
        tool_use("t1"),
        Part::text(" done"),
    ];
    assert_eq!(Part::joined_text(&parts), "see # notes done");
    assert_eq!(Part::joined_text(&[]), "");
}

#[test]
fn tool_uses_come_in_order_with_their_message_index() {
    let conversation = Conversation {
        system: vec![Part::text("be brief")],
        messages: vec![
            message(Role::User, vec![Part::text("list the files")]),
            message(
                Role::Assistant,
                vec![Part::text("sure"), tool_use("t1"), tool_use("t2")],
            ),
            message(
                Role::User,
                vec![Part::ToolResult {
                    tool_use_id: "t1".into(),
                    content: vec![Part::text("a b")],
                    is_error: false,
                }],
            ),
            message(Role::Assistant, vec![tool_use("t3")]),
        ],
    };
    let found: Vec<(usize, &str)> = conversation
        .tool_uses()
        .map(|(index, part)| match part {
            Part::ToolUse { id, .. } => (index, id.as_str()),
            other => panic!("not a tool use: {other:?}"),
        })
        .collect();
    assert_eq!(found, [(1, "t1"), (1, "t2"), (3, "t3")]);
    assert_eq!(Conversation::default().tool_uses().count(), 0);
}

#[test]
fn usage_adds_up_field_by_field() {
    let mut total = Usage::default();
    let one = Usage {
        input_tokens: 10,
        output_tokens: 5,
        thinking_tokens: 2,
        cache_read_tokens: 7,
        cache_write_tokens: 1,
    };
    total.add(&one);
    total.add(&one);
    assert_eq!(
        total,
        Usage {
            input_tokens: 20,
            output_tokens: 10,
            thinking_tokens: 4,
            cache_read_tokens: 14,
            cache_write_tokens: 2,
        }
    );
}

#[test]
fn a_cloned_conversation_shares_its_parts_until_one_side_changes() {
    let first = Conversation {
        system: Vec::new(),
        messages: vec![message(Role::User, vec![Part::text("hi")])],
    };
    let mut second = first.clone();
    assert!(second.messages[0].parts.ptr_eq(&first.messages[0].parts));
    second.messages[0].parts.push(Part::text("more"));
    assert!(!second.messages[0].parts.ptr_eq(&first.messages[0].parts));
    assert_eq!(first.messages[0].parts, vec![Part::text("hi")]);
    assert_eq!(second.messages[0].parts.len(), 2);
    assert_eq!(
        second.messages[0].parts.clone().into_vec(),
        vec![Part::text("hi"), Part::text("more")]
    );
}
