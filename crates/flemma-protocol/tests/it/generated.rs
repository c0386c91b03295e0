//! The JSON Schemas under `protocol/` are generated from these types; this test fails when the
//! committed files drift. `UPDATE_GENERATED=1 cargo test -p flemma-protocol` rewrites them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn committed_schemas_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocol");
    for (name, schema) in flemma_protocol::schemas() {
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let path = dir.join(name);
        if std::env::var_os("UPDATE_GENERATED").is_some() {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "protocol/{name} is out of date; run `UPDATE_GENERATED=1 cargo test -p flemma-protocol`"
        );
    }
}
