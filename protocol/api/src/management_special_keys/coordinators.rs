//! The coordinators change (`\xff\xff/configuration/coordinators/processes` and
//! `cluster_description`; `coordinatorsCommitActor`, then `changeQuorumChecker`): the new
//! coordinators are parsed, checked against `\xff/coordinators`, asked whether they answer,
//! and the new connection string is written to `\xff/coordinators` with a fresh random id.
//! The commit that carries it makes the cluster move; the old coordinators then forward the
//! clients to the new ones (the core's monitor follows, the driver rewrites the cluster file).
//!
//! Unlike the other parts, success shows as an error too: libfdb_c's commit of a change ends
//! in `commit_unknown_result` as the cluster recovers, and the retry finds the coordinators
//! already as asked, which is the "No change" message (fdbcli reads it as done).

use std::net::ToSocketAddrs;

use fdb_protocol::cluster_file::{ClusterFile, Coordinator, NetworkAddress};
use fdb_protocol::{SpecialWrite, TransactionOption};

use super::errors::{api_error, management_error};
use super::parts::write_at;
use crate::driver::{submit, Driver};
use crate::error::Error;
use crate::transaction::Transaction;

/// `\xff/coordinators`: the connection string the cluster runs on.
const COORDINATORS_KEY: &[u8] = b"\xff/coordinators";
/// `\xff/previousCoordinators`: the connection string before the last change.
const PREVIOUS_COORDINATORS_KEY: &[u8] = b"\xff/previousCoordinators";

/// `CoordinatorsResult`, the outcomes that fail the commit with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    SameNetworkAddresses,
    BadDatabaseState,
    CoordinatorUnreachable,
}

impl Refusal {
    /// `ManagementAPI::generateErrorMessage`, in libfdb_c's JSON.
    fn message(self) -> String {
        let (retriable, msg) = match self {
            Refusal::SameNetworkAddresses => {
                (false, "No change (existing configuration satisfies request)")
            }
            Refusal::BadDatabaseState => (
                false,
                "The database is in an unexpected state from which changing coordinators might be unsafe",
            ),
            // The one libfdb_c marks retriable.
            Refusal::CoordinatorUnreachable => {
                (true, "One of the specified coordinators is unreachable")
            }
        };
        management_error(retriable, "coordinators", msg)
    }
}

/// One coordinator as written (`Hostname::isHostname`, else `NetworkAddress::parse`).
fn parse_coordinator(s: &str) -> Option<Coordinator> {
    let cs = ClusterFile::parse(&format!("a:b@{s}")).ok()?;
    match <[Coordinator; 1]>::try_from(cs.coordinators) {
        Ok([c]) => Some(c),
        Err(_) => None,
    }
}

/// `[A-Za-z0-9_]+`.
fn valid_description(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// `tryResolveHostnames` over the coordinators of a connection string's address list
/// (what follows its `@`), as `NetworkAddress::toString` shows them: the addresses, and the
/// host names that resolve, marked `(fromHostname)`; an address both written and resolved
/// shows once, as written.
pub(super) fn resolved_coordinators(list: &str) -> Vec<String> {
    let parsed: Vec<Coordinator> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .filter_map(parse_coordinator)
        .collect();
    let (addrs, hosts) = split_sorted(&parsed);
    let mut all: Vec<(NetworkAddress, bool)> = addrs.iter().map(|a| (a.clone(), false)).collect();
    for a in resolve(&[], &hosts) {
        all.push((a, true));
    }
    // Stable: of equal addresses, the written one (first) stays.
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|b, a| a.0 == b.0);
    all.into_iter()
        .map(|(a, named)| {
            if named {
                format!("{a}(fromHostname)")
            } else {
                a.to_string()
            }
        })
        .collect()
}

/// `randomAlphaNumeric(32)`: the new connection string's id.
fn random_id() -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..32)
        .map(|_| CHARS[(crate::engine::random_u64() % CHARS.len() as u64) as usize] as char)
        .collect()
}

/// The coordinators split as `ClusterConnectionString` keeps them: addresses and host names,
/// each sorted (`NetworkAddress` and `Hostname` order).
pub(super) fn split_sorted(
    coordinators: &[Coordinator],
) -> (Vec<NetworkAddress>, Vec<(String, u16, bool)>) {
    let mut addrs = Vec::new();
    let mut hosts = Vec::new();
    for c in coordinators {
        match c {
            Coordinator::Address(a) => addrs.push(a.clone()),
            Coordinator::Hostname { host, port, tls } => hosts.push((host.clone(), *port, *tls)),
        }
    }
    addrs.sort();
    // `Hostname` compares its service as a string.
    hosts.sort_by(|a, b| (&a.0, a.1.to_string(), a.2).cmp(&(&b.0, b.1.to_string(), b.2)));
    (addrs, hosts)
}

/// `tryResolveHostnames`: the distinct addresses the coordinators stand for, the host names
/// resolved (by the system's resolver); a name that does not resolve is left out.
pub(super) fn resolve(
    addrs: &[NetworkAddress],
    hosts: &[(String, u16, bool)],
) -> Vec<NetworkAddress> {
    let mut out: Vec<NetworkAddress> = addrs.to_vec();
    for (host, port, tls) in hosts {
        let found = (host.as_str(), *port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next());
        if let Some(a) = found {
            out.push(NetworkAddress {
                ip: a.ip(),
                port: *port,
                tls: *tls,
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `coordinatorsCommitActor`: `Some(message)` when the change is refused (or already made).
pub(super) async fn commit_coordinators<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    pb: &[u8],
) -> Result<Option<String>, Error> {
    let processes_key = [pb, b"processes"].concat();
    let mut wanted = Vec::new();
    if let Some(v) = write_at(writes, &processes_key).and_then(|w| w.value.as_ref()) {
        // An empty value is one empty name, refused as an address.
        for s in String::from_utf8_lossy(v).split(',') {
            match parse_coordinator(s) {
                Some(c) => wanted.push(c),
                None => {
                    let msg = format!("ERROR: '{s}' is not a valid network endpoint address\n");
                    return Ok(Some(api_error("coordinators", &msg)));
                }
            }
        }
    }
    let description_key = [pb, b"cluster_description"].concat();
    let mut new_name = None;
    if let Some(w) = write_at(writes, &description_key) {
        match &w.value {
            Some(v) if valid_description(v) => {
                new_name = Some(String::from_utf8_lossy(v).into_owned())
            }
            _ => {
                return Ok(Some(api_error(
                    "coordinators",
                    "Cluster description must match [A-Za-z0-9_]+",
                )))
            }
        }
    }
    Ok(change_quorum_checker(tx, wanted, new_name)
        .await?
        .map(Refusal::message))
}

/// `changeQuorumChecker`: sets `\xff/coordinators` to the new connection string, or says why
/// not. The configuration database is not asked whether it is alive (`verifyConfigurationDatabaseAlive`,
/// a Paxos config transaction this client does not speak) before "No change" is answered.
async fn change_quorum_checker<D: Driver>(
    tx: &Transaction<D>,
    wanted: Vec<Coordinator>,
    new_name: Option<String>,
) -> Result<Option<Refusal>, Error> {
    tx.set_options([
        TransactionOption::LockAware,
        TransactionOption::AccessSystemKeys,
        TransactionOption::UseProvisionalProxies,
        TransactionOption::PrioritySystemImmediate,
    ])?;
    // `getClusterConnectionStringFromStorageServer`. libfdb_c asks up to three times, 2 s
    // apart, before it gives up on a missing key or a changed name; this client asks once.
    let stored = tx.get(COORDINATORS_KEY).await?;
    let Some(old) = stored.and_then(|v| ClusterFile::parse_bytes(&v).ok()) else {
        return Ok(Some(Refusal::BadDatabaseState));
    };
    let current = tx
        .get(b"\xff\xff/connection_string")
        .await?
        .and_then(|v| ClusterFile::parse_bytes(&v).ok());
    if current.is_some_and(|c| c.description != old.description) {
        return Ok(Some(Refusal::BadDatabaseState));
    }
    let wanted = if wanted.is_empty() {
        old.coordinators.clone()
    } else {
        wanted
    };
    let (addrs, hosts) = split_sorted(&wanted);
    let desired = resolve(&addrs, &hosts);
    // A duplicate or a name that does not resolve leaves fewer addresses than names.
    if desired.len() != wanted.len() {
        return Ok(Some(Refusal::CoordinatorUnreachable));
    }
    let name = new_name.unwrap_or_else(|| old.description.clone());
    let (old_addrs, old_hosts) = split_sorted(&old.coordinators);
    if addrs == old_addrs && hosts == old_hosts && name == old.description {
        reset_previous_coordinators(tx).await?;
        return Ok(Some(Refusal::SameNetworkAddresses));
    }
    let coordinators = addrs
        .into_iter()
        .map(Coordinator::Address)
        .chain(
            hosts
                .into_iter()
                .map(|(host, port, tls)| Coordinator::Hostname { host, port, tls }),
        )
        .collect();
    let new = ClusterFile {
        description: name,
        id: random_id(),
        coordinators,
    };
    let key = new.cluster_key();
    let reachable: bool = submit(tx.driver(), move |c, now| {
        c.check_coordinators(now, &key, &desired)
    })
    .await?;
    if !reachable {
        return Ok(Some(Refusal::CoordinatorUnreachable));
    }
    tracing::info!(from = %old, to = %new, "changing the coordinators");
    tx.set(COORDINATORS_KEY, new.to_string());
    Ok(None)
}

/// `resetPreviousCoordinatorsKey`: clears `\xff/previousCoordinators` in a transaction of its
/// own (the one at hand fails with the "No change" message, so it commits nothing).
async fn reset_previous_coordinators<D: Driver>(tx: &Transaction<D>) -> Result<(), Error> {
    let clear = Transaction::new(tx.driver().clone());
    loop {
        clear.set_option(TransactionOption::AccessSystemKeys)?;
        clear.clear(PREVIOUS_COORDINATORS_KEY);
        // Boxed: this runs inside a commit, and a commit's future cannot hold another inline.
        let commit: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>> =
            Box::pin(clear.commit());
        match commit.await {
            Ok(_) => return Ok(()),
            Err(e) => match e.code() {
                Some(code) => clear.on_error(code).await?,
                None => return Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinators_parse_and_sort_as_a_connection_string_keeps_them() {
        let c = |s: &str| parse_coordinator(s).unwrap();
        assert!(parse_coordinator("").is_none());
        assert!(parse_coordinator("foo").is_none());
        assert!(parse_coordinator("1.2.3.4").is_none());
        assert!(parse_coordinator("1.2.3.4:1@x").is_none());
        let wanted = [
            c("10.0.0.2:4500"),
            c("db.example:10"),
            c("10.0.0.10:4500"),
            c("db.example:9"),
            c("10.0.0.2:99:tls"),
        ];
        let (addrs, hosts) = split_sorted(&wanted);
        let shown: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        // Numeric order of the addresses, string order of the ports of names.
        assert_eq!(
            shown,
            ["10.0.0.2:99:tls", "10.0.0.2:4500", "10.0.0.10:4500"]
        );
        assert_eq!(hosts[0].1, 10);
        let dup = split_sorted(&[c("10.0.0.1:1"), c("10.0.0.1:1")]);
        assert_eq!(resolve(&dup.0, &dup.1).len(), 1);
        assert!(valid_description(b"ab_C9"));
        assert!(!valid_description(b""));
        assert!(!valid_description(b"a-b"));
        let id = random_id();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn refusals_carry_libfdb_c_messages() {
        assert_eq!(
            Refusal::CoordinatorUnreachable.message(),
            r#"{"command":"coordinators","message":"One of the specified coordinators is unreachable","retriable":true}"#
        );
        assert!(Refusal::SameNetworkAddresses
            .message()
            .ends_with(r#"satisfies request)","retriable":false}"#));
    }
}
