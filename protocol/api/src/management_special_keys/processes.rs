//! The cluster's processes as the system keys list them: the workers with their classes
//! (`getWorkers`) and the excluded servers and logs still in the cluster
//! (`ExclusionInProgressActor`). Reads only; the read path shows them as rows.

use std::net::IpAddr;

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::storage::StorageServerInterface;
use fdb_protocol::TransactionOption;

use super::address::AddressExclusion;
use super::parts::{
    CONF_PREFIX, LOCALITY_PREFIX, LOGS_KEY, PROCESS_CLASSES, SERVER_LIST, WORKER_LIST,
};
use super::values::{
    decode_logs, decode_worker, decode_worker_locality, ip_port, Binary, Locality, ProcessClass,
    DB_SOURCE, TESTER_CLASS, UNSET_CLASS,
};
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// `ExclusionInProgressActor`: the addresses of the storage servers and logs the exclusions
/// (by address and by locality, failed or not) cover, or logs without an address, sorted.
pub(super) async fn in_progress<D: Driver>(tx: &Transaction<D>) -> Result<Vec<String>, Error> {
    tx.set_options([
        TransactionOption::ReadSystemKeys,
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
    ])?;
    let list = |part: &str| {
        let b = [CONF_PREFIX, part.as_bytes(), b"/"].concat();
        let e = [CONF_PREFIX, part.as_bytes(), b"0"].concat();
        let tx = tx.clone();
        async move {
            let rows = tx.get_range(&b, &e, 0).await?;
            Ok::<_, Error>(
                rows.into_iter()
                    .map(|kv| kv.key[b.len()..].to_vec())
                    .collect::<Vec<_>>(),
            )
        }
    };
    let mut addresses: Vec<AddressExclusion> = Vec::new();
    for part in ["excluded", "failed"] {
        addresses.extend(
            list(part)
                .await?
                .iter()
                .filter_map(|a| AddressExclusion::parse(a)),
        );
    }
    let mut localities: Vec<(String, String)> = Vec::new();
    for part in ["excluded_locality", "failed_locality"] {
        for l in list(part).await? {
            let l = String::from_utf8_lossy(&l).into_owned();
            let l = l.strip_prefix(LOCALITY_PREFIX).unwrap_or(&l);
            if let Some((k, v)) = l.split_once(':') {
                localities.push((k.to_owned(), v.to_owned()));
            }
        }
    }
    let excluded = |ip: IpAddr, port: u16| addresses.iter().any(|a| a.excludes(ip, port));
    let mut found: Vec<String> = Vec::new();
    for kv in tx.get_range(SERVER_LIST.0, SERVER_LIST.1, 0).await? {
        // The protocol version, then the interface as a flatbuffer.
        let body = Bytes::copy_from_slice(kv.value.get(8..).unwrap_or_default());
        let ssi = fdb_protocol::serializer::decode_root::<StorageServerInterface>(&body)
            .map_err(|_| Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        let list = &ssi.get_value.endpoint.addresses;
        let mut all = vec![&list.address];
        all.extend(list.secondary_address.iter());
        let by_locality = localities.iter().any(|(k, v)| {
            ssi.locality
                .data
                .iter()
                .any(|e| e.key.as_ref() == k.as_bytes() && e.value.as_deref() == Some(v.as_bytes()))
        });
        for a in all {
            let ip = IpAddr::from(a.ip);
            if by_locality || excluded(ip, a.port) {
                found.push(ip_port(ip, a.port));
            }
        }
    }
    if let Some(v) = tx.get(LOGS_KEY).await? {
        let logs = decode_logs(&v).ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        for (ip, port) in logs {
            let unset = ip == IpAddr::from([0, 0, 0, 0]) && port == 0;
            if unset || excluded(ip, port) {
                found.push(ip_port(ip, port));
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// One worker as `getWorkers` gives it (`ProcessData`).
pub(super) struct Worker {
    /// `ip:port`.
    pub(super) address: String,
    pub(super) class: ProcessClass,
    pub(super) locality: Locality,
}

/// `getWorkers`: every worker but testers, with its class as the database sets it (when
/// set with `setclass`, or when the worker's own is unset), sorted by address as strings,
/// each address once.
pub(super) async fn workers<D: Driver>(tx: &Transaction<D>) -> Result<Vec<Worker>, Error> {
    let classes = tx
        .get_range(PROCESS_CLASSES.0, PROCESS_CLASSES.1, 0)
        .await?;
    let list = tx.get_range(WORKER_LIST.0, WORKER_LIST.1, 0).await?;
    let class_of = |id: &Option<Vec<u8>>| {
        let id = id.as_deref()?;
        classes.iter().find_map(|kv| {
            let mut k = Binary(&kv.key[PROCESS_CLASSES.0.len()..]);
            if k.bytes()? != id {
                return None;
            }
            let mut v = Binary(&kv.value);
            v.u64()?;
            v.class()
        })
    };
    // (A value that does not decode fails the read, as `BinaryReader` throws
    // `serialization_failed`.)
    let mut out = Vec::new();
    for kv in list {
        let (id, mut class, addr) =
            decode_worker(&kv.value).ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        let db_class = class_of(&id).unwrap_or_default();
        if db_class.source == DB_SOURCE || class.class == UNSET_CLASS {
            class = db_class;
        }
        let locality = decode_worker_locality(&kv.value)
            .ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        if class.class != TESTER_CLASS {
            out.push(Worker {
                address: addr,
                class,
                locality,
            });
        }
    }
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out.dedup_by(|a, b| a.address == b.address);
    Ok(out)
}
