//! Request bodies per provider, asserted as exact JSON, plus byte stability and round trips.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use base64::Engine as _;
use flemma_conversation::{Conversation, Message, Part, Role, ThinkingSignature};
use flemma_wire::{
    CacheRetention, ProviderKind, RequestOptions, Thinking, ThinkingLevel, ThinkingOff,
    ToolDefinition, build_request, count_tokens_request, list_models_request, nearest_effort,
    parse_count_tokens, parse_models,
};
use serde_json::{Value, json};

fn message(role: Role, parts: Vec<Part>) -> Message {
    Message {
        role,
        parts: parts.into(),
        span: None,
    }
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "weather".into(),
            description: "Get weather".into(),
            input_schema: json!({"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}),
            strict: true,
            capabilities: vec![],
            is_async: false,
        },
        ToolDefinition {
            name: "flemma.jobs.status".into(),
            description: "Job status".into(),
            input_schema: json!({"type":"object","properties":{"job_id":{"type":"string"}},"required":["job_id"]}),
            strict: false,
            capabilities: vec!["disables_background".into(), "disables_save_to".into()],
            is_async: false,
        },
    ]
}

fn options(model: &str) -> RequestOptions {
    RequestOptions {
        model: model.into(),
        max_tokens: 4096,
        temperature: Some(0.5),
        thinking: Thinking::Off,
        cache_retention: CacheRetention::None,
        tools: tools(),
        vertex_location: "global".into(),
        ..RequestOptions::default()
    }
}

fn signed(provider: &str, text: &str, value: &str) -> Part {
    Part::Thinking {
        text: text.into(),
        signature: Some(ThinkingSignature {
            provider: provider.into(),
            value: value.into(),
        }),
        redacted: false,
    }
}

fn tool_use(id: &str, name: &str, raw: &str) -> Part {
    Part::ToolUse {
        id: id.into(),
        name: name.into(),
        input: serde_json::from_str(raw).unwrap(),
        raw_input: raw.into(),
    }
}

fn result(id: &str, text: &str, is_error: bool) -> Part {
    Part::ToolResult {
        tool_use_id: id.into(),
        content: vec![Part::text(text)],
        is_error,
    }
}

/// A first turn: a question with an image; the model thought, answered and called a tool;
/// the result came back with a follow-up.
fn conversation(id: &str, thinking: Part) -> Conversation {
    Conversation {
        system: vec![Part::text("Be terse.")],
        messages: vec![
            message(
                Role::User,
                vec![
                    Part::text("Weather?"),
                    Part::Image {
                        mime: "image/png".into(),
                        data: vec![1, 2, 3],
                        path: "./a.png".into(),
                    },
                ],
            ),
            message(
                Role::Assistant,
                vec![
                    Part::text("Checking."),
                    tool_use(id, "weather", "{\"location\": \"Florence\"}"),
                    thinking,
                ],
            ),
            message(Role::User, vec![result(id, "40 C", false)]),
        ],
    }
}

fn body(kind: ProviderKind, conversation: &Conversation, options: &RequestOptions) -> Value {
    let built = build_request(kind, conversation, options).unwrap();
    serde_json::from_slice(&built.request.body).unwrap()
}

#[test]
fn anthropic_body_headers_and_native_thinking_first() {
    let conversation = conversation("toolu_01A", signed("anthropic", "Call weather.", "sigA"));
    let mut options = options("claude-sonnet-4-5");
    options.anthropic_version = "2023-06-01".into();
    options.anthropic_beta = vec!["a-1".into(), "b-2".into()];
    let built = build_request(ProviderKind::Anthropic, &conversation, &options).unwrap();
    assert_eq!(built.request.method, "POST");
    assert_eq!(built.request.path_and_query, "/v1/messages");
    assert_eq!(
        built.request.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("anthropic-version".to_string(), "2023-06-01".to_string()),
            ("anthropic-beta".to_string(), "a-1,b-2".to_string()),
        ]
    );
    let body: Value = serde_json::from_slice(&built.request.body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": [{"type": "text", "text": "Be terse."}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AQID"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Call weather.", "signature": "sigA"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {"location": "Florence"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": [{"type": "text", "text": "40 C"}]},
                ]},
            ],
            "tools": [
                {"name": "flemma__jobs__status", "description": "Job status",
                 "input_schema": {"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"]}},
                {"name": "weather", "description": "Get weather",
                 "input_schema": {"type": "object", "properties": {
                     "location": {"type": "string"},
                     "flemma.save_to": {"type": ["string", "null"], "description": body["tools"][1]["input_schema"]["properties"]["flemma.save_to"]["description"]},
                 }, "required": ["location", "flemma.save_to"], "additionalProperties": false},
                 "strict": true},
            ],
            "temperature": 0.5,
            "stream": true,
        })
    );
    // Key order is fixed (insertion order), not alphabetical.
    let text = String::from_utf8(built.request.body).unwrap();
    assert!(text.starts_with("{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":4096,\"system\":"));
    assert!(built.warnings.is_empty(), "{:?}", built.warnings);
}

#[test]
fn anthropic_thinking_levels_budget_clamp_adaptive_and_override() {
    let conversation = Conversation {
        system: vec![],
        messages: vec![message(Role::User, vec![Part::text("Think.")])],
    };
    let mut opts = options("claude-sonnet-4-5");
    opts.thinking = Thinking::Level(ThinkingLevel::High);
    let built = build_request(ProviderKind::Anthropic, &conversation, &opts).unwrap();
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    // High is 8192, clamped below max_tokens 4096.
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 4095})
    );
    assert_eq!(
        built.warnings,
        vec!["thinking budget 8192 lowered to 4095 to stay below max_tokens 4096"]
    );
    assert!(
        b.get("temperature").is_none(),
        "temperature is omitted with thinking"
    );

    opts.thinking = Thinking::Level(ThinkingLevel::Medium);
    let b = body(ProviderKind::Anthropic, &conversation, &opts);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );

    opts.thinking = Thinking::Level(ThinkingLevel::Minimal);
    assert_eq!(
        body(ProviderKind::Anthropic, &conversation, &opts)["thinking"]["budget_tokens"],
        1024
    );

    opts.anthropic_thinking_budget = Some(3000);
    assert_eq!(
        body(ProviderKind::Anthropic, &conversation, &opts)["thinking"]["budget_tokens"],
        3000
    );
    opts.anthropic_thinking_budget = None;

    opts.max_tokens = 1000;
    let built = build_request(ProviderKind::Anthropic, &conversation, &opts).unwrap();
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    assert!(b.get("thinking").is_none());
    assert_eq!(b["temperature"], 0.5);
    assert!(built.warnings[0].contains("thinking turned off"));

    opts.max_tokens = 32000;
    opts.supports_adaptive_thinking = true;
    opts.thinking = Thinking::Level(ThinkingLevel::Max);
    let b = body(ProviderKind::Anthropic, &conversation, &opts);
    assert_eq!(b["thinking"], json!({"type": "adaptive"}));
    assert_eq!(b["output_config"], json!({"effort": "max"}));
}

#[test]
fn anthropic_cache_control_on_last_tool_system_and_tail() {
    let conversation = conversation("toolu_01A", Part::text(""));
    let mut opts = options("claude-sonnet-4-5");
    opts.cache_retention = CacheRetention::Long;
    let b = body(ProviderKind::Anthropic, &conversation, &opts);
    let marker = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(b["system"][0]["cache_control"], marker);
    assert_eq!(b["tools"][1]["cache_control"], marker);
    assert!(b["tools"][0].get("cache_control").is_none());
    assert_eq!(b["messages"][2]["content"][0]["cache_control"], marker);
    assert!(
        b["messages"][0]["content"][1]
            .get("cache_control")
            .is_none()
    );
    opts.cache_retention = CacheRetention::Short;
    let b = body(ProviderKind::Anthropic, &conversation, &opts);
    assert_eq!(
        b["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn anthropic_ids_normalised_errors_flagged_and_results_first() {
    let id = "urn:flemma:tool:weather:0123456789ab";
    let mut conversation = conversation(id, Part::text(""));
    conversation.messages[2] = message(
        Role::User,
        vec![Part::text("and then?"), result(id, "boom", true)],
    );
    let b = body(ProviderKind::Anthropic, &conversation, &options("claude"));
    let use_id = b["messages"][1]["content"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        use_id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    );
    assert_eq!(
        b["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": use_id, "content": [{"type": "text", "text": "boom"}], "is_error": true},
            {"type": "text", "text": "and then?"},
        ])
    );
}

#[test]
fn anthropic_redacted_native_and_foreign_thinking() {
    let mut conversation = conversation("toolu_01A", signed("openai", "foreign idea", "eyJ9"));
    conversation.messages[1].parts.push(Part::Thinking {
        text: "opaque".into(),
        signature: None,
        redacted: true,
    });
    let b = body(ProviderKind::Anthropic, &conversation, &options("claude"));
    assert_eq!(
        b["messages"][1]["content"],
        json!([
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "foreign idea\n\n---"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {"location": "Florence"}},
        ])
    );
}

fn reasoning_signature() -> (Value, String) {
    let item = json!({"id":"rs_017e","type":"reasoning","content":[],"encrypted_content":"gAAA...FINAL","summary":[{"type":"summary_text","text":"Use the tool."}]});
    let encoded = base64::engine::general_purpose::STANDARD.encode(item.to_string());
    (item, encoded)
}

#[test]
fn openai_responses_body_with_reasoning_round_trip_and_verbatim_arguments() {
    let (item, encoded) = reasoning_signature();
    let conversation = conversation("call_zg", signed("openai", "Use the tool.", &encoded));
    let mut opts = options("gpt-5");
    opts.thinking = Thinking::Level(ThinkingLevel::High);
    opts.cache_retention = CacheRetention::Short;
    opts.prompt_cache_key = Some("/home/u/chat.chat".into());
    let built = build_request(ProviderKind::OpenAi, &conversation, &opts).unwrap();
    assert_eq!(built.request.path_and_query, "/responses");
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    let save_to = b["tools"][1]["parameters"]["properties"]["flemma.save_to"].clone();
    assert_eq!(
        b,
        json!({
            "model": "gpt-5",
            "instructions": "Be terse.",
            "input": [
                {"role": "user", "content": [
                    {"type": "input_text", "text": "Weather?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AQID"},
                ]},
                item,
                {"role": "assistant", "content": "Checking."},
                {"type": "function_call", "call_id": "call_zg", "name": "weather", "arguments": "{\"location\": \"Florence\"}"},
                {"type": "function_call_output", "call_id": "call_zg", "output": "40 C"},
            ],
            "tools": [
                {"type": "function", "name": "flemma__jobs__status", "description": "Job status",
                 "parameters": {"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"]}, "strict": false},
                {"type": "function", "name": "weather", "description": "Get weather",
                 "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "flemma.save_to": save_to},
                  "required": ["location", "flemma.save_to"], "additionalProperties": false}, "strict": true},
            ],
            "reasoning": {"effort": "high", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "max_output_tokens": 4096,
            "prompt_cache_key": "/home/u/chat.chat",
            "store": false,
            "stream": true,
        })
    );
    // The arguments string is replayed byte for byte (with its space).
    let text = String::from_utf8(built.request.body).unwrap();
    assert!(text.contains(r#""arguments":"{\"location\": \"Florence\"}""#));
}

#[test]
fn openai_reasoning_override_and_off() {
    let conversation = conversation("call_zg", Part::text(""));
    let mut opts = options("gpt-5");
    let b = body(ProviderKind::OpenAi, &conversation, &opts);
    assert!(b.get("reasoning").is_none() && b.get("include").is_none());
    assert_eq!(b["temperature"], 0.5);
    opts.thinking = Thinking::Level(ThinkingLevel::Low);
    opts.openai_reasoning = Some(flemma_wire::ReasoningEffort::High);
    opts.openai_reasoning_summary = Some(flemma_wire::ReasoningSummary::Detailed);
    let b = body(ProviderKind::OpenAi, &conversation, &opts);
    assert_eq!(
        b["reasoning"],
        json!({"effort": "high", "summary": "detailed"})
    );
    assert!(b.get("temperature").is_none());
}

#[test]
fn chat_completions_body_with_pdf_warning() {
    let mut conversation = conversation("call_8E", signed("anthropic", "mull", "sig"));
    conversation.messages[2].parts.push(Part::Pdf {
        data: vec![9],
        path: "./spec.pdf".into(),
    });
    let mut opts = options("kimi-k2");
    opts.thinking = Thinking::Level(ThinkingLevel::Medium);
    let built = build_request(ProviderKind::OpenAiCompatible, &conversation, &opts).unwrap();
    assert_eq!(built.request.path_and_query, "/chat/completions");
    assert_eq!(
        built.warnings,
        vec!["PDF attachments are not supported by openai-compatible; ./spec.pdf sent as text"]
    );
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    let weather_params = b["tools"][1]["function"]["parameters"].clone();
    assert_eq!(
        weather_params["required"],
        json!(["location", "flemma.save_to"])
    );
    assert_eq!(
        b,
        json!({
            "model": "kimi-k2",
            "messages": [
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}},
                ]},
                {"role": "assistant", "content": "mull\n\n---\n\nChecking.", "tool_calls": [
                    {"id": "call_8E", "type": "function", "function": {"name": "weather", "arguments": "{\"location\": \"Florence\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_8E", "content": "40 C"},
                {"role": "user", "content": "[attachment ./spec.pdf: PDF attachments are not supported by openai-compatible]"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "flemma__jobs__status", "description": "Job status",
                  "parameters": {"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"]}}},
                {"type": "function", "function": {"name": "weather", "description": "Get weather",
                  "parameters": weather_params, "strict": true}},
            ],
            "max_tokens": 4096,
            "temperature": 0.5,
            "reasoning_effort": "medium",
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
    // Moonshot: same format, no reasoning_effort.
    let b = body(ProviderKind::Moonshot, &conversation, &opts);
    assert!(b.get("reasoning_effort").is_none());
    opts.thinking = Thinking::Off;
    let b = body(ProviderKind::OpenAiCompatible, &conversation, &opts);
    assert!(b.get("reasoning_effort").is_none());
}

#[test]
fn gemini_body_with_signature_on_first_call_and_function_response() {
    let id = "urn:flemma:tool:weather:0123456789ab";
    let mut conversation = conversation(id, signed("vertex", "thought summary", "CiQB"));
    conversation.messages[1].parts.insert(
        2,
        tool_use("8hd01vsf", "flemma.jobs.status", "{\"job_id\":\"j\"}"),
    );
    conversation.messages[2]
        .parts
        .push(result("8hd01vsf", "job failed", true));
    let mut opts = options("gemini-2.5-flash");
    opts.thinking = Thinking::Level(ThinkingLevel::Low);
    let built = build_request(ProviderKind::Gemini, &conversation, &opts).unwrap();
    assert_eq!(
        built.request.path_and_query,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    let weather_schema = b["tools"][0]["functionDeclarations"][1]["parametersJsonSchema"].clone();
    assert_eq!(
        weather_schema["required"],
        json!(["location", "flemma.save_to"])
    );
    assert_eq!(
        b,
        json!({
            "systemInstruction": {"parts": [{"text": "Be terse."}]},
            "tools": [{"functionDeclarations": [
                {"name": "flemma__jobs__status", "description": "Job status",
                 "parametersJsonSchema": {"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"]}},
                {"name": "weather", "description": "Get weather", "parametersJsonSchema": weather_schema},
            ]}],
            "contents": [
                {"role": "user", "parts": [
                    {"text": "Weather?"},
                    {"inlineData": {"mimeType": "image/png", "data": "AQID"}},
                ]},
                {"role": "model", "parts": [
                    {"text": "Checking."},
                    {"functionCall": {"name": "weather", "args": {"location": "Florence"}}, "thoughtSignature": "CiQB"},
                    {"functionCall": {"id": "8hd01vsf", "name": "flemma__jobs__status", "args": {"job_id": "j"}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "weather", "response": {"output": "40 C"}}},
                    {"functionResponse": {"id": "8hd01vsf", "name": "flemma__jobs__status", "response": {"error": "job failed"}}},
                ]},
            ],
            "generationConfig": {"maxOutputTokens": 4096, "temperature": 0.5,
                                 "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 1024}},
        })
    );
}

#[test]
fn gemini_signature_on_last_text_without_calls_and_levels_for_gemini_3() {
    let conversation = Conversation {
        system: vec![],
        messages: vec![
            message(Role::User, vec![Part::text("hi")]),
            message(
                Role::Assistant,
                vec![
                    Part::text("a"),
                    Part::text("b"),
                    signed("vertex", "", "EpEB"),
                ],
            ),
            message(Role::User, vec![Part::text("more")]),
        ],
    };
    let mut opts = options("gemini-3-pro-preview");
    opts.tools.clear();
    opts.thinking = Thinking::Level(ThinkingLevel::Max);
    let b = body(ProviderKind::Gemini, &conversation, &opts);
    assert_eq!(
        b["contents"][1]["parts"],
        json!([{"text": "a"}, {"text": "b", "thoughtSignature": "EpEB"}])
    );
    assert_eq!(
        b["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingLevel": "HIGH"})
    );
    opts.gemini_thinking_budget = Some(-1);
    let b = body(ProviderKind::Gemini, &conversation, &opts);
    assert_eq!(
        b["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingBudget": -1})
    );
}

#[test]
fn vertex_path_needs_a_project() {
    let conversation = conversation("x", Part::text(""));
    let mut opts = options("gemini-2.5-flash");
    let error = build_request(ProviderKind::Vertex, &conversation, &opts).unwrap_err();
    assert!(error.to_string().contains("project"), "{error}");
    opts.vertex_project = Some("proj".into());
    opts.vertex_location = "us-east5".into();
    let built = build_request(ProviderKind::Vertex, &conversation, &opts).unwrap();
    assert_eq!(
        built.request.path_and_query,
        "/v1beta1/projects/proj/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        flemma_wire::vertex_default_base_url("us-east5"),
        "https://us-east5-aiplatform.googleapis.com"
    );
    assert_eq!(
        flemma_wire::vertex_default_base_url("global"),
        "https://aiplatform.googleapis.com"
    );
}

#[test]
fn missing_model_is_an_explained_error() {
    let error = build_request(
        ProviderKind::Anthropic,
        &Conversation::default(),
        &options(""),
    )
    .unwrap_err();
    assert!(error.to_string().contains("no model is set for anthropic"));
}

#[test]
fn bodies_are_byte_stable_and_a_second_turn_extends_the_first() {
    let (_, encoded) = reasoning_signature();
    for kind in flemma_wire::ProviderKind::ALL {
        let signature = match kind.signature_provider() {
            "openai" => signed("openai", "t", &encoded),
            "" => Part::text(""),
            provider => signed(provider, "t", "SIG"),
        };
        let first = conversation("call_1", signature);
        let mut opts = options("gemini-2.5-flash");
        opts.vertex_project = Some("p".into());
        opts.cache_retention = CacheRetention::Short;
        let a = build_request(kind, &first, &opts).unwrap().request.body;
        let b = build_request(kind, &first, &opts).unwrap().request.body;
        assert_eq!(a, b, "{kind:?}");

        let mut second = first.clone();
        second
            .messages
            .push(message(Role::Assistant, vec![Part::text("Sunny.")]));
        second
            .messages
            .push(message(Role::User, vec![Part::text("Thanks")]));
        let c = build_request(kind, &second, &opts).unwrap().request.body;
        let first_messages = messages_of(kind, &a);
        let second_messages = messages_of(kind, &c);
        let prefix = &second_messages[..first_messages.len()];
        // Anthropic moves the tail cache marker; compare without it.
        assert_eq!(
            strip_cache(prefix),
            strip_cache(&first_messages),
            "{kind:?}"
        );
        // Everything before the messages is identical.
        let head = |bytes: &[u8]| {
            let v: Value = serde_json::from_slice(bytes).unwrap();
            let mut v = v.as_object().unwrap().clone();
            for key in ["messages", "input", "contents"] {
                v.shift_remove(key);
            }
            v
        };
        assert_eq!(head(&a), head(&c), "{kind:?}");
    }
}

fn messages_of(kind: ProviderKind, body: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(body).unwrap();
    let key = match kind {
        ProviderKind::OpenAi | ProviderKind::Codex => "input",
        ProviderKind::Gemini | ProviderKind::Vertex => "contents",
        _ => "messages",
    };
    v[key].as_array().unwrap().clone()
}

fn strip_cache(values: &[Value]) -> Vec<Value> {
    let mut text = serde_json::to_string(values).unwrap();
    text = text.replace(r#","cache_control":{"type":"ephemeral"}"#, "");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn missing_result_gets_a_synthetic_error() {
    let mut conversation = conversation("toolu_9", Part::text(""));
    conversation.messages.pop();
    let built = build_request(ProviderKind::Anthropic, &conversation, &options("claude")).unwrap();
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    assert_eq!(
        b["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "toolu_9",
                "content": [{"type": "text", "text": "No result provided"}], "is_error": true}])
    );
    assert_eq!(built.warnings.len(), 1);
}

#[test]
fn token_counting_and_model_listing() {
    let conversation = conversation("toolu_1", Part::text(""));
    let opts = options("claude-sonnet-4-5");
    let request = count_tokens_request(ProviderKind::Anthropic, &conversation, &opts).unwrap();
    assert_eq!(request.path_and_query, "/v1/messages/count_tokens");
    let b: Value = serde_json::from_slice(&request.body).unwrap();
    assert!(b.get("max_tokens").is_none() && b.get("stream").is_none());
    assert_eq!(
        parse_count_tokens(ProviderKind::Anthropic, br#"{"input_tokens": 2095}"#),
        Ok(2095)
    );

    let request =
        count_tokens_request(ProviderKind::OpenAi, &conversation, &options("gpt-5")).unwrap();
    assert_eq!(request.path_and_query, "/responses/input_tokens");
    assert_eq!(
        parse_count_tokens(
            ProviderKind::OpenAi,
            br#"{"object":"response.input_tokens","input_tokens":11}"#
        ),
        Ok(11)
    );
    let request = count_tokens_request(
        ProviderKind::Gemini,
        &conversation,
        &options("gemini-2.5-flash"),
    )
    .unwrap();
    assert_eq!(
        request.path_and_query,
        "/v1beta/models/gemini-2.5-flash:countTokens"
    );
    let b: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        b["generateContentRequest"]["model"],
        "models/gemini-2.5-flash"
    );
    assert_eq!(
        parse_count_tokens(ProviderKind::Gemini, br#"{"totalTokens":31}"#),
        Ok(31)
    );
    assert!(count_tokens_request(ProviderKind::Moonshot, &conversation, &opts).is_err());
    assert!(parse_count_tokens(ProviderKind::Anthropic, b"<html>").is_err());

    assert_eq!(
        list_models_request(ProviderKind::Anthropic, &opts).path_and_query,
        "/v1/models?limit=1000"
    );
    let models = parse_models(
        ProviderKind::Anthropic,
        br#"{"data":[{"type":"model","id":"claude-sonnet-4-20250514","display_name":"Claude Sonnet 4","max_input_tokens":200000,"max_tokens":64000}],"has_more":false}"#,
    )
    .unwrap();
    assert_eq!(models[0].id, "claude-sonnet-4-20250514");
    assert_eq!(models[0].display_name.as_deref(), Some("Claude Sonnet 4"));
    assert_eq!(models[0].context_window, Some(200000));
    let models = parse_models(
        ProviderKind::OpenAiCompatible,
        br#"{"object":"list","data":[{"id":"gpt-5","object":"model","created":1,"owned_by":"openai"}]}"#,
    )
    .unwrap();
    assert_eq!(models[0].id, "gpt-5");
    let models = parse_models(
        ProviderKind::Gemini,
        br#"{"models":[{"name":"models/gemini-2.5-flash","displayName":"Gemini 2.5 Flash","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","streamGenerateContent"]},{"name":"models/text-embedding-004","supportedGenerationMethods":["embedContent"]}]}"#,
    )
    .unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].id, "gemini-2.5-flash");
    assert_eq!(models[0].max_output_tokens, Some(65536));
}

#[test]
fn anthropic_thinking_is_turned_off_in_a_tool_loop_without_a_thinking_block() {
    // The tool call came from another provider: no Anthropic thinking block to put first.
    let foreign = conversation("call_1", signed("openai", "other", "eyJ9"));
    let mut opts = options("claude-sonnet-4-5");
    opts.max_tokens = 32000;
    opts.thinking = Thinking::Level(ThinkingLevel::High);
    let built = build_request(ProviderKind::Anthropic, &foreign, &opts).unwrap();
    let b: Value = serde_json::from_slice(&built.request.body).unwrap();
    assert!(b.get("thinking").is_none());
    assert_eq!(b["temperature"], 0.5);
    assert!(built.warnings[0].starts_with("thinking turned off for this request"));
    // With a native block first, thinking stays on.
    let native = conversation("toolu_1", signed("anthropic", "mine", "sig"));
    let b = body(ProviderKind::Anthropic, &native, &opts);
    assert_eq!(b["thinking"]["type"], "enabled");
}

#[test]
fn gemini_3_foreign_calls_in_the_current_turn_get_the_documented_dummy_signature() {
    let conversation = conversation("toolu_1", signed("anthropic", "other", "sig"));
    let b = body(
        ProviderKind::Gemini,
        &conversation,
        &options("gemini-3-pro-preview"),
    );
    assert_eq!(
        b["contents"][1]["parts"][2],
        json!({"functionCall": {"name": "weather", "args": {"location": "Florence"}},
               "thoughtSignature": "skip_thought_signature_validator"})
    );
    // Gemini 2.5 does not validate: nothing is invented.
    let b = body(
        ProviderKind::Gemini,
        &conversation,
        &options("gemini-2.5-flash"),
    );
    assert!(
        b["contents"][1]["parts"][2]
            .get("thoughtSignature")
            .is_none()
    );
}

#[test]
fn provider_names_round_trip() {
    assert_eq!(
        ProviderKind::from_name("openai-compatible"),
        Some(ProviderKind::OpenAiCompatible)
    );
    assert_eq!(
        ProviderKind::from_name("gemini"),
        Some(ProviderKind::Gemini)
    );
    assert_eq!(ProviderKind::from_name("claude"), None);
    assert_eq!(
        "openai_compatible".parse::<ProviderKind>().map_err(|e| e.to_string()),
        Err("`openai_compatible` is not a provider (expected one of: anthropic, openai, openai-compatible, moonshot, gemini, vertex, codex)".to_string())
    );
    for kind in ProviderKind::ALL {
        assert_eq!(ProviderKind::from_name(kind.name()), Some(kind));
        assert_eq!(kind.to_string().parse::<ProviderKind>(), Ok(kind));
        assert_eq!(
            ProviderKind::from(flemma_config::Provider::from(kind)),
            kind
        );
    }
    assert_eq!(ProviderKind::OpenAiCompatible.name(), "openai-compatible");
}

#[test]
fn zero_max_tokens_is_an_explained_error() {
    let mut opts = options("gpt-5");
    opts.max_tokens = 0;
    let error = build_request(ProviderKind::OpenAi, &Conversation::default(), &opts).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("max_tokens is 0 for openai model gpt-5")
    );
    // Token counting does not need it.
    assert!(count_tokens_request(ProviderKind::OpenAi, &Conversation::default(), &opts).is_ok());
}

#[test]
fn gemini_off_is_budget_zero_except_for_models_that_always_think() {
    let conversation = Conversation::default();
    let b = body(
        ProviderKind::Gemini,
        &conversation,
        &options("gemini-2.5-flash"),
    );
    assert_eq!(
        b["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 0})
    );
    for model in ["gemini-2.5-pro", "models/gemini-3-pro-preview"] {
        let b = body(ProviderKind::Gemini, &conversation, &options(model));
        assert!(
            b["generationConfig"].get("thinkingConfig").is_none(),
            "{model}"
        );
    }
}

#[test]
fn responses_marks_failed_tool_results_in_the_output_text() {
    let mut conversation = conversation("call_err", Part::text(""));
    conversation.messages[2] = message(Role::User, vec![result("call_err", "exit 2", true)]);
    let b = body(ProviderKind::OpenAi, &conversation, &options("gpt-5"));
    let output = b["input"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["type"] == "function_call_output"))
        .map(|item| item["output"].clone());
    assert_eq!(output, Some(json!("Error: exit 2")));

    conversation.messages[2] = message(Role::User, vec![result("call_err", "exit 0", false)]);
    let b = body(ProviderKind::OpenAi, &conversation, &options("gpt-5"));
    assert!(b.to_string().contains(r#""output":"exit 0""#), "{b}");
}

// ---- per-model request shapes (Flemma 0.14's model list) ------------------------------------

fn hello() -> Conversation {
    Conversation {
        system: Vec::new(),
        messages: vec![message(Role::User, vec![Part::Text { text: "hi".into() }])],
    }
}

#[test]
fn kimi_k3_takes_reasoning_effort_and_k2_6_is_told_to_stop_thinking() {
    let k3 = RequestOptions {
        thinking: Thinking::Level(ThinkingLevel::Medium),
        reasoning_efforts: &["low", "high", "max"],
        thinking_off: ThinkingOff::Forced,
        ..options("kimi-k3")
    };
    let sent = body(ProviderKind::Moonshot, &hello(), &k3);
    assert_eq!(sent["reasoning_effort"], "high", "{sent}");
    assert!(sent.get("thinking").is_none(), "{sent}");
    let max = RequestOptions {
        thinking: Thinking::Level(ThinkingLevel::Max),
        ..k3.clone()
    };
    assert_eq!(
        body(ProviderKind::Moonshot, &hello(), &max)["reasoning_effort"],
        "max"
    );

    let k26 = RequestOptions {
        thinking: Thinking::Off,
        thinking_off: ThinkingOff::Disable,
        ..options("kimi-k2.6")
    };
    let sent = body(ProviderKind::Moonshot, &hello(), &k26);
    assert_eq!(sent["thinking"], json!({"type": "disabled"}), "{sent}");
    assert!(sent.get("reasoning_effort").is_none(), "{sent}");
    // Thinking on: K2.6 thinks by default, nothing to say.
    let on = RequestOptions {
        thinking: Thinking::Level(ThinkingLevel::High),
        ..k26
    };
    let sent = body(ProviderKind::Moonshot, &hello(), &on);
    assert!(sent.get("thinking").is_none() && sent.get("reasoning_effort").is_none());
}

#[test]
fn adaptive_claude_models_turn_budgets_into_efforts_and_sonnet_5_is_told_to_stop() {
    let opus = RequestOptions {
        thinking: Thinking::Budget(4096),
        supports_adaptive_thinking: true,
        ..options("claude-opus-4-8")
    };
    let sent = body(ProviderKind::Anthropic, &hello(), &opus);
    assert_eq!(sent["thinking"], json!({"type": "adaptive"}), "{sent}");
    assert_eq!(sent["output_config"], json!({"effort": "medium"}), "{sent}");

    let sonnet = RequestOptions {
        thinking: Thinking::Off,
        supports_adaptive_thinking: true,
        thinking_off: ThinkingOff::Disable,
        ..options("claude-sonnet-5")
    };
    let sent = body(ProviderKind::Anthropic, &hello(), &sonnet);
    assert_eq!(sent["thinking"], json!({"type": "disabled"}), "{sent}");
    // Thinking is off, so the temperature goes out.
    assert_eq!(sent["temperature"], json!(0.5), "{sent}");
}

#[test]
fn gpt_5_2_and_later_map_max_to_xhigh() {
    let gpt = RequestOptions {
        thinking: Thinking::Level(ThinkingLevel::Max),
        reasoning_efforts: &["low", "medium", "high", "xhigh"],
        ..options("gpt-5.5")
    };
    let sent = body(ProviderKind::OpenAi, &hello(), &gpt);
    assert_eq!(sent["reasoning"]["effort"], "xhigh", "{sent}");
    assert_eq!(
        nearest_effort(ThinkingLevel::Minimal, &["low", "high", "max"]),
        Some("low")
    );
}
