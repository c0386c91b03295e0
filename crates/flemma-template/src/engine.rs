//! The sandboxed Rhai engine and the pure helper functions every template sees.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flemma_conversation::Part;
use rhai::module_resolvers::DummyModuleResolver;
use rhai::packages::{Package, StandardPackage};
use rhai::{Array, Dynamic, Engine, FLOAT, INT, ImmutableString, Map, NativeCallContext, Shared};

use crate::Limits;
use crate::files::normalize;

/// The token `on_progress` stops a script with when the evaluation is cancelled.
pub(crate) const CANCELLED: &str = "evaluation cancelled";

/// Attachments and mixed output produced by `include()` (binary mode, or a template that
/// attaches files). Emitting it with `{{ }}` or `emit()` inserts the parts in place.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// The parts, in order.
    pub parts: Vec<Part>,
}

fn standard_package() -> Shared<rhai::Module> {
    static PACKAGE: OnceLock<Shared<rhai::Module>> = OnceLock::new();
    PACKAGE
        .get_or_init(|| StandardPackage::new().as_shared_module())
        .clone()
}

/// The time budgets of an evaluation: each top-level script run (a template module, the
/// frontmatter, one message with what it includes) gets `Limits::time_budget`, so a long chat
/// never runs out of time while a `loop {}` still ends after the budget; and all runs together
/// get `Limits::evaluation_budget`, so that a chat of many slow templates cannot take the
/// per-run budget again for every message.
///
/// The running script's deadline is checked at every operation (`on_progress`), so a script
/// stops within one operation of it; no single operation is slow (`bounded` refuses the ones
/// whose result would be too large before building it). The check reads the clock and one
/// atomic: cheap next to the operation itself. A run past its deadline that has used less than
/// half of its budget on the CPU (the machine kept it waiting: a loaded machine, a busy core) is
/// given until it has: a three-line frontmatter is not stopped because the thread running it
/// was preempted for 100 ms.
#[derive(Debug, Clone)]
pub(crate) struct RunClock(Arc<ClockInner>);

#[derive(Debug)]
struct ClockInner {
    /// What deadlines are counted from.
    epoch: Instant,
    /// Nanoseconds after `epoch` when the running script must stop.
    deadline: AtomicU64,
    state: Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    run_started: Instant,
    /// The thread's CPU time when the run started.
    run_cpu_started: Duration,
    /// What the running script may take (the per-run budget, or less when the evaluation's
    /// budget has less left).
    run_budget: Duration,
    per_run: Duration,
    /// What is left of the evaluation's budget (what finished runs took is taken off).
    left: Duration,
    total: Duration,
}

impl RunClock {
    pub(crate) fn new(limits: &Limits) -> Self {
        let epoch = Instant::now();
        Self(Arc::new(ClockInner {
            epoch,
            deadline: AtomicU64::new(nanos(limits.time_budget)),
            state: Mutex::new(ClockState {
                run_started: epoch,
                run_cpu_started: thread_cpu_time(),
                run_budget: limits.time_budget,
                per_run: limits.time_budget,
                left: limits.evaluation_budget,
                total: limits.evaluation_budget,
            }),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.0
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the budget of a new run; `false` when the evaluation's budget is spent (the run
    /// must not start).
    pub(crate) fn start_run(&self) -> bool {
        let mut state = self.state();
        if state.left.is_zero() {
            return false;
        }
        state.run_started = Instant::now();
        state.run_cpu_started = thread_cpu_time();
        state.run_budget = state.per_run.min(state.left);
        let deadline = state.run_started.duration_since(self.0.epoch) + state.run_budget;
        self.0.deadline.store(nanos(deadline), Ordering::Relaxed);
        true
    }

    /// Ends the run started last: its time is taken off the evaluation's budget.
    pub(crate) fn end_run(&self) {
        let mut state = self.state();
        let took = state.run_started.elapsed();
        state.left = state.left.saturating_sub(took);
    }

    /// Takes `took` (work of the evaluation outside a script run, such as compiling a
    /// template) off the evaluation's budget.
    pub(crate) fn charge(&self, took: Duration) {
        let mut state = self.state();
        state.left = state.left.saturating_sub(took);
    }

    /// The evaluation's whole budget.
    pub(crate) fn total(&self) -> Duration {
        self.state().total
    }

    /// Whether the running script is past its deadline (one clock read: called at every
    /// operation).
    fn past_deadline(&self) -> bool {
        nanos(self.0.epoch.elapsed()) > self.0.deadline.load(Ordering::Relaxed)
    }

    /// Why the running script must stop now, when its budget is spent.
    fn overrun(&self) -> Option<String> {
        if !self.past_deadline() {
            return None;
        }
        let state = self.state();
        // Past the deadline: stopped if the run itself used half of its budget, else given
        // until it could have (the next check comes then, not at every operation).
        let used = thread_cpu_time().saturating_sub(state.run_cpu_started);
        let half = state.run_budget / 2;
        if used < half {
            let next = self.0.epoch.elapsed() + (half - used);
            self.0.deadline.store(nanos(next), Ordering::Relaxed);
            return None;
        }
        Some(if state.run_budget < state.per_run {
            format!(
                "the templates of this chat used their whole time budget ({} ms for all of them together)",
                state.total.as_millis()
            )
        } else {
            format!(
                "the template time budget of {} ms is spent (an endless loop?)",
                state.per_run.as_millis()
            )
        })
    }
}

/// The CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    )
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A sandboxed engine: the standard package (strings, maths, arrays, maps, iterators), no
/// module resolver, no `eval`, printing to `tracing`, resource limits, and a progress callback
/// that stops on the cancel flag or when the wall-clock budget is spent.
pub(crate) fn sandboxed_engine(
    limits: &Limits,
    clock: RunClock,
    cancel: Option<Arc<AtomicBool>>,
    now: SystemTime,
    impure: Arc<AtomicBool>,
) -> Engine {
    let mut engine = Engine::new_raw();
    engine.register_global_module(standard_package());
    engine.set_module_resolver(DummyModuleResolver::new());
    engine.disable_symbol("eval");
    engine.set_max_operations(limits.max_operations);
    engine.set_max_string_size(limits.max_string_size);
    engine.set_max_array_size(limits.max_array_size);
    engine.set_max_map_size(limits.max_map_size);
    engine.set_max_call_levels(limits.max_call_levels);
    engine.set_max_expr_depths(limits.max_expr_depth, limits.max_expr_depth);
    engine.set_max_variables(10_000);
    // Templates run once per compile: optimising them costs more than it saves.
    engine.set_optimization_level(rhai::OptimizationLevel::None);
    engine.on_print(|text| tracing::info!(target: "flemma_template::print", "{text}"));
    engine.on_debug(|text, source, position| {
        tracing::debug!(target: "flemma_template::debug", ?source, %position, "{text}");
    });
    let interrupted = impure.clone();
    engine.on_progress(move |operations| {
        let _ = operations;
        if cancel
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
        {
            interrupted.store(true, Ordering::Relaxed);
            return Some(Dynamic::from(CANCELLED.to_string()));
        }
        if let Some(reason) = clock.overrun() {
            // Stopped by the clock: another run may get further.
            interrupted.store(true, Ordering::Relaxed);
            return Some(Dynamic::from(reason));
        }
        None
    });
    register_helpers(&mut engine, now, impure);
    crate::bounded::register(&mut engine);
    engine
}

/// `impure` is set when a template reads the clock.
fn register_helpers(engine: &mut Engine, now: SystemTime, impure: Arc<AtomicBool>) {
    engine.register_type_with_name::<Attachment>("Attachment");
    engine.register_fn("to_string", |attachment: &mut Attachment| {
        describe_parts(&attachment.parts)
    });
    engine.register_fn("values", |array: Array| array);
    engine.register_fn("values", |map: Map| -> Array {
        map.into_values().collect()
    });
    engine.register_fn("each", |ctx: NativeCallContext, array: Array| {
        // Six entries a map: refused before building what the size check would refuse after.
        crate::bounded::pieces(&ctx, array.len())?;
        let max = ctx.engine().max_map_size();
        if max > 0 && array.len().saturating_mul(6) > max {
            return Err(Box::new(rhai::EvalAltResult::ErrorDataTooLarge(
                "Size of object map".to_owned(),
                rhai::Position::NONE,
            )));
        }
        Ok(each(array))
    });
    engine.register_fn("format_number", |n: INT| format_number(n as FLOAT, 0));
    engine.register_fn("format_number", |n: FLOAT| format_number(n, 2));
    engine.register_fn("format_number", |n: INT, decimals: INT| {
        format_number(n as FLOAT, decimals)
    });
    engine.register_fn("format_number", format_number);
    engine.register_fn("format_tokens", |n: INT| format_tokens(n as FLOAT));
    engine.register_fn("format_tokens", format_tokens);
    engine.register_fn("format_money", |n: INT| format_money(n as FLOAT, "$"));
    engine.register_fn("format_money", |n: FLOAT| format_money(n, "$"));
    engine.register_fn("format_money", |n: INT, symbol: &str| {
        format_money(n as FLOAT, symbol)
    });
    engine.register_fn("format_money", |n: FLOAT, symbol: &str| {
        format_money(n, symbol)
    });
    engine.register_fn("format_percent", |n: INT| format_percent(n as FLOAT, 0));
    engine.register_fn("format_percent", |n: FLOAT| format_percent(n, 1));
    engine.register_fn("format_percent", format_percent);
    engine.register_fn("format_percent", |n: INT, decimals: INT| {
        format_percent(n as FLOAT, decimals)
    });
    let seconds = unix_seconds(now);
    let clock_read = move || {
        impure.store(true, Ordering::Relaxed);
        seconds
    };
    let read = clock_read.clone();
    engine.register_fn("now", move || format_date(read(), "%Y-%m-%dT%H:%M:%SZ"));
    let read = clock_read.clone();
    engine.register_fn("date", move || format_date(read(), "%Y-%m-%d"));
    let read = clock_read.clone();
    engine.register_fn("date", move |ctx: NativeCallContext, format: &str| {
        // A two-byte directive expands to at most 12 bytes (`%Y` of a far year; `%B` is 9).
        crate::bounded::string_fits(&ctx, format.len().saturating_mul(6))?;
        Ok::<_, Box<rhai::EvalAltResult>>(format_date(read(), format))
    });
    engine.register_fn("unix_time", clock_read);
    engine.register_fn("path_basename", path_basename);
    engine.register_fn("path_dirname", path_dirname);
    engine.register_fn("path_extension", path_extension);
    engine.register_fn("path_join", path_join);
    engine.register_fn("path_normalize", path_normalize);
}

/// `path_basename("/a/b.txt")` → `b.txt` (`""` when the path ends in `..` or is a root).
fn path_basename(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `path_dirname("/a/b.txt")` → `/a`; `path_dirname("b.txt")` → `.`; a root stays itself.
fn path_dirname(path: &str) -> String {
    match Path::new(path).parent() {
        Some(parent) if parent.as_os_str().is_empty() => ".".into(),
        Some(parent) => parent.to_string_lossy().into_owned(),
        None if path.is_empty() => ".".into(),
        None => path.to_string(),
    }
}

/// `path_extension("a.tar.gz")` → `gz` (`""` without an extension).
fn path_extension(path: &str) -> String {
    Path::new(path)
        .extension()
        .map(|extension| extension.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `path_join("a", "b.txt")` → `a/b.txt`; an absolute second path replaces the first.
fn path_join(base: &str, path: &str) -> String {
    Path::new(base).join(path).to_string_lossy().into_owned()
}

/// Removes `.` and resolves `..` lexically (`a/./b/../c` → `a/c`; empty → `.`).
fn path_normalize(path: &str) -> String {
    let normalized = normalize(Path::new(path));
    if normalized.as_os_str().is_empty() {
        ".".into()
    } else {
        normalized.to_string_lossy().into_owned()
    }
}

/// `each(array)`: one map per item with `item`, `index` (1-based), `index0`, `first`, `last`
/// and `length`.
fn each(array: Array) -> Array {
    let length = array.len();
    array
        .into_iter()
        .enumerate()
        .map(|(index0, item)| {
            let mut map = Map::new();
            map.insert("item".into(), item);
            map.insert("index".into(), Dynamic::from(index0 as INT + 1));
            map.insert("index0".into(), Dynamic::from(index0 as INT));
            map.insert("first".into(), Dynamic::from(index0 == 0));
            map.insert("last".into(), Dynamic::from(index0 + 1 == length));
            map.insert("length".into(), Dynamic::from(length as INT));
            Dynamic::from_map(map)
        })
        .collect()
}

/// `1234567.891` → `1,234,567.89` (with `decimals` digits after the point).
pub(crate) fn format_number(n: FLOAT, decimals: INT) -> String {
    let decimals = decimals.clamp(0, 12) as usize;
    let formatted = format!("{:.*}", decimals, n.abs());
    let (whole, fraction) = match formatted.split_once('.') {
        Some((whole, fraction)) => (whole.to_string(), Some(fraction.to_string())),
        None => (formatted, None),
    };
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if n < 0.0 && n.abs() >= 0.5 * 10f64.powi(-(decimals as i32)) {
        "-"
    } else {
        ""
    };
    match fraction {
        Some(fraction) => format!("{sign}{grouped}.{fraction}"),
        None => format!("{sign}{grouped}"),
    }
}

/// `950` → `950`, `1234` → `1.2k`, `2500000` → `2.5M`.
pub(crate) fn format_tokens(n: FLOAT) -> String {
    let abs = n.abs();
    let (value, suffix) = if abs >= 1e9 {
        (n / 1e9, "B")
    } else if abs >= 1e6 {
        (n / 1e6, "M")
    } else if abs >= 1e3 {
        (n / 1e3, "k")
    } else {
        return format!("{}", n.round() as INT);
    };
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text}{suffix}")
}

/// `1234.5` → `$1,234.50`.
pub(crate) fn format_money(n: FLOAT, symbol: &str) -> String {
    let number = format_number(n.abs(), 2);
    if n < 0.0 {
        format!("-{symbol}{number}")
    } else {
        format!("{symbol}{number}")
    }
}

/// A fraction as a percentage: `0.425` → `42.5%`.
pub(crate) fn format_percent(n: FLOAT, decimals: INT) -> String {
    format!("{}%", format_number(n * 100.0, decimals))
}

fn unix_seconds(time: SystemTime) -> INT {
    match time.duration_since(UNIX_EPOCH) {
        Ok(duration) => INT::try_from(duration.as_secs()).unwrap_or(INT::MAX),
        Err(before) => -INT::try_from(before.duration().as_secs()).unwrap_or(INT::MAX),
    }
}

/// Formats a Unix time (UTC) with `%Y %m %d %H %M %S %A %a %B %b %j %%`.
pub(crate) fn format_date(seconds: INT, format: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let month_name = MONTHS[(month - 1) as usize];
    let day_of_year = days - days_from_civil(year, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('B') => out.push_str(month_name),
            Some('b') => out.push_str(&month_name[..3]),
            Some('j') => out.push_str(&format!("{day_of_year:03}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(days: INT) -> (INT, INT, INT) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + INT::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: INT, month: INT, day: INT) -> INT {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// What `{{ value }}` writes: `()` → nothing, strings as is, maps and arrays as JSON,
/// attachments as parts, anything else with `to_string`.
pub(crate) enum Emitted {
    Text(String),
    Parts(Vec<Part>),
}

pub(crate) fn emitted(value: &Dynamic) -> Emitted {
    if value.is_unit() {
        return Emitted::Text(String::new());
    }
    if let Some(text) = value.read_lock::<ImmutableString>() {
        return Emitted::Text(text.to_string());
    }
    if let Some(attachment) = value.read_lock::<Attachment>() {
        return Emitted::Parts(attachment.parts.clone());
    }
    if value.is_map() || value.is_array() {
        return Emitted::Text(serde_json::to_string(value).unwrap_or_else(|_| value.to_string()));
    }
    Emitted::Text(value.to_string())
}

/// A short description of attachment parts (for `to_string` on an attachment).
pub(crate) fn describe_parts(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.clone(),
            Part::Image { path, mime, .. } => format!("[image {path} ({mime})]"),
            Part::Pdf { path, .. } => format!("[pdf {path}]"),
            Part::TextFile { text, .. } => text.clone(),
            _ => String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers_tokens_money_percent() {
        assert_eq!(format_number(1_234_567.0, 0), "1,234,567");
        assert_eq!(format_number(-1234.567, 2), "-1,234.57");
        assert_eq!(format_number(999.0, 0), "999");
        assert_eq!(format_tokens(950.0), "950");
        assert_eq!(format_tokens(1234.0), "1.2k");
        assert_eq!(format_tokens(2_000_000.0), "2M");
        assert_eq!(format_money(1234.5, "$"), "$1,234.50");
        assert_eq!(format_money(-3.0, "€"), "-€3.00");
        assert_eq!(format_percent(0.425, 1), "42.5%");
    }

    #[test]
    fn path_helpers_work_lexically() {
        assert_eq!(path_basename("/a/b/notes.md"), "notes.md");
        assert_eq!(path_basename("dir/sub/"), "sub");
        assert_eq!(path_basename("/"), "");
        assert_eq!(path_dirname("/a/b/notes.md"), "/a/b");
        assert_eq!(path_dirname("notes.md"), ".");
        assert_eq!(path_dirname("/"), "/");
        assert_eq!(path_extension("archive.tar.gz"), "gz");
        assert_eq!(path_extension("Makefile"), "");
        assert_eq!(path_join("a/b", "c.txt"), "a/b/c.txt");
        assert_eq!(path_join("a/b", "/etc/hosts"), "/etc/hosts");
        assert_eq!(path_normalize("a/./b/../c"), "a/c");
        assert_eq!(path_normalize("/x/../../y"), "/y");
        assert_eq!(path_normalize("a/.."), ".");
        assert_eq!(path_normalize("../a"), "../a");
    }

    #[test]
    fn formats_dates_in_utc() {
        // 2026-11-30T08:38:57Z is a Monday.
        let seconds = 1_796_027_937;
        assert_eq!(
            format_date(seconds, "%Y-%m-%dT%H:%M:%SZ"),
            "2026-11-30T08:38:57Z"
        );
        assert_eq!(
            format_date(seconds, "%A %d %B %Y (%j) 100%%"),
            "Monday 30 November 2026 (334) 100%"
        );
        assert_eq!(format_date(0, "%Y-%m-%d %a"), "1970-01-01 Thu");
    }
}
