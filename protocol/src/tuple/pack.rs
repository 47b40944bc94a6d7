//! [`TuplePack`] / [`TupleUnpack`] and their implementations for Rust's own types, over the
//! element encodings of `design/tuple.md`.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use super::*;

/// A value that can be written as (part of) a packed tuple.
pub trait TuplePack {
    /// Appends this value's encoding at `depth` to `w`, telling where an incomplete
    /// versionstamp landed. Tuple-like implementations pass `depth.increment()` to their
    /// elements.
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset;

    /// Packs this value as a whole tuple (see [`pack`](super::pack)).
    fn pack_to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.pack(&mut out, TupleDepth::root(false));
        out
    }

    /// See [`pack_with_versionstamp`](super::pack_with_versionstamp).
    fn pack_to_vec_with_versionstamp(&self) -> PackResult<Vec<u8>> {
        let mut out = Vec::new();
        with_versionstamp_offset(&mut out, |out| self.pack(out, TupleDepth::root(false)))?;
        Ok(out)
    }
}

/// A value that can be read from (part of) a packed tuple, borrowing from the input where it
/// can (`&str`-like and byte-string elements without escapes).
pub trait TupleUnpack<'de>: Sized {
    /// Reads this value at `depth` from the front of `input`, returning the rest.
    fn unpack(input: &'de [u8], depth: TupleDepth) -> PackResult<(&'de [u8], Self)>;

    /// Reads a whole packed tuple; bytes left over are [`PackError::TrailingBytes`].
    fn unpack_root(input: &'de [u8]) -> PackResult<Self> {
        let (rest, v) = Self::unpack(input, TupleDepth::root(false))?;
        if rest.is_empty() {
            Ok(v)
        } else {
            Err(PackError::TrailingBytes)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Element encodings shared by the implementations and `Element`.

/// Consumes the type code `code`.
pub(crate) fn expect_code<'a>(
    input: &'a [u8],
    code: u8,
    expected: &'static str,
) -> PackResult<&'a [u8]> {
    match input.split_first() {
        Some((&c, rest)) if c == code => Ok(rest),
        Some((&found, _)) => Err(PackError::UnexpectedType { expected, found }),
        None => Err(PackError::Truncated),
    }
}

/// Splits `n` bytes off the front of `input`.
pub(crate) fn take(input: &[u8], n: usize) -> PackResult<(&[u8], &[u8])> {
    if input.len() < n {
        Err(PackError::Truncated)
    } else {
        let (a, b) = input.split_at(n);
        Ok((b, a))
    }
}

/// A fixed-size element's body: its type `code`, then exactly `N` bytes.
pub(crate) fn fixed<'a, const N: usize>(
    input: &'a [u8],
    code: u8,
    expected: &'static str,
) -> PackResult<(&'a [u8], [u8; N])> {
    let input = expect_code(input, code, expected)?;
    let (rest, b) = take(input, N)?;
    let mut bytes = [0u8; N];
    bytes.copy_from_slice(b);
    Ok((rest, bytes))
}

/// Writes a null: escaped inside a nested tuple, where a bare 0x00 ends the tuple.
pub(crate) fn write_nil(w: &mut Vec<u8>, depth: TupleDepth) {
    w.push(NIL);
    if depth.depth() > 1 {
        w.push(ESCAPE);
    }
}

pub(crate) fn parse_nil(input: &[u8], depth: TupleDepth) -> PackResult<&[u8]> {
    let rest = expect_code(input, NIL, "null")?;
    if depth.depth() > 1 {
        // Inside a nested tuple a bare 0x00 is its end, not a null.
        match rest.split_first() {
            Some((&ESCAPE, rest)) => Ok(rest),
            _ => Err(PackError::UnexpectedType {
                expected: "null",
                found: NIL,
            }),
        }
    } else {
        Ok(rest)
    }
}

/// Writes `code`, then `v` with every 0x00 followed by 0xff, then a terminating 0x00.
pub(crate) fn write_bytes(w: &mut Vec<u8>, code: u8, v: &[u8]) {
    w.reserve(v.len() + 2);
    w.push(code);
    for chunk in v.split_inclusive(|&b| b == NIL) {
        w.extend_from_slice(chunk);
        if chunk.last() == Some(&NIL) {
            w.push(ESCAPE);
        }
    }
    w.push(NIL);
}

/// Reads an escaped byte string up to its terminator (the type code already consumed);
/// borrowed unless it held an escaped 0x00.
pub(crate) fn parse_escaped(input: &[u8]) -> PackResult<(&[u8], Cow<'_, [u8]>)> {
    let mut owned: Option<Vec<u8>> = None;
    let mut start = 0;
    let mut from = 0;
    loop {
        let z = match input[from..].iter().position(|&b| b == NIL) {
            Some(i) => from + i,
            None => return Err(PackError::Truncated),
        };
        if input.get(z + 1) == Some(&ESCAPE) {
            owned
                .get_or_insert_with(Vec::new)
                .extend_from_slice(&input[start..=z]);
            start = z + 2;
            from = z + 2;
        } else {
            let value = match owned {
                None => Cow::Borrowed(&input[..z]),
                Some(mut buf) => {
                    buf.extend_from_slice(&input[start..z]);
                    Cow::Owned(buf)
                }
            };
            return Ok((&input[z + 1..], value));
        }
    }
}

pub(crate) fn parse_string(input: &[u8]) -> PackResult<(&[u8], Cow<'_, str>)> {
    let input = expect_code(input, STRING, "string")?;
    let (rest, raw) = parse_escaped(input)?;
    let s = match raw {
        Cow::Borrowed(b) => Cow::Borrowed(core::str::from_utf8(b).map_err(|_| PackError::BadUtf8)?),
        Cow::Owned(v) => Cow::Owned(String::from_utf8(v).map_err(|_| PackError::BadUtf8)?),
    };
    Ok((rest, s))
}

pub(crate) fn parse_bytes(input: &[u8]) -> PackResult<(&[u8], Cow<'_, [u8]>)> {
    parse_escaped(expect_code(input, BYTES, "byte string")?)
}

/// Writes an integer given by its sign and big-endian magnitude without leading zeros (at
/// most 255 bytes): 0x14 ± n for up to 8 bytes, 0x1d / 0x0b with a length byte beyond; a
/// negative number's bytes are the one's complement of its magnitude.
pub(crate) fn write_int(w: &mut Vec<u8>, negative: bool, magnitude: &[u8], depth: TupleDepth) {
    let n = magnitude.len();
    debug_assert!(n <= 255 && magnitude.first() != Some(&0));
    if n == 0 {
        w.push(INT_ZERO);
        return;
    }
    // The Python binding switches to the long form at 2^64 - 1 itself, one value early.
    let long = n > 8 || (depth.python_ints() && n == 8 && magnitude.iter().all(|&b| b == 0xff));
    match (negative, long) {
        (false, false) => w.push(INT_ZERO + n as u8),
        (false, true) => w.extend_from_slice(&[POS_INT_END, n as u8]),
        (true, false) => w.push(INT_ZERO - n as u8),
        (true, true) => w.extend_from_slice(&[NEG_INT_START, n as u8 ^ 0xff]),
    }
    if negative {
        w.extend(magnitude.iter().map(|b| !b));
    } else {
        w.extend_from_slice(magnitude);
    }
}

pub(crate) fn write_u128(w: &mut Vec<u8>, negative: bool, magnitude: u128, depth: TupleDepth) {
    let bytes = magnitude.to_be_bytes();
    let skip = (magnitude.leading_zeros() / 8) as usize;
    write_int(w, negative, &bytes[skip..], depth);
}

/// An integer element as it was on the wire.
pub(crate) struct RawInt<'a> {
    pub negative: bool,
    /// The big-endian body; a negative number's is the one's complement of its magnitude.
    body: &'a [u8],
}

impl RawInt<'_> {
    /// The magnitude's bytes, big-endian, leading zeros included.
    fn magnitude(&self) -> impl Iterator<Item = u8> + '_ {
        let flip = if self.negative { 0xff } else { 0 };
        self.body.iter().map(move |b| b ^ flip)
    }

    /// The magnitude without leading zeros.
    pub(super) fn magnitude_bytes(&self) -> Vec<u8> {
        self.magnitude().skip_while(|&b| b == 0).collect()
    }

    /// The magnitude, when it fits 128 bits.
    pub(super) fn magnitude_u128(&self) -> Option<u128> {
        let mut m: u128 = 0;
        for b in self.magnitude() {
            if m >> 120 != 0 {
                return None;
            }
            m = (m << 8) | b as u128;
        }
        Some(m)
    }

    /// The value, when it fits an `i128`.
    pub(super) fn to_i128(&self) -> Option<i128> {
        signed_i128(self.negative, self.magnitude_u128()?)
    }
}

/// The integer of a sign and a magnitude, when it fits an `i128` (the wire's integers and
/// [`super::BigInt`] both keep the two apart).
pub(super) fn signed_i128(negative: bool, m: u128) -> Option<i128> {
    if !negative {
        i128::try_from(m).ok()
    } else if m <= 1 << 127 {
        // 2^127 wraps to i128::MIN, which is its own negation.
        Some((m as i128).wrapping_neg())
    } else {
        None
    }
}

pub(crate) fn is_int_code(code: u8) -> bool {
    (NEG_INT_START..=POS_INT_END).contains(&code)
}

/// Reads any integer element: 0x0c..=0x1c with the length in the code, 0x0b / 0x1d with a
/// length byte (any length, also the ≤ 8 bytes the Python binding writes for ±(2^64 - 1)).
pub(crate) fn parse_int(input: &[u8]) -> PackResult<(&[u8], RawInt<'_>)> {
    let (&code, rest) = input.split_first().ok_or(PackError::Truncated)?;
    let (rest, n, negative) = match code {
        NEG_INT_START => {
            let (&l, rest) = rest.split_first().ok_or(PackError::Truncated)?;
            (rest, (l ^ 0xff) as usize, true)
        }
        POS_INT_END => {
            let (&l, rest) = rest.split_first().ok_or(PackError::Truncated)?;
            (rest, l as usize, false)
        }
        c if is_int_code(c) => {
            let negative = c < INT_ZERO;
            (rest, c.abs_diff(INT_ZERO) as usize, negative)
        }
        found => {
            return Err(PackError::UnexpectedType {
                expected: "integer",
                found,
            })
        }
    };
    let (rest, body) = take(rest, n)?;
    Ok((rest, RawInt { negative, body }))
}

/// Float and double keys: the IEEE bits with the sign bit flipped for positive numbers and
/// every bit flipped for negative ones, so that the bytes sort like the numbers (IEEE total
/// order: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN). The pair of conversions for
/// float type `$f` and its bits' type `$u`, written once for both widths.
macro_rules! float_key {
    ($to:ident, $from:ident, $f:ty, $u:ty) => {
        pub(crate) fn $to(f: $f) -> $u {
            const SIGN: u32 = <$u>::BITS - 1;
            let b = f.to_bits();
            if b >> SIGN == 1 {
                !b
            } else {
                b ^ (1 << SIGN)
            }
        }

        pub(crate) fn $from(k: $u) -> $f {
            const SIGN: u32 = <$u>::BITS - 1;
            <$f>::from_bits(if k >> SIGN == 1 { k ^ (1 << SIGN) } else { !k })
        }
    };
}

float_key!(f32_to_key, f32_from_key, f32, u32);
float_key!(f64_to_key, f64_from_key, f64, u64);

pub(crate) fn parse_f32(input: &[u8]) -> PackResult<(&[u8], f32)> {
    let (rest, b) = fixed(input, FLOAT, "float")?;
    Ok((rest, f32_from_key(u32::from_be_bytes(b))))
}

pub(crate) fn parse_f64(input: &[u8]) -> PackResult<(&[u8], f64)> {
    let (rest, b) = fixed(input, DOUBLE, "double")?;
    Ok((rest, f64_from_key(u64::from_be_bytes(b))))
}

/// Consumes the start of a nested tuple whose elements will be at `depth.increment()`,
/// refusing nesting beyond [`MAX_DEPTH`].
pub(crate) fn open_nested(input: &[u8], depth: TupleDepth) -> PackResult<&[u8]> {
    if depth.depth() > MAX_DEPTH {
        return Err(PackError::TooDeep);
    }
    expect_code(input, NESTED, "nested tuple")
}

/// If `input` is at the end of a nested tuple (a 0x00 that is no escaped null), the rest.
pub(crate) fn nested_end(input: &[u8]) -> Option<&[u8]> {
    match input {
        [NIL, ESCAPE, ..] => None,
        [NIL, rest @ ..] => Some(rest),
        _ => None,
    }
}

/// Consumes the end of a nested tuple whose elements have all been read.
pub(crate) fn close_nested(input: &[u8]) -> PackResult<&[u8]> {
    match nested_end(input) {
        Some(rest) => Ok(rest),
        None => match input.first() {
            None => Err(PackError::Truncated),
            Some(&found) => Err(PackError::UnexpectedType {
                expected: "end of nested tuple",
                found,
            }),
        },
    }
}

/// Packs a sequence as a tuple: bare at the root, wrapped in 0x05 .. 0x00 when nested.
pub(crate) fn pack_seq<'x, T: TuplePack + 'x>(
    items: impl IntoIterator<Item = &'x T>,
    w: &mut Vec<u8>,
    depth: TupleDepth,
) -> VersionstampOffset {
    let nested = depth.depth() > 0;
    if nested {
        w.push(NESTED);
    }
    let mut vs = VersionstampOffset::None;
    for item in items {
        vs += item.pack(w, depth.increment());
    }
    if nested {
        w.push(NIL);
    }
    vs
}

/// Reads a tuple of any length as `T`s: to the end of the input at the root, to the nested
/// tuple's end otherwise.
pub(crate) fn unpack_seq<'de, T: TupleUnpack<'de>>(
    mut input: &'de [u8],
    depth: TupleDepth,
) -> PackResult<(&'de [u8], Vec<T>)> {
    let nested = depth.depth() > 0;
    if nested {
        input = open_nested(input, depth)?;
    }
    let mut items = Vec::new();
    loop {
        if nested {
            if let Some(rest) = nested_end(input) {
                return Ok((rest, items));
            }
            if input.is_empty() {
                return Err(PackError::Truncated);
            }
        } else if input.is_empty() {
            return Ok((input, items));
        }
        let (rest, item) = T::unpack(input, depth.increment())?;
        input = rest;
        items.push(item);
    }
}

// ---------------------------------------------------------------------------------------------
// Implementations

impl<T: TuplePack + ?Sized> TuplePack for &T {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        (**self).pack(w, depth)
    }
}

impl TuplePack for () {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        pack_seq::<()>([], w, depth)
    }
}

impl TupleUnpack<'_> for () {
    fn unpack(mut input: &[u8], depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        if depth.depth() > 0 {
            input = close_nested(open_nested(input, depth)?)?;
        }
        Ok((input, ()))
    }
}

macro_rules! tuple_impls {
    ($(($($n:tt $t:ident),+))+) => {$(
        impl<$($t: TuplePack),+> TuplePack for ($($t,)+) {
            fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
                let nested = depth.depth() > 0;
                if nested {
                    w.push(NESTED);
                }
                let mut vs = VersionstampOffset::None;
                $(vs += self.$n.pack(w, depth.increment());)+
                if nested {
                    w.push(NIL);
                }
                vs
            }
        }

        impl<'de, $($t: TupleUnpack<'de>),+> TupleUnpack<'de> for ($($t,)+) {
            #[allow(non_snake_case)]
            fn unpack(mut input: &'de [u8], depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
                let nested = depth.depth() > 0;
                if nested {
                    input = open_nested(input, depth)?;
                }
                $(let (rest, $t) = $t::unpack(input, depth.increment())?; input = rest;)+
                if nested {
                    input = close_nested(input)?;
                }
                Ok((input, ($($t,)+)))
            }
        }
    )+};
}

tuple_impls! {
    (0 T0)
    (0 T0, 1 T1)
    (0 T0, 1 T1, 2 T2)
    (0 T0, 1 T1, 2 T2, 3 T3)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5, 6 T6)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5, 6 T6, 7 T7)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5, 6 T6, 7 T7, 8 T8)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5, 6 T6, 7 T7, 8 T8, 9 T9)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5, 6 T6, 7 T7, 8 T8, 9 T9, 10 T10)
    (0 T0, 1 T1, 2 T2, 3 T3, 4 T4, 5 T5, 6 T6, 7 T7, 8 T8, 9 T9, 10 T10, 11 T11)
}

macro_rules! int_impls {
    ($($t:ty => $f:ident as $wide:ty;)+) => {$(
        impl TuplePack for $t {
            #[allow(clippy::unnecessary_cast)]
            fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
                let (negative, magnitude) = $f(*self as $wide);
                write_u128(w, negative, magnitude, depth);
                VersionstampOffset::None
            }
        }

        impl TupleUnpack<'_> for $t {
            fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
                let (rest, raw) = parse_int(input)?;
                let v = if raw.negative {
                    raw.to_i128().and_then(|v| <$t>::try_from(v).ok())
                } else {
                    raw.magnitude_u128().and_then(|m| <$t>::try_from(m).ok())
                };
                v.map(|v| (rest, v)).ok_or(PackError::IntOutOfRange)
            }
        }
    )+};
}

fn signed(v: i128) -> (bool, u128) {
    (v < 0, v.unsigned_abs())
}

fn unsigned(v: u128) -> (bool, u128) {
    (false, v)
}

int_impls! {
    i16 => signed as i128;
    i32 => signed as i128;
    i64 => signed as i128;
    i128 => signed as i128;
    isize => signed as i128;
    u16 => unsigned as u128;
    u32 => unsigned as u128;
    u64 => unsigned as u128;
    u128 => unsigned as u128;
    usize => unsigned as u128;
}

/// The two floats: their type code, their order-preserving bits, their parser.
macro_rules! float_impls {
    ($($t:ty => $code:ident, $to_key:ident, $parse:ident;)*) => {
        $(impl TuplePack for $t {
            fn pack(&self, w: &mut Vec<u8>, _depth: TupleDepth) -> VersionstampOffset {
                w.push($code);
                w.extend_from_slice(&$to_key(*self).to_be_bytes());
                VersionstampOffset::None
            }
        }

        impl TupleUnpack<'_> for $t {
            fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
                $parse(input)
            }
        })*
    };
}

float_impls! {
    f32 => FLOAT, f32_to_key, parse_f32;
    f64 => DOUBLE, f64_to_key, parse_f64;
}

impl TuplePack for bool {
    fn pack(&self, w: &mut Vec<u8>, _depth: TupleDepth) -> VersionstampOffset {
        w.push(if *self { TRUE } else { FALSE });
        VersionstampOffset::None
    }
}

impl TupleUnpack<'_> for bool {
    fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        match input.split_first() {
            Some((&FALSE, rest)) => Ok((rest, false)),
            Some((&TRUE, rest)) => Ok((rest, true)),
            Some((&found, _)) => Err(PackError::UnexpectedType {
                expected: "boolean",
                found,
            }),
            None => Err(PackError::Truncated),
        }
    }
}

impl TuplePack for str {
    fn pack(&self, w: &mut Vec<u8>, _depth: TupleDepth) -> VersionstampOffset {
        write_bytes(w, STRING, self.as_bytes());
        VersionstampOffset::None
    }
}

impl TuplePack for String {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        self.as_str().pack(w, depth)
    }
}

impl TuplePack for Cow<'_, str> {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        self.as_ref().pack(w, depth)
    }
}

impl<'de> TupleUnpack<'de> for Cow<'de, str> {
    fn unpack(input: &'de [u8], _depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        parse_string(input)
    }
}

impl TupleUnpack<'_> for String {
    fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        parse_string(input).map(|(rest, s)| (rest, s.into_owned()))
    }
}

impl TuplePack for [u8] {
    fn pack(&self, w: &mut Vec<u8>, _depth: TupleDepth) -> VersionstampOffset {
        write_bytes(w, BYTES, self);
        VersionstampOffset::None
    }
}

impl TuplePack for Vec<u8> {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        self.as_slice().pack(w, depth)
    }
}

impl TupleUnpack<'_> for Vec<u8> {
    fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        parse_bytes(input).map(|(rest, b)| (rest, b.into_owned()))
    }
}

impl TuplePack for Bytes<'_> {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        self.0.as_ref().pack(w, depth)
    }
}

impl<'de> TupleUnpack<'de> for Bytes<'de> {
    fn unpack(input: &'de [u8], _depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        parse_bytes(input).map(|(rest, b)| (rest, Bytes(b)))
    }
}

impl<T: TuplePack> TuplePack for [T] {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        pack_seq(self, w, depth)
    }
}

impl<T: TuplePack> TuplePack for Vec<T> {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        pack_seq(self, w, depth)
    }
}

impl<'de, T: TupleUnpack<'de>> TupleUnpack<'de> for Vec<T> {
    fn unpack(input: &'de [u8], depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        unpack_seq(input, depth)
    }
}

impl<T: TuplePack> TuplePack for Option<T> {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        match self {
            None => {
                write_nil(w, depth);
                VersionstampOffset::None
            }
            Some(v) => v.pack(w, depth),
        }
    }
}

impl<'de, T: TupleUnpack<'de>> TupleUnpack<'de> for Option<T> {
    fn unpack(input: &'de [u8], depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        if input.first() == Some(&NIL) {
            parse_nil(input, depth).map(|rest| (rest, None))
        } else {
            T::unpack(input, depth).map(|(rest, v)| (rest, Some(v)))
        }
    }
}
