//! The session's settings as ACP shows them. The mode (docs/modes.md) both ways the protocol
//! has: the session modes (`modes`, `session/set_mode`, `current_mode_update`: Zed) and a `mode`
//! config option (`configOptions`, `session/set_config_option`, `config_option_update`:
//! CodeCompanion accepts only these); either way of changing it changes the other, and both
//! are told. The model and the thinking level are config options only (`model`,
//! `thought_level`).

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, CurrentModeUpdate, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigOptionValue, SessionConfigSelectOption, SessionMode, SessionModeState,
    SessionNotification, SessionUpdate,
};
use agent_client_protocol::{Client, Error};
use flemma_config::Mode;

use crate::backend::{Picker, Settings};

/// The ids of the config options.
pub const MODE_OPTION: &str = "mode";
pub const MODEL_OPTION: &str = "model";
pub const THOUGHT_OPTION: &str = "thought_level";

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

fn select(id: &'static str, name: &str, picker: &Picker) -> SessionConfigOption {
    let options: Vec<SessionConfigSelectOption> = picker
        .choices
        .iter()
        .map(|choice| {
            SessionConfigSelectOption::new(choice.value.clone(), choice.name.clone())
                .description(choice.description.clone())
        })
        .collect();
    SessionConfigOption::select(id, name.to_owned(), picker.current.clone(), options)
}

/// The session's config options: the mode first, then the model and the thinking level when
/// the session has them, each with its current value selected.
pub fn config_options(settings: &Settings) -> Vec<SessionConfigOption> {
    let options: Vec<SessionConfigSelectOption> = Mode::ALL
        .into_iter()
        .map(|mode| {
            SessionConfigSelectOption::new(mode.as_str(), name_of(mode))
                .description(mode.description())
        })
        .collect();
    let mut all = vec![
        SessionConfigOption::select(MODE_OPTION, "Mode", settings.mode.as_str(), options)
            .description("What the chat's tools may change")
            .category(SessionConfigOptionCategory::Mode),
    ];
    if let Some(model) = &settings.model {
        all.push(
            select(MODEL_OPTION, "Model", model)
                .description("The model of the chat's next requests (its frontmatter wins)")
                .category(SessionConfigOptionCategory::Model),
        );
    }
    if let Some(level) = &settings.thought_level {
        all.push(
            select(THOUGHT_OPTION, "Thinking", level)
                .description("How much the model thinks before it answers")
                .category(SessionConfigOptionCategory::ThoughtLevel),
        );
    }
    all
}

/// What a `session/set_mode` or `session/set_config_option` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    Mode(Mode),
    Model(String),
    ThoughtLevel(String),
}

/// The setting a `session/set_mode` (no `config_id`) or `session/set_config_option` names
/// with `value`, checked against the session's `settings`, or why it names none.
pub fn requested(
    config_id: Option<&str>,
    value: &str,
    settings: Option<&Settings>,
) -> Result<Setting, Error> {
    let id = config_id.unwrap_or(MODE_OPTION);
    let picker = |picker: Option<&Picker>, what: &str| -> Result<String, Error> {
        let Some(picker) = picker else {
            return Err(invalid(format!(
                "this session has no {what} to choose (the configuration does not resolve, or the model does not think)"
            )));
        };
        if picker.has(value) {
            return Ok(value.to_owned());
        }
        let values: Vec<&str> = picker.choices.iter().map(|c| c.value.as_str()).collect();
        Err(invalid(format!(
            "unknown {what} `{value}`: the choices are {}",
            values.join(", ")
        )))
    };
    match id {
        MODE_OPTION => Mode::parse(value).map(Setting::Mode).ok_or_else(|| {
            invalid(format!(
                "unknown mode `{value}`: the modes are {} (docs/modes.md)",
                flemma_config::MODES.join(", ")
            ))
        }),
        MODEL_OPTION => {
            picker(settings.and_then(|s| s.model.as_ref()), "model").map(Setting::Model)
        }
        THOUGHT_OPTION => picker(
            settings.and_then(|s| s.thought_level.as_ref()),
            "thinking level",
        )
        .map(Setting::ThoughtLevel),
        other => Err(invalid(format!(
            "unknown config option `{other}`: flemmad's sessions have `{MODE_OPTION}`, `{MODEL_OPTION}` and `{THOUGHT_OPTION}`"
        ))),
    }
}

fn invalid(message: String) -> Error {
    Error::new(-32602, message)
}

/// The value of a `session/set_config_option` request as text (a select's value id).
pub fn value_text(value: &SessionConfigOptionValue) -> Option<String> {
    match value {
        SessionConfigOptionValue::ValueId { value } => Some(value.0.to_string()),
        _ => None,
    }
}

/// Tells the client the session's settings are now `settings`: `config_option_update`, and
/// `current_mode_update` too unless the mode is `told_mode` already.
pub fn announce(
    cx: &ConnectionTo<Client>,
    session: &str,
    settings: &Settings,
    told_mode: Option<Mode>,
) -> Result<(), Error> {
    if told_mode != Some(settings.mode) {
        cx.send_notification(SessionNotification::new(
            session.to_owned(),
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(settings.mode.as_str())),
        ))?;
    }
    cx.send_notification(SessionNotification::new(
        session.to_owned(),
        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(config_options(settings))),
    ))
}

/// The text of `/model` or `/mode` without an argument: the choices, the current one marked.
pub fn listing(what: &str, picker: &Picker) -> String {
    let mut out = format!("{what} (`*`: the current one):");
    for choice in &picker.choices {
        let mark = if choice.value == picker.current {
            "*"
        } else {
            " "
        };
        out.push_str(&format!("\n{mark} {}", choice.value));
        if let Some(description) = &choice.description {
            out.push_str(&format!(" — {description}"));
        }
    }
    out
}

/// The modes as a picker (for `/mode`).
pub fn mode_picker(current: Mode) -> Picker {
    Picker {
        current: current.as_str().to_owned(),
        choices: Mode::ALL
            .into_iter()
            .map(|mode| crate::backend::Choice {
                value: mode.as_str().to_owned(),
                name: name_of(mode).to_owned(),
                description: Some(mode.description().to_owned()),
            })
            .collect(),
    }
}
