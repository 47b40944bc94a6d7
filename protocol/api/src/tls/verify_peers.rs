//! FDB's verify-peers rules (`TLSPolicy::set_verify_peers` and `TLSPolicy::Rule` in
//! `flow/TLSConfig.actor.cpp`): alternatives separated by `|` (`\|` is a literal bar), each a
//! comma-separated list of `Check.Valid=0|1`, `Check.Unexpired=0|1` and name criteria
//! (`S.CN=...`, `I.O>=...`, `R.OU<=...`, `subjectAltName=DNS:...`). A peer is accepted if any
//! rule with `Check.Valid=0` exists, else if its chain verifies and some rule's criteria match.
//!
//! Supported here: `Check.Valid` (both values) and `Check.Unexpired=1` — that is, FDB's
//! default `Check.Valid=1` and the "accept anything" `Check.Valid=0`. Rules with name
//! criteria or `Check.Unexpired=0` are refused when the database opens (an error, not a
//! silently weaker check).

use super::TlsError;

/// Parsed verify-peers rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyPeers {
    rules: Vec<Rule>,
}

/// One alternative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rule {
    /// `Check.Valid`: the chain must verify against the CA bundle.
    verify_cert: bool,
}

impl VerifyPeers {
    /// Parses FDB's verify-peers text.
    pub fn parse(text: &str) -> Result<VerifyPeers, TlsError> {
        let refuse = |why: &str| TlsError::VerifyPeers {
            rules: text.to_string(),
            why: why.to_string(),
        };
        let mut rules = Vec::new();
        for alternative in split_alternatives(text) {
            // An empty rule is FDB's defaults: `Check.Valid=1`, `Check.Unexpired=1`.
            let mut rule = Rule { verify_cert: true };
            for term in alternative.split(',').filter(|_| !alternative.is_empty()) {
                let Some((name, value)) = term.split_once('=') else {
                    return Err(refuse("a term without `=`"));
                };
                match (name, value) {
                    ("Check.Valid", "1") => rule.verify_cert = true,
                    ("Check.Valid", "0") => rule.verify_cert = false,
                    ("Check.Unexpired", "1") => {}
                    ("Check.Unexpired", "0") => {
                        return Err(refuse("Check.Unexpired=0 is not supported"))
                    }
                    (n, _) if n.starts_with("Check.") => {
                        return Err(refuse("Check.* takes 0 or 1, and only Valid and Unexpired"))
                    }
                    _ => {
                        return Err(refuse(
                            "certificate field criteria (S./I./R./subjectAltName) are not \
                             supported; only Check.Valid and Check.Unexpired=1",
                        ))
                    }
                }
            }
            rules.push(rule);
        }
        Ok(VerifyPeers { rules })
    }

    /// Whether a server's chain must verify against the CA bundle: FDB skips all checking if
    /// any rule says `Check.Valid=0`.
    pub fn checks_chain(&self) -> bool {
        self.rules.iter().all(|r| r.verify_cert)
    }
}

/// FDB's splitting on `|`: a bar preceded by a backslash does not split.
fn split_alternatives(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'|' && (i == 0 || bytes[i - 1] != b'\\') {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_checks_the_chain() {
        assert!(VerifyPeers::parse("Check.Valid=1").unwrap().checks_chain());
        assert!(VerifyPeers::parse("Check.Valid=1,Check.Unexpired=1")
            .unwrap()
            .checks_chain());
    }

    #[test]
    fn an_empty_rule_is_the_default() {
        assert!(VerifyPeers::parse("").unwrap().checks_chain());
        assert!(VerifyPeers::parse("Check.Valid=1|").unwrap().checks_chain());
    }

    #[test]
    fn any_rule_with_check_valid_0_accepts_every_peer() {
        assert!(!VerifyPeers::parse("Check.Valid=0").unwrap().checks_chain());
        assert!(!VerifyPeers::parse("Check.Valid=1|Check.Valid=0")
            .unwrap()
            .checks_chain());
    }

    #[test]
    fn what_is_not_supported_is_refused() {
        for text in [
            "S.CN=fdb",
            "Check.Valid=1,I.O=Apple",
            "Check.Unexpired=0",
            "Check.Valid=2",
            "Check.Other=1",
            "Check.Valid",
            "Check.Valid=1,",
        ] {
            assert!(
                matches!(VerifyPeers::parse(text), Err(TlsError::VerifyPeers { .. })),
                "{text:?} was accepted"
            );
        }
    }
}
