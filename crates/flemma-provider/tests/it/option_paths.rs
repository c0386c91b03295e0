//! Every option a provider message tells the user to set exists in the config schema.

use std::path::Path;

fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [root.join("src"), root.join("../flemma-wire/src")] {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                files.push((path.display().to_string(), text));
            }
        }
    }
    files
}

/// Backtick-quoted option paths in the sources (`parameters.vertex.project_id`,
/// `flemma.opt.…`, `providers.<name>.…`).
fn quoted_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| {
            [
                "parameters.",
                "providers.",
                "secrets.",
                "tools.",
                "flemma.opt.",
            ]
            .iter()
            .any(|prefix| quoted.starts_with(prefix))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_option_named_in_a_provider_message_exists() {
    let mut checked = 0;
    for (file, text) in sources() {
        for path in quoted_paths(&text) {
            let expanded: Vec<String> = if path.contains("<name>") {
                flemma_config::Provider::ALL
                    .iter()
                    .map(|p| path.replace("<name>", p.as_str()))
                    .collect()
            } else {
                vec![path.clone()]
            };
            for option in expanded {
                let schema_path = match option.strip_prefix("flemma.opt.") {
                    Some(opt) => flemma_config::opt_path(opt).unwrap_or_else(|e| {
                        panic!("{file}: `{path}` is no frontmatter option: {e}")
                    }),
                    None => option.clone(),
                };
                if let Err(error) = flemma_config::option_shape(&schema_path) {
                    panic!("{file}: `{path}` is not an option of the config schema: {error}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 3, "the scan found only {checked} option paths");
}

#[test]
fn the_vertex_project_message_names_project_id() {
    let options = flemma_wire::RequestOptions {
        model: "gemini-2.5-pro".into(),
        max_tokens: 100,
        ..Default::default()
    };
    let conversation = flemma_wire::Conversation::default();
    let error =
        flemma_wire::build_request(flemma_wire::ProviderKind::Vertex, &conversation, &options)
            .map(|_| ())
            .unwrap_err()
            .to_string();
    assert!(error.contains("`parameters.vertex.project_id`"), "{error}");
}

#[test]
fn the_documented_default_base_urls_are_the_ones_used() {
    let docs = flemma_config::options_markdown();
    for kind in flemma_wire::ProviderKind::ALL {
        if kind == flemma_wire::ProviderKind::Vertex {
            continue; // derived from the location
        }
        let default = flemma_provider::http::default_base_url(kind, "global");
        let row = docs
            .lines()
            .find(|line| line.contains(&format!("`providers.{}.base_url`", kind.name())))
            .unwrap_or_else(|| panic!("no docs row for {kind}"));
        assert!(row.contains(&format!("`{default}`")), "{kind}: {row}");
    }
}
