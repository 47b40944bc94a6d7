//! libfdb_c's network options from the environment: a variable `FDB_NETWORK_OPTION_<NAME>`
//! sets network option `<NAME>` (upper case, as `fdb.options` names it) in every program on
//! libfdb_c. This crate reads the TLS ones among them ([`crate::TlsConfig`]) and the knobs
//! ([`knobs`]); fdb-compat, which has foundationdb-rs's network options, reads them all.

use fdb_protocol::knobs::Knobs;

/// What every such variable's name starts with.
pub const PREFIX: &str = "FDB_NETWORK_OPTION_";

/// The parameters a variable's value holds (libfdb_c's `parseOptionValues`): it is split at
/// `:`, and a parameter is set for each piece in turn; `\:` is a `:` and `\\` a `\`. `None`
/// for any other `\`, which libfdb_c refuses (`invalid_option_value`).
pub fn values(value: &str) -> Option<Vec<String>> {
    let mut values = Vec::new();
    let mut current = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ':')) => current.push(e),
                _ => return None,
            },
            ':' => values.push(core::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    values.push(current);
    Some(values)
}

/// The knobs `FDB_NETWORK_OPTION_KNOB` sets (`name=value`, several split at `:`), over
/// libfdb_c's defaults. A knob not taken is said in a warning (`tracing`), as libfdb_c says it
/// on standard error, and the rest still apply.
pub fn knobs() -> Knobs {
    let mut knobs = Knobs::default();
    let Ok(value) = std::env::var(format!("{PREFIX}KNOB")) else {
        return knobs;
    };
    let Some(options) = values(&value) else {
        tracing::warn!(%value, "knobs from the environment not used: a bad escape");
        return knobs;
    };
    for option in options {
        match knobs.set_option(&option) {
            Some(Ok(())) => {}
            Some(Err(why)) => {
                tracing::warn!(knob = %option, ?why, "knob from the environment not used")
            }
            None => tracing::warn!(knob = %option, "knob from the environment is not name=value"),
        }
    }
    knobs
}

#[cfg(test)]
mod tests {
    use super::values;

    fn split(v: &str) -> Option<Vec<&str>> {
        // Leaked for the comparison's sake: a test's few strings.
        values(v).map(|vs| vs.into_iter().map(|s| &*s.leak()).collect())
    }

    /// The cases of libfdb_c's own unit test of `parseOptionValues`.
    #[test]
    fn values_split_as_libfdb_c_splits_them() {
        assert_eq!(split("a"), Some(vec!["a"]));
        assert_eq!(split("abcde"), Some(vec!["abcde"]));
        assert_eq!(split(""), Some(vec![""]));
        assert_eq!(split("a:b:c:d:e"), Some(vec!["a", "b", "c", "d", "e"]));
        assert_eq!(split(r"\\a\::\:b:\\"), Some(vec![r"\a:", ":b", r"\"]));
        assert_eq!(split("abcd:"), Some(vec!["abcd", ""]));
        assert_eq!(split(":abcd"), Some(vec!["", "abcd"]));
        assert_eq!(split(":"), Some(vec!["", ""]));
        assert_eq!(split(r"\x"), None);
        assert_eq!(split(r"a\"), None);
    }
}
