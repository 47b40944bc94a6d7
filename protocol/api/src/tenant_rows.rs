//! The tenant module's rows (`\xff\xff/management/tenant/map/<name>`): the tenant map read as
//! special-key rows, as `getTenantList` lists them. Apart from the module's writes and commit
//! (`tenant_special_keys.rs`) because the management modules' read path serves the same rows
//! when a read spans both.

use fdb_protocol::tenant_map::TENANT_MAP_SPECIAL_PREFIX;
use fdb_protocol::{KeySelector, KeyValue};

use crate::driver::Driver;
use crate::error::Error;
use crate::tenant_management::list_tenants_in;
use crate::transaction::Transaction;

/// The end of every tenant name (no name starts with `\xff`).
pub(crate) const NAMES_END: &[u8] = b"\xff";

/// The tenant name a special key stands for, within the map: keys before the map give the
/// first name, keys after it the end of all names.
fn name_at(key: &[u8]) -> &[u8] {
    if key <= TENANT_MAP_SPECIAL_PREFIX {
        b""
    } else if let Some(name) = key.strip_prefix(TENANT_MAP_SPECIAL_PREFIX) {
        name
    } else {
        NAMES_END
    }
}

/// The module's rows in the names `[begin, end)` (`getTenantList`).
async fn rows<D: Driver>(
    tx: &Transaction<D>,
    begin: &[u8],
    end: &[u8],
    limit: usize,
) -> Result<Vec<KeyValue>, Error> {
    if begin >= end {
        return Ok(Vec::new());
    }
    let list = list_tenants_in(tx, begin, end, limit).await?;
    Ok(list
        .into_iter()
        .map(|r| KeyValue {
            key: r.key,
            value: r.value,
        })
        .collect())
}

/// The rows a range read between two plain keys (offset 1) may land on: the first `limit`
/// names between the two keys (0: all), as `getTenantList` lists them whatever the read's
/// direction (so that a reverse read with a limit answers from the first tenants of the
/// range, as libfdb_c 7.3.77 does).
pub(crate) async fn rows_for_range<D: Driver>(
    tx: &Transaction<D>,
    begin: &KeySelector,
    end: &KeySelector,
    limit: usize,
) -> Result<Vec<KeyValue>, Error> {
    let mut last = name_at(&end.key).to_vec();
    last.push(0);
    rows(tx, name_at(&begin.key), &last, limit).await
}

/// The module's rows between two special keys (in the tenant module or around it).
pub(crate) async fn rows_between<D: Driver>(
    tx: &Transaction<D>,
    begin: &[u8],
    end: &[u8],
) -> Result<Vec<KeyValue>, Error> {
    rows(tx, name_at(begin), name_at(end), 0).await
}

/// The row of a point read.
pub(crate) async fn rows_for_key<D: Driver>(
    tx: &Transaction<D>,
    key: &[u8],
) -> Result<Vec<KeyValue>, Error> {
    let name = name_at(key);
    let mut after = name.to_vec();
    after.push(0);
    rows(tx, name, &after, 1).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stand_for_names() {
        assert_eq!(name_at(b"\xff\xff/management/tenant/map/abc"), b"abc");
        assert_eq!(name_at(b"\xff\xff/management/tenant/"), b"");
        assert_eq!(name_at(b"\xff\xff/management/tenant/map0"), NAMES_END);
    }
}
