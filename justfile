# Convenience recipes; each is a plain cargo command you can run by hand.

# Run every test (the README's test command).
test:
    cargo test --workspace

# What CI runs.
ci:
    bash .ci/run

# Format and lint.
lint:
    cargo fmt --all
    cargo clippy --workspace --all-targets -- -D warnings

# All benchmarks (slow; see docs/benchmarks.md).
bench:
    cargo bench --workspace

# Try flemmad without an API key, against the bundled mock provider.
demo:
    ./scripts/demo.sh

# Fuzz the parser (needs nightly and cargo-fuzz).
fuzz:
    cd fuzz && cargo +nightly fuzz run parse
