//! `\xff\xff/actor_lineage/` (libfdb_c's `ActorLineageImpl`): a read names an index
//! (`state/` or `time/`), a process `ip:port` and optional bounds
//! (`state/<host>/<wait state>/<time>/<seq>`, `time/<host>/<time>/<wait state>/<seq>`), and
//! libfdb_c asks that process for its sampled actor lineage.
//!
//! This client checks the keys as libfdb_c 7.3.77 does and fails a malformed read the same
//! way (`special_keys_api_failure`, with the reason in `\xff\xff/error_message`). It does not
//! ask the process: a well-formed read still fails with `special_keys_no_module_found`
//! (libfdb_c's answer depends on the process: an fdbserver 7.3.77 without sampling answers
//! no rows, an unreachable address never answers).

use alloc::vec::Vec;

/// The module's `[begin, end)`.
pub(super) const ACTOR_LINEAGE_MODULE: (&[u8], &[u8]) =
    (b"\xff\xff/actor_lineage/", b"\xff\xff/actor_lineage0");

const MISSING: &str = r#"{"command":"read actor_lineage","message":"missing required parameters (index, host)","retriable":false}"#;
const INVALID_INDEX: &str = r#"{"command":"read actor_lineage","message":"invalid index in actor_lineage","retriable":false}"#;
const PARSE: &str =
    r#"{"command":"read actor_lineage","message":"failed to parse key","retriable":false}"#;

/// `StringRef::splitAny("/")`: a trailing `/` ends the last token, `//` makes an empty one.
fn split(s: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut r = s;
    while !r.is_empty() {
        match r.iter().position(|c| *c == b'/') {
            Some(i) => {
                out.push(&r[..i]);
                r = &r[i + 1..];
            }
            None => {
                out.push(r);
                r = b"";
            }
        }
    }
    out
}

/// `sscanf("%d")` at the front of `s`: white space, a sign, digits; what it consumed.
fn scan_int(s: &[u8]) -> Option<usize> {
    let ws = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let sign = usize::from(matches!(s.get(ws), Some(b'+' | b'-')));
    let n = s[ws + sign..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    (n > 0).then_some(ws + sign + n)
}

/// `NetworkAddress::parse`: `[ipv6]:port`, or `%d.%d.%d.%d:%d` taking the whole text; a
/// `:tls` after either.
fn host_ok(t: &[u8]) -> bool {
    if t.is_empty() {
        return false;
    }
    let t = if t.len() > 4 && t.ends_with(b":tls") {
        &t[..t.len() - 4]
    } else {
        t
    };
    if let Some(rest) = t.strip_prefix(b"[") {
        let Some(close) = rest.iter().position(|c| *c == b']') else {
            return false;
        };
        let ip = core::str::from_utf8(&rest[..close]).ok();
        let port = &rest[close + 1..];
        return port.first() == Some(&b':')
            && seq_ok(&port[1..])
            && ip.is_some_and(|ip| ip.parse::<core::net::Ipv6Addr>().is_ok());
    }
    let mut at = 0;
    for (i, sep) in [b'.', b'.', b'.', b':', 0].into_iter().enumerate() {
        let Some(n) = scan_int(&t[at..]) else {
            return false;
        };
        at += n;
        if i < 4 {
            if t.get(at) != Some(&sep) {
                return false;
            }
            at += 1;
        }
    }
    at == t.len()
}

/// The wait states `parse(WaitState&)` knows.
fn wait_state_ok(t: &[u8]) -> bool {
    matches!(
        t,
        b"disk" | b"Disk" | b"network" | b"Network" | b"running" | b"Running"
    )
}

/// `strptime("%FT%T%z")`: `YYYY-MM-DDTHH:MM:SS` and a zone (`Z`, `+hhmm`, `+hh:mm`, `+hh`).
fn time_ok(t: &[u8]) -> bool {
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    let Some(tpos) = t.iter().position(|c| *c == b'T') else {
        return false;
    };
    let (date, rest) = (&t[..tpos], &t[tpos + 1..]);
    let d: Vec<&[u8]> = date.split(|c| *c == b'-').collect();
    if d.len() != 3 || !d.iter().all(|p| digits(p)) {
        return false;
    }
    if rest.len() < 8 {
        return false;
    }
    let (clock, zone) = rest.split_at(8);
    let c: Vec<&[u8]> = clock.split(|c| *c == b':').collect();
    if c.len() != 3 || !c.iter().all(|p| digits(p) && p.len() == 2) {
        return false;
    }
    match zone.split_first() {
        Some((b'Z', [])) => true,
        Some((b'+' | b'-', z)) => {
            let z: Vec<u8> = z.iter().copied().filter(|c| *c != b':').collect();
            digits(&z) && (z.len() == 2 || z.len() == 4)
        }
        _ => false,
    }
}

/// `std::stoi`: white space, a sign, then at least one digit (what follows is ignored), in
/// `int`'s range.
fn seq_ok(t: &[u8]) -> bool {
    let s = t.trim_ascii_start();
    let (neg, s) = match s.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, s),
    };
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return false;
    }
    let mut v: i64 = 0;
    for c in &s[..n] {
        v = v * 10 + i64::from(c - b'0');
        if v > i64::from(i32::MAX) + 1 {
            return false;
        }
    }
    if neg {
        -v >= i64::from(i32::MIN)
    } else {
        v <= i64::from(i32::MAX)
    }
}

/// The tokens after the index, each checked as the index orders them.
fn fields_ok(tokens: &[&[u8]], state: bool) -> bool {
    tokens.iter().enumerate().all(|(i, t)| match (i, state) {
        (0, _) => host_ok(t),
        (1, true) | (2, false) => wait_state_ok(t),
        (2, true) | (1, false) => time_ok(t),
        (3, _) => seq_ok(t),
        _ => true,
    })
}

/// Why libfdb_c refuses a read of `[begin, end)` (both inside the module), as the JSON
/// `\xff\xff/error_message` shows; `None` for a well-formed read.
pub(super) fn refusal(begin: &[u8], end: &[u8]) -> Option<&'static str> {
    let prefix = ACTOR_LINEAGE_MODULE.0;
    let b = split(begin.get(prefix.len()..).unwrap_or(b""));
    let e = split(end.get(prefix.len()..).unwrap_or(b""));
    if b.len() < 2 || e.len() < 2 {
        return Some(MISSING);
    }
    let inside = |index: &[u8]| {
        let lo = [prefix, index, b"/"].concat();
        let hi = [prefix, index, b"0"].concat();
        lo.as_slice() <= begin && end <= hi.as_slice()
    };
    let state = if inside(b"state") {
        true
    } else if inside(b"time") {
        false
    } else {
        return Some(INVALID_INDEX);
    };
    if !fields_ok(&b[1..], state) || !fields_ok(&e[1..], state) {
        return Some(PARSE);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(b: &str, e: &str) -> Option<&'static str> {
        let p = |s: &str| [ACTOR_LINEAGE_MODULE.0, s.as_bytes()].concat();
        refusal(&p(b), &p(e))
    }

    #[test]
    fn keys_are_checked_as_libfdb_c_checks_them() {
        // Measured with libfdb_c 7.3.77.
        assert_eq!(r("state/", "state0"), Some(MISSING));
        assert_eq!(r("", "state/x"), Some(MISSING));
        assert_eq!(
            r("other/1.2.3.4:5", "other/1.2.3.4:5/x"),
            Some(INVALID_INDEX)
        );
        assert_eq!(r("time/1.2.3.4:5", "time/1.2.3.4:5/1"), Some(PARSE));
        assert_eq!(
            r("state/1.2.3.4:5/DISK", "state/1.2.3.4:5/running"),
            Some(PARSE)
        );
        assert_eq!(r("state//x", "state/1.2.3.4:5/running"), Some(PARSE));
        assert_eq!(r("state/1.2.3.4", "state/1.2.3.4:5/running"), Some(PARSE));
        assert_eq!(r("state/1.2.3.4:5", "state/1.2.3.4:5/running"), None);
        assert_eq!(r("state/[::1]:5", "state/[::1]:5/running"), None);
        assert_eq!(
            r("state/1.2.3.4:5:tls", "state/1.2.3.4:5:tls/running"),
            None
        );
        assert_eq!(r("state/nonsense", "state/nonsense/running"), Some(PARSE));
        assert_eq!(
            r(
                "state/1.2.3.4:5/disk/2024-01-02T03:04:05+0000/12abc/extra",
                "state/1.2.3.4:5/running"
            ),
            None
        );
        assert_eq!(
            r(
                "time/1.2.3.4:5/2024-01-02T03:04:05+0000/disk",
                "time/1.2.3.4:5/2024-01-02T03:04:06Z"
            ),
            None
        );
    }
}
