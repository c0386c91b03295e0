//! The wire crate stays pure: its normal dependencies are data crates only, never HTTP,
//! async runtimes, processes or clocks.

#[test]
fn wire_depends_on_no_io_crate() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("the crate's own Cargo.toml is readable");
    let allowed = [
        "flemma-conversation",
        "flemma-syntax",
        "flemma-config",
        "serde",
        "serde_json",
        "base64",
        "thiserror",
        "memchr",
    ];
    let section = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("Cargo.toml has a [dependencies] section");
    for line in section.lines().filter(|l| !l.trim().is_empty()) {
        let name = line.split(['=', '.']).next().unwrap_or("").trim();
        assert!(
            allowed.contains(&name),
            "flemma-wire must not depend on `{name}`: IO belongs in flemma-provider (the edge)"
        );
    }
}
