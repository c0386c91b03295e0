//! `session/set_mode`, `session/set_config_option` and the `/model` and `/mode` commands: a setting changed on the chat.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::SessionConfigId;
use agent_client_protocol::v1::schema::SessionId;
use agent_client_protocol::{Client, Error};

use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, ModeParams};

use crate::modes::Setting;
use crate::{
    backend::{Backend, Settings},
    modes,
};

use super::state::{Session, State, engine, invalid, refused, retell_settings};

/// `session/set_mode` and `session/set_config_option`: the setting changed (the mode is the
/// one the session's tools will run in: its chat's frontmatter may make it stricter than
/// asked), and the settings as they are now. Not for a delegated session: its prompts come
/// from another model, whose harness must not widen what it may do.
pub(super) fn set_setting(
    state: &State,
    id: &SessionId,
    config_id: Option<&SessionConfigId>,
    value: &str,
) -> Result<(Arc<Session>, Settings), Error> {
    let session = state.session(id)?;
    if session.delegated {
        return Err(invalid(
            "this session was opened for another agent's ask_agent: its settings are its chat's configuration's, set by flemmad's user",
        ));
    }
    let settings = state.backend.settings(&session.path).ok();
    let setting = modes::requested(config_id.map(|id| &*id.0), value, settings.as_ref())?;
    apply(&*state.backend, &session.path, setting).map_err(refused)?;
    let settings = state.backend.settings(&session.path).map_err(refused)?;
    Ok((session, settings))
}

/// Changes the setting of the chat at `path`: what happened, in a sentence.
/// Sets the mode of the chat at `path` for this daemon or process (never in the chat's file)
/// with `flemma/mode`; the mode its tools will run in (its frontmatter may make it stricter).
fn set_mode(
    backend: &dyn Backend,
    path: &Path,
    mode: flemma_config::Mode,
) -> Result<flemma_config::Mode, RequestError> {
    engine(backend, path, |uri| {
        FlemmaRequest::Mode(ModeParams {
            uri,
            mode: mode.as_str().to_owned(),
        })
    })?;
    backend.mode(path)
}

pub(super) fn apply(
    backend: &dyn Backend,
    path: &Path,
    setting: Setting,
) -> Result<String, RequestError> {
    match setting {
        Setting::Mode(mode) => set_mode(backend, path, mode).map(|effective| {
            if effective == mode {
                format!("mode: {} — {}", mode.as_str(), mode.description())
            } else {
                format!(
                    "mode: {} asked, but the chat's frontmatter sets the stricter {}, which wins",
                    mode.as_str(),
                    effective.as_str()
                )
            }
        }),
        Setting::Model(model) => backend.set_model(path, &model),
        Setting::ThoughtLevel(level) => backend.set_thought_level(path, &level),
    }
}

/// `/model [NAME]` and `/mode [NAME]`: the choices without a name, else the setting changed
/// as its config option changes it (a model may be any `flemma.switch` takes), and the
/// settings told. The text to show.
pub(super) fn setting_command(
    state: &State,
    session: &Session,
    command: &str,
    argument: &str,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let settings = match state.backend.settings(&session.path) {
        Ok(settings) => settings,
        Err(error) => return Ok(format!("/{command}: {error}")),
    };
    let (picker, what) = match command {
        "mode" => (Some(modes::mode_picker(settings.mode)), "modes"),
        _ => (settings.model.clone(), "models"),
    };
    if argument.is_empty() {
        return Ok(match picker {
            Some(picker) => modes::listing(what, &picker),
            None => format!(
                "/{command}: no {what} to choose: the chat's configuration does not resolve (`flemmad status` says why)"
            ),
        });
    }
    let setting = match command {
        "mode" => modes::requested(Some(modes::MODE_OPTION), argument, Some(&settings)),
        _ => Ok(Setting::Model(argument.to_owned())),
    };
    let answer = match setting.map_err(|e| RequestError::new(e.code.into(), e.message)) {
        Ok(setting) => apply(&*state.backend, &session.path, setting),
        Err(error) => Err(error),
    };
    retell_settings(&*state.backend, session, cx)?;
    Ok(answer.unwrap_or_else(|error| format!("/{command}: {error}")))
}
