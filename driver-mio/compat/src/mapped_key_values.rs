//! The results of `get_mapped_range` (foundationdb-rs's `mapped_key_values`): each row of
//! the range read, with the rows its mapper selected.

use std::fmt;

use bytes::Bytes;
use fdb_protocol::MappedReqAndResult;

use crate::future::FdbKeyValue;
use crate::keyselector::KeySelector;

/// One batch of a mapped range read. As fdbserver sends them, a point mapper's rows keep
/// their own key and value only at the batch's ends (the continuation); the others have both
/// empty, as libfdb_c hands them over.
#[derive(Debug)]
pub struct MappedKeyValues {
    pub(crate) rows: Vec<FdbMappedKeyValue>,
    pub(crate) more: bool,
}

impl MappedKeyValues {
    /// Whether rows may follow this batch.
    pub fn more(&self) -> bool {
        self.more
    }
}

/// A row of the range, its mapped range, and the rows found there.
#[derive(Clone, PartialEq, Eq)]
pub struct FdbMappedKeyValue {
    pub(crate) parent: FdbKeyValue,
    pub(crate) begin: Bytes,
    pub(crate) end: Bytes,
    pub(crate) rows: Vec<FdbKeyValue>,
}

impl fmt::Debug for FdbMappedKeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FdbMappedKeyValue")
            .field("parent", &self.parent)
            .field("begin", &self.begin)
            .field("end", &self.end)
            .field("rows", &self.rows)
            .finish()
    }
}

impl FdbMappedKeyValue {
    /// A row as the core read it. libfdb_c's C API lays every row out as a range
    /// (`FDBMappedKeyValue::getRange`); a point mapper's row reads here as the range of its
    /// one key, holding the row if the key is set (libfdb_c gives only `begin_range`, the
    /// key, meaningfully for such a row).
    pub(crate) fn from_core(m: fdb_protocol::MappedKeyValue) -> Self {
        let parent = FdbKeyValue(m.kv);
        match m.mapped {
            MappedReqAndResult::Range(g) => FdbMappedKeyValue {
                parent,
                begin: g.begin.key,
                end: g.end.key,
                rows: g.result.data.into_iter().map(FdbKeyValue).collect(),
            },
            MappedReqAndResult::Value(v) => {
                let mut end = v.key.to_vec();
                end.push(0);
                let rows = v
                    .result
                    .map(|value| {
                        FdbKeyValue(fdb_protocol::KeyValue {
                            key: v.key.clone(),
                            value,
                        })
                    })
                    .into_iter()
                    .collect();
                FdbMappedKeyValue {
                    parent,
                    begin: v.key,
                    end: Bytes::from(end),
                    rows,
                }
            }
        }
    }

    /// The row's key.
    pub fn parent_key(&self) -> &[u8] {
        self.parent.key()
    }

    /// The row's value.
    pub fn parent_value(&self) -> &[u8] {
        self.parent.value()
    }

    /// The first key of the mapped range.
    pub fn begin_range(&self) -> &[u8] {
        &self.begin
    }

    /// The end of the mapped range.
    pub fn end_range(&self) -> &[u8] {
        &self.end
    }

    /// The mapped range's begin, as a selector.
    pub fn begin_selector(&self) -> KeySelector<'_> {
        KeySelector::first_greater_or_equal(&self.begin[..])
    }

    /// The mapped range's end, as a selector.
    pub fn end_selector(&self) -> KeySelector<'_> {
        KeySelector::first_greater_or_equal(&self.end[..])
    }

    /// The rows of the mapped range.
    pub fn key_values(&self) -> &[FdbKeyValue] {
        &self.rows
    }
}

/// One mapped row, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdbMappedValue(FdbMappedKeyValue);

/// The mapped rows, owned.
pub struct FdbMappedValuesIter(std::vec::IntoIter<FdbMappedKeyValue>);

crate::impls::item_list!(
    MappedKeyValues,
    rows,
    FdbMappedKeyValue,
    FdbMappedValuesIter,
    FdbMappedValue
);
