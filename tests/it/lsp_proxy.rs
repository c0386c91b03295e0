//! The proxy path with the engine: `flemmad lsp` (no `--no-daemon`) with `flemmad serve`
//! running pipes the editor's stdio to the daemon; a Helix-like client sends through it, the
//! reply streams into its buffer, the editor quits mid-stream, and the daemon writes the rest
//! of the reply into the file on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};

use crate::common;
use crate::daemon_two_editors::{editor, environment, send, serve};
use crate::lsp::lsp_client::Flavor;

const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}
```
"#;

#[test]
fn through_the_proxy_a_reply_streams_into_the_buffer_and_the_rest_into_the_file_after_the_editor_quits()
 {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let original = format!("{FRONTMATTER}@You:\nTell me a story.\n");
    let chat = common::chat(&original);
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(&mock.base_url(), &chat);
    let _daemon = serve(&env, &dir);
    let uri = format!("file://{}", chat.path.display());

    let story: String = (1..=60)
        .map(|i| format!("s{i:02}"))
        .collect::<Vec<_>>()
        .join(" ");
    mock.push(Turn::text(story.clone()).bytes_per_sec(1500));
    let mut helix = editor(Flavor::Helix, &env, &dir);
    helix.open(&uri, &original);
    send(&mut helix, &uri);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !helix.text(&uri).contains("s03") {
        assert!(Instant::now() < deadline, "{}", helix.text(&uri));
        helix.pump(Duration::from_millis(20));
    }
    let in_buffer = helix.text(&uri).to_owned();
    assert!(
        in_buffer.starts_with(&format!("{original}\n@Assistant:\ns01")),
        "{in_buffer}"
    );
    assert!(!in_buffer.contains("s60"), "streamed too fast: {in_buffer}");
    assert!(helix.apply_edits_seen > 0);
    // The editor never saved: the file is as it was while the editor had it open.
    assert_eq!(std::fs::read_to_string(&chat.path).unwrap(), original);

    // The user quits Helix (shutdown, exit): `flemmad lsp` ends; the daemon goes on.
    let status = helix.shutdown();
    assert!(status.success(), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let on_disk = loop {
        let text = std::fs::read_to_string(&chat.path).unwrap();
        if text.contains("s60") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the rest never reached the file: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        on_disk.starts_with(&format!("{original}\n@Assistant:\n{story}")),
        "{on_disk}"
    );
    assert_eq!(on_disk.matches(story.as_str()).count(), 1, "{on_disk}");
    assert_eq!(on_disk.matches("@Assistant:").count(), 1, "{on_disk}");
    runtime.block_on(mock.shutdown());
}
