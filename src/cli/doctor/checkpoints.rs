//! The checkpoints' share of the disk (`crate::checkpoints`, docs/review.md).

use super::{Finding, Machine, ProcessContext, Status};

pub(super) fn check_checkpoints(
    context: &ProcessContext,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) {
    if machine.program("git").is_none() {
        findings.push(
            Finding::new(
                "checkpoints",
                Status::Warn,
                "git is not on PATH: no checkpoints are recorded, so `flemmad changes` and `flemmad rewind` know no call",
            )
            .hint("install git"),
        );
        return;
    }
    let Some((dir, bytes, projects)) = crate::checkpoints::space_used(&context.dirs) else {
        findings.push(Finding::new(
            "checkpoints",
            Status::Info,
            "no state folder (HOME and XDG_STATE_HOME unset): no checkpoints are recorded",
        ));
        return;
    };
    findings.push(Finding::new(
        "checkpoints",
        Status::Info,
        format!(
            "{} for {projects} project{} in {} (delete the folder to forget them)",
            human(bytes),
            if projects == 1 { "" } else { "s" },
            dir.display()
        ),
    ));
}

/// `bytes` for a reader: `812 B`, `10.4 KiB`, `3.2 MiB`, `1.5 GiB`.
fn human(bytes: u64) -> String {
    let mut value = bytes as f64;
    for unit in ["B", "KiB", "MiB"] {
        if value < 1024.0 {
            return if unit == "B" {
                format!("{bytes} B")
            } else {
                format!("{value:.1} {unit}")
            };
        }
        value /= 1024.0;
    }
    format!("{value:.1} GiB")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_in_the_fitting_unit() {
        assert_eq!(super::human(812), "812 B");
        assert_eq!(super::human(10_650), "10.4 KiB");
        assert_eq!(super::human(3 * 1024 * 1024 + 200_000), "3.2 MiB");
        assert_eq!(super::human(3 << 30), "3.0 GiB");
    }
}
