//! Helpers for the special keys (`\xff\xff/...`) an application reads most: the cluster's
//! status document and the conflicting keys of a failed commit.

use bytes::Bytes;
use fdb_protocol::messages::types::KeyRange;
use fdb_protocol::{KeySelector, RangeOptions, StreamingMode, CONFLICTING_KEYS_PREFIX};

use crate::database::Database;
use crate::driver::{submit, Driver};
use crate::error::Error;
use crate::transaction::Transaction;

impl<D: Driver> Database<D> {
    /// `\xff\xff/status/json`: the cluster's status document, as `fdbcli --json` prints it
    /// (read from the cluster controller through the coordinators, as libfdb_c reads it).
    pub async fn status_json(&self) -> Result<String, Error> {
        let doc = submit(self.driver(), |c, now| c.status_json(now)).await?;
        let doc = doc.unwrap_or_default();
        Ok(String::from_utf8_lossy(&doc).into_owned())
    }
}

impl<D: Driver> Transaction<D> {
    /// The read conflict ranges that made this transaction's last commit fail with
    /// `not_committed`, read from `\xff\xff/transaction/conflicting_keys/` (empty unless the
    /// transaction set `report_conflicting_keys` and its commit conflicted). Read it before
    /// `on_error`, which resets the transaction.
    pub async fn conflicting_keys(&self) -> Result<Vec<KeyRange>, Error> {
        let mut end = CONFLICTING_KEYS_PREFIX.to_vec();
        end.push(0xff);
        let rows = self
            .get_range_with(
                KeySelector::first_greater_or_equal(CONFLICTING_KEYS_PREFIX),
                KeySelector::first_greater_or_equal(end),
                RangeOptions {
                    mode: StreamingMode::WantAll,
                    ..RangeOptions::default()
                },
                true,
            )
            .await?;
        // Each range shows as its begin marked "1" and its end marked "0".
        let mut ranges = Vec::new();
        let mut open: Option<Bytes> = None;
        for kv in rows {
            let key = kv.key.slice(CONFLICTING_KEYS_PREFIX.len()..);
            match (&kv.value[..], open.take()) {
                (b"1", None) => open = Some(key),
                (b"0", Some(begin)) => ranges.push(KeyRange { begin, end: key }),
                // A begin inside an open range continues it.
                (b"1", Some(begin)) => open = Some(begin),
                _ => {}
            }
        }
        Ok(ranges)
    }
}
