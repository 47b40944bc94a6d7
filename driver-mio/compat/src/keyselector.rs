//! foundationdb-rs's `KeySelector`: a borrowed or owned key, `or_equal` and an offset.

use std::borrow::Cow;

use crate::tuple::Bytes;

/// Selects a key relative to another: the last key `< key` (`<= key` with `or_equal`), then
/// `offset` keys forward.
#[derive(Clone, Debug)]
pub struct KeySelector<'a> {
    key: Bytes<'a>,
    or_equal: bool,
    offset: i32,
}

impl<'a> KeySelector<'a> {
    /// The selector `(key, or_equal, offset)`.
    pub const fn new(key: Cow<'a, [u8]>, or_equal: bool, offset: i32) -> Self {
        KeySelector {
            key: Bytes(key),
            or_equal,
            offset,
        }
    }

    /// The reference key.
    pub fn key(&self) -> &[u8] {
        self.key.as_ref()
    }

    /// Whether the reference key itself counts.
    pub fn or_equal(&self) -> bool {
        self.or_equal
    }

    /// How many keys forward.
    pub fn offset(&self) -> i32 {
        self.offset
    }

    /// The last key before `key`.
    pub fn last_less_than<K: Into<Cow<'a, [u8]>>>(key: K) -> Self {
        Self::new(key.into(), false, 0)
    }

    /// `key` if present, else the last key before it.
    pub fn last_less_or_equal<K: Into<Cow<'a, [u8]>>>(key: K) -> Self {
        Self::new(key.into(), true, 0)
    }

    /// The first key after `key`.
    pub fn first_greater_than<K: Into<Cow<'a, [u8]>>>(key: K) -> Self {
        Self::new(key.into(), true, 1)
    }

    /// `key` if present, else the first key after it.
    pub fn first_greater_or_equal<K: Into<Cow<'a, [u8]>>>(key: K) -> Self {
        Self::new(key.into(), false, 1)
    }

    fn set_key(&mut self, key: &[u8]) {
        match &mut self.key.0 {
            Cow::Owned(v) => {
                v.clear();
                v.extend_from_slice(key);
            }
            Cow::Borrowed(_) => self.key = Bytes(Cow::Owned(key.to_vec())),
        }
    }

    pub(crate) fn make_first_greater_or_equal(&mut self, key: &[u8]) {
        self.set_key(key);
        self.or_equal = false;
        self.offset = 1;
    }

    pub(crate) fn make_first_greater_than(&mut self, key: &[u8]) {
        self.set_key(key);
        self.or_equal = true;
        self.offset = 1;
    }

    /// The core's selector.
    pub(crate) fn to_core(&self) -> fdb_protocol::KeySelector {
        fdb_protocol::KeySelector::new(self.key(), self.or_equal, self.offset)
    }
}
