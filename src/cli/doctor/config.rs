//! `flemmad doctor`: the configuration, the credentials and the provider.

use super::*;

/// The configuration file: which one, and whether it is valid. Returns the resolved
/// configuration when it is.
pub(super) fn check_config(
    context: &ProcessContext,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) -> Option<Config> {
    const CHECK: &str = "config";
    let input = crate::chat::config_input(context);
    let problems = input.diagnostics();
    if !problems.is_empty() {
        let place = input.user_file.clone().unwrap_or_default();
        let rendered = crate::chat::render_all(&place, None, &problems);
        findings.push(
            Finding::new(
                CHECK,
                Status::Fail,
                format!("{} has problems:\n{}", place.display(), rendered.trim_end()),
            )
            .hint(format!(
                "fix {} as the lines above say (docs/configuration.md lists every option)",
                place.display()
            )),
        );
        return None;
    }
    match &input.user_file {
        Some(file) => findings.push(Finding::new(
            CHECK,
            Status::Ok,
            format!("{} is valid", file.display()),
        )),
        None => {
            let expected =
                flemma_config::default_config_path(&|key| machine.var(key).map(str::to_owned));
            let message = match expected {
                Some(path) => format!(
                    "no configuration file ({} does not exist); the defaults apply",
                    path.display()
                ),
                None => "no configuration file (HOME is not set); the defaults apply".to_owned(),
            };
            findings.push(Finding::new(CHECK, Status::Info, message));
        }
    }
    match flemma_config::resolve(&input.layers) {
        Ok(resolved) => Some(resolved.config),
        Err(errors) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("the configuration does not resolve: {errors}"),
                )
                .hint("fix the configuration file as the message says"),
            );
            None
        }
    }
}

/// The credential of the configured provider: found, and by which resolver (never the value).
pub(super) fn check_credentials(
    config: &Config,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) -> Result<(), CliError> {
    const CHECK: &str = "credentials";
    let kind = ProviderKind::from(config.provider);
    let (service, credential_kind) = credential_for(kind);
    let resolver = CredentialResolver::new(
        machine.environment.clone(),
        ResolverOptions {
            gcloud_path: Some(config.secrets.gcloud.path.clone()),
            chatgpt_auth_file: config.secrets.chatgpt.auth_file.clone(),
            ..ResolverOptions::default()
        },
    );
    if kind == ProviderKind::Codex {
        let login = resolver.chatgpt().and_then(|login| {
            let expired = login.check()?;
            Ok((login.path().display().to_string(), expired))
        });
        findings.push(match login {
            Ok((path, expired)) => Finding::new(
                CHECK,
                Status::Ok,
                format!(
                    "codex (the configured provider) uses the ChatGPT login in {path}{}",
                    if expired {
                        "; its access token has expired and the next request refreshes it"
                    } else {
                        ""
                    }
                ),
            ),
            Err(error) => Finding::new(CHECK, Status::Fail, error.to_string())
                .hint("run `codex login` (the Codex CLI) and sign in with your ChatGPT account"),
        });
        return Ok(());
    }
    let found =
        crate::runtime::get()?.block_on(resolver.resolve_with_source(service, credential_kind));
    findings.push(match found {
        Ok((_secret, source)) => Finding::new(
            CHECK,
            Status::Ok,
            format!(
                "the {credential_kind} for {} (the configured provider) comes from {source}",
                kind.name()
            ),
        ),
        Err(error) if kind == ProviderKind::OpenAiCompatible => Finding::new(
            CHECK,
            Status::Info,
            format!(
                "no {credential_kind} for {} (fine for a local server that needs none)",
                kind.name()
            ),
        )
        .hint(format!(
            "if your server needs a key, set {}",
            error.env_var
        )),
        Err(error) => {
            let hint = format!(
                "set {} (or store it: secret-tool store --label={service} service {service} key {credential_kind})",
                error.env_var
            );
            Finding::new(
                CHECK,
                Status::Fail,
                format!(
                    "no {credential_kind} for {} (the configured provider): {}",
                    kind.name(),
                    error.attempts.join("; ")
                ),
            )
            .hint(hint)
        }
    });
    Ok(())
}

/// `--online`: the provider answers a model listing within [`ONLINE_TIMEOUT`].
pub(super) fn check_provider(
    config: &Config,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) -> Result<(), CliError> {
    const CHECK: &str = "provider";
    let mut setup = provider_setup(config, None, &machine.environment)?;
    setup.client.connect_timeout = setup.client.connect_timeout.min(ONLINE_TIMEOUT);
    setup.client.timeout = setup.client.timeout.min(ONLINE_TIMEOUT);
    let client = client(config, &setup, machine.environment.clone())?;
    let cancel = CancellationToken::new();
    let listed = crate::runtime::get()?.block_on(async {
        tokio::time::timeout(
            ONLINE_TIMEOUT,
            client.list_models(setup.kind, &setup.options, &setup.endpoint, cancel.clone()),
        )
        .await
    });
    let base = &setup.endpoint.base_url;
    findings.push(match listed {
        Ok(Ok(models)) => {
            let has_model = models.iter().any(|m| m.id == config.model);
            let finding = Finding::new(
                CHECK,
                if has_model { Status::Ok } else { Status::Warn },
                format!(
                    "{} at {base} answers: {} models{}",
                    setup.kind.name(),
                    models.len(),
                    if has_model {
                        format!(", including {}", config.model)
                    } else {
                        format!(", but not the configured model {}", config.model)
                    }
                ),
            );
            if has_model {
                finding
            } else {
                finding.hint(format!(
                    "pick one `flemmad models {}` lists (set `model` in the configuration)",
                    setup.kind.name()
                ))
            }
        }
        Ok(Err(error)) => Finding::new(CHECK, Status::Fail, format!("{base}: {error}"))
            .hint("fix what the message says, then run `flemmad doctor --online` again"),
        Err(_) => Finding::new(
            CHECK,
            Status::Fail,
            format!(
                "{} at {base} did not answer within {} s",
                setup.kind.name(),
                ONLINE_TIMEOUT.as_secs()
            ),
        )
        .hint(format!(
            "check the network and the base URL ({} or `providers.{}.base_url`)",
            flemma_provider::http::base_url_env_var(setup.kind),
            setup.kind.name()
        )),
    });
    Ok(())
}
