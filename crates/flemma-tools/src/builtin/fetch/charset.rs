//! A page's bytes → UTF-8 text, the encoding chosen as seed `002` orders it: byte-order mark,
//! `charset` of the `Content-Type` header, `<meta charset>` or `<meta http-equiv="Content-Type">`
//! in the first 4 KiB, UTF-8 when the bytes are valid UTF-8, else `windows-1252`. A name the
//! Encoding Standard does not know is skipped.

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};

/// How far into the page a `<meta>` charset is looked for.
const META_WINDOW: usize = 4096;

/// The page as text, or why it cannot be decoded (the encoding's name).
pub fn decode(body: &[u8], content_type: Option<&str>) -> Result<String, String> {
    let (encoding, body) = match Encoding::for_bom(body) {
        Some((encoding, bom)) => (encoding, &body[bom..]),
        None => (choose(body, content_type), body),
    };
    encoding
        .decode_without_bom_handling_and_without_replacement(body)
        .map(std::borrow::Cow::into_owned)
        .ok_or_else(|| {
            format!(
                "the page is not valid {} (its declared or guessed encoding)",
                encoding.name()
            )
        })
}

fn choose(body: &[u8], content_type: Option<&str>) -> &'static Encoding {
    content_type
        .and_then(charset_parameter)
        .and_then(known)
        .or_else(|| meta_charset(&body[..body.len().min(META_WINDOW)]))
        .unwrap_or_else(|| {
            if std::str::from_utf8(body).is_ok() {
                UTF_8
            } else {
                WINDOWS_1252
            }
        })
}

/// A label the Encoding Standard knows.
fn known(label: &str) -> Option<&'static Encoding> {
    Encoding::for_label(label.trim().as_bytes())
}

/// `text/html; charset="iso-8859-1"` → `iso-8859-1`.
fn charset_parameter(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(|c| c == '"' || c == '\''))
    })
}

/// The first `charset=` inside a `<meta …>` tag that names a known encoding. A page cannot be
/// UTF-16 when its `<meta>` was readable as ASCII, so (as browsers do) UTF-16 means UTF-8 there.
fn meta_charset(head: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut rest = head.as_str();
    while let Some(at) = rest.find("<meta") {
        let tag = &rest[at..];
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        if let Some(found) = tag.find("charset") {
            let value = tag[found + "charset".len()..]
                .trim_start()
                .strip_prefix('=')
                .map(|v| v.trim_start().trim_start_matches(['"', '\'']));
            if let Some(value) = value {
                let end = value
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "-_:.".contains(c)))
                    .unwrap_or(value.len());
                if let Some(encoding) = known(&value[..end]) {
                    return Some(
                        if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                            UTF_8
                        } else {
                            encoding
                        },
                    );
                }
            }
        }
        rest = &rest[at + "<meta".len()..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_of_the_seed() {
        // Header beats meta; meta beats the UTF-8 guess; the BOM beats everything.
        let latin = b"<meta charset=\"utf-8\"><p>caf\xe9</p>";
        assert_eq!(
            decode(latin, Some("text/html; charset=ISO-8859-1")).as_deref(),
            Ok("<meta charset=\"utf-8\"><p>caf\u{e9}</p>")
        );
        assert_eq!(
            decode(
                b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-15\">\xa4",
                None
            )
            .map(|s| s.ends_with('\u{20ac}')),
            Ok(true)
        );
        assert_eq!(decode(b"caf\xc3\xa9", None).as_deref(), Ok("caf\u{e9}"));
        assert_eq!(decode(b"caf\xe9", None).as_deref(), Ok("caf\u{e9}"));
        assert_eq!(
            decode(
                b"\xef\xbb\xbfcaf\xc3\xa9",
                Some("text/html; charset=iso-8859-1")
            )
            .as_deref(),
            Ok("caf\u{e9}")
        );
        // An unknown name is skipped.
        assert_eq!(
            decode(b"caf\xe9", Some("text/html; charset=klingon")).as_deref(),
            Ok("caf\u{e9}")
        );
        assert!(
            decode(b"caf\xe9", Some("text/html; charset=utf-8"))
                .is_err_and(|e| e.contains("UTF-8"))
        );
    }
}
