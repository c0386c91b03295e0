//! `flemmad doctor`: the agents `ask_agent` may ask (`[agents.NAME]`), started once each.

use super::*;

/// Each configured agent: its command resolves, it starts and answers `initialize` (in the
/// neutral directory, as it runs for a chat; stopped again at once).
pub(super) fn check_agents(context: &ProcessContext, findings: &mut Vec<Finding>) {
    const CHECK: &str = "agents";
    let input = crate::chat::config_input(context);
    let Ok(resolved) = flemma_config::resolve(&input.layers) else {
        return; // the config check above reports it
    };
    if resolved.config.agents.is_empty() {
        findings.push(Finding::new(CHECK, Status::Info, "no agents configured"));
        return;
    }
    let here = context.cwd.clone();
    let env = |name: &str| context.var(name);
    let defined = crate::agent_setup::defined(&resolved, &here, &env);
    for note in &defined.notes {
        findings.push(Finding::new(CHECK, Status::Warn, note.clone()));
    }
    let Ok(runtime) = crate::runtime::get() else {
        return;
    };
    let startup = Duration::from_secs(resolved.config.parameters.idle_timeout.clamp(1, 30));
    let agents = crate::agent_setup::AskedAgents::default();
    for agent in &defined.agents {
        let started = agent.command(0, context).map(|command| {
            runtime.block_on(async {
                let hub = agents.hub.clone();
                runtime
                    .spawn(async move {
                        hub.connect(&command, startup)
                            .await
                            .map(|c| c.info().clone())
                    })
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|started| started)
            })
        });
        findings.push(match started.and_then(|started| started) {
            Ok(info) => Finding::new(
                CHECK,
                Status::Ok,
                format!(
                    "agent `{}` starts and answers `initialize`{} ({})",
                    agent.name,
                    match (&info.name, &info.title) {
                        (Some(name), Some(title)) => format!(" as {name} ({title})"),
                        (Some(name), None) => format!(" as {name}"),
                        _ => String::new(),
                    },
                    agent.describe()
                ),
            ),
            Err(reason) => Finding::new(
                CHECK,
                Status::Fail,
                format!(
                    "agent `{}` does not start: {reason} ({})",
                    agent.name,
                    agent.describe()
                ),
            )
            .hint(format!(
                "run its command by hand to see why, or set agents.{}.enabled = false",
                agent.name
            )),
        });
    }
    runtime.block_on(agents.shutdown());
}
