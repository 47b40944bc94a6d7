//! The exclusion space check (`checkExclusion`): whether the storage servers left keep
//! enough space, judged over the status document. The verdict is a pure function of the
//! document, so its unit tests need no cluster.

use super::address::{parse_network_address, AddressExclusion};
use super::errors::api_error;
use super::parts::LOCALITY_PREFIX;
use crate::driver::{submit, Driver};
use crate::error::Error;
use crate::transaction::Transaction;

/// `checkExclusion`: whether excluding `addresses` and `localities` leaves enough space, over
/// the status document. `Some(message)` when it does not (or cannot tell).
pub(super) async fn check_exclusion<D: Driver>(
    tx: &Transaction<D>,
    addresses: &[AddressExclusion],
    localities: &[String],
    failed: bool,
) -> Result<Option<String>, Error> {
    let command = if failed { "exclude failed" } else { "exclude" };
    let cannot = || cannot_tell(command);
    let doc = submit(tx.driver(), |c, now| c.status_json(now)).await?;
    let Ok(status) = serde_json::from_slice::<serde_json::Value>(&doc.unwrap_or_default()) else {
        return Ok(cannot());
    };
    Ok(exclusion_verdict(&status, addresses, localities, failed))
}

/// `checkExclusion`'s answer when the status document does not tell.
fn cannot_tell(command: &str) -> Option<String> {
    Some(api_error(
        command,
        "ERROR: Could not calculate the impact of this exclude on the total available space in the cluster.\n\
         Please try the exclude again in 30 seconds.\n\
         Call set(\"0xff0xff/management/options/exclude/force\", ...) first to exclude without checking available space.\n",
    ))
}

/// `checkExclusion`'s verdict over a status document (see [`check_exclusion`]).
fn exclusion_verdict(
    status: &serde_json::Value,
    addresses: &[AddressExclusion],
    localities: &[String],
    failed: bool,
) -> Option<String> {
    let command = if failed { "exclude failed" } else { "exclude" };
    let cannot = || cannot_tell(command);
    let Some(processes) = status
        .get("cluster")
        .and_then(|c| c.get("processes"))
        .and_then(|p| p.as_object())
    else {
        return cannot();
    };
    let parsed: Vec<(&str, &str)> = localities
        .iter()
        .filter_map(|l| l.strip_prefix(LOCALITY_PREFIX).unwrap_or(l).split_once(':'))
        .collect();
    let (mut ss_total, mut ss_excluded) = (0u64, 0u64);
    let (mut used, mut free, mut available) = (0i64, 0i64, 0i64);
    let (mut used_kept, mut free_kept) = (0i64, 0i64);
    let mut disks: Vec<String> = Vec::new();
    let int = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_i64());
    for process in processes.values() {
        let locality = process.get("locality").and_then(|l| l.as_object());
        let mut excluded = process
            .get("excluded")
            .and_then(|e| e.as_bool())
            .unwrap_or(false);
        if !excluded {
            let Some(addr) = process.get("address").and_then(|a| a.as_str()) else {
                return cannot();
            };
            let Some((ip, port)) = parse_network_address(addr) else {
                return cannot();
            };
            excluded = addresses.iter().any(|a| a.excludes(ip, port));
            if let (false, Some(loc)) = (excluded, locality) {
                excluded = parsed
                    .iter()
                    .any(|(k, v)| loc.get(*k).and_then(|x| x.as_str()) == Some(*v));
            }
        }
        let disk = match locality {
            Some(_) => process
                .get("disk_id")
                .and_then(|d| d.as_str())
                .unwrap_or(""),
            None => "",
        };
        let Some(roles) = process.get("roles").and_then(|r| r.as_array()) else {
            return cannot();
        };
        for role in roles {
            if role.get("role").and_then(|r| r.as_str()) != Some("storage") {
                continue;
            }
            ss_total += 1;
            if excluded {
                ss_excluded += 1;
            }
            let (Some(u), Some(f), Some(a)) = (
                int(role, "kvstore_used_bytes"),
                int(role, "kvstore_free_bytes"),
                int(role, "kvstore_available_bytes"),
            ) else {
                return cannot();
            };
            used += u;
            free += f;
            available += a;
            if !excluded {
                used_kept += u;
                if disk.is_empty() || !disks.iter().any(|d| d == disk) {
                    free_kept += f;
                    if !disk.is_empty() {
                        disks.push(disk.to_owned());
                    }
                }
            }
        }
    }
    if ss_excluded > 0 {
        let ratio = (used + free - available) as f64 / ((used_kept + free_kept) as f64).max(1.0);
        if ss_excluded == ss_total || ratio > 0.9 {
            return Some(api_error(
                command,
                "ERROR: This exclude may cause the total available space in the cluster to drop below 10%.\n\
                 Call set(\"0xff0xff/management/options/exclude/force\", ...) first to exclude without checking available space.\n",
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_space_check_counts_storage_servers_as_check_exclusion_does() {
        let storage = |used: i64, free: i64, available: i64| {
            serde_json::json!({"role": "storage", "kvstore_used_bytes": used,
                "kvstore_free_bytes": free, "kvstore_available_bytes": available})
        };
        let doc = |procs: Vec<(&str, &str, serde_json::Value)>| {
            let mut m = serde_json::Map::new();
            for (i, (addr, zone, role)) in procs.into_iter().enumerate() {
                m.insert(
                    format!("p{i}"),
                    serde_json::json!({"address": addr, "locality": {"zoneid": zone},
                        "roles": [role, {"role": "log"}]}),
                );
            }
            serde_json::json!({"cluster": {"processes": m}})
        };
        let a = |s: &str| AddressExclusion::parse(s.as_bytes()).unwrap();
        let two = doc(vec![
            ("10.0.0.1:4500", "z1", storage(100, 900, 900)),
            ("10.0.0.2:4500:tls", "z2", storage(100, 900, 900)),
        ]);
        // One of two half-empty servers: fine. Both: refused. By locality or machine too.
        assert_eq!(
            exclusion_verdict(&two, &[a("10.0.0.1:4500")], &[], false),
            None
        );
        let both = exclusion_verdict(&two, &[a("10.0.0.1"), a("10.0.0.2:4500")], &[], false);
        assert!(both.unwrap().contains("drop below 10%"));
        let zone = [
            "locality_zoneid:z1".to_owned(),
            "locality_zoneid:z2".to_owned(),
        ];
        assert!(exclusion_verdict(&two, &[], &zone, true)
            .unwrap()
            .starts_with(r#"{"command":"exclude failed""#));
        // Nearly full servers: excluding one leaves too little space.
        let full = doc(vec![
            ("10.0.0.1:4500", "z1", storage(950, 50, 40)),
            ("10.0.0.2:4500", "z2", storage(950, 50, 40)),
        ]);
        assert!(exclusion_verdict(&full, &[a("10.0.0.1:4500")], &[], false).is_some());
        // A role without its space, or no processes: cannot tell.
        let broken = doc(vec![(
            "10.0.0.1:4500",
            "z1",
            serde_json::json!({"role": "storage"}),
        )]);
        let cannot = exclusion_verdict(&broken, &[a("10.0.0.9:1")], &[], false).unwrap();
        assert!(cannot.contains("Could not calculate"));
        assert!(exclusion_verdict(&serde_json::json!({}), &[], &[], false).is_some());
    }
}
