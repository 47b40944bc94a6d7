//! The maintenance commit (`maintenance/<zone>`): one zone's healthy-zone value for the
//! seconds written, or its clear; with boost's printing of the seconds in its messages.

use fdb_protocol::error::ErrorCode;
use fdb_protocol::{SpecialWrite, TransactionOption};

use super::errors::api_error;
use super::parts::{writes_in, HEALTHY_ZONE_KEY, IGNORE_SS_FAILURES_ZONE, VERSIONS_PER_SECOND};
use super::values::{decode_healthy_zone, healthy_zone_value};
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// `maintenanceCommitActor`: one zone in maintenance for the seconds written, or a clear of
/// the zone in maintenance.
pub(super) async fn commit_maintenance<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
) -> Result<Option<String>, Error> {
    tx.set_options([
        TransactionOption::LockAware,
        TransactionOption::AccessSystemKeys,
        TransactionOption::PrioritySystemImmediate,
    ])?;
    let zone_now = tx
        .get(HEALTHY_ZONE_KEY)
        .await?
        .and_then(|v| decode_healthy_zone(&v));
    let mut set: Option<(Vec<u8>, f64)> = None;
    for w in writes_in(writes, pb, pe) {
        match &w.value {
            Some(v) => {
                if set.is_some() {
                    return Ok(Some(api_error(
                        "maintenance",
                        "Multiple zones given for maintenance, only one allowed at the same time",
                    )));
                }
                let seconds = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    // boost::bad_lexical_cast escapes the actor: `unknown_error`.
                    .ok_or(Error::from(ErrorCode::UNKNOWN_ERROR))?;
                set = Some((w.begin[pb.len()..].to_vec(), seconds));
            }
            None => {
                if let (None, Some((zone, _))) = (&set, &zone_now) {
                    let key = [pb, zone].concat();
                    if w.begin.as_ref() <= key.as_slice() && key.as_slice() < w.end.as_ref() {
                        tx.clear(HEALTHY_ZONE_KEY);
                    }
                }
            }
        }
    }
    if let Some((zone, seconds)) = set {
        if zone_now
            .as_ref()
            .is_some_and(|(z, _)| z == IGNORE_SS_FAILURES_ZONE)
        {
            return Ok(Some(api_error(
                "maintenance",
                "Maintenance mode cannot be used while data distribution is disabled for storage server failures.",
            )));
        }
        if seconds < 0.0 {
            let msg = format!(
                "The specified maintenance time {} is a negative value",
                lexical_double(seconds)
            );
            return Ok(Some(api_error("maintenance", &msg)));
        }
        let rv = tx.get_read_version().await?;
        let until = (rv as f64 + seconds * VERSIONS_PER_SECOND as f64) as i64;
        tx.set(HEALTHY_ZONE_KEY, healthy_zone_value(&zone, until));
    }
    Ok(None)
}

/// `boost::lexical_cast<std::string>(double)`: 17 significant digits, as `%.17g` prints.
fn lexical_double(d: f64) -> String {
    if d == d.trunc() && d.abs() < 1e17 {
        return format!("{d:.0}");
    }
    let s = format!("{d:.16e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-5..17).contains(&exp) {
        let digits = (16 - exp).max(0) as usize;
        let fixed = format!("{d:.digits$}");
        let fixed = fixed.trim_end_matches('0').trim_end_matches('.');
        fixed.to_owned()
    } else {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_boost_prints_them() {
        assert_eq!(lexical_double(-5.0), "-5");
        assert_eq!(lexical_double(-1.5), "-1.5");
        assert_eq!(lexical_double(-0.1), "-0.10000000000000001");
    }
}
