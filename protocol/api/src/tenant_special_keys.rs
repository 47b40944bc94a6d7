//! The tenant special keys, `\xff\xff/management/tenant/`: the module libfdb_c 7.3 runs in
//! the client (`TenantRangeImpl`, `fdbclient/TenantSpecialKeys.actor.h`), through which the
//! Python binding's `fdb.tenant_management` and fdbcli manage tenants.
//!
//! * Reading `map/<name>` gives each tenant's JSON. The rows are read from the tenant map
//!   here (as `listTenantMetadataTransaction` reads them) and handed to the core, which
//!   applies selectors, limits and direction as for any special key.
//! * With `special_key_space_enable_writes`, writes are kept by the core until the commit,
//!   which first carries them out as ordinary writes in the same transaction:
//!   * a set of `map/<name>` creates the tenant (nothing if it exists), a clear deletes it (a
//!     range clear deletes every tenant in the range);
//!   * a set of `configure/<tuple(name, "tenant_group")>` configures it (a clear removes the
//!     group); with a create in the same commit it configures the new tenant;
//!   * a set of `rename/<old>` to `<new>` renames a tenant.
//!
//!   Overlapping renames, or a rename beside a create, delete or configure of either name,
//!   fail the commit with `special_keys_api_failure`, and `\xff\xff/error_message` then says
//!   why, in libfdb_c's JSON.

use std::collections::BTreeMap;

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::{
    route_special_key, tuple, Committed, KeySelector, RangeOptions, RangeResult, SpecialModule,
    SpecialWrite, TransactionOption, TENANT_MANAGEMENT_RANGE, TRACING_MODULE,
};

use crate::driver::{query, Driver, Pending};
use crate::error::Error;
use crate::management_special_keys::{api_error, api_failure};
use crate::tenant_management::{
    check_tenant_mode, configure_tenant_by_in, create_tenant_with_in, delete_tenant_in,
    list_tenants_in, rename_tenant_in, TenantConfig,
};
use crate::tenant_rows::{rows_for_key, rows_for_range, NAMES_END};
use crate::transaction::Transaction;

const MAP: (&[u8], &[u8]) = (b"map/", b"map0");
const CONFIGURE: (&[u8], &[u8]) = (b"configure/", b"configure0");
const RENAME: (&[u8], &[u8]) = (b"rename/", b"rename0");
/// `CLIENT_KNOBS->TOO_MANY`: a range delete of this many tenants is refused.
const TOO_MANY: usize = 1_000_000;

/// What the writes ask for, sorted out as `commitImpl` sorts them.
#[derive(Default)]
struct Plan {
    /// Name ranges set (`Some`, a create of the range's first name) or cleared.
    map: Vec<(Bytes, Bytes, bool)>,
    /// Configuration parameters by tenant, in the order written.
    configure: BTreeMap<Bytes, Vec<(Bytes, Option<Bytes>)>>,
    renames: Vec<(Bytes, Bytes)>,
}

/// Strips `sub`'s prefix from a write's key range (`[begin, end)` inside the tenant module);
/// an end past `sub` becomes `past`.
fn within(w: &SpecialWrite, sub: (&[u8], &[u8]), past: &[u8]) -> Option<(Bytes, Bytes)> {
    let m = TENANT_MANAGEMENT_RANGE.0;
    let b = w.begin.strip_prefix(m).unwrap_or(b"");
    // An end at the module's end is past every part.
    let e = w.end.strip_prefix(m).unwrap_or(b"\xff");
    let (b, e) = (b.max(sub.0), e.min(sub.1));
    if b >= e {
        return None;
    }
    let begin = b.strip_prefix(sub.0).unwrap_or(b"");
    let end = e.strip_prefix(sub.0).unwrap_or(past);
    Some((Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end)))
}

/// Whether `[begin, end)` is the single key `begin`.
fn single(begin: &[u8], end: &[u8]) -> bool {
    end.len() == begin.len() + 1 && end.starts_with(begin) && end.last() == Some(&0)
}

impl Plan {
    async fn of<D: Driver>(tx: &Transaction<D>, writes: Vec<SpecialWrite>) -> Result<Plan, Error> {
        let mut plan = Plan::default();
        let mut renamed: Vec<Bytes> = Vec::new();
        for w in &writes {
            if let Some((b, e)) = within(w, MAP, NAMES_END) {
                plan.map.push((b, e, w.value.is_some()));
            } else if let Some((b, e)) = within(w, CONFIGURE, b"") {
                if !single(&b, &e) {
                    continue;
                }
                let Ok((name, param)) = tuple::unpack::<(Vec<u8>, Vec<u8>)>(&b) else {
                    return Err(api_failure(
                        tx,
                        api_error("configure tenant", "invalid tenant configuration key"),
                    )
                    .await);
                };
                plan.configure
                    .entry(Bytes::from(name))
                    .or_default()
                    .push((Bytes::from(param), w.value.clone()));
            } else if let Some((old, _)) = within(w, RENAME, b"") {
                // A rename is a set; a clear of one asks for nothing.
                let Some(new) = w.value.clone() else { continue };
                if renamed.contains(&old) || renamed.contains(&new) || old == new {
                    return Err(api_failure(
                        tx,
                        api_error("rename tenant", "tenant rename conflict"),
                    )
                    .await);
                }
                renamed.push(old.clone());
                renamed.push(new.clone());
                plan.renames.push((old, new));
            }
        }
        let renamed_in =
            |b: &[u8], e: &[u8]| renamed.iter().any(|n| b <= n.as_ref() && n.as_ref() < e);
        for (b, e, _) in &plan.map {
            if renamed_in(b, e) {
                return Err(
                    api_failure(tx, api_error("rename tenant", "tenant rename conflict")).await,
                );
            }
        }
        if plan.configure.keys().any(|n| renamed.contains(n)) {
            return Err(
                api_failure(tx, api_error("rename tenant", "tenant rename conflict")).await,
            );
        }
        Ok(plan)
    }
}

/// The group a list of configuration parameters leaves (`TenantMapEntry::configure`: 7.3
/// knows `tenant_group` alone).
fn configured(
    mut group: Option<Bytes>,
    params: &[(Bytes, Option<Bytes>)],
) -> Result<TenantConfig, Error> {
    for (param, value) in params {
        if param.as_ref() != b"tenant_group" {
            return Err(ErrorCode::INVALID_TENANT_CONFIGURATION.into());
        }
        group = value.clone();
    }
    Ok(TenantConfig {
        tenant_group: group,
    })
}

/// Carries out the tenant module's writes in `tx`, before its commit (`commitImpl`).
async fn commit_writes<D: Driver>(tx: &Transaction<D>) -> Result<(), Error> {
    let mut writes = tx.take_special_writes().await?;
    // The management parts before the tenant module: `SpecialKeySpace::commit` runs the
    // modules in key order (the global configuration first here, before the
    // configuration module too: only which failure wins could tell).
    crate::global_config::commit_global_config(tx, &writes).await?;
    crate::management_special_keys::commit_writes(tx, &writes).await?;
    // A tracing write made too late is kept only for its module's commit (after the
    // management module's) to refuse; `\xff\xff/error_message` says why already.
    let tracing_refused = writes.iter().any(|w| w.begin.starts_with(TRACING_MODULE.0));
    writes.retain(|w| route_special_key(&w.begin) == Some(SpecialModule::Tenants));
    if writes.is_empty() {
        return refuse_tracing(tracing_refused);
    }
    // libfdb_c's module works on the native transaction under RYW, which reads and writes
    // system keys without asking; here the same transaction does it.
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    let Plan {
        map,
        mut configure,
        renames,
    } = Plan::of(tx, writes).await?;
    let mut create: BTreeMap<Bytes, Vec<(Bytes, Option<Bytes>)>> = BTreeMap::new();
    for (begin, end, set) in map {
        if set {
            let params = configure.remove(&begin).unwrap_or_default();
            create.insert(begin, params);
        } else if single(&begin, &end) {
            delete_tenant_in(tx, &begin).await?;
            configure.remove(&begin);
        } else {
            let tenants = list_tenants_in(tx, &begin, &end, TOO_MANY).await?;
            if tenants.len() == TOO_MANY {
                return Err(api_failure(
                    tx,
                    api_error("delete tenants", "too many tenants to range delete"),
                )
                .await);
            }
            for t in tenants {
                delete_tenant_in(tx, t.name()).await?;
            }
            configure.retain(|n, _| !(begin <= *n && *n < end));
        }
    }
    for (name, params) in create {
        let config = configured(None, &params)?;
        create_tenant_with_in(tx, &name, &config).await?;
    }
    for (name, params) in configure {
        configure_tenant_by_in(tx, &name, |group| configured(group, &params)).await?;
    }
    for (old, new) in renames {
        rename_tenant_in(tx, &old, &new).await?;
    }
    refuse_tracing(tracing_refused)
}

/// `TracingOptionsImpl::commit`: any write it kept fails the commit.
fn refuse_tracing(refused: bool) -> Result<(), Error> {
    if refused {
        return Err(ErrorCode::SPECIAL_KEYS_API_FAILURE.into());
    }
    Ok(())
}

impl<D: Driver> Transaction<D> {
    /// A point read in the tenant module: its rows first, then the core answers.
    pub(crate) fn tenant_get(&self, key: &[u8]) -> Pending<D, Option<Bytes>> {
        let key = key.to_vec();
        let tx = self.clone();
        Pending::local(async move {
            let rows = rows_for_key(&tx, &key).await?;
            tx.call(move |c, now, id| c.get_with_tenants(now, id, &key, rows))
                .await
        })
    }

    // Shaped like management_range, but its rows and its core call are the tenant module's.
    /// A range read's batch in the tenant module: its rows first, then the core answers.
    pub(crate) fn tenant_range(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
    ) -> Pending<D, RangeResult> {
        let tx = self.clone();
        Pending::local(async move {
            let rows = rows_for_range(&tx, &begin, &end, opts.limit).await?;
            tx.call(move |c, now, id| c.get_range_with_tenants(now, id, begin, end, opts, rows))
                .await
        })
    }

    /// The commit after writes into the special key space: their module's writes first, then
    /// the commit.
    pub(crate) async fn commit_after_special_writes(&self) -> Result<Committed, Error> {
        commit_writes(self).await?;
        self.call(|c, now, id| c.commit(now, id)).await
    }

    async fn take_special_writes(&self) -> Result<Vec<SpecialWrite>, Error> {
        let id = self.flushed_id();
        query(self.driver(), move |c, now| {
            let id = id(c, now);
            c.take_special_writes(id)
        })
        .await?
        .map_err(Error::Client)
    }

    pub(crate) async fn set_special_error_message(&self, msg: Bytes) -> Result<(), Error> {
        let id = self.flushed_id();
        query(self.driver(), move |c, now| {
            let id = id(c, now);
            c.set_special_error_message(id, msg)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_libfdb_cs_json() {
        assert_eq!(
            api_error("rename tenant", "tenant rename conflict"),
            r#"{"command":"rename tenant","message":"tenant rename conflict","retriable":false}"#
        );
    }

    #[test]
    fn writes_are_cut_to_their_part() {
        let w = |b: &[u8], e: &[u8]| SpecialWrite {
            begin: Bytes::copy_from_slice(b),
            end: Bytes::copy_from_slice(e),
            value: None,
        };
        let all = w(TENANT_MANAGEMENT_RANGE.0, TENANT_MANAGEMENT_RANGE.1);
        assert_eq!(
            within(&all, MAP, NAMES_END),
            Some((Bytes::new(), Bytes::from_static(NAMES_END)))
        );
        let one = w(
            b"\xff\xff/management/tenant/map/a",
            b"\xff\xff/management/tenant/map/a\x00",
        );
        let (b, e) = within(&one, MAP, NAMES_END).unwrap();
        assert!(single(&b, &e));
        assert_eq!(within(&one, RENAME, b""), None);
    }
}
