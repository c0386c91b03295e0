//! Standard functions whose result is measured before it is built.
//!
//! The sandbox checks the size of a value after each operation (`Limits::max_string_size`,
//! `max_array_size`), and the time budget at every operation. A few standard functions can
//! build a result far past those limits in one operation before the check sees it: `replace`
//! multiplies a string (`s.replace("x", s)` on a 4 MiB string asks for terabytes), `split("")`
//! and `to_chars()` make an array of four million strings, `pad` of a 4 MiB string took 134 ms
//! in a release build. These replacements (registered on the engine, so they are found before
//! the standard package's) give the same results, refuse what would be too large before
//! building it, and build with the standard library's bulk operations.

use rhai::{Array, Dynamic, Engine, EvalAltResult, INT, ImmutableString, NativeCallContext};

type Result<T> = std::result::Result<T, Box<EvalAltResult>>;

/// Registers the bounded functions on `engine`.
pub(crate) fn register(engine: &mut Engine) {
    engine.register_fn("replace", replace_str);
    engine.register_fn(
        "replace",
        |ctx: NativeCallContext, s: &mut ImmutableString, find: &str, with: char| -> Result<()> {
            replace_str(ctx, s, find, with.encode_utf8(&mut [0; 4]))
        },
    );
    engine.register_fn(
        "replace",
        |ctx: NativeCallContext, s: &mut ImmutableString, find: char, with: &str| -> Result<()> {
            replace_str(ctx, s, find.encode_utf8(&mut [0; 4]), with)
        },
    );
    engine.register_fn("pad", pad_str);
    engine.register_fn(
        "pad",
        |ctx: NativeCallContext, s: &mut ImmutableString, len: INT, with: char| -> Result<()> {
            pad_str(ctx, s, len, with.encode_utf8(&mut [0; 4]))
        },
    );
    engine.register_fn(
        "to_chars",
        |ctx: NativeCallContext, s: &str| -> Result<Array> {
            pieces(&ctx, s.chars().count())?;
            Ok(s.chars().map(Dynamic::from).collect::<Array>())
        },
    );
    engine.register_fn(
        "split",
        |ctx: NativeCallContext, s: &mut ImmutableString| -> Result<Array> {
            if s.is_empty() {
                return Ok(vec![Dynamic::from(s.clone())]);
            }
            pieces(&ctx, s.split_whitespace().count())?;
            Ok(collect(s.split_whitespace()))
        },
    );
    for (name, reverse) in [("split", false), ("split_rev", true)] {
        engine.register_fn(
            name,
            move |ctx: NativeCallContext, s: &mut ImmutableString, by: &str| -> Result<Array> {
                split_str(&ctx, s, by, None, reverse)
            },
        );
        engine.register_fn(
            name,
            move |ctx: NativeCallContext,
                  s: &mut ImmutableString,
                  by: &str,
                  segments: INT|
                  -> Result<Array> { split_str(&ctx, s, by, Some(segments), reverse) },
        );
        engine.register_fn(
            name,
            move |ctx: NativeCallContext, s: &mut ImmutableString, by: char| -> Result<Array> {
                split_str(&ctx, s, by.encode_utf8(&mut [0; 4]), None, reverse)
            },
        );
        engine.register_fn(
            name,
            move |ctx: NativeCallContext,
                  s: &mut ImmutableString,
                  by: char,
                  segments: INT|
                  -> Result<Array> {
                split_str(
                    &ctx,
                    s,
                    by.encode_utf8(&mut [0; 4]),
                    Some(segments),
                    reverse,
                )
            },
        );
    }
}

fn too_large(what: &str) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorDataTooLarge(
        what.to_owned(),
        rhai::Position::NONE,
    ))
}

/// Refuses a string of `bytes` longer than the engine allows.
pub(crate) fn string_fits(ctx: &NativeCallContext, bytes: usize) -> Result<()> {
    let max = ctx.engine().max_string_size();
    if max > 0 && bytes > max {
        return Err(too_large("Length of string"));
    }
    Ok(())
}

/// Refuses an array of `count` items longer than the engine allows.
pub(crate) fn pieces(ctx: &NativeCallContext, count: usize) -> Result<()> {
    let max = ctx.engine().max_array_size();
    if max > 0 && count > max {
        return Err(too_large("Size of array/BLOB"));
    }
    Ok(())
}

fn collect<'a>(pieces: impl Iterator<Item = &'a str>) -> Array {
    pieces
        .map(|piece| Dynamic::from(ImmutableString::from(piece)))
        .collect()
}

/// `s.replace(find, with)`: every `find` in `s` replaced by `with`, in place; a result that
/// would grow past the longest string is refused before it is built.
fn replace_str(
    ctx: NativeCallContext,
    s: &mut ImmutableString,
    find: &str,
    with: &str,
) -> Result<()> {
    if s.is_empty() {
        return Ok(());
    }
    // One character is searched for with `memchr`, many times faster than a string.
    let mut chars = find.chars();
    let one_char = match (chars.next(), chars.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    };
    let grows = with.len().saturating_sub(find.len());
    if grows > 0 {
        let matches = match one_char {
            // An empty `find` matches before every character and at the end.
            _ if find.is_empty() => s.chars().count() + 1,
            Some(c) => s.matches(c).count(),
            None => s.matches(find).count(),
        };
        string_fits(&ctx, s.len().saturating_add(matches.saturating_mul(grows)))?;
    }
    *s = match one_char {
        Some(c) => s.replace(c, with),
        None => s.replace(find, with),
    }
    .into();
    Ok(())
}

/// `s.pad(len, with)`: `with` repeated (the last one cut) until `s` has `len` characters.
fn pad_str(ctx: NativeCallContext, s: &mut ImmutableString, len: INT, with: &str) -> Result<()> {
    let Ok(len) = usize::try_from(len) else {
        // Negative: nothing to do.
        return Ok(());
    };
    string_fits(&ctx, len)?;
    let have = s.chars().count();
    if len <= have || with.is_empty() {
        return Ok(());
    }
    let needed = len - have;
    let per = with.chars().count();
    let (whole, part) = (needed / per, needed % per);
    let tail: &str = match with.char_indices().nth(part) {
        Some((end, _)) => &with[..end],
        None => with,
    };
    let bytes = whole
        .saturating_mul(with.len())
        .saturating_add(tail.len())
        .saturating_add(s.len());
    string_fits(&ctx, bytes)?;
    let mut padded = String::with_capacity(bytes);
    padded.push_str(s);
    padded.push_str(&with.repeat(whole));
    padded.push_str(tail);
    *s = padded.into();
    Ok(())
}

/// `s.split(by)`, `s.split(by, segments)` and `split_rev`, as the standard package has them.
fn split_str(
    ctx: &NativeCallContext,
    s: &ImmutableString,
    by: &str,
    segments: Option<INT>,
    reverse: bool,
) -> Result<Array> {
    let whole = || vec![Dynamic::from(s.clone())];
    if s.is_empty() || (!by.is_empty() && !s.contains(by)) {
        return Ok(whole());
    }
    let segments = match segments {
        Some(n) if n <= 1 => return Ok(whole()),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    // An empty separator splits around every character: "", each character, "".
    let count = if by.is_empty() {
        s.chars().count() + 2
    } else {
        s.matches(by).count() + 1
    };
    pieces(ctx, count.min(segments))?;
    Ok(match (reverse, segments) {
        (false, usize::MAX) => collect(s.split(by)),
        (false, n) => collect(s.splitn(n, by)),
        (true, usize::MAX) => collect(s.rsplit(by)),
        (true, n) => collect(s.rsplitn(n, by)),
    })
}
