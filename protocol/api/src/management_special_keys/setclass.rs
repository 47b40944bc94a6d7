//! fdbcli's `setclass` (`\xff\xff/configuration/process/class_type/<addr>`): the class set
//! in `\xff/processClass/` for every worker the address covers.

use fdb_protocol::error::ErrorCode;
use fdb_protocol::{SpecialWrite, TransactionOption};

use super::address::{parse_network_address, AddressExclusion};
use super::errors::api_error;
use super::parts::{
    writes_in, PROCESS_CLASSES, PROCESS_CLASS_CHANGE_KEY, PROCESS_CLASS_VALUE_VERSION, WORKER_LIST,
};
use super::values::{class_named, decode_worker, random_uid, uid_hex, DB_SOURCE, TESTER_CLASS};
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// `ProcessClassRangeImpl::commit`: each address set to a class (`default`: the one the
/// process was started with), for every worker the address covers.
pub(super) async fn commit_process_class<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
) -> Result<Option<String>, Error> {
    let mut sets = Vec::new();
    for w in writes_in(writes, pb, pe) {
        let Some(v) = &w.value else { continue };
        let name = &w.begin[pb.len()..];
        let Some(addr) = AddressExclusion::parse(name) else {
            let shown = String::from_utf8_lossy(name);
            let mut msg = format!("ERROR: '{shown}' is not a valid network endpoint address\n");
            if shown.contains(":tls") {
                msg.push_str("        Do not include the `:tls' suffix when naming a process\n");
            }
            return Ok(Some(api_error("setclass", &msg)));
        };
        let class = class_named(v);
        if class.is_none() && v.as_ref() != b"default" {
            let msg = format!(
                "ERROR: '{}' is not a valid process class\n",
                String::from_utf8_lossy(v)
            );
            return Ok(Some(api_error("setclass", &msg)));
        }
        sets.push((addr, class));
    }
    tx.set_options([
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
        TransactionOption::UseProvisionalProxies,
        TransactionOption::RawAccess,
        TransactionOption::AccessSystemKeys,
    ])?;
    let list = tx.get_range(WORKER_LIST.0, WORKER_LIST.1, 0).await?;
    let mut workers = Vec::new();
    for kv in &list {
        let (id, class, addr) =
            decode_worker(&kv.value).ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        // `getWorkers` leaves the testers out.
        if class.class != TESTER_CLASS {
            workers.push((id, parse_network_address(&addr)));
        }
    }
    for (addr, class) in sets {
        let mut changed = false;
        for (id, at) in &workers {
            let (Some(id), Some((ip, port))) = (id, at) else {
                continue;
            };
            if !addr.excludes(*ip, *port) {
                continue;
            }
            // `processClassKeyFor`: the process id as a length-prefixed string.
            let mut key = PROCESS_CLASSES.0.to_vec();
            key.extend_from_slice(&(id.len() as u32).to_le_bytes());
            key.extend_from_slice(id);
            match class {
                Some(c) => {
                    let mut v = PROCESS_CLASS_VALUE_VERSION.to_le_bytes().to_vec();
                    v.extend_from_slice(&c.to_le_bytes());
                    v.extend_from_slice(&DB_SOURCE.to_le_bytes());
                    tx.set(key, v);
                }
                None => tx.clear(key),
            }
            changed = true;
        }
        if changed {
            let (a, b) = random_uid();
            tx.set(PROCESS_CLASS_CHANGE_KEY, uid_hex(a, b));
        }
    }
    Ok(None)
}
