//! The exclusions' commit (`excluded/`, `failed/`, by address or locality): the new names
//! set under `\xff/conf/`, the cleared ones included again, after the space check unless
//! forced.

use fdb_protocol::{ConflictRangeType, SpecialWrite, TransactionOption};

use super::address::AddressExclusion;
use super::errors::api_error;
use super::parts::{swap_prefix, write_at, writes_in, CONF_PREFIX, LOCALITY_PREFIX, MANAGEMENT};
use super::space_check::check_exclusion;
use super::values::{random_uid, uid_hex};
use crate::driver::{submit, Driver};
use crate::error::Error;
use crate::transaction::Transaction;

/// `checkExclusion`'s answer when `checkSafeExclusions` finds marking the servers failed
/// unsafe.
const UNSAFE: &str = "ERROR: It is unsafe to exclude the specified servers at this time.\n\
    Please check that this exclusion does not bring down an entire storage team.\n\
    Please also ensure that the exclusion will keep a majority of coordinators alive.\n\
    You may add more storage processes or coordinators to make the operation safe.\n\
    Call set(\"0xff0xff/management/failed/<ADDRESS...>\", ...) to exclude without performing safety checks.\n";

/// `checkSafeExclusions`, asked of the cluster by the core: whether the commit proxies (the
/// storage teams) and the coordinators' fault tolerance allow marking `addresses` failed.
/// As in `checkExclusion`, a check that fails with an error is unsafe.
async fn safe_to_fail<D: Driver>(tx: &Transaction<D>, addresses: &[AddressExclusion]) -> bool {
    let wire: Vec<_> = addresses.iter().map(AddressExclusion::wire).collect();
    submit(tx.driver(), move |c, now| {
        c.check_safe_exclusions(now, wire)
    })
    .await
    .unwrap_or(false)
}

/// `excludeCommitActor` / `excludeLocalityCommitActor`, then `includeServers` /
/// `includeLocalities`.
pub(super) async fn commit_exclusion<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
    failed: bool,
    locality: bool,
) -> Result<Option<String>, Error> {
    let command = if failed { "exclude failed" } else { "exclude" };
    let mut addresses = Vec::new();
    let mut localities = Vec::new();
    for w in writes_in(writes, pb, pe).filter(|w| w.value.is_some()) {
        let name = &w.begin[pb.len()..];
        let shown = String::from_utf8_lossy(name);
        if locality {
            if shown.starts_with(LOCALITY_PREFIX) && shown.contains(':') {
                localities.push(shown.into_owned());
            } else {
                let msg = format!("ERROR: '{shown}' is not a valid locality\n");
                return Ok(Some(api_error(command, &msg)));
            }
        } else {
            match AddressExclusion::parse(name) {
                Some(a) => addresses.push(a),
                None => {
                    let mut msg =
                        format!("ERROR: '{shown}' is not a valid network endpoint address\n");
                    if shown.contains(":tls") {
                        msg.push_str(
                            "        Do not include the `:tls' suffix when naming a process\n",
                        );
                    }
                    return Ok(Some(api_error(command, &msg)));
                }
            }
        }
    }
    if locality {
        tx.set_options([
            TransactionOption::RawAccess,
            TransactionOption::PrioritySystemImmediate,
            TransactionOption::LockAware,
        ])?;
    }
    let part = &pb[MANAGEMENT.0.len()..];
    let force_key = [
        b"\xff\xff/management/options/",
        part.strip_suffix(b"/").unwrap_or(part),
        b"/force",
    ]
    .concat();
    let force = write_at(writes, &force_key).is_some_and(|w| w.value.is_some());
    let any = !addresses.is_empty() || !localities.is_empty();
    if any && !force {
        if let Some(msg) = check_exclusion(tx, &addresses, &localities, failed).await? {
            return Ok(Some(msg));
        }
        // libfdb_c asks with the addresses alone: a locality asks about no process.
        if failed && !safe_to_fail(tx, &addresses).await {
            return Ok(Some(api_error(command, UNSAFE)));
        }
    }
    tx.set_options([
        TransactionOption::AccessSystemKeys,
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
        TransactionOption::UseProvisionalProxies,
    ])?;
    let sys_prefix = swap_prefix(pb, MANAGEMENT.0, CONF_PREFIX);
    let sys_end = [&sys_prefix[..sys_prefix.len() - 1], b"0"].concat();
    // `\xff/conf/excluded` and the like: changed with every change of its list.
    let version_key = &sys_prefix[..sys_prefix.len() - 1];
    let existing = tx.get_range(&sys_prefix, &sys_end, 0).await?;
    let known = |name: &[u8]| {
        existing.iter().any(|kv| {
            let have = &kv.key[sys_prefix.len()..];
            if locality {
                have == name
            } else {
                AddressExclusion::parse(have).is_some()
                    && AddressExclusion::parse(have) == AddressExclusion::parse(name)
            }
        })
    };
    let names: Vec<Vec<u8>> = if locality {
        localities.iter().map(|l| l.clone().into_bytes()).collect()
    } else {
        addresses
            .iter()
            .map(|a| a.to_string().into_bytes())
            .collect()
    };
    let mut new = false;
    for name in names.iter().filter(|n| !known(n)) {
        tx.set([&sys_prefix[..], name].concat(), b"");
        new = true;
    }
    if new {
        let (a, b) = random_uid();
        let end = [version_key, b"\x00"].concat();
        tx.add_conflict_range(version_key, &end, ConflictRangeType::Read)?;
        tx.set(version_key, uid_hex(a, b));
    }
    // The includes: the clears.
    tx.set_options([
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
        TransactionOption::UseProvisionalProxies,
        TransactionOption::RawAccess,
        TransactionOption::CausalWriteRisky,
    ])?;
    let (a, b) = random_uid();
    let stamp = uid_hex(a, b);
    for w in writes_in(writes, pb, pe).filter(|w| w.value.is_none()) {
        let end = [version_key, b"\x00"].concat();
        tx.add_conflict_range(version_key, &end, ConflictRangeType::Read)?;
        tx.set(version_key, &stamp);
        let cb = swap_prefix(&w.begin, MANAGEMENT.0, CONF_PREFIX);
        let ce = swap_prefix(&w.end, MANAGEMENT.0, CONF_PREFIX);
        tx.clear_range(cb, ce);
    }
    Ok(None)
}
