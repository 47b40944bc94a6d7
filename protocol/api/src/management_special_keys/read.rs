//! The read path: which reads are answered here, each part's rows from the system keys
//! (with the transaction's own writes merged in), and the point and range reads handed to
//! the core with the ranges they cover.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::KeyRange;
use fdb_protocol::{
    KeySelector, KeyValue, RangeOptions, RangeResult, SpecialWrite, TransactionOption,
};

use super::auto_coordinators::auto_coordinators;
use super::coordinators::resolved_coordinators;
use super::errors::api_failure;
use super::parts::{
    row, swap_prefix, write_at, Part, CONF_PREFIX, CONSISTENCY_CHECK_SUSPENDED_KEY,
    DATA_DISTRIBUTION_MODE_KEY, DB_LOCKED_KEY, HEALTHY_ZONE_KEY, IGNORE_SS_FAILURES_ZONE,
    MANAGEMENT, MIN_REQUIRED_COMMIT_VERSION_KEY, PARTS, REBALANCE_DD_IGNORE_KEY,
    VERSIONS_PER_SECOND,
};
use super::processes::{in_progress, workers};
use super::values::{decode_healthy_zone, le_u64, uid_hex};
use crate::driver::{query, Driver, Pending};
use crate::error::Error;
use crate::transaction::Transaction;

/// The module (management or configuration) holding `key`; the router
/// (`fdb_protocol::route_special_key`) sent the read here because there is one.
fn module_of(key: &[u8]) -> Option<(&'static [u8], &'static [u8])> {
    fdb_protocol::system_key_module(key)
}

/// The ranges of `module` whose rows are given in full: all of it, every part being served.
fn covered(module: (&[u8], &[u8])) -> Vec<KeyRange> {
    vec![range(module.0, module.1)]
}

fn range(b: &[u8], e: &[u8]) -> KeyRange {
    KeyRange {
        begin: Bytes::copy_from_slice(b),
        end: Bytes::copy_from_slice(e),
    }
}

/// `rywGetRange`: `rows` (sorted, inside `[b, e)`) as the transaction's writes in `[b, e)`
/// leave them: a written range hides what was read there, and a set shows its value.
fn with_writes(rows: Vec<KeyValue>, writes: &[SpecialWrite], b: &[u8], e: &[u8]) -> Vec<KeyValue> {
    let inside: Vec<&SpecialWrite> = writes
        .iter()
        .filter(|w| w.begin.as_ref() < e && b < w.end.as_ref())
        .collect();
    let mut out: Vec<KeyValue> = rows
        .into_iter()
        .filter(|kv| !inside.iter().any(|w| w.begin <= kv.key && kv.key < w.end))
        .collect();
    for w in inside {
        if let Some(v) = &w.value {
            if b <= w.begin.as_ref() && w.begin.as_ref() < e {
                out.push(KeyValue {
                    key: w.begin.clone(),
                    value: v.clone(),
                });
            }
        }
    }
    out.sort_by(|x, y| x.key.cmp(&y.key));
    out
}

/// The rows of `part` (`[pb, pe)`) in `[b, e)`.
async fn part_rows<D: Driver>(
    tx: &Transaction<D>,
    part: Part,
    (pb, _pe): (&[u8], &[u8]),
    (b, e): (&[u8], &[u8]),
    writes: &[SpecialWrite],
    ryw: bool,
) -> Result<Vec<KeyValue>, Error> {
    let own = |rows: Vec<KeyValue>| {
        if ryw {
            with_writes(rows, writes, b, e)
        } else {
            rows
        }
    };
    // A one-key part's row as the transaction's own write left it, if it wrote one.
    let own_write = || {
        write_at(writes, pb)
            .filter(|_| ryw)
            .map(|w| w.value.iter().map(|v| row(pb, v.to_vec())).collect())
    };
    match part {
        Part::Options => Ok(writes
            .iter()
            .filter(|w| w.value.is_some() && b <= w.begin.as_ref() && w.begin.as_ref() < e)
            .map(|w| row(w.begin.to_vec(), Vec::new()))
            .collect()),
        Part::Exclusion { .. } => {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let sb = swap_prefix(b, MANAGEMENT.0, CONF_PREFIX);
            let se = swap_prefix(e, MANAGEMENT.0, CONF_PREFIX);
            let rows = tx
                .get_range(&sb, &se, 0)
                .await?
                .into_iter()
                .map(|kv| KeyValue {
                    key: Bytes::from(swap_prefix(&kv.key, CONF_PREFIX, MANAGEMENT.0)),
                    value: kv.value,
                })
                .collect();
            Ok(own(rows))
        }
        Part::DbLocked | Part::ConsistencyCheck => {
            if let Some(rows) = own_write() {
                return Ok(rows);
            }
            tx.set_option(TransactionOption::LockAware)?;
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            if part == Part::DbLocked {
                let v = tx.get(DB_LOCKED_KEY).await?;
                let uid = v.as_deref().and_then(|v| {
                    let uid = v.get(10..26)?;
                    Some(uid_hex(le_u64(uid)?, le_u64(&uid[8..])?))
                });
                Ok(uid.into_iter().map(|u| row(pb, u)).collect())
            } else {
                tx.set_option(TransactionOption::PrioritySystemImmediate)?;
                let v = tx.get(CONSISTENCY_CHECK_SUSPENDED_KEY).await?;
                let suspended = v
                    .as_deref()
                    .and_then(|v| v.first())
                    .is_some_and(|b| *b != 0);
                Ok(if suspended {
                    vec![row(pb, "")]
                } else {
                    Vec::new()
                })
            }
        }
        Part::Maintenance => {
            tx.set_option(TransactionOption::LockAware)?;
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let mut rows = Vec::new();
            if let Some(v) = tx.get(HEALTHY_ZONE_KEY).await? {
                if let Some((zone, until)) = decode_healthy_zone(&v) {
                    let rv = tx.get_read_version().await?;
                    let ignore = zone == IGNORE_SS_FAILURES_ZONE;
                    let key = [pb, &zone].concat();
                    if (ignore || until > rv) && b <= key.as_slice() && key.as_slice() < e {
                        let secs = if ignore {
                            0
                        } else {
                            (until - rv) / VERSIONS_PER_SECOND
                        };
                        rows.push(row(key, secs.to_string()));
                    }
                }
            }
            Ok(own(rows))
        }
        Part::DataDistribution => {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let mut rows = Vec::new();
            let inside = |k: &[u8]| b <= k && k < e;
            let untouched = |k: &[u8]| !ryw || write_at(writes, k).is_none();
            let mode_key = [pb, b"mode"].concat();
            if inside(&mode_key) && untouched(&mode_key) {
                let v = tx.get(DATA_DISTRIBUTION_MODE_KEY).await?;
                let mode = v
                    .as_deref()
                    .and_then(|v| Some(i32::from_le_bytes(v.get(..4)?.try_into().ok()?)))
                    .unwrap_or(-1);
                rows.push(row(mode_key, mode.to_string()));
            }
            let ignored_key = [pb, b"rebalance_ignored"].concat();
            if inside(&ignored_key)
                && untouched(&ignored_key)
                && tx.get(REBALANCE_DD_IGNORE_KEY).await?.is_some()
            {
                rows.push(row(ignored_key, ""));
            }
            Ok(own(rows))
        }
        Part::InProgress => Ok(in_progress(tx)
            .await?
            .into_iter()
            .map(|a| row([pb, a.as_bytes()].concat(), ""))
            .filter(|kv| b <= kv.key.as_ref() && kv.key.as_ref() < e)
            .collect()),
        Part::VersionKey(key) => {
            // `advanceversion`'s key shows the transaction's own write (even one its commit
            // would refuse); `versionepoch`'s is always read.
            if key == MIN_REQUIRED_COMMIT_VERSION_KEY {
                if let Some(rows) = own_write() {
                    return Ok(rows);
                }
            }
            tx.set_option(TransactionOption::LockAware)?;
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let v = tx.get(key).await?;
            let v = v
                .as_deref()
                .and_then(le_u64)
                .map(|v| (v as i64).to_string());
            Ok(v.into_iter().map(|v| row(pb, v)).collect())
        }
        Part::ProcessClass { source } => {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let rows = workers(tx)
                .await?
                .into_iter()
                .map(|w| {
                    let v = if source {
                        w.class.source_name()
                    } else {
                        w.class.class_name()
                    };
                    row([pb, w.address.as_bytes()].concat(), v)
                })
                .filter(|kv| b <= kv.key.as_ref() && kv.key.as_ref() < e)
                .collect();
            Ok(if source { rows } else { own(rows) })
        }
        Part::Coordinators => {
            // `coordinatorsGetRangeActor`: the description, and the coordinators sorted as
            // strings, from the connection string in use, host names resolved.
            let cs = tx
                .get(b"\xff\xff/connection_string")
                .await?
                .unwrap_or_default();
            let cs = String::from_utf8_lossy(&cs);
            let (description, addresses) = match cs.split_once('@') {
                Some((key, addresses)) => (key.split(':').next().unwrap_or(""), addresses),
                None => ("", ""),
            };
            let mut coordinators = resolved_coordinators(addresses);
            coordinators.sort_unstable();
            let mut rows = Vec::new();
            for (name, v) in [
                ("cluster_description", description.to_owned()),
                ("processes", coordinators.join(",")),
            ] {
                let key = [pb, name.as_bytes()].concat();
                if b <= key.as_slice() && key.as_slice() < e {
                    rows.push(row(key, v));
                }
            }
            Ok(own(rows))
        }
        Part::Tenant => crate::tenant_rows::rows_between(tx, b, e).await,
        Part::AutoCoordinators => match auto_coordinators(tx).await? {
            Ok(v) => Ok(vec![row(b, v)]),
            Err(msg) => Err(api_failure(tx, msg).await),
        },
    }
}

/// Every row of the served parts in `[b, e)` (inside `module`).
async fn rows_in<D: Driver>(
    tx: &Transaction<D>,
    module: (&[u8], &[u8]),
    b: &[u8],
    e: &[u8],
) -> Result<Vec<KeyValue>, Error> {
    let (writes, ryw) = tx.special_writes().await?;
    let mut rows = Vec::new();
    for (pb, pe, part) in PARTS {
        if !(module.0 <= pb && pe <= module.1) {
            continue;
        }
        let (x, y) = (b.max(pb), e.min(pe));
        if x < y {
            rows.extend(part_rows(tx, part, (pb, pe), (x, y), &writes, ryw).await?);
        }
    }
    Ok(rows)
}

impl<D: Driver> Transaction<D> {
    /// A point read in the management or configuration module.
    pub(crate) fn management_get(&self, key: &[u8]) -> Pending<D, Option<Bytes>> {
        let key = key.to_vec();
        let tx = self.clone();
        Pending::local(async move {
            tx.check_outside_tenants()?;
            let module = module_of(&key).expect("routed here by route_special_key");
            let after = [&key[..], b"\x00"].concat();
            let rows = rows_in(&tx, module, &key, &after).await?;
            let covered = covered(module);
            tx.call(move |c, now, id| c.get_with_rows(now, id, &key, rows, covered))
                .await
        })
    }

    /// A range read's batch in the management or configuration module: the rows between the
    /// two keys when both selectors are plain keys (offset 1), the whole module's otherwise.
    pub(crate) fn management_range(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
    ) -> Pending<D, RangeResult> {
        let tx = self.clone();
        Pending::local(async move {
            tx.check_outside_tenants()?;
            let module = module_of(&begin.key).expect("routed here by route_special_range");
            let (b, e) = if begin.offset == 1 && end.offset == 1 {
                (begin.key.to_vec(), end.key.to_vec())
            } else {
                (module.0.to_vec(), module.1.to_vec())
            };
            let rows = rows_in(&tx, module, &b, &e).await?;
            let covered = covered(module);
            tx.call(move |c, now, id| {
                c.get_range_with_rows(now, id, begin, end, opts, rows, covered)
            })
            .await
        })
    }

    /// The management parts are not for a transaction inside a tenant (`supportsTenants`).
    fn check_outside_tenants(&self) -> Result<(), Error> {
        if self.in_tenant() {
            return Err(ErrorCode::ILLEGAL_TENANT_ACCESS.into());
        }
        Ok(())
    }

    async fn special_writes(&self) -> Result<(Vec<SpecialWrite>, bool), Error> {
        let id = self.flushed_id();
        query(self.driver(), move |c, now| {
            let id = id(c, now);
            c.special_writes(id)
        })
        .await?
        .map_err(Error::Client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_writes_hide_and_add_rows_as_ryw_get_range_does() {
        let kv = |k: &str, v: &str| row(k, v);
        let w = |b: &str, e: &str, v: Option<&str>| SpecialWrite {
            begin: Bytes::copy_from_slice(b.as_bytes()),
            end: Bytes::copy_from_slice(e.as_bytes()),
            value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        };
        let read = vec![kv("a", "1"), kv("c", "3"), kv("e", "5")];
        let writes = [
            w("b", "b\0", Some("2")),
            w("c", "d", None),
            w("e", "e\0", Some("new")),
            w("x", "x\0", Some("outside")),
        ];
        let got = with_writes(read, &writes, b"a", b"f");
        assert_eq!(got, [kv("a", "1"), kv("b", "2"), kv("e", "new")]);
    }
}
