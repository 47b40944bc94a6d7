//! Property tests of the ObjectSerializer core on tables declared here with `fb_table!` /
//! `fb_message!`, covering every kind of member: inline scalars of each width, UIDs, strings,
//! vectors of scalars / strings / tables / vectors / UIDs, nested tables, and optionals
//! (unions) of scalars, strings, tables and vectors, with many empty strings and vectors
//! mixed in (FDB shares the first empty one between all later ones).
//!
//! Besides `decode(encode(x)) == x`, a schema-driven walker checks the layout FDB requires:
//! the message is padded to 8, the root offset and every table, string and vector count are
//! 4-aligned, every vtable 2-aligned, every inline member sits at an address aligned to its
//! own alignment, vector elements are aligned to theirs, and all empty strings and vectors
//! share one location.

use std::collections::BTreeSet;

use bytes::Bytes;
use fdb_protocol::serializer::{
    decode, decode_root, encode, encode_with, file_identifier, union_slots, DecodeError, Fb,
    Layout, Message, Reader, TableReader,
};
use fdb_protocol::Uid;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

// ---------------------------------------------------------------------------------------------
// Layout audit: a walker that mirrors the schema of the test types.
// ---------------------------------------------------------------------------------------------

/// What the walker found.
#[derive(Default, Debug)]
struct Audit {
    /// Alignment violations, human readable.
    problems: Vec<String>,
    /// Positions of every empty string or vector met.
    empties: BTreeSet<usize>,
    /// How many tables were visited.
    tables: usize,
}

impl Audit {
    fn aligned(&mut self, pos: usize, align: usize, what: &str) {
        if !pos.is_multiple_of(align) {
            self.problems
                .push(format!("{what} at {pos} is not aligned to {align}"));
        }
    }
}

fn layout_align(l: Layout) -> usize {
    match l {
        Layout::Inline { align, .. } => align as usize,
        Layout::Indirect | Layout::Union => 4,
        Layout::Zero => 1,
    }
}

fn elem_size(l: Layout) -> usize {
    match l {
        Layout::Inline { size, .. } => size as usize,
        _ => 4,
    }
}

/// A type whose encoding can be walked and audited.
trait Walk: Fb {
    /// Walks the value whose slot (inline data, or the offset to its data) is at `pos`.
    fn walk(r: Reader<'_>, pos: usize, a: &mut Audit) -> Result<(), DecodeError>;

    /// Walks this member from the next slot(s) of a table.
    fn walk_field(t: &mut TableReader<'_>, a: &mut Audit) -> Result<(), DecodeError> {
        match t.next_slot()? {
            Some(p) => Self::walk(t.r, p, a),
            None => Ok(()),
        }
    }
}

macro_rules! walk_scalar {
    ($($t:ty),*) => {$(
        impl Walk for $t {
            fn walk(r: Reader<'_>, pos: usize, a: &mut Audit) -> Result<(), DecodeError> {
                let size = elem_size(<$t as Fb>::LAYOUT);
                r.bytes(pos, size)?;
                a.aligned(pos, layout_align(<$t as Fb>::LAYOUT), stringify!($t));
                Ok(())
            }
        }
    )*};
}
walk_scalar!(u8, i8, bool, u16, i16, u32, i32, u64, i64, f64, Uid);

impl Walk for Bytes {
    fn walk(r: Reader<'_>, pos: usize, a: &mut Audit) -> Result<(), DecodeError> {
        let at = r.follow(pos)?;
        a.aligned(at, 4, "string length");
        let n = r.u32(at)? as usize;
        r.bytes(at + 4, n)?;
        if n == 0 {
            a.empties.insert(at);
        }
        Ok(())
    }
}

impl<T: Walk> Walk for Vec<T> {
    fn walk(r: Reader<'_>, pos: usize, a: &mut Audit) -> Result<(), DecodeError> {
        let at = r.follow(pos)?;
        a.aligned(at, 4, "vector length");
        let n = r.u32(at)? as usize;
        if n == 0 {
            a.empties.insert(at);
            return Ok(());
        }
        a.aligned(
            at + 4,
            layout_align(T::LAYOUT).max(4),
            "first vector element",
        );
        let size = elem_size(T::LAYOUT);
        r.bytes(at + 4, n * size)?;
        for i in 0..n {
            T::walk(r, at + 4 + i * size, a)?;
        }
        Ok(())
    }
}

impl<T: Walk> Walk for Option<T> {
    fn walk(_r: Reader<'_>, _pos: usize, _a: &mut Audit) -> Result<(), DecodeError> {
        Err(DecodeError::InvalidValue("union outside a table"))
    }
    fn walk_field(t: &mut TableReader<'_>, a: &mut Audit) -> Result<(), DecodeError> {
        match union_slots(t)? {
            (1, Some(p)) => match T::LAYOUT {
                // FDB writes a scalar alternative raw, without aligning it: only bounds.
                Layout::Inline { size, .. } => {
                    let at = t.r.follow(p)?;
                    t.r.bytes(at, size as usize)?;
                    Ok(())
                }
                _ => T::walk(t.r, p, a),
            },
            _ => Ok(()),
        }
    }
}

/// Implements [`Walk`] for a table: the table (its back pointer) is 4-aligned and placed so
/// that `table + 4` is aligned to the largest member alignment, as FDB's `WriteToBuffer`
/// does; then every member is walked.
macro_rules! walk_table {
    ($name:ident { $($field:ident : $ty:ty),* }) => {
        impl Walk for $name {
            fn walk(r: Reader<'_>, pos: usize, a: &mut Audit) -> Result<(), DecodeError> {
                let table = r.follow(pos)?;
                let align = [$(layout_align(<$ty as Fb>::LAYOUT)),*]
                    .into_iter()
                    .fold(4, usize::max);
                a.aligned(table, 4, concat!("table ", stringify!($name)));
                a.aligned(table + 4, align, concat!("members of ", stringify!($name)));
                a.tables += 1;
                let soffset = i32::from_le_bytes(r.array::<4>(table)?) as i64;
                a.aligned((table as i64 - soffset) as usize, 2, "vtable");
                #[allow(unused_mut, unused_variables)]
                let mut t = r.table_at(table)?;
                $( <$ty as Walk>::walk_field(&mut t, a)?; )*
                Ok(())
            }
        }
    };
}

macro_rules! table {
    ($(#[$m:meta])* struct $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        fdb_protocol::fb_table! { $(#[$m])* pub struct $name { $(pub $field: $ty),* } }
        walk_table!($name { $($field: $ty),* });
    };
}

macro_rules! message {
    ($(#[$m:meta])* struct $name:ident = $fid:expr; { $($field:ident : $ty:ty),* $(,)? }) => {
        fdb_protocol::fb_message! { $(#[$m])* pub struct $name = $fid; { $(pub $field: $ty),* } }
        walk_table!($name { $($field: $ty),* });
    };
}

/// Walks a whole message: header, root table, everything reachable.
fn audit<T: Walk>(buf: &[u8]) -> Audit {
    let mut a = Audit::default();
    let bytes = Bytes::copy_from_slice(buf);
    // The audit walks every part once more than a decode would: give it ample budget.
    let budget = std::cell::Cell::new(usize::MAX);
    let r = Reader::new(&bytes, &budget);
    a.aligned(buf.len(), 8, "message length");
    let root = r.u32(0).expect("header") as usize;
    a.aligned(root, 4, "root table");
    let mut t = r.table_at(root).expect("root table");
    a.tables += 1;
    T::walk_field(&mut t, &mut a).expect("a valid encoding walks");
    a
}

// ---------------------------------------------------------------------------------------------
// Test types.
// ---------------------------------------------------------------------------------------------

table! {
    struct Empty {}
}

table! {
    /// Every inline scalar, in an order that makes the vtable sort them.
    struct Scalars {
        a_u8: u8,
        b_bool: bool,
        c_u16: u16,
        d_i32: i32,
        e_u32: u32,
        f_i64: i64,
        g_u64: u64,
        h_f64: f64,
        i_uid: Uid,
        j_i8: i8,
        k_i16: i16,
    }
}

table! {
    struct Leaf {
        tag: u8,
        name: Bytes,
        maybe: Option<u16>,
    }
}

table! {
    struct Middle {
        leaf: Leaf,
        leaves: Vec<Leaf>,
        id: Uid,
        flag: bool,
    }
}

table! {
    struct Outer {
        middle: Middle,
        maybe_middle: Option<Middle>,
        empty: Empty,
        n: i64,
    }
}

message! {
    /// One of everything. More than 24 slots, so its vtable spills out of line.
    struct Everything = 0x00C0_FFEE; {
        scalars: Scalars,
        bytes: Bytes,
        v_u8: Vec<u8>,
        v_bool: Vec<bool>,
        v_u16: Vec<u16>,
        v_i32: Vec<i32>,
        v_u64: Vec<u64>,
        v_f64: Vec<f64>,
        v_bytes: Vec<Bytes>,
        v_leaf: Vec<Leaf>,
        v_uid: Vec<Uid>,
        v_v_u8: Vec<Vec<u8>>,
        leaf: Leaf,
        outer: Outer,
        o_u8: Option<u8>,
        o_bool: Option<bool>,
        o_u64: Option<u64>,
        o_f64: Option<f64>,
        o_uid: Option<Uid>,
        o_bytes: Option<Bytes>,
        o_leaf: Option<Leaf>,
        o_v_i32: Option<Vec<i32>>,
        o_v_bytes: Option<Vec<Bytes>>,
        tail: u8,
    }
}

message! {
    /// Mostly strings and vectors, to exercise the sharing of the first empty one.
    struct Empties = 0x0012_3456; {
        a: Bytes,
        b: Vec<u8>,
        c: Vec<Bytes>,
        d: Bytes,
        e: Vec<Leaf>,
        f: Option<Bytes>,
        g: Vec<Uid>,
        h: Bytes,
        i: Vec<Vec<u8>>,
        j: Option<Vec<u64>>,
        k: Vec<Empty>,
        l: Bytes,
    }
}

message! {
    /// No out-of-line data at all.
    struct OnlyScalars = 7; {
        a: u8,
        b: u64,
        c: Uid,
        d: u16,
    }
}

message! {
    struct Nothing = 0x0FFF_FFFF; {}
}

message! {
    /// Floats with arbitrary bit patterns (NaNs included), compared bit for bit.
    struct Floats = 99; {
        f: f64,
        o: Option<f64>,
        v: Vec<f64>,
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------------------------

/// Empty half of the time, so that many empties meet in one message.
fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop_oneof![
        Just(Bytes::new()),
        vec(any::<u8>(), 1..max).prop_map(Bytes::from),
    ]
}

/// A vector that is empty half of the time.
fn vec_of<S: Strategy>(s: S, max: usize) -> impl Strategy<Value = Vec<S::Value>>
where
    S::Value: Clone,
{
    prop_oneof![Just(Vec::new()), vec(s, 1..max)]
}

fn uid() -> impl Strategy<Value = Uid> {
    any::<(u64, u64)>().prop_map(|(a, b)| Uid::new(a, b))
}

/// Finite, so that the derived `PartialEq` holds (NaNs are tested in `Floats`).
fn finite() -> impl Strategy<Value = f64> {
    use proptest::num::f64;
    f64::NORMAL | f64::SUBNORMAL | f64::ZERO | f64::POSITIVE | f64::NEGATIVE
}

fn scalars() -> impl Strategy<Value = Scalars> {
    (
        any::<u8>(),
        any::<bool>(),
        any::<u16>(),
        any::<i32>(),
        any::<u32>(),
        any::<i64>(),
        any::<u64>(),
        finite(),
        uid(),
        any::<i8>(),
        any::<i16>(),
    )
        .prop_map(|(a, b, c, d, e, f, g, h, i, j, k)| Scalars {
            a_u8: a,
            b_bool: b,
            c_u16: c,
            d_i32: d,
            e_u32: e,
            f_i64: f,
            g_u64: g,
            h_f64: h,
            i_uid: i,
            j_i8: j,
            k_i16: k,
        })
}

fn leaf() -> impl Strategy<Value = Leaf> {
    (any::<u8>(), bytes(24), proptest::option::of(any::<u16>()))
        .prop_map(|(tag, name, maybe)| Leaf { tag, name, maybe })
}

fn middle() -> impl Strategy<Value = Middle> {
    (leaf(), vec_of(leaf(), 4), uid(), any::<bool>()).prop_map(|(leaf, leaves, id, flag)| Middle {
        leaf,
        leaves,
        id,
        flag,
    })
}

fn outer() -> impl Strategy<Value = Outer> {
    (middle(), proptest::option::of(middle()), any::<i64>()).prop_map(
        |(middle, maybe_middle, n)| Outer {
            middle,
            maybe_middle,
            empty: Empty {},
            n,
        },
    )
}

fn everything() -> impl Strategy<Value = Everything> {
    use proptest::option::of;
    let vectors = (
        vec_of(any::<u8>(), 40),
        vec_of(any::<bool>(), 10),
        vec_of(any::<u16>(), 10),
        vec_of(any::<i32>(), 10),
        vec_of(any::<u64>(), 10),
        vec_of(finite(), 10),
        vec_of(bytes(16), 8),
        vec_of(leaf(), 5),
        vec_of(uid(), 5),
        vec_of(vec_of(any::<u8>(), 9), 5),
    );
    let optionals = (
        of(any::<u8>()),
        of(any::<bool>()),
        of(any::<u64>()),
        of(finite()),
        of(uid()),
        of(bytes(20)),
        of(leaf()),
        of(vec_of(any::<i32>(), 6)),
        of(vec_of(bytes(8), 6)),
    );
    (
        scalars(),
        bytes(64),
        vectors,
        leaf(),
        outer(),
        optionals,
        any::<u8>(),
    )
        .prop_map(|(scalars, bytes, v, leaf, outer, o, tail)| Everything {
            scalars,
            bytes,
            v_u8: v.0,
            v_bool: v.1,
            v_u16: v.2,
            v_i32: v.3,
            v_u64: v.4,
            v_f64: v.5,
            v_bytes: v.6,
            v_leaf: v.7,
            v_uid: v.8,
            v_v_u8: v.9,
            leaf,
            outer,
            o_u8: o.0,
            o_bool: o.1,
            o_u64: o.2,
            o_f64: o.3,
            o_uid: o.4,
            o_bytes: o.5,
            o_leaf: o.6,
            o_v_i32: o.7,
            o_v_bytes: o.8,
            tail,
        })
}

fn empties() -> impl Strategy<Value = Empties> {
    use proptest::option::of;
    (
        (
            bytes(5),
            vec_of(any::<u8>(), 5),
            vec_of(bytes(3), 4),
            bytes(5),
        ),
        (vec_of(leaf(), 3), of(bytes(5)), vec_of(uid(), 3), bytes(5)),
        (
            vec_of(vec_of(any::<u8>(), 3), 4),
            of(vec_of(any::<u64>(), 3)),
            vec_of(Just(Empty {}), 3),
            bytes(5),
        ),
    )
        .prop_map(|((a, b, c, d), (e, f, g, h), (i, j, k, l))| Empties {
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            i,
            j,
            k,
            l,
        })
}

fn only_scalars() -> impl Strategy<Value = OnlyScalars> {
    (any::<u8>(), any::<u64>(), uid(), any::<u16>()).prop_map(|(a, b, c, d)| OnlyScalars {
        a,
        b,
        c,
        d,
    })
}

fn floats() -> impl Strategy<Value = Floats> {
    let bits = any::<u64>().prop_map(f64::from_bits);
    (
        bits.clone(),
        proptest::option::of(bits.clone()),
        vec(bits, 0..6),
    )
        .prop_map(|(f, o, v)| Floats { f, o, v })
}

// ---------------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------------

/// Everything every encoding must satisfy; returns the encoding.
fn check_encoding<M: Message + Walk + PartialEq + std::fmt::Debug>(
    x: &M,
) -> Result<Vec<u8>, TestCaseError> {
    let enc = encode(x);
    prop_assert_eq!(enc.len() % 8, 0, "padded to 8");
    prop_assert_eq!(file_identifier(&enc), Ok(M::FILE_IDENTIFIER));
    let buf = Bytes::from(enc.clone());
    let back: M = decode(&buf).map_err(|e| TestCaseError::fail(format!("decode: {e}")))?;
    prop_assert_eq!(&back, x);
    // The encoding is canonical: what decodes re-encodes to the same bytes.
    prop_assert_eq!(encode(&back), enc.clone());
    let a = audit::<M>(&enc);
    prop_assert!(a.problems.is_empty(), "misaligned: {:?}", a.problems);
    prop_assert!(
        a.empties.len() <= 1,
        "empty strings/vectors not shared: {:?}",
        a.empties
    );
    Ok(enc)
}

/// Decoding a prefix never panics; if it succeeds (only padding was cut), it is `x` again,
/// because every read is bounds-checked against the prefix.
fn check_truncations<M: Message + PartialEq + std::fmt::Debug>(
    x: &M,
    enc: &[u8],
    cuts: &[Index],
) -> Result<(), TestCaseError> {
    let all: Vec<usize> = if enc.len() <= 256 {
        (0..enc.len()).collect()
    } else {
        cuts.iter()
            .map(|i| i.index(enc.len()))
            .chain(0..16)
            .chain(enc.len() - 16..enc.len())
            .collect()
    };
    for cut in all {
        let buf = Bytes::copy_from_slice(&enc[..cut]);
        if let Ok(v) = decode::<M>(&buf) {
            prop_assert_eq!(&v, x, "prefix of {} bytes decoded differently", cut);
        }
    }
    Ok(())
}

/// Flipping bytes of a valid encoding never panics, and whatever decodes re-encodes to a
/// message that decodes to the same bytes again (a fixpoint after one round).
fn check_flips<M: Message + std::fmt::Debug>(
    enc: &[u8],
    flips: &[(Index, u8)],
) -> Result<(), TestCaseError> {
    for &(ref at, mask) in flips {
        let mut bad = enc.to_vec();
        let i = at.index(bad.len());
        bad[i] ^= mask.max(1);
        if let Ok(v) = decode::<M>(&Bytes::from(bad)) {
            let again = encode(&v);
            let w: M = decode(&Bytes::from(again.clone()))
                .map_err(|e| TestCaseError::fail(format!("re-decode after flip: {e}")))?;
            prop_assert_eq!(encode(&w), again);
        }
    }
    Ok(())
}

fn cuts() -> impl Strategy<Value = Vec<Index>> {
    vec(any::<Index>(), 48)
}

fn flips() -> impl Strategy<Value = Vec<(Index, u8)>> {
    vec(any::<(Index, u8)>(), 16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn everything_roundtrips(x in everything(), cuts in cuts(), flips in flips()) {
        let enc = check_encoding(&x)?;
        check_truncations(&x, &enc, &cuts)?;
        check_flips::<Everything>(&enc, &flips)?;
    }

    #[test]
    fn empties_roundtrip_and_share_one_location(x in empties(), cuts in cuts(), flips in flips()) {
        let enc = check_encoding(&x)?;
        check_truncations(&x, &enc, &cuts)?;
        check_flips::<Empties>(&enc, &flips)?;
    }

    #[test]
    fn only_scalars_roundtrip(x in only_scalars(), cuts in cuts()) {
        let enc = check_encoding(&x)?;
        check_truncations(&x, &enc, &cuts)?;
    }

    #[test]
    fn nested_tables_roundtrip_as_root(x in outer()) {
        // A table that is not a message, encoded under an arbitrary identifier.
        let enc = encode_with(&x, 0x0AB_CDEF);
        prop_assert_eq!(enc.len() % 8, 0);
        prop_assert_eq!(file_identifier(&enc), Ok(0x0AB_CDEF));
        let back: Outer = decode_root(&Bytes::from(enc)).unwrap();
        prop_assert_eq!(back, x);
    }

    #[test]
    fn floats_roundtrip_bit_for_bit(x in floats()) {
        let enc = encode(&x);
        prop_assert_eq!(enc.len() % 8, 0);
        let back: Floats = decode(&Bytes::from(enc.clone())).unwrap();
        prop_assert_eq!(back.f.to_bits(), x.f.to_bits());
        prop_assert_eq!(back.o.map(f64::to_bits), x.o.map(f64::to_bits));
        let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&back.v), bits(&x.v));
        prop_assert_eq!(encode(&back), enc);
    }

    #[test]
    fn wrong_file_identifier_is_refused(x in only_scalars(), fid in any::<u32>()) {
        prop_assume!(fid != OnlyScalars::FILE_IDENTIFIER);
        let enc = encode_with(&x, fid);
        prop_assert_eq!(
            decode::<OnlyScalars>(&Bytes::from(enc)),
            Err(DecodeError::FileIdentifier { expected: OnlyScalars::FILE_IDENTIFIER, found: fid })
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic(mut buf in vec(any::<u8>(), 0..512)) {
        if buf.len() >= 8 {
            buf[4..8].copy_from_slice(&Everything::FILE_IDENTIFIER.to_le_bytes());
        }
        let _ = decode::<Everything>(&Bytes::from(buf.clone()));
        let _ = decode_root::<Empties>(&Bytes::from(buf));
    }
}

#[test]
fn empty_message_is_just_header_and_tables() {
    let enc = check_encoding(&Nothing {}).unwrap();
    assert_eq!(enc.len() % 8, 0);
    let a = audit::<Nothing>(&enc);
    assert_eq!(a.tables, 2);
}

#[test]
fn all_empties_share_one_location() {
    let x = Empties::default();
    let enc = check_encoding(&x).unwrap();
    let a = audit::<Empties>(&enc);
    assert_eq!(a.empties.len(), 1, "{:?}", a.empties);
}
