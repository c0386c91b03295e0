//! The `templating` table: module lists accumulate like every list, parser commands are
//! replaced as a whole, and both are checked.

use flemma_config::*;
use serde_json::json;

#[test]
fn modules_accumulate_and_parsers_replace_across_layers() -> Result<(), Box<dyn std::error::Error>>
{
    let user = ConfigLayer::from_toml_str(
        "[templating]\nmodules = [\"~/.config/flemma/a.rhai\", \"b.rhai\"]\n\n[templating.frontmatter_parsers]\nyaml = [\"yq\", \"-o\", \"json\"]\ntoml = [\"toml2json\"]\n",
        LayerKind::UserFile,
    )?;
    let client = ConfigLayer::from_json(
        &json!({"templating": {
            "modules": ["!b.rhai", "+c.rhai"],
            "frontmatter_parsers": {"yaml": ["yq", "--output-format=json"]}
        }}),
        LayerKind::Client,
    )
    .map_err(|errors| errors.to_string())?;
    let resolved = resolve(&[ConfigLayer::defaults(), user, client])?;
    let templating = &resolved.config.templating;
    assert_eq!(templating.modules, ["~/.config/flemma/a.rhai", "c.rhai"]);
    assert_eq!(
        templating.frontmatter_parsers.get("yaml"),
        Some(&vec!["yq".to_string(), "--output-format=json".to_string()])
    );
    assert_eq!(
        templating.frontmatter_parsers.get("toml"),
        Some(&vec!["toml2json".to_string()])
    );
    assert_eq!(
        resolved.source_of("templating.frontmatter_parsers.yaml"),
        Some(LayerKind::Client)
    );
    Ok(())
}

#[test]
fn defaults_are_empty() -> Result<(), Box<dyn std::error::Error>> {
    let resolved = resolve(&[ConfigLayer::defaults()])?;
    assert!(resolved.config.templating.modules.is_empty());
    assert!(resolved.config.templating.frontmatter_parsers.is_empty());
    Ok(())
}

#[test]
fn a_parser_command_must_be_a_list_of_strings() {
    let error = ConfigLayer::from_toml_str(
        "[templating.frontmatter_parsers]\nyaml = \"yq -o json\"\n",
        LayerKind::UserFile,
    )
    .err()
    .map(|errors| errors.to_string())
    .unwrap_or_default();
    assert!(
        error.contains("templating.frontmatter_parsers.yaml"),
        "{error}"
    );
    let error =
        ConfigLayer::from_toml_str("[templating]\nmodule = [\"a.rhai\"]\n", LayerKind::UserFile)
            .err()
            .map(|errors| errors.to_string())
            .unwrap_or_default();
    assert!(error.contains("modules"), "{error}");
}
