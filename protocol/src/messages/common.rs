//! Wrappers every request and reply uses: `ErrorOr`, `Void`, `ReplyPromise`, FDB's `Error`.

use crate::error::ErrorCode;
use crate::serializer::{
    load_alternative, union_slots, DecodeError, Fb, Layout, Reader, Result, Saved, TableReader,
    VtCollector, Writer,
};
use crate::uid::Uid;

/// FDB's `Error` travels as a table holding only its `u16` code (`flow/include/flow/Error.h`):
/// the [`EnsureTable`] of the code.
impl Fb for ErrorCode {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        EnsureTable(self.0).save(w)
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        Ok(ErrorCode(EnsureTable::<u16>::load(r, pos)?.0))
    }
    fn collect_vtables(c: &mut VtCollector) {
        EnsureTable::<u16>::collect_vtables(c);
    }
}

impl Default for ErrorCode {
    /// FDB's default-constructed `Error` carries the invalid code.
    fn default() -> Self {
        ErrorCode(0xffff)
    }
}

/// FDB's `ErrorOr<T>`: every reply is one. A union of `<Error, T>` (tag 1 = error, 2 = value).
#[derive(Clone, Debug, PartialEq)]
pub enum ErrorOr<T> {
    /// The error the server answered with.
    Err(ErrorCode),
    /// The reply itself.
    Ok(T),
}

impl<T> Default for ErrorOr<T> {
    fn default() -> Self {
        ErrorOr::Err(ErrorCode::default())
    }
}

impl<T> ErrorOr<T> {
    /// As a `Result`, for `?`.
    pub fn into_result(self) -> core::result::Result<T, ErrorCode> {
        match self {
            ErrorOr::Ok(v) => Ok(v),
            ErrorOr::Err(e) => Err(e),
        }
    }
}

impl<T: Fb> Fb for ErrorOr<T> {
    const LAYOUT: Layout = Layout::Union;
    fn save(&self, w: &mut Writer) -> Saved {
        match self {
            ErrorOr::Err(e) => Saved::Union {
                tag: 1,
                target: Some(w.save_alternative(e)),
            },
            ErrorOr::Ok(v) => Saved::Union {
                tag: 2,
                target: Some(w.save_alternative(v)),
            },
        }
    }
    fn load(_r: Reader<'_>, _pos: usize) -> Result<Self> {
        Err(DecodeError::InvalidValue("union outside a table"))
    }
    fn load_field(t: &mut TableReader<'_>) -> Result<Self> {
        match union_slots(t)? {
            (0, _) => Err(DecodeError::EmptyUnion),
            (1, Some(p)) => Ok(ErrorOr::Err(load_alternative(t.r, p)?)),
            (2, Some(p)) => Ok(ErrorOr::Ok(load_alternative(t.r, p)?)),
            (tag, _) => Err(DecodeError::BadUnionTag { tag }),
        }
    }
    fn collect_vtables(c: &mut VtCollector) {
        ErrorCode::collect_vtables(c);
        T::collect_vtables(c);
    }
}

/// The error a reply carries, whatever its type: FDB answers every request with an
/// `ErrorOr<T>`, and the transport layer (a role that ended, `broken_promise`) answers
/// without regard for `T`, so the client looks at the error alternative before decoding the
/// value. `None` for a value, or for bytes that are not a reply at all.
pub fn reply_error(msg: &bytes::Bytes) -> Option<ErrorCode> {
    let root = crate::serializer::decode_root_with(msg, |t| match union_slots(t)? {
        (1, Some(p)) => load_alternative::<ErrorCode>(t.r, p).map(Some),
        _ => Ok(None),
    });
    root.ok().flatten()
}

crate::serializer::fb_table! {
    /// FDB's `Void`: a table with no members, the reply of requests that only need an ack.
    pub struct Void {}
}

crate::serializer::fb_table! {
    /// Where the reply goes: only the token travels; the reply comes back on the same
    /// connection (`serializable_traits<ReplyPromise<T>>` in `fdbrpc/include/fdbrpc/fdbrpc.h`).
    pub struct ReplyPromise {
        pub token: Uid,
    }
}

/// `EnsureTable<T>` for a `T` that is not itself a table: FDB wraps it in a one-member table
/// so it can be a union alternative (`flat_buffers.h`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnsureTable<T>(pub T);

impl<T: Fb> Fb for EnsureTable<T> {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        let mut t = w.begin_table(&[T::LAYOUT]);
        let s = self.0.save(w);
        t.push(s);
        Saved::Offset(w.end_table(t))
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let mut t = r.table(pos)?;
        Ok(EnsureTable(t.field()?))
    }
    fn collect_vtables(c: &mut VtCollector) {
        c.add(&[T::LAYOUT]);
        T::collect_vtables(c);
    }
}

/// File identifier composition (`flow/include/flow/FileIdentifier.h`): the top byte names the
/// wrapper; a second wrapper goes into the top nibble.
pub mod fid {
    /// `ReplyPromise<T>`.
    pub const REPLY_PROMISE: u32 = 1;
    /// `ErrorOr<T>`.
    pub const ERROR_OR: u32 = 2;
    /// `VectorRef<T>`.
    pub const VECTOR_REF: u32 = 3;
    /// `Optional<T>`.
    pub const OPTIONAL: u32 = 4;

    /// `wrapper<inner>` where `inner` is itself plain (depth 0) or wrapped once (depth 1).
    pub const fn compose(wrapper: u32, inner: u32) -> u32 {
        if inner >= 1 << 24 {
            (wrapper << 28) | inner
        } else {
            (wrapper << 24) | inner
        }
    }
    /// What a reply of type `T` carries: `ErrorOr<EnsureTable<T>>`.
    pub const fn reply(inner: u32) -> u32 {
        compose(ERROR_OR, inner)
    }
}
