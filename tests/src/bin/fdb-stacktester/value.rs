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
