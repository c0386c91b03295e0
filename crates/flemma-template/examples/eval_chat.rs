//! Prints the evaluation of a `.chat` file as JSON: `cargo run -p flemma-template --example eval_chat FILE`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: eval_chat FILE.chat")?;
    let path = std::path::PathBuf::from(path);
    let text = std::fs::read_to_string(&path)?;
    let doc = flemma_syntax::parse(text);
    let options = flemma_template::EvalOptions {
        path: Some(std::fs::canonicalize(&path)?),
        ..Default::default()
    };
    let evaluation =
        flemma_template::evaluate(&doc, std::sync::Arc::new(flemma_template::FsHost), &options);
    println!("{}", serde_json::to_string_pretty(&evaluation)?);
    Ok(())
}
