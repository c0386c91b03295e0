//! Resolving defaults + user file + frontmatter layers (the work done on every re-evaluation).

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_config::{ConfigLayer, LayerKind, resolve};
use serde_json::json;

const USER_FILE: &str = r#"
provider = "anthropic"
model = "claude-sonnet-4-5"

[parameters]
thinking = "high"
max_tokens = "50%"
timeout = 300

[parameters.anthropic]
beta = ["context-1m-2025-08-07"]

[providers.openai-compatible]
base_url = "http://localhost:11434"

[models."gpt-5"]
input = 1.25
output = 10.0

[tools]
auto_approve = ["$standard", "!write", "+bash"]
max_concurrent = 4

[presets."$yolo"]
auto_approve = ["bash", "read", "write", "edit"]

[[tools.custom]]
name = "jq"
description = "Run jq"
command = "jq ."
"#;

fn bench_resolve(c: &mut Criterion) {
    let defaults = ConfigLayer::defaults();
    let user =
        ConfigLayer::from_toml_str(USER_FILE, LayerKind::UserFile).expect("valid bench config");
    let frontmatter = ConfigLayer::from_json(
        &json!({
            "provider": "openai",
            "parameters": {"thinking": "medium", "temperature": 0.3},
            "tools": {"auto_approve": ["$readonly", "+bash"], "autopilot": false}
        }),
        LayerKind::Frontmatter,
    )
    .expect("valid bench frontmatter");
    let layers = [defaults, user, frontmatter];
    c.bench_function("resolve defaults+file+frontmatter", |b| {
        b.iter(|| resolve(std::hint::black_box(&layers)).expect("resolves"))
    });
    c.bench_function("parse user file (TOML)", |b| {
        b.iter(|| {
            ConfigLayer::from_toml_str(std::hint::black_box(USER_FILE), LayerKind::UserFile)
                .expect("parses")
        })
    });
}

/// One glob decision of each use: a tool name against `flemma.*` (as an approval does), a
/// chat against a `[trust] paths` glob (as every analysis does). Each compiles its pattern.
fn bench_globs(c: &mut Criterion) {
    use std::hint::black_box;
    c.bench_function("tool-name glob: flemma.* against flemma.jobs.status", |b| {
        b.iter(|| flemma_config::glob_match(black_box("flemma.*"), black_box("flemma.jobs.status")))
    });
    c.bench_function("tool-name glob: demo.{echo,pid} against demo.env", |b| {
        b.iter(|| flemma_config::glob_match(black_box("demo.{echo,pid}"), black_box("demo.env")))
    });
    let settings = flemma_config::TrustSettings {
        paths: vec!["~/notes/**".into(), "/srv/*/prompts".into()],
        restricted: false,
    };
    let home = std::path::Path::new("/home/me");
    c.bench_function("trust: a chat against two path globs", |b| {
        b.iter(|| {
            flemma_config::chat_trust(
                black_box(std::path::Path::new("/srv/team/prompts/deep/a.chat")),
                &settings,
                &[],
                Some(home),
            )
        })
    });
}

criterion_group!(benches, bench_resolve, bench_globs);
criterion_main!(benches);
