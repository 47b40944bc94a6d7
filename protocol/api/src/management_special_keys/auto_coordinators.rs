//! `\xff\xff/management/auto_coordinators` (`CoordinatorsAutoImplActor`, `AutoQuorumChange`
//! with the count from the redundancy): the coordinators fdbcli's `coordinators auto` would
//! set. The current ones when they are fine (one per zone, every one a worker, enough and an
//! odd number for the redundancy, none excluded, one per IP, every one answering); otherwise
//! a random choice among the workers not excluded, coordinator-class ones first, at most one
//! per zone.
//!
//! Two differences from libfdb_c: the current coordinators are asked with the core's quorum
//! check (5 s, any answer counts) where `isAcceptable` waits 1.5 s and wants a leader named,
//! and an address is shown without `:tls`.

use fdb_protocol::cluster_file::{ClusterFile, NetworkAddress};
use fdb_protocol::TransactionOption;
use std::net::IpAddr;

use super::address::{parse_network_address, AddressExclusion};
use super::coordinators::{resolve, split_sorted};
use super::errors::management_error;
use super::parts::{CONF_PREFIX, LOCALITY_PREFIX};
use super::processes::{workers, Worker};
use super::values::COORDINATOR_CLASS;
use crate::driver::{submit, Driver};
use crate::error::Error;
use crate::transaction::Transaction;

/// The locality fields `addDesiredWorkers` spreads the choice over, in its order.
const FIELDS: [&[u8]; 4] = [b"dcid", b"data_hall", b"zoneid", b"machineid"];

/// What the read shows: the row's value, or the JSON message its failure leaves.
pub(super) async fn auto_coordinators<D: Driver>(
    tx: &Transaction<D>,
) -> Result<Result<String, String>, Error> {
    tx.set_options([
        TransactionOption::LockAware,
        TransactionOption::RawAccess,
        // libfdb_c reads through the transaction under its read-your-writes layer, which
        // does not check system keys.
        TransactionOption::ReadSystemKeys,
        TransactionOption::UseProvisionalProxies,
        TransactionOption::PrioritySystemImmediate,
    ])?;
    let refuse = |retriable, msg| Ok(Err(management_error(retriable, "auto_coordinators", msg)));
    let Some(old) = tx
        .get(b"\xff/coordinators")
        .await?
        .and_then(|v| ClusterFile::parse_bytes(&v).ok())
    else {
        return refuse(false, "The coordinator key does not exist");
    };
    let (addrs, hosts) = split_sorted(&old.coordinators);
    let current = resolve(&addrs, &hosts);
    let replicas = |name: &'static str| {
        let tx = tx.clone();
        async move {
            let v = tx.get([CONF_PREFIX, name.as_bytes()].concat()).await?;
            Ok::<i64, Error>(atoi(v.as_deref().unwrap_or_default()))
        }
    };
    let redundancy = replicas("storage_replicas")
        .await?
        .min(replicas("log_replicas").await?);
    let desired = (redundancy * 2 - 1).max(0) as usize;
    let all = workers(tx).await?;
    let excluded = all_excluded(tx, &all).await?;
    let is_excluded = |ip: IpAddr, port: u16| excluded.iter().any(|x| x.excludes(ip, port));
    if fine(
        &current,
        old.coordinators.len(),
        desired,
        &all,
        &is_excluded,
    ) {
        let key = old.cluster_key();
        let asked = current.clone();
        let answered: bool = submit(tx.driver(), move |c, now| {
            c.check_coordinators(now, &key, &asked)
        })
        .await?;
        if answered {
            // Host names first, then addresses, as the connection string keeps them.
            let shown: Vec<String> = hosts
                .iter()
                .map(|(h, p, tls)| format!("{h}:{p}{}", if *tls { ":tls" } else { "" }))
                .chain(addrs.iter().map(|a| a.to_string()))
                .collect();
            return Ok(Ok(shown.join(",")));
        }
    }
    let mut chosen = choose(&all, desired, &is_excluded);
    if chosen.len() < desired {
        if chosen.is_empty() || chosen.len() < current.len() {
            return refuse(
                true,
                "Too few fdbserver machines to provide coordination at the current redundancy level",
            );
        }
        chosen.truncate((chosen.len() - 1) | 1);
    }
    Ok(Ok(chosen.join(",")))
}

/// `atoi`: the leading decimal digits (with a sign), 0 when there are none.
fn atoi(v: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(v);
    let s = s.trim_start();
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = rest
        .bytes()
        .take_while(u8::is_ascii_digit)
        .take(18)
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    if neg {
        -n
    } else {
        n
    }
}

fn locality<'a>(w: &'a Worker, field: &[u8]) -> Option<&'a [u8]> {
    w.locality
        .iter()
        .find(|(k, _)| k == field)
        .and_then(|(_, v)| v.as_deref())
}

fn ip_port_of(a: &str) -> Option<(IpAddr, u16)> {
    parse_network_address(a)
}

/// `getAllExcludedServers`: the addresses excluded or failed, and the workers an excluded or
/// failed locality covers.
async fn all_excluded<D: Driver>(
    tx: &Transaction<D>,
    all: &[Worker],
) -> Result<Vec<AddressExclusion>, Error> {
    let mut out = Vec::new();
    let mut localities = Vec::new();
    for (part, locality) in [
        ("excluded", false),
        ("failed", false),
        ("excluded_locality", true),
        ("failed_locality", true),
    ] {
        let b = [CONF_PREFIX, part.as_bytes(), b"/"].concat();
        let e = [CONF_PREFIX, part.as_bytes(), b"0"].concat();
        for kv in tx.get_range(&b, &e, 0).await? {
            let name = &kv.key[b.len()..];
            if locality {
                let l = String::from_utf8_lossy(name);
                let l = l.strip_prefix(LOCALITY_PREFIX).unwrap_or(&l);
                if let Some((k, v)) = l.split_once(':') {
                    localities.push((k.as_bytes().to_vec(), v.as_bytes().to_vec()));
                }
            } else if let Some(a) = AddressExclusion::parse(name) {
                out.push(a);
            }
        }
    }
    for w in all {
        let hit = localities
            .iter()
            .any(|(k, v)| locality(w, k) == Some(v.as_slice()));
        if hit {
            if let Some(a) = AddressExclusion::parse(w.address.as_bytes()) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// The checks of `getDesired` and `isAcceptable` short of asking the coordinators.
fn fine(
    current: &[NetworkAddress],
    named: usize,
    desired: usize,
    all: &[Worker],
    is_excluded: &dyn Fn(IpAddr, u16) -> bool,
) -> bool {
    let mut zones = Vec::new();
    for c in current {
        let Some(w) = all
            .iter()
            .find(|w| ip_port_of(&w.address) == Some((c.ip, c.port)))
        else {
            return false;
        };
        let zone = locality(w, b"zoneid");
        if zones.contains(&zone) {
            return false;
        }
        zones.push(zone);
    }
    let mut ips: Vec<IpAddr> = current.iter().map(|c| c.ip).collect();
    ips.sort();
    ips.dedup();
    current.len() == named
        && current.len() >= desired
        && current.len() % 2 == 1
        && !current.iter().any(|c| is_excluded(c.ip, c.port))
        && ips.len() == current.len()
}

/// `addDesiredWorkers`: up to `desired` workers in random order, coordinator-class ones
/// first, at most one per zone, spread over the data centres, data halls and machines.
fn choose(
    all: &[Worker],
    desired: usize,
    is_excluded: &dyn Fn(IpAddr, u16) -> bool,
) -> Vec<String> {
    let mut remaining: Vec<&Worker> = all.iter().collect();
    // Fisher-Yates, then the coordinator class to the front.
    for i in (1..remaining.len()).rev() {
        let j = (crate::engine::random_u64() % (i as u64 + 1)) as usize;
        remaining.swap(i, j);
    }
    remaining.sort_by_key(|w| w.class.class != COORDINATOR_CLASS);
    let hard = |f: &[u8]| if f == b"zoneid" { 1 } else { desired };
    let mut max = [1usize; 4];
    let mut counts: Vec<Vec<(&[u8], usize)>> = vec![Vec::new(); 4];
    let mut chosen = Vec::new();
    while chosen.len() < desired {
        let pick = remaining.iter().position(|w| {
            let Some((ip, port)) = ip_port_of(&w.address) else {
                return false;
            };
            !is_excluded(ip, port)
                && FIELDS.iter().enumerate().all(|(i, f)| {
                    let v = locality(w, f).unwrap_or_default();
                    let n = counts[i].iter().find(|(k, _)| *k == v).map_or(0, |e| e.1);
                    n < max[i]
                })
        });
        match pick {
            Some(at) => {
                let w = remaining.remove(at);
                for (i, f) in FIELDS.iter().enumerate() {
                    let v = locality(w, f).unwrap_or_default();
                    match counts[i].iter_mut().find(|(k, _)| *k == v) {
                        Some(e) => e.1 += 1,
                        None => counts[i].push((v, 1)),
                    }
                }
                chosen.push(w.address.clone());
            }
            None => match (0..4).find(|&i| max[i] < hard(FIELDS[i])) {
                Some(i) => max[i] += 1,
                None => break,
            },
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::super::values::ProcessClass;
    use super::*;

    fn worker(addr: &str, zone: &str, class: i16) -> Worker {
        Worker {
            address: addr.into(),
            class: ProcessClass { class, source: 0 },
            locality: vec![(b"zoneid".to_vec(), Some(zone.as_bytes().to_vec()))],
        }
    }

    #[test]
    fn the_choice_takes_one_per_zone_and_coordinators_first() {
        let all = [
            worker("10.0.0.1:1", "a", 1),
            worker("10.0.0.1:2", "a", 1),
            worker("10.0.0.2:1", "b", COORDINATOR_CLASS),
            worker("10.0.0.3:1", "c", 1),
        ];
        let none = |_: IpAddr, _: u16| false;
        for _ in 0..20 {
            let got = choose(&all, 3, &none);
            assert_eq!(got.len(), 3);
            assert_eq!(got[0], "10.0.0.2:1");
            assert!(got.contains(&"10.0.0.3:1".to_string()));
            assert_eq!(got.iter().filter(|a| a.starts_with("10.0.0.1:")).count(), 1);
        }
        // Only two zones are left when one is excluded.
        let no_c = |ip: IpAddr, _: u16| ip == IpAddr::from([10, 0, 0, 3]);
        assert_eq!(choose(&all, 3, &no_c).len(), 2);
    }

    #[test]
    fn the_current_set_is_fine_only_when_every_check_passes() {
        let all = [worker("10.0.0.1:1", "a", 1), worker("10.0.0.2:1", "a", 1)];
        let a = |s: &str| {
            let (ip, port) = parse_network_address(s).unwrap();
            NetworkAddress {
                ip,
                port,
                tls: false,
            }
        };
        let none = |_: IpAddr, _: u16| false;
        assert!(fine(&[a("10.0.0.1:1")], 1, 1, &all, &none));
        // Too few for the redundancy, not a worker, an even count, excluded, one zone twice.
        assert!(!fine(&[a("10.0.0.1:1")], 1, 3, &all, &none));
        assert!(!fine(&[a("10.0.0.9:1")], 1, 1, &all, &none));
        assert!(!fine(&[a("10.0.0.1:1")], 2, 1, &all, &none));
        assert!(!fine(&[a("10.0.0.1:1")], 1, 1, &all, &|_, _| true));
        assert!(!fine(
            &[a("10.0.0.1:1"), a("10.0.0.2:1")],
            2,
            1,
            &all,
            &none
        ));
        assert_eq!(atoi(b"3"), 3);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b" -2z"), -2);
    }
}
