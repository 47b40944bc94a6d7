//! How one trace event is written: libfdb_c's two trace formats, XML (its default) and JSON,
//! with their escaping, and the event's time stamps.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// A trace file's format (the `TraceFormat` option, `xml` or `json`, in any case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Xml,
    Json,
}

impl Format {
    /// The option's value as libfdb_c reads it: `None` for any other name.
    pub(crate) fn parse(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "xml" => Some(Format::Xml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// The file name's extension (without its dot).
    pub(crate) fn extension(self) -> &'static str {
        match self {
            Format::Xml => "xml",
            Format::Json => "json",
        }
    }

    /// What a file starts with: XML's declaration and root element; nothing for JSON, whose
    /// file is one object a line.
    pub(crate) fn header(self) -> &'static str {
        match self {
            Format::Xml => "<?xml version=\"1.0\"?>\r\n<Trace>\r\n",
            Format::Json => "",
        }
    }

    /// What a file that is closed ends with.
    pub(crate) fn footer(self) -> &'static str {
        match self {
            Format::Xml => "</Trace>\r\n",
            Format::Json => "",
        }
    }

    /// One event, its fields in order, as one line.
    pub(crate) fn event(self, fields: &[(&str, &str)]) -> String {
        let mut out = String::new();
        match self {
            Format::Xml => {
                out.push_str("<Event ");
                for (name, value) in fields {
                    xml_escape(&mut out, name);
                    out.push_str("=\"");
                    xml_escape(&mut out, value);
                    out.push_str("\" ");
                }
                out.push_str("/>\n");
            }
            Format::Json => {
                out.push_str("{  ");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push('"');
                    json_escape(&mut out, name);
                    out.push_str("\": \"");
                    json_escape(&mut out, value);
                    out.push('"');
                }
                out.push_str(" }\n");
            }
        }
        out
    }
}

/// XML's five specials as entities; a line break or a NUL becomes a space, so that every
/// event stays on one line.
fn xml_escape(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' | '\n' | '\0' => out.push(' '),
            c => out.push(c),
        }
    }
}

/// JSON's quote and backslash escaped, line breaks as `\n` and `\r`, and every other byte
/// that is not printable ASCII as `\xHH`, byte by byte, as libfdb_c writes it.
fn json_escape(out: &mut String, s: &str) {
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            0x20..=0x7e => out.push(b as char),
            b => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

/// An event's `Time` (seconds since 1970, to the microsecond) and `DateTime` (UTC, to the
/// second).
pub(crate) fn stamps(at: SystemTime) -> (String, String) {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let time = format!("{secs}.{:06}", since.subsec_micros());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let date = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    );
    (time, date)
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn xml_escapes_as_libfdb_c() {
        let line = Format::Xml.event(&[("Type", "A"), ("Detail", "a&b\"<c>\nd\0")]);
        assert_eq!(
            line,
            "<Event Type=\"A\" Detail=\"a&amp;b&quot;&lt;c&gt; d \" />\n"
        );
    }

    #[test]
    fn json_escapes_as_libfdb_c() {
        let line = Format::Json.event(&[("Type", "A"), ("Detail", "q\"b\\n\nr\r\u{1}é")]);
        assert_eq!(
            line,
            "{  \"Type\": \"A\", \"Detail\": \"q\\\"b\\\\n\\nr\\r\\x01\\xc3\\xa9\" }\n"
        );
    }

    #[test]
    fn formats_are_named_in_any_case() {
        assert_eq!(Format::parse("XML"), Some(Format::Xml));
        assert_eq!(Format::parse("Json"), Some(Format::Json));
        assert_eq!(Format::parse("yaml"), None);
    }

    #[test]
    fn stamps_are_utc() {
        // 2026-12-07T16:54:46Z, as a libfdb_c trace file wrote it.
        let at = UNIX_EPOCH + Duration::from_micros(1_796_662_486_958_040);
        assert_eq!(
            stamps(at),
            (
                "1796662486.958040".to_string(),
                "2026-12-07T16:54:46Z".to_string()
            )
        );
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(stamps(leap).1, "2000-02-29T00:00:00Z");
        assert_eq!(stamps(UNIX_EPOCH).1, "1970-01-01T00:00:00Z");
    }
}
