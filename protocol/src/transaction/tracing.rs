//! `\xff\xff/tracing/` (libfdb_c's `TracingOptionsImpl`): the transaction's span context as
//! two rows, `transaction_id` (the trace id, 32 hex digits) and `token` (the span id, in
//! decimal), and the writes that change them before the transaction does anything else.
//!
//! The trace id is what every request of the transaction carries in its span context
//! ([`super::Transactions::span`]), so setting `transaction_id` names the transaction's
//! requests. Both stay across `on_error` (NativeAPI's `reset` keeps the span context) and
//! are drawn afresh by `reset` (`fullReset`).
//!
//! As libfdb_c 7.3.77 does: a write after the transaction wrote anything (approximate size
//! above 0) is refused at commit with `special_keys_api_failure`; a `transaction_id` that
//! is not 32 bytes or whose halves do not scan as hex fails with `internal_error` (an
//! `ASSERT` in `UID::fromString`); a `token` other than `true` / `false` and any clear fail
//! with `special_keys_api_failure`. A key is told apart by how it ends (`endsWith`), so
//! `\xff\xff/tracing/footoken` sets the token.

use alloc::vec::Vec;
use bytes::Bytes;

use super::Transactions;
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::TransactionId;
use crate::messages::types::KeyValue;
use crate::uid::Uid;

/// The module's `[begin, end)`.
pub const TRACING_MODULE: (&[u8], &[u8]) = (b"\xff\xff/tracing/", b"\xff\xff/tracing0");
const TRANSACTION_ID: &[u8] = b"transaction_id";
const TOKEN: &[u8] = b"token";

/// What a write into the module did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TracingWrite {
    /// Taken (or ignored: a key that names no option).
    Done,
    /// Too late: the write is kept for the commit to refuse (the write map holds it).
    Refused,
    /// Failed at once with this error and `\xff\xff/error_message` (if any).
    Failed(ErrorCode, Option<&'static str>),
}

/// `sscanf("%16x")` over `s` from `at`: skips white space, then reads up to 16 characters
/// of an optional sign, an optional `0x`, and hex digits. `None` when no digit was read.
fn scan_hex16(s: &[u8], at: &mut usize) -> Option<u64> {
    while s.get(*at).is_some_and(|c| c.is_ascii_whitespace()) {
        *at += 1;
    }
    let start = *at;
    let end = (start + 16).min(s.len());
    let mut i = start;
    let negative = match s.get(i) {
        Some(b'-') if i < end => {
            i += 1;
            true
        }
        Some(b'+') if i < end => {
            i += 1;
            false
        }
        _ => false,
    };
    if i + 1 < end && s[i] == b'0' && (s[i + 1] | 0x20) == b'x' && {
        s.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit()) && i + 2 < end
    } {
        i += 2;
    }
    let digits = i;
    let mut v: u64 = 0;
    while i < end && s[i].is_ascii_hexdigit() {
        let d = (s[i] as char).to_digit(16).unwrap_or(0);
        v = (v << 4) | u64::from(d);
        i += 1;
    }
    if i == digits {
        return None;
    }
    *at = i;
    Some(if negative { v.wrapping_neg() } else { v })
}

/// `UID::fromString`: 32 bytes whose two halves scan as hex (a NUL ends the string).
pub(crate) fn parse_transaction_id(v: &[u8]) -> Option<Uid> {
    if v.len() != 32 {
        return None;
    }
    let s = v.split(|c| *c == 0).next().unwrap_or(b"");
    let mut at = 0;
    let first = scan_hex16(s, &mut at)?;
    let second = scan_hex16(s, &mut at)?;
    Some(Uid::new(first, second))
}

impl Transactions {
    /// The module's rows for `tx`.
    pub(super) fn tracing_rows(&self, tx: TransactionId, out: &mut Vec<KeyValue>) {
        let Some(t) = self.txs.get(&tx) else {
            return;
        };
        let rows = [
            (TOKEN, alloc::format!("{}", t.span_token)),
            (TRANSACTION_ID, alloc::format!("{}", t.trace_id)),
        ];
        for (name, value) in rows {
            out.push(KeyValue {
                key: Bytes::from([TRACING_MODULE.0, name].concat()),
                value: Bytes::from(value.into_bytes()),
            });
        }
    }

    /// `TracingOptionsImpl::set` / `clear` of `key` (`value` `None` for a clear).
    pub(super) fn tracing_write(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        value: Option<&Bytes>,
        single: bool,
    ) -> Result<TracingWrite, ClientError> {
        let Some(value) = value else {
            let msg = if single {
                r#"{"command":"clear trace","message":"clear disabled","retriable":false}"#
            } else {
                r#"{"command":"clear trace","message":"clear range disabled","retriable":false}"#
            };
            return Ok(TracingWrite::Failed(
                ErrorCode::SPECIAL_KEYS_API_FAILURE,
                Some(msg),
            ));
        };
        if self.approximate_size(tx) > 0 {
            return Ok(TracingWrite::Refused);
        }
        let t = self.tx_mut(tx)?;
        if key.ends_with(TRANSACTION_ID) {
            match parse_transaction_id(value) {
                Some(id) => t.trace_id = id,
                None => return Ok(TracingWrite::Failed(ErrorCode::INTERNAL_ERROR, None)),
            }
        } else if key.ends_with(TOKEN) {
            t.span_token = match value.as_ref() {
                b"true" => t.token_rng.next_u64(),
                b"false" => 0,
                _ => {
                    return Ok(TracingWrite::Failed(
                        ErrorCode::SPECIAL_KEYS_API_FAILURE,
                        Some(
                            r#"{"command":"configure trace token","message":"token must be set to true/false","retriable":false}"#,
                        ),
                    ))
                }
            };
        }
        Ok(TracingWrite::Done)
    }
}

impl Transactions {
    /// A write into the module, from `check_special_write`: `Ok(true)`, taken by the special
    /// key space (kept for the commit when too late), or the error it fails with.
    // `check_special_write`'s arguments, passed on whole: the tracing module is its branch.
    pub(super) fn tracing_special_write(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        value: Option<&Bytes>,
        single: bool,
    ) -> Result<bool, ClientError> {
        match self.tracing_write(tx, begin, value, single)? {
            TracingWrite::Done => Ok(true),
            TracingWrite::Refused => {
                let t = self.tx_mut(tx)?;
                t.special_error = Some(Bytes::from_static(TOO_LATE.as_bytes()));
                t.special_writes.insert(
                    Bytes::copy_from_slice(begin),
                    Bytes::copy_from_slice(end),
                    None,
                );
                Ok(true)
            }
            TracingWrite::Failed(code, msg) => {
                if let Some(msg) = msg {
                    self.tx_mut(tx)?.special_error = Some(Bytes::from_static(msg.as_bytes()));
                }
                Err(ClientError::Fdb(code))
            }
        }
    }
}

/// Why a tracing write made too late fails the commit.
const TOO_LATE: &str = r#"{"command":"configure trace","message":"tracing options must be set first","retriable":false}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_ids_scan_as_sscanf_does() {
        for (text, id) in [
            (
                "0123456789abcdef0123456789ABCDEF",
                Some("0123456789abcdef0123456789abcdef"),
            ),
            // Measured with libfdb_c 7.3.77: a prefix, a space and a stray letter.
            (
                "0x23456789abcdef0123456789abcdef",
                Some("0023456789abcdef0123456789abcdef"),
            ),
            (
                " 123456789abcdef0123456789abcdef",
                Some("123456789abcdef00123456789abcdef"),
            ),
            (
                "0123456789abcdef0123456789abcdeg",
                Some("0123456789abcdef00123456789abcde"),
            ),
            ("0123", None),
            ("0123456789abcdefXXXXXXXXXXXXXXXX", None),
            ("zz23456789abcdef0123456789abcdef", None),
        ] {
            let parsed = parse_transaction_id(text.as_bytes()).map(|u| alloc::format!("{u}"));
            assert_eq!(parsed.as_deref(), id, "{text:?}");
        }
    }
}
