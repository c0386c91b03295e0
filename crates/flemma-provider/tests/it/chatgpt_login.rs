//! The ChatGPT login of provider `codex` against the mock's Codex backend and token endpoint
//! over real HTTP: shared with a Codex CLI that refreshes the same file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use flemma_conversation::{Conversation, Message, Part, Role};
use flemma_mock_provider::{MockProvider, Turn};
use flemma_provider::chatgpt::{ChatGptLogin as Login, LoginError};
use flemma_provider::credentials::{CredentialEnvironment, CredentialResolver, ResolverOptions};
use flemma_provider::http::{ClientConfig, ClientEvent, Endpoint, ProviderClient};
use flemma_provider::{ProviderKind, RequestOptions, StreamEvent};
use tokio_util::sync::CancellationToken;

struct Setup {
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    client: ProviderClient,
    endpoint: Endpoint,
}

fn setup(mock: &MockProvider) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("auth.json");
    let environment = CredentialEnvironment::from_vars([
        ("CODEX_HOME", dir.path().display().to_string()),
        (
            "CODEX_REFRESH_TOKEN_URL_OVERRIDE",
            format!("{}/oauth/token", mock.base_url()),
        ),
    ]);
    let resolver = CredentialResolver::new(environment, ResolverOptions::default());
    let client = ProviderClient::new(ClientConfig::default(), Arc::new(resolver)).unwrap();
    Setup {
        _dir: dir,
        file,
        client,
        endpoint: Endpoint::new(format!("{}/backend-api/codex", mock.base_url())),
    }
}

fn conversation() -> Conversation {
    Conversation {
        system: Vec::new(),
        messages: vec![Message {
            role: Role::User,
            parts: vec![Part::text("Hi")].into(),
            span: None,
        }],
    }
}

async fn ask(setup: &Setup) -> (Result<(), String>, Vec<StreamEvent>) {
    let options = RequestOptions {
        model: "gpt-5.5".into(),
        max_tokens: 1000,
        ..RequestOptions::default()
    };
    let mut events = Vec::new();
    let result = setup
        .client
        .stream(
            ProviderKind::Codex,
            &conversation(),
            &options,
            &setup.endpoint,
            CancellationToken::new(),
            &mut |event| {
                if let ClientEvent::Event(event) = event {
                    events.push(event);
                }
            },
        )
        .await;
    (result.map(drop).map_err(|e| e.to_string()), events)
}

/// The Codex CLI refreshed the login after flemmad read it: the backend refuses flemmad's old
/// token, and flemmad takes the file's new one instead of refreshing (the refresh token on
/// disk is the Codex CLI's now; using the old one would have been refused as reused).
#[tokio::test]
async fn a_login_the_codex_cli_refreshed_is_picked_up_without_a_refresh() {
    let mock = MockProvider::start().await.unwrap();
    let setup = setup(&mock);
    std::fs::write(&setup.file, mock.chatgpt_login(false).auth_json()).unwrap();
    mock.push(Turn::text("one"));
    let (result, events) = ask(&setup).await;
    assert_eq!(result, Ok(()));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::RateLimits { limits } if limits.windows.len() == 2)),
        "{events:?}"
    );

    // The Codex CLI's refresh: a new login on the backend, written to the file.
    std::fs::write(&setup.file, mock.chatgpt_login(false).auth_json()).unwrap();
    mock.push(Turn::text("two"));
    let (result, _) = ask(&setup).await;
    assert_eq!(result, Ok(()));
    assert!(
        mock.chatgpt_refreshes().is_empty(),
        "flemmad did not refresh"
    );
}

/// A token the backend refuses although it has not expired (revoked) is refreshed once, the
/// request retried with the new one, and the file rewritten.
#[tokio::test]
async fn a_refused_token_is_refreshed_once() {
    let mock = MockProvider::start().await.unwrap();
    let setup = setup(&mock);
    let login = mock.chatgpt_login(false);
    // The file holds another (valid-looking) access token with the login's refresh token.
    let mut file: serde_json::Value = serde_json::from_str(&login.auth_json()).unwrap();
    file["tokens"]["access_token"] = "revoked-token".into();
    std::fs::write(&setup.file, file.to_string()).unwrap();
    mock.push(Turn::text("ok"));
    let (result, _) = ask(&setup).await;
    assert_eq!(result, Ok(()));
    assert_eq!(mock.chatgpt_refreshes().len(), 1);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&setup.file).unwrap()).unwrap();
    assert_ne!(written["tokens"]["access_token"], "revoked-token");
    assert_eq!(
        mock.requests().len(),
        2,
        "the refused request and its retry"
    );
}

#[test]
fn the_login_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let login = Login::new(
        dir.path().join("auth.json"),
        "http://127.0.0.1:9/oauth/token",
    );
    assert!(matches!(login.check(), Err(LoginError::NotLoggedIn { .. })));
    std::fs::write(login.path(), "{not json").unwrap();
    let error = login.check().unwrap_err().to_string();
    assert!(
        error.contains("it is not JSON") && error.contains("codex login"),
        "{error}"
    );
    std::fs::write(login.path(), r#"{"tokens": {}}"#).unwrap();
    let error = login.check().unwrap_err().to_string();
    assert!(error.contains("no `tokens.access_token`"), "{error}");
}

/// The Codex CLI refreshed the login a moment before flemmad, and writes the file a moment
/// after: flemmad's refresh is refused (the refresh token was used), and it takes the tokens
/// the Codex CLI writes instead of failing.
#[tokio::test]
async fn a_refresh_that_lost_the_race_takes_the_winners_tokens() {
    let mock = MockProvider::start().await.unwrap();
    let setup = setup(&mock);
    let login = mock.chatgpt_login(true);
    std::fs::write(&setup.file, login.auth_json()).unwrap();
    // The Codex CLI's refresh, its answer not written yet.
    let answer: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/oauth/token", mock.base_url()))
        .json(&serde_json::json!({
            "client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
            "grant_type": "refresh_token",
            "refresh_token": login.refresh_token,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let winner = flemma_mock_provider::ChatGptLogin {
        id_token: answer["id_token"].as_str().unwrap().to_owned(),
        access_token: answer["access_token"].as_str().unwrap().to_owned(),
        refresh_token: answer["refresh_token"].as_str().unwrap().to_owned(),
        account_id: login.account_id.clone(),
    };
    let file = setup.file.clone();
    let written = winner.auth_json();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        std::fs::write(file, written).unwrap();
    });
    mock.push(Turn::text("ok"));
    let (result, _) = ask(&setup).await;
    writer.await.unwrap();
    assert_eq!(result, Ok(()));
    assert_eq!(
        mock.chatgpt_refreshes().len(),
        2,
        "the Codex CLI's and flemmad's"
    );
    assert_eq!(
        mock.requests()[0].header("authorization"),
        Some(format!("Bearer {}", winner.access_token).as_str())
    );
}
