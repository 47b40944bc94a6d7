//! `get_mapped_range` done by the client: FDB's storage servers apply the mapper next to
//! the data; the core has no such request yet, so each row's mapped key or range is read
//! here, in the same transaction, at the same isolation. The mapper's rules are FDB's: a
//! tuple whose elements `"{K[i]}"` / `"{V[i]}"` take the i-th element of the row's key /
//! value tuple, a last element `"{...}"` makes it a range (everything under the rest),
//! `{{` and `}}` stand for literal braces, and other elements stay as they are.

use std::borrow::Cow;

use bytes::Bytes;
use fdb_api::ErrorCode;
use fdb_protocol::{KeySelector, RangeOptions};

use crate::future::FdbKeyValue;
use crate::mapped_key_values::FdbMappedKeyValue;
use crate::tuple::{pack, unpack, Element};
use crate::{FdbError, FdbResult};

/// One element of a mapper.
enum Part {
    Key(usize),
    Value(usize),
    Literal(Element<'static>),
}

/// A parsed mapper: its parts, and whether it ends with `{...}`.
pub(crate) struct Mapper {
    parts: Vec<Part>,
    range: bool,
}

fn bad(code: ErrorCode) -> FdbError {
    FdbError::of(code)
}

fn index(s: &str, tag: &str) -> Option<FdbResult<usize>> {
    let inner = s.strip_prefix(tag)?.strip_suffix("]}")?;
    Some(inner.parse().map_err(|_| bad(ErrorCode::MAPPER_BAD_INDEX)))
}

impl Mapper {
    pub(crate) fn parse(mapper: &[u8]) -> FdbResult<Mapper> {
        let elements: Vec<Element> =
            unpack(mapper).map_err(|_| bad(ErrorCode::MAPPER_NOT_TUPLE))?;
        let n = elements.len();
        let mut parts = Vec::with_capacity(n);
        let mut range = false;
        for (i, e) in elements.into_iter().enumerate() {
            let Element::String(s) = &e else {
                parts.push(Part::Literal(e.into_owned()));
                continue;
            };
            if s == "{...}" {
                if i + 1 != n {
                    return Err(bad(ErrorCode::MAPPER_BAD_RANGE_DECRIPTOR));
                }
                range = true;
            } else if let Some(k) = index(s, "{K[") {
                parts.push(Part::Key(k?));
            } else if let Some(v) = index(s, "{V[") {
                parts.push(Part::Value(v?));
            } else {
                let literal = s.replace("{{", "{").replace("}}", "}");
                parts.push(Part::Literal(Element::String(Cow::Owned(literal))));
            }
        }
        Ok(Mapper { parts, range })
    }

    /// The key (or range prefix) for one row.
    fn key_for(&self, key: &[u8], value: &[u8]) -> FdbResult<Vec<u8>> {
        let needs = |f: fn(&Part) -> bool| self.parts.iter().any(f);
        let key_tuple: Vec<Element> = if needs(|p| matches!(p, Part::Key(_))) {
            unpack(key).map_err(|_| bad(ErrorCode::MAPPER_BAD_INDEX))?
        } else {
            Vec::new()
        };
        let value_tuple: Vec<Element> = if needs(|p| matches!(p, Part::Value(_))) {
            unpack(value).map_err(|_| bad(ErrorCode::MAPPER_BAD_INDEX))?
        } else {
            Vec::new()
        };
        let mut out: Vec<Element> = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            out.push(
                match p {
                    Part::Key(i) => key_tuple.get(*i),
                    Part::Value(i) => value_tuple.get(*i),
                    Part::Literal(e) => Some(e),
                }
                .ok_or(bad(ErrorCode::MAPPER_BAD_INDEX))?
                .clone(),
            );
        }
        Ok(pack(&out))
    }

    /// Reads what `row` maps to.
    pub(crate) async fn map_row(
        &self,
        tx: &fdb_driver_mio::AsyncTransaction,
        row: FdbKeyValue,
        snapshot: bool,
    ) -> FdbResult<FdbMappedKeyValue> {
        let mapped = self.key_for(row.key(), row.value())?;
        if self.range {
            let end = strinc(&mapped);
            let rows = tx
                .get_range_with(
                    KeySelector::first_greater_or_equal(&mapped),
                    KeySelector::first_greater_or_equal(&end),
                    RangeOptions::default(),
                    snapshot,
                )
                .await?;
            Ok(FdbMappedKeyValue {
                parent: row,
                begin: Bytes::from(mapped),
                end: Bytes::from(end),
                rows: rows.into_iter().map(FdbKeyValue).collect(),
            })
        } else {
            let value = if snapshot {
                tx.snapshot_get(&mapped).await?
            } else {
                tx.get(&mapped).await?
            };
            let mut end = mapped.clone();
            end.push(0);
            let rows = value
                .map(|value| {
                    FdbKeyValue(fdb_protocol::KeyValue {
                        key: Bytes::from(mapped.clone()),
                        value,
                    })
                })
                .into_iter()
                .collect();
            Ok(FdbMappedKeyValue {
                parent: row,
                begin: Bytes::from(mapped),
                end: Bytes::from(end),
                rows,
            })
        }
    }
}

/// The first key after every key starting with `key`.
fn strinc(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    while let Some(&last) = k.last() {
        if last == 0xff {
            k.pop();
        } else {
            *k.last_mut().expect("not empty") += 1;
            return k;
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapper_rules() {
        let key = pack(&("index", "blue", 7i64));
        let value = pack(&("v0",));
        let m = Mapper::parse(&pack(&("data", "{K[2]}", "{V[0]}", "a{{b}}", 3i64))).unwrap();
        assert!(!m.range);
        assert_eq!(
            m.key_for(&key, &value).unwrap(),
            pack(&("data", 7i64, "v0", "a{b}", 3i64))
        );
        let m = Mapper::parse(&pack(&("data", "{K[2]}", "{...}"))).unwrap();
        assert!(m.range);
        assert_eq!(m.key_for(&key, &value).unwrap(), pack(&("data", 7i64)));
        let code = |r: FdbResult<()>| r.unwrap_err().code();
        assert_eq!(code(Mapper::parse(&pack(&("{...}", "x"))).map(drop)), 2032);
        assert_eq!(code(Mapper::parse(b"\x99").map(drop)), 2043);
        let m = Mapper::parse(&pack(&("{K[9]}",))).unwrap();
        assert_eq!(code(m.key_for(&key, &value).map(drop)), 2030);
        assert_eq!(strinc(b"a\xff\xff"), b"b");
    }
}
