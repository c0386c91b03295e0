//! The session's mode (docs/modes.md) as ACP shows it, both ways the protocol has: the session
//! modes (`modes`, `session/set_mode`, `current_mode_update`: Zed) and a `mode` config option
//! (`configOptions`, `session/set_config_option`, `config_option_update`: CodeCompanion accepts
//! only these). Either way of changing it changes the other, and both are told.

use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, CurrentModeUpdate, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigOptionValue, SessionConfigSelectOption, SessionMode, SessionModeState,
    SessionNotification, SessionUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, schema::SessionConfigId};
use agent_client_protocol::{Client, Error};
use flemma_config::Mode;

/// The id of the mode config option.
pub const MODE_OPTION: &str = "mode";

fn name_of(mode: Mode) -> &'static str {
    match mode {
        Mode::Ask => "Ask (read-only)",
        Mode::Default => "Default",
        Mode::AutoEdit => "Auto-edit",
    }
}

/// The session modes, `current` selected (strictest last, as flemmad lists them).
pub fn mode_state(current: Mode) -> SessionModeState {
    SessionModeState::new(
        current.as_str(),
        Mode::ALL
            .into_iter()
            .map(|mode| {
                SessionMode::new(mode.as_str(), name_of(mode)).description(mode.description())
            })
            .collect(),
    )
}

/// The session's config options: the mode, `current` selected.
pub fn config_options(current: Mode) -> Vec<SessionConfigOption> {
    let options: Vec<SessionConfigSelectOption> = Mode::ALL
        .into_iter()
        .map(|mode| {
            SessionConfigSelectOption::new(mode.as_str(), name_of(mode))
                .description(mode.description())
        })
        .collect();
    vec![
        SessionConfigOption::select(MODE_OPTION, "Mode", current.as_str(), options)
            .description("What the chat's tools may change")
            .category(SessionConfigOptionCategory::Mode),
    ]
}

/// The mode a `session/set_mode` or `session/set_config_option` names, or why it names none.
pub fn requested(config_id: Option<&SessionConfigId>, value: &str) -> Result<Mode, Error> {
    if let Some(id) = config_id
        && &*id.0 != MODE_OPTION
    {
        return Err(Error::new(
            -32602,
            format!(
                "unknown config option `{}`: flemmad's sessions have `{MODE_OPTION}` only",
                id.0
            ),
        ));
    }
    Mode::parse(value).ok_or_else(|| {
        Error::new(
            -32602,
            format!(
                "unknown mode `{value}`: the modes are {} (docs/modes.md)",
                flemma_config::MODES.join(", ")
            ),
        )
    })
}

/// The value of a `session/set_config_option` request as text (a select's value id).
pub fn value_text(value: &SessionConfigOptionValue) -> Option<String> {
    match value {
        SessionConfigOptionValue::ValueId { value } => Some(value.0.to_string()),
        _ => None,
    }
}

/// Tells the client the session's mode is now `mode`, both ways.
pub fn announce(cx: &ConnectionTo<Client>, session: &str, mode: Mode) -> Result<(), Error> {
    cx.send_notification(SessionNotification::new(
        session.to_owned(),
        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.as_str())),
    ))?;
    cx.send_notification(SessionNotification::new(
        session.to_owned(),
        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(config_options(mode))),
    ))
}
