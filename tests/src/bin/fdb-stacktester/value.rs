//! Stack values: conversions from the dynamic tuple elements the instructions carry, the
//! packing the reference tester uses, and the two kinds of failure (an FDB error, which the
//! machine records on its stack, and a fatal one, which ends the tester with a nonzero exit).

use std::fmt;

use fdb_api::{Error, ErrorCode};
use fdb_protocol::tuple::{pack_into_like_python, BigInt, Element};

/// A failure the stack machine cannot record: a malformed instruction, a lost connection.
#[derive(Debug)]
pub struct Fatal(pub String);

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an operation failed with: an FDB error (pushed as `("ERROR", code)`) or a fatal one.
#[derive(Debug)]
pub enum Failure {
    Fdb(ErrorCode),
    Fatal(Fatal),
}

impl From<Fatal> for Failure {
    fn from(f: Fatal) -> Self {
        Failure::Fatal(f)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        match e.code() {
            Some(c) => Failure::Fdb(c),
            None => Failure::Fatal(Fatal(format!("client failure: {e}"))),
        }
    }
}

impl From<ErrorCode> for Failure {
    fn from(c: ErrorCode) -> Self {
        Failure::Fdb(c)
    }
}

/// Packs a tuple as the Python binding does (the reference tester's bytes are compared).
pub fn pack(items: &[Element<'static>]) -> Vec<u8> {
    let mut out = Vec::new();
    pack_into_like_python(&Element::Tuple(items.to_vec()), &mut out);
    out
}

/// `prefix` followed by the packed tuple.
pub fn pack_with_prefix(prefix: &[u8], items: &[Element<'static>]) -> Vec<u8> {
    let mut out = prefix.to_vec();
    pack_into_like_python(&Element::Tuple(items.to_vec()), &mut out);
    out
}

/// The packed error tuple the spec asks for: `("ERROR", "<code>")`, both byte strings.
pub fn error_element(code: ErrorCode) -> Element<'static> {
    let packed = pack(&[
        bytes(b"ERROR".to_vec()),
        bytes(code.0.to_string().into_bytes()),
    ]);
    bytes(packed)
}

pub fn bytes(v: Vec<u8>) -> Element<'static> {
    Element::Bytes(v.into())
}

pub fn string(s: impl Into<String>) -> Element<'static> {
    Element::String(s.into().into())
}

pub fn int(v: i128) -> Element<'static> {
    match i64::try_from(v) {
        Ok(v) => Element::Int(v),
        Err(_) => Element::BigInt(BigInt::from(v)),
    }
}

fn bad(what: &str, e: &Element<'_>) -> Fatal {
    Fatal(format!("expected {what}, found {e:?}"))
}

pub fn as_bytes(e: &Element<'_>) -> Result<Vec<u8>, Fatal> {
    match e {
        Element::Bytes(b) => Ok(b.0.to_vec()),
        // A string where bytes are expected: its UTF-8 (what Python 3 testers get from
        // `str.encode`); the generators never ask for it.
        Element::String(s) => Ok(s.as_bytes().to_vec()),
        _ => Err(bad("bytes", e)),
    }
}

pub fn as_i128(e: &Element<'_>) -> Result<i128, Fatal> {
    match e {
        Element::Int(v) => Ok(*v as i128),
        Element::BigInt(b) => b.to_i128().ok_or_else(|| bad("a 128-bit integer", e)),
        Element::Bool(b) => Ok(*b as i128),
        _ => Err(bad("an integer", e)),
    }
}

/// Any integer argument, of any size.
pub fn as_bigint(e: &Element<'_>) -> Result<BigInt, Fatal> {
    match e {
        Element::Int(v) => Ok(BigInt::from(*v)),
        Element::BigInt(b) => Ok(b.clone()),
        Element::Bool(b) => Ok(BigInt::from(*b as i64)),
        _ => Err(bad("an integer", e)),
    }
}

/// An integer as the element the reference tester would push: `Int` when it fits 64 bits.
pub fn int_element(v: BigInt) -> Element<'static> {
    match v.to_i64() {
        Some(v) => Element::Int(v),
        None => Element::BigInt(v),
    }
}

/// `a - b` over arbitrary-precision integers (the bindingtester's SUB operands reach
/// 2040 bits); a typed failure if the difference outgrows the tuple layer's 255 bytes.
pub fn sub(a: &BigInt, b: &BigInt) -> Result<BigInt, Fatal> {
    // a - b = a + (-b): equal signs add magnitudes, opposite ones subtract the smaller.
    let (an, bn) = (a.is_negative(), !b.is_negative());
    let (am, bm) = (a.magnitude(), b.magnitude());
    let (negative, magnitude) = if an == bn {
        (an, add_magnitudes(am, bm))
    } else {
        match cmp_magnitudes(am, bm) {
            std::cmp::Ordering::Less => (bn, sub_magnitudes(bm, am)),
            _ => (an, sub_magnitudes(am, bm)),
        }
    };
    BigInt::from_magnitude(negative, &magnitude)
        .ok_or_else(|| Fatal("SUB: the difference exceeds 255 bytes".into()))
}

fn cmp_magnitudes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Big-endian `a + b`.
fn add_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u16;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 || j > 0 || carry > 0 {
        let mut s = carry;
        if i > 0 {
            i -= 1;
            s += a[i] as u16;
        }
        if j > 0 {
            j -= 1;
            s += b[j] as u16;
        }
        out.push(s as u8);
        carry = s >> 8;
    }
    out.reverse();
    out
}

/// Big-endian `a - b`, for `a >= b`.
fn sub_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i16;
    let mut j = b.len();
    for i in (0..a.len()).rev() {
        let mut d = a[i] as i16 - borrow;
        if j > 0 {
            j -= 1;
            d -= b[j] as i16;
        }
        borrow = (d < 0) as i16;
        out.push((d + 256 * borrow) as u8);
    }
    out.reverse();
    out
}

pub fn as_i64(e: &Element<'_>) -> Result<i64, Fatal> {
    i64::try_from(as_i128(e)?).map_err(|_| bad("a 64-bit integer", e))
}

pub fn as_usize(e: &Element<'_>) -> Result<usize, Fatal> {
    usize::try_from(as_i128(e)?).map_err(|_| bad("a count", e))
}

/// Python truthiness of an integer-ish argument (`reverse`, `or_equal`).
pub fn as_bool(e: &Element<'_>) -> Result<bool, Fatal> {
    Ok(as_i128(e)? != 0)
}

/// FDB's `strinc`: the first key after every key starting with `prefix`.
pub fn strinc(prefix: &[u8]) -> Result<Vec<u8>, Fatal> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last != 0xff {
            p.push(last + 1);
            return Ok(p);
        }
    }
    Err(Fatal(format!("strinc of {prefix:02x?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_matches_i128_and_reaches_beyond_it() {
        let vals: [i128; 9] = [
            0,
            1,
            -1,
            255,
            -256,
            i64::MAX as i128 + 1,
            i64::MIN as i128 - 1,
            (1 << 100) - 7,
            -(1 << 100),
        ];
        for a in vals {
            for b in vals {
                let d = sub(&BigInt::from(a), &BigInt::from(b)).unwrap();
                assert_eq!(d.to_i128(), Some(a - b), "{a} - {b}");
            }
        }
        // 2^1000 - (-2^1000) = 2^1001, and back.
        let mut m = vec![0u8; 126];
        m[0] = 1;
        let p = BigInt::from_magnitude(false, &m).unwrap();
        let n = BigInt::from_magnitude(true, &m).unwrap();
        let d = sub(&p, &n).unwrap();
        assert!(!d.is_negative());
        assert_eq!(d.magnitude()[0], 2);
        assert_eq!(d.magnitude().len(), 126);
        assert_eq!(sub(&d, &p).unwrap(), p);
        assert_eq!(sub(&n, &n).unwrap(), BigInt::default());
        // Beyond the tuple layer's 255 bytes: a failure, not a panic.
        let top = BigInt::from_magnitude(false, &[0xff; 255]).unwrap();
        let neg = BigInt::from_magnitude(true, &[0xff; 255]).unwrap();
        assert!(sub(&top, &neg).is_err());
    }
}
