//! One test (or a few) per configuration rule.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use flemma_config::*;
use serde_json::json;

fn layer_json(kind: LayerKind, value: serde_json::Value) -> ConfigLayer {
    ConfigLayer::from_json(&value, kind).unwrap()
}

fn with_defaults(layers: Vec<ConfigLayer>) -> ResolvedConfig {
    let mut all = vec![ConfigLayer::defaults()];
    all.extend(layers);
    resolve(&all).unwrap()
}

fn approve_list(resolved: &ResolvedConfig) -> Vec<String> {
    match resolved.auto_approve() {
        AutoApprove::Tools { tools, .. } => tools,
        AutoApprove::Function(f) => panic!("expected a list, got function {f:?}"),
    }
}

fn first_error(result: Result<ResolvedConfig, ConfigErrors>) -> ConfigError {
    result.unwrap_err().errors()[0].clone()
}

// ---- defaults ------------------------------------------------------------------------------

#[test]
fn defaults_follow_the_seeds() {
    let resolved = with_defaults(vec![]);
    let config = &resolved.config;
    assert_eq!(config.provider, Provider::Anthropic);
    assert_eq!(config.model, "claude-sonnet-4-6");
    assert_eq!(
        config.parameters.thinking,
        Thinking::Level(ThinkingLevel::High)
    );
    assert_eq!(config.parameters.max_tokens, MaxTokens::Percent(50));
    assert_eq!(config.parameters.timeout, 600);
    assert_eq!(config.parameters.connect_timeout, 10);
    assert_eq!(config.parameters.cache_retention, CacheRetention::Short);
    assert_eq!(config.parameters.anthropic.api_version, "2023-06-01");
    assert_eq!(config.parameters.vertex.location, "global");
    assert!(config.tools.autopilot.enabled);
    assert_eq!(config.tools.autopilot.max_turns, 100);
    assert_eq!(config.tools.autopilot.resume_delay, 2000);
    assert_eq!(config.tools.max_concurrent, 2);
    assert_eq!(config.tools.default_timeout, 30);
    assert!(config.tools.require_approval);
    assert_eq!(config.tools.store.path_format, "$chat");
    assert_eq!(config.tools.store.preview.lines, 10);
    assert_eq!(config.tools.store.preview.bytes, 2048);
    assert_eq!(config.tools.store.backup, Backup::Version);
    assert!(config.sandbox.enabled);
    // The seeds also list `/tmp`, `$TMPDIR` and the cache: flemmad's sandbox gives each chat
    // private ones instead (docs/security.md, invariant I), so they are not host paths here.
    assert_eq!(
        config.sandbox.policy.rw_paths,
        [
            "urn:flemma:cwd",
            "urn:flemma:buffer:path",
            "urn:flemma:store"
        ]
    );
    assert_eq!(config.sandbox.limits.processes, 512);
    assert_eq!(config.sandbox.limits.memory, 8192);
    assert!(config.editing.compact_headers);
    assert_eq!(config.editing.coalesce_ms, 100);
    assert_eq!(config.secrets.gcloud.path, "gcloud");
    assert_eq!(
        approve_list(&resolved),
        ["read", "write", "edit", "find", "grep", "ls", "flemma.*"]
    );
    assert_eq!(resolved.enabled_tools(), UNCONDITIONAL_TOOLS);
    assert_eq!(
        resolved.source_of("parameters.thinking"),
        Some(LayerKind::Defaults)
    );
}

#[test]
fn default_model_per_provider() {
    // Flemma's defaults (its README's provider table).
    assert_eq!(default_model(Provider::Openai), "gpt-5.4");
    assert_eq!(default_model(Provider::Gemini), "gemini-3.1-pro-preview");
    assert_eq!(default_model(Provider::Vertex), "gemini-3.1-pro-preview");
    assert_eq!(default_model(Provider::Anthropic), "claude-sonnet-4-6");
    assert_eq!(default_model(Provider::Moonshot), "kimi-k2.6");
}

// ---- precedence and provenance -------------------------------------------------------------

#[test]
fn highest_layer_wins_for_scalars_whatever_the_argument_order() {
    let user = ConfigLayer::from_toml_str(
        "[parameters]\nthinking = \"low\"\ntemperature = 0.5\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let client = layer_json(
        LayerKind::Client,
        json!({"parameters": {"thinking": "medium"}}),
    );
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set("parameters.thinking", json!("max"))
        .unwrap();
    let resolved = resolve(&[frontmatter, client, ConfigLayer::defaults(), user]).unwrap();
    assert_eq!(
        resolved.config.parameters.thinking,
        Thinking::Level(ThinkingLevel::Max)
    );
    assert_eq!(resolved.config.parameters.temperature, Some(0.5));
    assert_eq!(
        resolved.source_of("parameters.thinking"),
        Some(LayerKind::Frontmatter)
    );
    assert_eq!(
        resolved.source_of("parameters.temperature"),
        Some(LayerKind::UserFile)
    );
    assert_eq!(
        resolved.source_of("parameters"),
        Some(LayerKind::Frontmatter)
    );
}

#[test]
fn provenance_lists_every_leaf_with_its_layer() {
    let runtime = layer_json(LayerKind::Runtime, json!({"tools": {"max_concurrent": 0}}));
    let resolved = with_defaults(vec![runtime]);
    let provenance = resolved.provenance();
    assert!(provenance.contains(&("tools.max_concurrent".into(), LayerKind::Runtime)));
    assert!(provenance.contains(&("tools.default_timeout".into(), LayerKind::Defaults)));
    assert!(provenance.contains(&("tools.auto_approve".into(), LayerKind::Defaults)));
    assert_eq!(resolved.config.tools.max_concurrent, 0);
}

#[test]
fn lists_record_the_highest_layer_that_touched_them() {
    let user = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"auto_approve": ["+bash"]}}),
    );
    let resolved = with_defaults(vec![user]);
    assert_eq!(
        resolved.source_of("tools.auto_approve"),
        Some(LayerKind::UserFile)
    );
}

#[test]
fn switching_provider_without_a_model_uses_the_provider_default() {
    let user = layer_json(
        LayerKind::UserFile,
        json!({"provider": "anthropic", "model": "claude-opus-4-1"}),
    );
    assert_eq!(
        with_defaults(vec![user.clone()]).config.model,
        "claude-opus-4-1"
    );

    let runtime = layer_json(LayerKind::Runtime, json!({"provider": "openai"}));
    let resolved = with_defaults(vec![user.clone(), runtime.clone()]);
    assert_eq!(resolved.config.provider, Provider::Openai);
    assert_eq!(resolved.config.model, "gpt-5.4");
    assert_eq!(resolved.source_of("model"), Some(LayerKind::Runtime));

    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"model": "gpt-5-mini"}));
    let resolved = with_defaults(vec![user, runtime, frontmatter]);
    assert_eq!(resolved.config.model, "gpt-5-mini");
}

// ---- op-prefix lists (seed 001) ------------------------------------------------------------

#[test]
fn standard_minus_write_plus_bash() {
    let user = ConfigLayer::from_toml_str(
        "[tools]\nauto_approve = [\"$standard\", \"!write\", \"+bash\"]\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let resolved = with_defaults(vec![user]);
    assert_eq!(
        approve_list(&resolved),
        ["read", "edit", "find", "grep", "ls", "flemma.*", "bash"]
    );
    let policy = resolved.auto_approve();
    assert_eq!(policy.approves("write"), Some(false));
    assert_eq!(policy.approves("bash"), Some(true));
    assert_eq!(policy.approves("flemma.jobs.status"), Some(true));
    match policy {
        AutoApprove::Tools { exclusions, .. } => assert_eq!(exclusions, ["write"]),
        AutoApprove::Function(_) => unreachable!(),
    }
}

#[test]
fn readonly_plus_bash_in_frontmatter() {
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set(
            &opt_path("tools.auto_approve").unwrap(),
            json!(["$readonly", "+bash"]),
        )
        .unwrap();
    let resolved = with_defaults(vec![frontmatter]);
    assert_eq!(
        approve_list(&resolved),
        ["read", "find", "grep", "ls", "bash"]
    );
    assert_eq!(
        resolved.source_of("tools.auto_approve"),
        Some(LayerKind::Frontmatter)
    );
}

#[test]
fn bare_items_seed_the_list_then_ops_apply_in_order() {
    let layer = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"enabled": ["+grep", "read", "write", "!write", "^bash"]}}),
    );
    assert_eq!(
        with_defaults(vec![layer]).enabled_tools(),
        ["bash", "read", "grep"]
    );
}

#[test]
fn plain_array_replaces_and_ops_only_array_modifies_inherited_list() {
    let plain = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"enabled": ["read", "write"]}}),
    );
    assert_eq!(
        with_defaults(vec![plain.clone()]).enabled_tools(),
        ["read", "write"]
    );
    let ops = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"enabled": ["+grep", "!read"]}}),
    );
    assert_eq!(
        with_defaults(vec![plain, ops]).enabled_tools(),
        ["write", "grep"]
    );
}

#[test]
fn empty_list_sets_to_empty() {
    let layer = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": []}}),
    );
    let resolved = with_defaults(vec![layer]);
    assert!(approve_list(&resolved).is_empty());
    assert_eq!(resolved.auto_approve().approves("read"), Some(false));
    assert_eq!(resolved.config.tools.auto_approve, Vec::<String>::new());
}

#[test]
fn combined_prefixes_are_errors() {
    for bad in ["+^bash", "!$standard", "^!write", "++bash", "+$readonly"] {
        let error = ConfigLayer::from_json(
            &json!({"tools": {"auto_approve": [bad]}}),
            LayerKind::Frontmatter,
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(message.contains("combines operators"), "{bad}: {message}");
        assert!(message.contains(bad), "{bad}: {message}");
    }
}

#[test]
fn env_var_looking_items_are_plain_items() {
    let layer = layer_json(
        LayerKind::UserFile,
        json!({"sandbox": {"policy": {"rw_paths": ["+$HOME/projects", "+${TMPDIR}/x"]}}}),
    );
    let resolved = with_defaults(vec![layer]);
    let paths = &resolved.config.sandbox.policy.rw_paths;
    assert_eq!(paths[paths.len() - 2..], ["$HOME/projects", "${TMPDIR}/x"]);

    // In a tool list `$HOME` is not a preset, so it is checked as a (unknown) tool name.
    let tools = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"enabled": ["$HOME"]}}),
    );
    let error = first_error(resolve(&[ConfigLayer::defaults(), tools]));
    assert!(error.message.contains("unknown value '$HOME'"), "{error}");
}

#[test]
fn presets_are_rejected_in_text_lists() {
    let error = ConfigLayer::from_json(
        &json!({"tools": {"grep": {"exclude": ["$readonly"]}}}),
        LayerKind::UserFile,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("presets only apply to tool lists"),
        "{error}"
    );
}

#[test]
fn list_ops_api_matches_the_rhai_methods() {
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    let tools = opt_path("tools").unwrap();
    frontmatter.set(&tools, json!(["bash", "read"])).unwrap();
    frontmatter
        .list_op(&tools, ListOp::Append("grep".into()))
        .unwrap();
    frontmatter
        .list_op(&tools, ListOp::Remove("bash".into()))
        .unwrap();
    frontmatter
        .list_op(&tools, ListOp::Prepend("ls".into()))
        .unwrap();
    assert_eq!(
        frontmatter.get("tools.enabled"),
        Some(json!(["bash", "read", "+grep", "!bash", "^ls"]))
    );
    assert_eq!(
        with_defaults(vec![frontmatter]).enabled_tools(),
        ["ls", "read", "grep"]
    );
}

#[test]
fn assignment_replaces_the_same_layers_earlier_ops() {
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set("tools.auto_approve", json!(["$readonly"]))
        .unwrap();
    frontmatter
        .set("tools.auto_approve", json!(["+bash"]))
        .unwrap();
    assert_eq!(
        frontmatter.get("tools.auto_approve"),
        Some(json!(["+bash"]))
    );
    let resolved = with_defaults(vec![frontmatter]);
    assert_eq!(
        approve_list(&resolved).last().map(String::as_str),
        Some("bash")
    );
    assert!(approve_list(&resolved).contains(&"write".to_string()));
}

// ---- exclusions and presets ----------------------------------------------------------------

#[test]
fn exclusion_survives_a_later_preset_expansion() {
    let user = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"auto_approve": ["$standard", "!write"]}}),
    );
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .list_op("tools.auto_approve", ListOp::Append("$readonly".into()))
        .unwrap();
    frontmatter
        .list_op("tools.auto_approve", ListOp::Append("$standard".into()))
        .unwrap();
    let resolved = with_defaults(vec![user.clone(), frontmatter]);
    assert!(!approve_list(&resolved).contains(&"write".to_string()));
    assert_eq!(resolved.auto_approve().approves("edit"), Some(true));

    // A later `+write` lifts the exclusion; a later set starts over.
    let lift = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": ["+write"]}}),
    );
    assert!(approve_list(&with_defaults(vec![user.clone(), lift])).contains(&"write".to_string()));
    let reset = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": ["$standard"]}}),
    );
    assert!(approve_list(&with_defaults(vec![user, reset])).contains(&"write".to_string()));
}

#[test]
fn removing_a_tool_before_its_preset_is_added_still_excludes_it() {
    let user = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"auto_approve": ["!write"]}}),
    );
    // `"+$standard"` combines operators in literal syntax; the API form appends a preset.
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .list_op("tools.auto_approve", ListOp::Append("$standard".into()))
        .unwrap();
    let resolved = with_defaults(vec![user, frontmatter]);
    assert!(!approve_list(&resolved).contains(&"write".to_string()));
}

#[test]
fn user_presets_override_builtins_and_may_nest() {
    let user = ConfigLayer::from_toml_str(
        r#"
[presets."$readonly"]
auto_approve = ["read"]

[presets."$yolo"]
auto_approve = ["$readonly", "bash", "write", "edit"]

[tools]
auto_approve = ["$yolo"]
"#,
        LayerKind::UserFile,
    )
    .unwrap();
    let resolved = with_defaults(vec![user]);
    assert_eq!(approve_list(&resolved), ["read", "bash", "write", "edit"]);
    assert_eq!(
        resolved.config.presets["$yolo"].auto_approve[0],
        "$readonly"
    );
}

#[test]
fn preset_names_must_be_dollar_lowercase() {
    let error = ConfigLayer::from_toml_str(
        "[presets.yolo]\nauto_approve = [\"bash\"]\n",
        LayerKind::UserFile,
    )
    .unwrap_err();
    assert_eq!(error.errors()[0].suggestion.as_deref(), Some("$yolo"));
}

// ---- unknown names and "did you mean" ------------------------------------------------------

#[test]
fn unknown_key_suggests_the_closest_option() {
    let error = ConfigLayer::from_json(
        &json!({"parameters": {"thinkng": "low"}}),
        LayerKind::Client,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown option 'parameters.thinkng'. Did you mean 'parameters.thinking'?"
    );
    assert_eq!(error.errors()[0].layer, Some(LayerKind::Client));

    let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
    let error = layer.set("parameters.thinkng", json!("low")).unwrap_err();
    assert_eq!(error.suggestion.as_deref(), Some("parameters.thinking"));
}

#[test]
fn misplaced_key_suggests_its_real_location() {
    // (`thinking` at the top level is one of Flemma's aliases; `connect_timeout` is not.)
    let error =
        ConfigLayer::from_toml_str("connect_timeout = 5\n", LayerKind::UserFile).unwrap_err();
    assert_eq!(
        error.errors()[0].suggestion.as_deref(),
        Some("parameters.connect_timeout")
    );
}

#[test]
fn unknown_enum_value_suggests_the_closest_value() {
    let error =
        ConfigLayer::from_json(&json!({"provider": "opnai"}), LayerKind::Runtime).unwrap_err();
    assert_eq!(error.errors()[0].suggestion.as_deref(), Some("openai"));
    assert!(
        error
            .to_string()
            .starts_with("unknown value 'opnai' for 'provider'"),
        "{error}"
    );

    let error = ConfigLayer::from_json(
        &json!({"parameters": {"thinking": "hgih"}}),
        LayerKind::Runtime,
    )
    .unwrap_err();
    assert_eq!(error.errors()[0].suggestion.as_deref(), Some("high"));
}

#[test]
fn unknown_tool_suggests_the_closest_tool() {
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set(&opt_path("tools").unwrap(), json!(["raed"]))
        .unwrap();
    let error = first_error(resolve(&[ConfigLayer::defaults(), frontmatter]));
    assert_eq!(
        error.to_string(),
        "unknown value 'raed' in 'tools.enabled': no tool has that name. Did you mean 'read'?"
    );
    assert_eq!(error.layer, Some(LayerKind::Frontmatter));
}

#[test]
fn unknown_preset_suggests_the_closest_preset() {
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": ["$standrd"]}}),
    );
    let error = first_error(resolve(&[ConfigLayer::defaults(), frontmatter]));
    assert_eq!(error.suggestion.as_deref(), Some("$standard"));
    assert!(
        error.message.contains("unknown preset '$standrd'"),
        "{error}"
    );
}

#[test]
fn wrong_types_say_what_is_expected() {
    let error = ConfigLayer::from_json(
        &json!({"tools": {"max_concurrent": "two"}}),
        LayerKind::Client,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("expected an integer of at least 0"),
        "{error}"
    );
    let error =
        ConfigLayer::from_json(&json!({"tools": {"max_concurrent": -1}}), LayerKind::Client)
            .unwrap_err();
    assert!(
        error.to_string().contains("tools.max_concurrent"),
        "{error}"
    );
    let error = ConfigLayer::from_json(
        &json!({"tools": {"auto_approve": "bash"}}),
        LayerKind::Client,
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("must be a list of strings"),
        "{error}"
    );
    let error = ConfigLayer::from_json(&json!({"parameters": 3}), LayerKind::Client).unwrap_err();
    assert!(
        error.to_string().contains("'parameters' must be a table"),
        "{error}"
    );
}

#[test]
fn failed_set_leaves_the_layer_unchanged() {
    let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
    layer.set("parameters.thinking", json!("low")).unwrap();
    let before = layer.clone();
    assert!(
        layer
            .set("parameters", json!({"thinking": "medium", "timeout": "x"}))
            .is_err()
    );
    assert_eq!(layer, before);
}

// ---- TOML locations ------------------------------------------------------------------------

#[test]
fn toml_errors_carry_line_and_column() {
    let text = "provider = \"anthropic\"\n\n[parameters]\nthinkng = \"low\"\n";
    let error = ConfigLayer::from_toml_str(text, LayerKind::UserFile).unwrap_err();
    let first = &error.errors()[0];
    assert_eq!(first.location, Some(Location { line: 4, column: 1 }));
    assert_eq!(
        first.to_string(),
        "line 4, column 1: unknown option 'parameters.thinkng'. Did you mean 'parameters.thinking'?"
    );

    let text = "[tools]\nmax_concurrent = 2\nauto_approve = [\"$standard\", \"+^bash\"]\n";
    let error = ConfigLayer::from_toml_str(text, LayerKind::UserFile).unwrap_err();
    assert_eq!(error.errors()[0].location.map(|l| l.line), Some(3));
}

#[test]
fn toml_syntax_errors_carry_line_and_column() {
    let error = ConfigLayer::from_toml_str("[tools]\nmax_concurrent = = 2\n", LayerKind::UserFile)
        .unwrap_err();
    let first = &error.errors()[0];
    assert_eq!(first.location.map(|l| l.line), Some(2));
    assert!(first.message.starts_with("invalid TOML"), "{first}");
}

#[test]
fn all_errors_of_a_file_are_reported() {
    let text = "provder = \"x\"\n[tools]\nmax_concurent = 2\n";
    let error = ConfigLayer::from_toml_str(text, LayerKind::UserFile).unwrap_err();
    assert_eq!(error.errors().len(), 2);
    assert_eq!(error.errors()[1].location.map(|l| l.line), Some(3));
}

// ---- JSON frontmatter and frontmatter paths ------------------------------------------------

#[test]
fn json_frontmatter_example_from_the_seed() {
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({
            "provider": "openai",
            "model": "gpt-5",
            "parameters": {"thinking": "medium", "temperature": 0.3},
            "tools": {"auto_approve": ["$standard", "!write", "+bash"]}
        }),
    );
    let user = layer_json(LayerKind::UserFile, json!({"parameters": {"timeout": 120}}));
    let resolved = with_defaults(vec![user, frontmatter]);
    let config = &resolved.config;
    assert_eq!(config.provider, Provider::Openai);
    assert_eq!(config.model, "gpt-5");
    assert_eq!(
        config.parameters.thinking,
        Thinking::Level(ThinkingLevel::Medium)
    );
    assert_eq!(config.parameters.temperature, Some(0.3));
    assert_eq!(
        config.parameters.timeout, 120,
        "sibling parameters are untouched"
    );
    assert!(!approve_list(&resolved).contains(&"write".to_string()));
}

#[test]
fn tools_array_in_json_means_tools_enabled() {
    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"tools": ["read"]}));
    assert_eq!(frontmatter.get("tools.enabled"), Some(json!(["read"])));
    assert_eq!(with_defaults(vec![frontmatter]).enabled_tools(), ["read"]);
}

#[test]
fn autopilot_bool_shorthand_everywhere() {
    let mut rhai_like = ConfigLayer::new(LayerKind::Frontmatter);
    rhai_like
        .set(&opt_path("tools.autopilot").unwrap(), json!(false))
        .unwrap();
    assert_eq!(rhai_like.get("tools.autopilot.enabled"), Some(json!(false)));
    let resolved = with_defaults(vec![rhai_like]);
    assert!(!resolved.config.tools.autopilot.enabled);
    assert_eq!(resolved.config.tools.autopilot.max_turns, 100);
    assert_eq!(
        resolved.source_of("tools.autopilot.enabled"),
        Some(LayerKind::Frontmatter)
    );

    let toml =
        ConfigLayer::from_toml_str("[tools]\nautopilot = false\n", LayerKind::UserFile).unwrap();
    assert!(!with_defaults(vec![toml]).config.tools.autopilot.enabled);
    let json = layer_json(
        LayerKind::Client,
        json!({"tools": {"autopilot": {"max_turns": 5}}}),
    );
    assert_eq!(
        with_defaults(vec![json]).config.tools.autopilot.max_turns,
        5
    );
}

#[test]
fn opt_path_maps_frontmatter_aliases() {
    let cases = [
        ("thinking", "parameters.thinking"),
        ("temperature", "parameters.temperature"),
        ("max_tokens", "parameters.max_tokens"),
        ("cache_retention", "parameters.cache_retention"),
        (
            "anthropic.thinking_budget",
            "parameters.anthropic.thinking_budget",
        ),
        ("openai.reasoning", "parameters.openai.reasoning"),
        (
            "vertex.thinking_budget",
            "parameters.vertex.thinking_budget",
        ),
        ("tools", "tools.enabled"),
        ("tools.auto_approve", "tools.auto_approve"),
        ("tools.autopilot", "tools.autopilot"),
        ("tools.max_concurrent", "tools.max_concurrent"),
        ("provider", "provider"),
        ("model", "model"),
        ("parameters.thinking", "parameters.thinking"),
    ];
    for (alias, expected) in cases {
        assert_eq!(opt_path(alias).unwrap(), expected, "{alias}");
    }
    let error = opt_path("thinkng").unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown option 'thinkng'. Did you mean 'thinking'?"
    );
    let error = opt_path("anthropic.thinking_budgt").unwrap_err();
    assert!(error.suggestion.is_some(), "{error}");
}

#[test]
fn seed_parameter_overrides_via_opt_paths() {
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    for (alias, value) in [
        ("thinking", json!("medium")),
        ("temperature", json!(0.3)),
        ("max_tokens", json!(8000)),
        ("cache_retention", json!("none")),
        ("anthropic.thinking_budget", json!(20000)),
        ("openai.reasoning", json!("high")),
        ("vertex.thinking_budget", json!(4096)),
    ] {
        frontmatter.set(&opt_path(alias).unwrap(), value).unwrap();
    }
    let config = with_defaults(vec![frontmatter]).config;
    assert_eq!(config.parameters.max_tokens, MaxTokens::Tokens(8000));
    assert_eq!(config.parameters.cache_retention, CacheRetention::None);
    assert_eq!(config.parameters.anthropic.thinking_budget, Some(20000));
    assert_eq!(
        config.parameters.openai.reasoning,
        Some(ReasoningEffort::High)
    );
    assert_eq!(config.parameters.vertex.thinking_budget, Some(4096));
}

/// Flemma's schema declares top-level `thinking`, `timeout`, `max_tokens`, `temperature` and
/// `tools.approve` as aliases: a chat Flemma sends (`{"flemma": {"thinking": "low"}}`) must
/// resolve, in every layer that takes a table, to the option each stands for.
#[test]
fn flemmas_schema_aliases_set_the_options_they_stand_for_in_every_layer() {
    let flemma = json!({
        "thinking": "low",
        "timeout": 42,
        "max_tokens": 900,
        "temperature": 0.25,
        "tools": {"approve": ["bash"]},
    });
    for kind in [
        LayerKind::Frontmatter,
        LayerKind::Client,
        LayerKind::UserFile,
    ] {
        let resolved = with_defaults(vec![layer_json(kind, flemma.clone())]);
        let parameters = &resolved.config.parameters;
        assert_eq!(
            parameters.thinking,
            Thinking::Level(ThinkingLevel::Low),
            "{kind:?}"
        );
        assert_eq!(parameters.timeout, 42, "{kind:?}");
        assert_eq!(parameters.max_tokens, MaxTokens::Tokens(900), "{kind:?}");
        assert_eq!(parameters.temperature, Some(0.25), "{kind:?}");
        assert_eq!(approve_list(&resolved), ["bash"], "{kind:?}");
    }
    // Stored as the option: the layer's own view and the provenance name it.
    let layer = layer_json(LayerKind::Frontmatter, json!({"thinking": false}));
    assert_eq!(layer.get("parameters.thinking"), Some(json!(false)));
    assert_eq!(layer.get("thinking"), Some(json!(false)));
    // A wrong value is refused as the option's would be.
    let error = ConfigLayer::from_json(&json!({"thinking": "loud"}), LayerKind::Frontmatter)
        .unwrap_err()
        .errors()[0]
        .clone();
    assert!(error.to_string().contains("parameters.thinking"), "{error}");
    // `set` and `opt_path` take them too.
    let mut runtime = ConfigLayer::new(LayerKind::Runtime);
    runtime.set("temperature", json!(0.5)).unwrap();
    runtime.set("tools.approve", json!(["read"])).unwrap();
    assert_eq!(runtime.get("parameters.temperature"), Some(json!(0.5)));
    assert_eq!(opt_path("timeout").unwrap(), "parameters.timeout");
    assert_eq!(opt_path("tools.approve").unwrap(), "tools.auto_approve");
}

#[test]
fn get_returns_the_layers_own_view() {
    let layer = layer_json(
        LayerKind::Frontmatter,
        json!({"parameters": {"thinking": "low", "anthropic": {"thinking_budget": 2048}}}),
    );
    assert_eq!(layer.get("parameters.thinking"), Some(json!("low")));
    assert_eq!(
        layer.get("parameters"),
        Some(json!({"thinking": "low", "anthropic": {"thinking_budget": 2048}}))
    );
    assert_eq!(layer.get("tools"), None);
    assert_eq!(layer.get("no.such.option"), None);
}

// ---- values --------------------------------------------------------------------------------

#[test]
fn max_tokens_accepts_counts_and_percentages() {
    let percent = layer_json(
        LayerKind::UserFile,
        json!({"parameters": {"max_tokens": "25%"}}),
    );
    let config = with_defaults(vec![percent]).config;
    assert_eq!(config.parameters.max_tokens, MaxTokens::Percent(25));
    assert_eq!(config.parameters.max_tokens.for_limit(64000), 16000);
    for bad in [
        json!("150%"),
        json!("50"),
        json!("0%"),
        json!(0),
        json!("%"),
    ] {
        let result = ConfigLayer::from_json(
            &json!({"parameters": {"max_tokens": bad}}),
            LayerKind::UserFile,
        );
        assert!(result.is_err(), "{bad} accepted");
    }
}

#[test]
fn thinking_accepts_levels_budgets_and_false() {
    let off = layer_json(
        LayerKind::UserFile,
        json!({"parameters": {"thinking": false}}),
    );
    assert_eq!(
        with_defaults(vec![off]).config.parameters.thinking,
        Thinking::Off
    );
    let budget = layer_json(
        LayerKind::UserFile,
        json!({"parameters": {"thinking": 4096}}),
    );
    assert_eq!(
        with_defaults(vec![budget]).config.parameters.thinking,
        Thinking::Budget(4096)
    );
    assert!(
        ConfigLayer::from_json(
            &json!({"parameters": {"thinking": true}}),
            LayerKind::UserFile
        )
        .is_err()
    );
}

#[test]
fn backup_accepts_version_or_false() {
    let off = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"store": {"backup": false}}}),
    );
    assert_eq!(
        with_defaults(vec![off]).config.tools.store.backup,
        Backup::Off
    );
    assert!(
        ConfigLayer::from_json(
            &json!({"tools": {"store": {"backup": true}}}),
            LayerKind::UserFile
        )
        .is_err()
    );
}

#[test]
fn model_ids_with_dots_work_in_paths_and_files() {
    let mut layer = ConfigLayer::new(LayerKind::Runtime);
    layer
        .set("models.gemini-2.5-pro.input", json!(1.25))
        .unwrap();
    layer
        .set("models.\"gpt-4.1\"", json!({"context_window": 1_000_000}))
        .unwrap();
    let toml = ConfigLayer::from_toml_str(
        "[models.\"gemini-2.5-flash\"]\noutput = 2.5\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let config = with_defaults(vec![toml, layer]).config;
    assert_eq!(config.models["gemini-2.5-pro"].input, Some(1.25));
    assert_eq!(config.models["gpt-4.1"].context_window, Some(1_000_000));
    assert_eq!(config.models["gemini-2.5-flash"].output, Some(2.5));
}

// ---- functions -----------------------------------------------------------------------------

#[test]
fn auto_approve_function_and_its_limits() {
    let func = FunctionRef {
        id: 7,
        description: "|tool, input, ctx| …".into(),
    };
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set_function("tools.auto_approve", func.clone())
        .unwrap();
    assert_eq!(
        frontmatter.get("tools.auto_approve"),
        Some(json!({"function": {"id": 7, "description": "|tool, input, ctx| …"}}))
    );
    let resolved = with_defaults(vec![frontmatter.clone()]);
    assert_eq!(resolved.auto_approve(), AutoApprove::Function(func.clone()));
    assert_eq!(resolved.auto_approve().approves("read"), None);

    let error = frontmatter
        .list_op("tools.auto_approve", ListOp::Append("bash".into()))
        .unwrap_err();
    assert!(
        ConfigLayer::new(LayerKind::Frontmatter)
            .list_op("tools.enabled", ListOp::Append("+grep".into()))
            .is_err()
    );
    assert!(error.message.contains("function"), "{error}");
    assert!(
        ConfigLayer::new(LayerKind::Frontmatter)
            .set_function("tools.enabled", func.clone())
            .is_err()
    );

    // A function in a lower layer: ops above it are errors, a full list replaces it.
    let mut runtime = ConfigLayer::new(LayerKind::Runtime);
    runtime.set_function("tools.auto_approve", func).unwrap();
    let ops = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": ["+bash"]}}),
    );
    assert!(resolve(&[ConfigLayer::defaults(), runtime.clone(), ops]).is_err());
    let list = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": ["read"]}}),
    );
    assert_eq!(approve_list(&with_defaults(vec![runtime, list])), ["read"]);
}

// ---- tools registry, globs, conditional and custom tools -----------------------------------

#[test]
fn an_invalid_glob_is_an_error_naming_the_option() {
    let cases = [
        (
            json!({"tools": {"enabled": ["+slack.[ab"]}}),
            "tools.enabled",
            "slack.[ab",
        ),
        (
            json!({"tools": {"auto_approve": ["+slack.{a"]}}),
            "tools.auto_approve",
            "slack.{a",
        ),
        (
            json!({"tools": {"mcp": {"exclude": ["gh.[x"]}}}),
            "tools.mcp.exclude",
            "gh.[x",
        ),
        (
            json!({"trust": {"paths": ["~/notes/[x"]}}),
            "trust.paths",
            "~/notes/[x",
        ),
    ];
    for (value, path, item) in cases {
        let layer = layer_json(LayerKind::UserFile, value);
        let error = first_error(resolve(&[ConfigLayer::defaults(), layer]));
        assert_eq!(error.path, path);
        assert!(
            error
                .message
                .starts_with(&format!("'{item}' in '{path}' is not a valid glob (")),
            "{}",
            error.message
        );
        assert!(error.message.contains("\"Globs\""), "{}", error.message);
    }
}

#[test]
fn globs_in_tool_lists_expand_against_registered_tools() {
    let extra = vec![
        "slack.post".to_string(),
        "slack.read".to_string(),
        "linear.search".to_string(),
    ];
    let append = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"enabled": ["+slack.*"]}}),
    );
    let resolved = resolve_with_tools(&[ConfigLayer::defaults(), append], &extra).unwrap();
    assert!(
        resolved
            .enabled_tools()
            .ends_with(&["slack.post".to_string(), "slack.read".to_string()])
    );

    let remove = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"enabled": ["+slack.*", "+linear.search", "!slack.*"]}}),
    );
    let resolved = resolve_with_tools(&[ConfigLayer::defaults(), remove], &extra).unwrap();
    assert!(
        resolved
            .enabled_tools()
            .contains(&"linear.search".to_string())
    );
    assert!(
        !resolved
            .enabled_tools()
            .iter()
            .any(|t| t.starts_with("slack."))
    );

    let nothing = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"enabled": ["+github.*"]}}),
    );
    let error = first_error(resolve_with_tools(
        &[ConfigLayer::defaults(), nothing],
        &extra,
    ));
    assert!(error.message.contains("matched no tools"), "{error}");
}

#[test]
fn auto_approve_globs_stay_verbatim() {
    let layer = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"auto_approve": ["slack.*"]}}),
    );
    let resolved = with_defaults(vec![layer]);
    assert_eq!(approve_list(&resolved), ["slack.*"]);
    assert_eq!(resolved.auto_approve().approves("slack.post"), Some(true));
    assert_eq!(resolved.auto_approve().approves("bash"), Some(false));
}

#[test]
fn conditional_and_custom_tools_join_the_default_list() {
    let user = ConfigLayer::from_toml_str(
        r#"
[tools]
fetch_content = true
skills_dir = "~/skills"

[tools.lsp]
servers = ["rust-analyzer"]

[[tools.custom]]
name = "jq"
description = "Run jq"
command = "jq ."
"#,
        LayerKind::UserFile,
    )
    .unwrap();
    let resolved = with_defaults(vec![user.clone()]);
    let enabled = resolved.enabled_tools();
    for tool in ["read_skill", "fetch_content", "lsp", "jq", "bash"] {
        assert!(
            enabled.contains(&tool.to_string()),
            "{tool} missing from {enabled:?}"
        );
    }
    // The custom tool is a known name for approval lists too.
    let approve = layer_json(
        LayerKind::Frontmatter,
        json!({"tools": {"auto_approve": ["+jq"], "enabled": ["!jq"]}}),
    );
    let resolved = with_defaults(vec![user, approve]);
    assert_eq!(resolved.auto_approve().approves("jq"), Some(true));
    assert!(!resolved.enabled_tools().contains(&"jq".to_string()));
    assert_eq!(
        resolved.config.tools.custom[0].input_schema,
        json!({"type": "object", "properties": {}})
    );
}

#[test]
fn custom_tools_are_validated() {
    let missing = ConfigLayer::from_toml_str(
        "[[tools.custom]]\nname = \"x\"\ncommand = \"true\"\n",
        LayerKind::UserFile,
    )
    .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("missing the required key 'description'"),
        "{missing}"
    );
    assert_eq!(missing.errors()[0].location.map(|l| l.line), Some(1));

    let second = ConfigLayer::from_toml_str(
        "[[tools.custom]]\nname = \"a\"\ndescription = \"d\"\ncommand = \"true\"\n\n[[tools.custom]]\nname = \"b\"\ndescription = \"d\"\ncommand = \"true\"\ntimeout = \"soon\"\n",
        LayerKind::UserFile,
    )
    .unwrap_err();
    let error = &second.errors()[0];
    assert_eq!(error.path, "tools.custom[1].timeout");
    assert_eq!(error.location.map(|l| l.line), Some(10), "{error}");

    let typo = ConfigLayer::from_json(
        &json!({"tools": {"custom": [{"name": "x", "description": "d", "comand": "true"}]}}),
        LayerKind::UserFile,
    )
    .unwrap_err();
    assert_eq!(typo.errors()[0].suggestion.as_deref(), Some("command"));

    let clash = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"custom": [{"name": "bash", "description": "d", "command": "true"}]}}),
    );
    let error = first_error(resolve(&[ConfigLayer::defaults(), clash]));
    assert!(error.message.contains("built-in"), "{error}");
}

// ---- config file location ------------------------------------------------------------------

#[test]
fn default_config_path_follows_xdg_rules() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let explicit = env(&[
        ("FLEMMA_CONFIG", "/etc/f.toml"),
        ("XDG_CONFIG_HOME", "/x"),
        ("HOME", "/h"),
    ]);
    assert_eq!(default_config_path(&explicit), Some("/etc/f.toml".into()));
    let xdg = env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]);
    assert_eq!(
        default_config_path(&xdg),
        Some("/x/flemma/config.toml".into())
    );
    let relative_xdg = env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")]);
    assert_eq!(
        default_config_path(&relative_xdg),
        Some("/h/.config/flemma/config.toml".into())
    );
    let empty_flemma = env(&[("FLEMMA_CONFIG", ""), ("HOME", "/h")]);
    assert_eq!(
        default_config_path(&empty_flemma),
        Some("/h/.config/flemma/config.toml".into())
    );
    assert_eq!(default_config_path(&env(&[])), None);
}

#[test]
fn get_renders_a_reset_followed_by_appends_as_bare_items() {
    let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
    layer.set("tools.enabled", json!([])).unwrap();
    assert_eq!(layer.get("tools.enabled"), Some(json!([])));
    layer
        .list_op("tools.enabled", ListOp::Append("read".into()))
        .unwrap();
    layer
        .list_op("tools.enabled", ListOp::Remove("bash".into()))
        .unwrap();
    let rendered = layer.get("tools.enabled").unwrap();
    assert_eq!(rendered, json!(["read", "!bash"]));
    // The rendering means the same thing when assigned again.
    let mut again = ConfigLayer::new(LayerKind::Frontmatter);
    again.set("tools.enabled", rendered).unwrap();
    assert_eq!(
        with_defaults(vec![again]).enabled_tools(),
        with_defaults(vec![layer]).enabled_tools()
    );
}

#[test]
fn null_means_not_set_in_this_layer() {
    let client = layer_json(
        LayerKind::Client,
        json!({"provider": null, "parameters": {"temperature": null, "thinking": "low"}}),
    );
    assert_eq!(client.get("provider"), None);
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set("parameters.thinking", json!("max"))
        .unwrap();
    frontmatter.set("parameters", json!(null)).unwrap();
    assert!(frontmatter.is_empty());
    let resolved = with_defaults(vec![client, frontmatter]);
    assert_eq!(
        resolved.config.parameters.thinking,
        Thinking::Level(ThinkingLevel::Low)
    );
    assert_eq!(resolved.config.parameters.temperature, None);
}

#[test]
fn resolve_adds_the_defaults_layer_when_missing() {
    let user = layer_json(
        LayerKind::UserFile,
        json!({"tools": {"auto_approve": ["+bash"]}}),
    );
    let resolved = resolve(&[user]).unwrap();
    assert_eq!(resolved.config.tools.max_concurrent, 2);
    assert!(approve_list(&resolved).contains(&"bash".to_string()));
    assert!(approve_list(&resolved).contains(&"read".to_string()));
}

#[test]
fn option_shapes_guide_frontmatter_proxies() {
    assert_eq!(
        option_shape(&opt_path("tools").unwrap()).unwrap(),
        OptionShape::List {
            accepts_function: false
        }
    );
    assert_eq!(
        option_shape("tools.auto_approve").unwrap(),
        OptionShape::List {
            accepts_function: true
        }
    );
    assert_eq!(option_shape("tools.autopilot").unwrap(), OptionShape::Table);
    assert_eq!(option_shape("models.gpt-4.1").unwrap(), OptionShape::Table);
    assert_eq!(
        option_shape("parameters.thinking").unwrap(),
        OptionShape::Value
    );
    assert!(option_shape("parameters.thinkng").is_err());
}

#[test]
fn value_at_reads_the_resolved_tree() {
    let layer = layer_json(
        LayerKind::Runtime,
        json!({"parameters": {"thinking": 2048}, "models": {"gpt-4.1": {"input": 2.0}}}),
    );
    let resolved = with_defaults(vec![layer]);
    assert_eq!(resolved.value_at("parameters.thinking"), Some(json!(2048)));
    assert_eq!(
        resolved.value_at("tools.autopilot.max_turns"),
        Some(json!(100))
    );
    assert_eq!(resolved.value_at("models.gpt-4.1.input"), Some(json!(2.0)));
    assert_eq!(
        resolved.source_of("models.gpt-4.1.input"),
        Some(LayerKind::Runtime)
    );
    assert_eq!(
        resolved.source_of("models.\"gpt-4.1\".input"),
        Some(LayerKind::Runtime)
    );
    assert_eq!(resolved.source_of("models"), Some(LayerKind::Runtime));
    assert_eq!(
        resolved.value_at("tools.enabled"),
        Some(json!(UNCONDITIONAL_TOOLS))
    );
    assert_eq!(resolved.value_at("nope"), None);
}

// ---- model strings and presets (Flemma 0.13–0.14) ------------------------------------------

#[test]
fn a_model_string_selects_provider_model_and_parameters() {
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"model": "vertex/gemini-2.5-pro;project_id=x;thinking=low;max_tokens=4000"}),
    );
    let resolved = with_defaults(vec![frontmatter]);
    let config = &resolved.config;
    assert_eq!(config.provider, Provider::Vertex);
    assert_eq!(config.model, "gemini-2.5-pro");
    assert_eq!(config.parameters.vertex.project_id.as_deref(), Some("x"));
    assert_eq!(
        config.parameters.thinking,
        Thinking::Level(ThinkingLevel::Low)
    );
    assert_eq!(config.parameters.max_tokens, MaxTokens::Tokens(4000));
    assert_eq!(resolved.source_of("provider"), Some(LayerKind::Frontmatter));
    assert_eq!(
        resolved.source_of("parameters.vertex.project_id"),
        Some(LayerKind::Frontmatter)
    );
}

#[test]
fn a_model_string_in_the_config_file_too() {
    let user = ConfigLayer::from_toml_str(
        "model = \"anthropic/claude-opus-4-8;temperature=0.3\"\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let resolved = with_defaults(vec![user]);
    assert_eq!(resolved.config.provider, Provider::Anthropic);
    assert_eq!(resolved.config.model, "claude-opus-4-8");
    assert_eq!(resolved.config.parameters.temperature, Some(0.3));
}

#[test]
fn codex_model_strings_and_presets_select_the_subscription() {
    // `codex/…` selects provider codex; its own parameters are OpenAI's (the Responses API).
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"model": "codex/gpt-5.5;thinking=high;reasoning_summary=concise"}),
    );
    let resolved = with_defaults(vec![frontmatter]);
    assert_eq!(resolved.config.provider, Provider::Codex);
    assert_eq!(resolved.config.model, "gpt-5.5");
    assert_eq!(
        resolved.config.parameters.thinking,
        Thinking::Level(ThinkingLevel::High)
    );
    assert_eq!(
        resolved.source_of("parameters.openai.reasoning_summary"),
        Some(LayerKind::Frontmatter)
    );
    // A preset, and the provider alone: its default model.
    let user = ConfigLayer::from_toml_str(
        "[presets.\"$sub\"]\nmodel = \"codex/gpt-5.4-mini\"\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"model": "$sub"}));
    let resolved = with_defaults(vec![user, frontmatter]);
    assert_eq!(resolved.config.provider, Provider::Codex);
    assert_eq!(resolved.config.model, "gpt-5.4-mini");
    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"provider": "codex"}));
    let resolved = with_defaults(vec![frontmatter]);
    assert_eq!(resolved.config.model, "gpt-5.5");
}

#[test]
fn nil_clears_a_parameter_set_below() {
    let user = layer_json(
        LayerKind::UserFile,
        json!({"parameters": {"temperature": 0.7, "thinking": "max", "vertex": {"location": "us-east5"}}}),
    );
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"model": "vertex/gemini-2.5-flash;temperature=nil;thinking=nil;location=nil"}),
    );
    let resolved = with_defaults(vec![user, frontmatter]);
    assert_eq!(resolved.config.parameters.temperature, None);
    // Cleared parameters fall back to their defaults.
    assert_eq!(
        resolved.config.parameters.thinking,
        Thinking::Level(ThinkingLevel::High)
    );
    assert_eq!(resolved.config.parameters.vertex.location, "global");
    assert_eq!(
        resolved.source_of("parameters.thinking"),
        Some(LayerKind::Defaults)
    );
}

#[test]
fn a_slash_after_an_unknown_word_is_part_of_the_model() {
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"provider": "openai-compatible", "model": "meta-llama/Llama-3.1-8B"}),
    );
    let resolved = with_defaults(vec![frontmatter]);
    assert_eq!(resolved.config.provider, Provider::OpenaiCompatible);
    assert_eq!(resolved.config.model, "meta-llama/Llama-3.1-8B");
}

#[test]
fn model_string_mistakes_are_errors_with_suggestions() {
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"model": "vertex/gemini-2.5-pro;projct_id=x"}),
    );
    let error = first_error(resolve(&[ConfigLayer::defaults(), frontmatter]));
    assert!(
        error.message.contains("unknown parameter 'projct_id'"),
        "{error}"
    );
    assert_eq!(error.suggestion.as_deref(), Some("project_id"));
    assert_eq!(error.layer, Some(LayerKind::Frontmatter));

    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"model": "anthropic/claude-sonnet-4-6;thinking=hgih"}),
    );
    let error = first_error(resolve(&[ConfigLayer::defaults(), frontmatter]));
    assert!(error.message.contains("in model string"), "{error}");
    assert_eq!(error.suggestion.as_deref(), Some("high"));
}

fn fast_preset() -> ConfigLayer {
    ConfigLayer::from_toml_str(
        r#"
[presets."$fast"]
provider = "vertex"
model = "gemini-2.5-flash"
auto_approve = ["bash"]
tools = ["read", "bash"]

[presets."$fast".parameters]
thinking = "minimal"
vertex = { project_id = "p1" }
"#,
        LayerKind::UserFile,
    )
    .unwrap()
}

#[test]
fn a_model_preset_selects_provider_model_parameters_and_tools() {
    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"model": "$fast"}));
    let resolved = with_defaults(vec![fast_preset(), frontmatter]);
    let config = &resolved.config;
    assert_eq!(config.provider, Provider::Vertex);
    assert_eq!(config.model, "gemini-2.5-flash");
    assert_eq!(
        config.parameters.thinking,
        Thinking::Level(ThinkingLevel::Minimal)
    );
    assert_eq!(config.parameters.vertex.project_id.as_deref(), Some("p1"));
    assert_eq!(resolved.enabled_tools(), ["read", "bash"]);
    assert_eq!(resolved.auto_approve().approves("bash"), Some(true));
    assert_eq!(resolved.auto_approve().approves("write"), Some(false));
    let preset = &config.presets["$fast"];
    assert_eq!(preset.provider, Some(Provider::Vertex));
    assert_eq!(preset.model.as_deref(), Some("gemini-2.5-flash"));
}

#[test]
fn the_selecting_layer_beats_the_preset_and_the_string_beats_both() {
    let frontmatter = layer_json(
        LayerKind::Frontmatter,
        json!({"model": "$fast;project_id=p3", "parameters": {"thinking": "high", "vertex": {"project_id": "p2"}}}),
    );
    let resolved = with_defaults(vec![fast_preset(), frontmatter]);
    assert_eq!(
        resolved.config.parameters.thinking,
        Thinking::Level(ThinkingLevel::High)
    );
    assert_eq!(
        resolved.config.parameters.vertex.project_id.as_deref(),
        Some("p3")
    );
}

#[test]
fn an_unknown_preset_is_an_error_with_a_suggestion() {
    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"model": "$fats"}));
    let error = first_error(resolve(&[
        ConfigLayer::defaults(),
        fast_preset(),
        frontmatter,
    ]));
    assert!(error.message.contains("'$fats'"), "{error}");
    assert_eq!(error.suggestion.as_deref(), Some("$fast"));
}

#[test]
fn a_preset_with_a_provider_only_selects_its_default_model() {
    let user = ConfigLayer::from_toml_str(
        "[presets.\"$kimi\"]\nprovider = \"moonshot\"\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let frontmatter = layer_json(LayerKind::Frontmatter, json!({"model": "$kimi"}));
    let resolved = with_defaults(vec![user, frontmatter]);
    assert_eq!(resolved.config.provider, Provider::Moonshot);
    assert_eq!(resolved.config.model, "kimi-k2.6");
}

// ---- Flemma-only options and the pre-0.12 separator ------------------------------------------

#[test]
fn flemma_only_options_are_warnings_naming_what_flemmad_does() {
    let user = ConfigLayer::from_toml_str(
        "[tools.mcporter]\nenabled = true\ninclude = [\"slack:*\"]\n\n[editing]\nauto_write = true\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let warnings = user.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let mcporter = warnings
        .iter()
        .find(|w| w.message.contains("`tools.mcporter`"))
        .unwrap();
    assert!(mcporter.message.contains("[tools.mcp]"), "{mcporter}");
    assert_eq!(mcporter.location.map(|l| l.line), Some(1));
    assert_eq!(mcporter.layer, Some(LayerKind::UserFile));
    assert!(
        warnings
            .iter()
            .any(|w| w.message.contains("editing.auto_write"))
    );
    // The layer still resolves.
    with_defaults(vec![user]);

    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set("tools.mcporter.enabled", json!(true))
        .unwrap();
    assert_eq!(frontmatter.warnings().len(), 1);
    // Unknown options that Flemma does not have either are still errors.
    assert!(ConfigLayer::from_toml_str("[tools]\nmcporterz = 1\n", LayerKind::UserFile).is_err());
}

#[test]
fn colon_tool_names_are_read_with_a_dot_and_a_warning() {
    let user = ConfigLayer::from_toml_str(
        "[tools]\nauto_approve = [\"$standard\", \"flemma:*\"]\n",
        LayerKind::UserFile,
    )
    .unwrap();
    let warnings = user.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].message.contains("'flemma:*'") && warnings[0].message.contains("'flemma.*'"),
        "{}",
        warnings[0]
    );
    let resolved = with_defaults(vec![user]);
    assert_eq!(
        resolved.auto_approve().approves("flemma.jobs.status"),
        Some(true)
    );

    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .list_op("tools.auto_approve", ListOp::Append("slack:*".into()))
        .unwrap();
    assert!(frontmatter.warnings()[0].message.contains("'slack.*'"));
}
