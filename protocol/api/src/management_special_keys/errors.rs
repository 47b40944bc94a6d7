//! The JSON error messages a refused write leaves in `\xff\xff/error_message`, shared by
//! every part's commit and the tenant module's.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;

use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// `ManagementAPIError::toJsonString(false, command, message)`, as json_spirit writes it
/// (keys sorted, `raw_utf8`).
pub(crate) fn api_error(command: &str, message: &str) -> String {
    management_error(false, command, message)
}

/// `ManagementAPIError::toJsonString(retriable, command, message)`.
pub(crate) fn management_error(retriable: bool, command: &str, message: &str) -> String {
    fn esc(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c => out.push(c),
            }
        }
        out
    }
    format!(
        r#"{{"command":"{}","message":"{}","retriable":{retriable}}}"#,
        esc(command),
        esc(message)
    )
}

/// Fails the commit with `special_keys_api_failure`, leaving `message` in
/// `\xff\xff/error_message`.
pub(crate) async fn api_failure<D: Driver>(tx: &Transaction<D>, msg: String) -> Error {
    if let Err(e) = tx.set_special_error_message(Bytes::from(msg)).await {
        return e;
    }
    ErrorCode::SPECIAL_KEYS_API_FAILURE.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_json_spirits() {
        assert_eq!(
            api_error("lock", "a \"b\"\n"),
            r#"{"command":"lock","message":"a \"b\"\n","retriable":false}"#
        );
    }
}
