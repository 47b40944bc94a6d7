//! Atomic operations and versionstamps, applied the way FDB applies them
//! (`fdbclient/include/fdbclient/Atomic.h`).
//!
//! The same functions serve the client's read-your-writes layer (an atomic op over a value the
//! transaction already knows) and the in-process test cluster's storage servers. The rules are
//! FDB's, including its quirks: an empty operand usually wins, `add` works on the operand's
//! length, and the "V2" forms of `and`/`min` treat a missing value as "just store the operand".

use alloc::vec::Vec;

use crate::keys::mutation_type as mt;

/// The atomic operations of the 7.3 API (`FDBMutationType` in `fdb.options`), each carrying
/// the code it has on the wire. Typed so an application cannot send a set, a clear or a
/// reserved code through `atomic_op`; [`MutationType::from_code`] reads a raw code.
///
/// `and` and `min` are sent as their "V2" forms (a missing value becomes the operand), as
/// libfdb_c does since API 510; the deprecated `And`/`Or`/`Xor` names are the bitwise ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MutationType {
    /// Little-endian addition, with the operand's length (`add`, 2).
    Add,
    /// Deprecated name of [`MutationType::BitAnd`] (`and`, 6).
    #[deprecated(note = "use MutationType::BitAnd")]
    And,
    /// Bitwise and; a missing value becomes the operand (`bit_and`, 6).
    BitAnd,
    /// Deprecated name of [`MutationType::BitOr`] (`or`, 7).
    #[deprecated(note = "use MutationType::BitOr")]
    Or,
    /// Bitwise or (`bit_or`, 7).
    BitOr,
    /// Deprecated name of [`MutationType::BitXor`] (`xor`, 8).
    #[deprecated(note = "use MutationType::BitXor")]
    Xor,
    /// Bitwise xor (`bit_xor`, 8).
    BitXor,
    /// Appends the operand unless the value would pass the value size limit
    /// (`append_if_fits`, 9).
    AppendIfFits,
    /// The larger as little-endian unsigned integers (`max`, 12).
    Max,
    /// The smaller as little-endian unsigned integers; a missing value becomes the operand
    /// (`min`, 13).
    Min,
    /// Sets a key whose 10-byte placeholder (at the offset in its last four bytes) becomes the
    /// commit's versionstamp (`set_versionstamped_key`, 14).
    SetVersionstampedKey,
    /// Sets a value whose placeholder becomes the commit's versionstamp
    /// (`set_versionstamped_value`, 15).
    SetVersionstampedValue,
    /// The lexicographically smaller (`byte_min`, 16).
    ByteMin,
    /// The lexicographically larger (`byte_max`, 17).
    ByteMax,
    /// Clears the key if its value equals the operand (`compare_and_clear`, 20).
    CompareAndClear,
}

#[allow(deprecated)]
impl MutationType {
    /// Every atomic op, each code once (the deprecated aliases left out).
    pub const ALL: [MutationType; 12] = [
        MutationType::Add,
        MutationType::BitAnd,
        MutationType::BitOr,
        MutationType::BitXor,
        MutationType::AppendIfFits,
        MutationType::Max,
        MutationType::Min,
        MutationType::SetVersionstampedKey,
        MutationType::SetVersionstampedValue,
        MutationType::ByteMin,
        MutationType::ByteMax,
        MutationType::CompareAndClear,
    ];

    /// The code `fdb_transaction_atomic_op` takes (`fdb.options`' `MutationType` scope).
    pub const fn code(self) -> u8 {
        match self {
            MutationType::Add => mt::ADD_VALUE,
            MutationType::And | MutationType::BitAnd => mt::AND,
            MutationType::Or | MutationType::BitOr => mt::OR,
            MutationType::Xor | MutationType::BitXor => mt::XOR,
            MutationType::AppendIfFits => mt::APPEND_IF_FITS,
            MutationType::Max => mt::MAX,
            MutationType::Min => mt::MIN,
            MutationType::SetVersionstampedKey => mt::SET_VERSIONSTAMPED_KEY,
            MutationType::SetVersionstampedValue => mt::SET_VERSIONSTAMPED_VALUE,
            MutationType::ByteMin => mt::BYTE_MIN,
            MutationType::ByteMax => mt::BYTE_MAX,
            MutationType::CompareAndClear => mt::COMPARE_AND_CLEAR,
        }
    }

    /// The atomic op with this API code; `None` for a code the API does not offer (sets,
    /// clears, the V2 wire forms, reserved codes).
    pub fn from_code(code: u8) -> Option<MutationType> {
        MutationType::ALL.into_iter().find(|m| m.code() == code)
    }

    /// FDB's name of the op (`fdb.options`), e.g. `"bit_and"`.
    pub const fn name(self) -> &'static str {
        match self {
            MutationType::Add => "add",
            MutationType::And => "and",
            MutationType::BitAnd => "bit_and",
            MutationType::Or => "or",
            MutationType::BitOr => "bit_or",
            MutationType::Xor => "xor",
            MutationType::BitXor => "bit_xor",
            MutationType::AppendIfFits => "append_if_fits",
            MutationType::Max => "max",
            MutationType::Min => "min",
            MutationType::SetVersionstampedKey => "set_versionstamped_key",
            MutationType::SetVersionstampedValue => "set_versionstamped_value",
            MutationType::ByteMin => "byte_min",
            MutationType::ByteMax => "byte_max",
            MutationType::CompareAndClear => "compare_and_clear",
        }
    }
}

impl From<MutationType> for u8 {
    fn from(m: MutationType) -> u8 {
        m.code()
    }
}

/// `VALUE_SIZE_LIMIT`: `append_if_fits` never grows a value beyond this.
pub const VALUE_SIZE_LIMIT: usize = 100_000;

/// Is `kind` an atomic operation that reads the existing value (as opposed to set/clear and the
/// versionstamp operations, which are resolved at commit)?
pub fn is_atomic_op(kind: u8) -> bool {
    matches!(
        kind,
        mt::ADD_VALUE
            | mt::AND
            | mt::OR
            | mt::XOR
            | mt::APPEND_IF_FITS
            | mt::MAX
            | mt::MIN
            | mt::BYTE_MIN
            | mt::BYTE_MAX
            | mt::MIN_V2
            | mt::AND_V2
            | mt::COMPARE_AND_CLEAR
    )
}

/// Applies atomic op `kind` with `operand` to `existing`; `None` means the key ends up absent.
/// Kinds that are not atomic ops leave the value unchanged.
pub fn apply(kind: u8, existing: Option<&[u8]>, operand: &[u8]) -> Option<Vec<u8>> {
    let ex = existing.unwrap_or(&[]);
    let out = match kind {
        mt::ADD_VALUE => add(ex, operand),
        mt::AND => and(ex, operand),
        mt::AND_V2 => match existing {
            None => operand.to_vec(),
            Some(_) => and(ex, operand),
        },
        mt::OR => bitwise(ex, operand, |a, b| a | b),
        mt::XOR => bitwise(ex, operand, |a, b| a ^ b),
        mt::APPEND_IF_FITS => {
            if ex.is_empty() {
                operand.to_vec()
            } else if operand.is_empty() || ex.len() + operand.len() > VALUE_SIZE_LIMIT {
                ex.to_vec()
            } else {
                let mut v = ex.to_vec();
                v.extend_from_slice(operand);
                v
            }
        }
        mt::MAX => max(ex, operand),
        mt::MIN => min(ex, operand),
        mt::MIN_V2 => match existing {
            None => operand.to_vec(),
            Some(_) => min(ex, operand),
        },
        mt::BYTE_MAX => match existing {
            Some(e) if e > operand => e.to_vec(),
            _ => operand.to_vec(),
        },
        mt::BYTE_MIN => match existing {
            Some(e) if e < operand => e.to_vec(),
            _ => operand.to_vec(),
        },
        mt::COMPARE_AND_CLEAR => {
            return match existing {
                None => None,
                Some(e) if e == operand => None,
                Some(e) => Some(e.to_vec()),
            }
        }
        _ => return existing.map(<[u8]>::to_vec),
    };
    Some(out)
}

/// Little-endian addition, truncated or zero-extended to the operand's length.
fn add(ex: &[u8], op: &[u8]) -> Vec<u8> {
    if ex.is_empty() || op.is_empty() {
        return op.to_vec();
    }
    let mut carry = 0u16;
    op.iter()
        .enumerate()
        .map(|(i, &b)| {
            let sum = b as u16 + ex.get(i).copied().unwrap_or(0) as u16 + carry;
            carry = sum >> 8;
            sum as u8
        })
        .collect()
}

/// `and` pads a short existing value with zeros (the v1 form: a missing value is empty).
fn and(ex: &[u8], op: &[u8]) -> Vec<u8> {
    op.iter()
        .enumerate()
        .map(|(i, &b)| b & ex.get(i).copied().unwrap_or(0))
        .collect()
}

/// `or`/`xor`: the operand's bytes past the existing value are kept as they are.
fn bitwise(ex: &[u8], op: &[u8], f: impl Fn(u8, u8) -> u8) -> Vec<u8> {
    if ex.is_empty() || op.is_empty() {
        return op.to_vec();
    }
    op.iter()
        .enumerate()
        .map(|(i, &b)| ex.get(i).map_or(b, |&e| f(e, b)))
        .collect()
}

/// The existing value, cut or zero-padded to `len` bytes.
fn resized(ex: &[u8], len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = ex.iter().copied().take(len).collect();
    v.resize(len, 0);
    v
}

/// Compares `op` with `ex` as little-endian unsigned integers of `op`'s length.
fn cmp_le(ex: &[u8], op: &[u8]) -> core::cmp::Ordering {
    for i in (0..op.len()).rev() {
        let e = ex.get(i).copied().unwrap_or(0);
        match op[i].cmp(&e) {
            core::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    core::cmp::Ordering::Equal
}

fn max(ex: &[u8], op: &[u8]) -> Vec<u8> {
    if ex.is_empty() || op.is_empty() {
        return op.to_vec();
    }
    if cmp_le(ex, op) == core::cmp::Ordering::Less {
        resized(ex, op.len())
    } else {
        op.to_vec()
    }
}

fn min(ex: &[u8], op: &[u8]) -> Vec<u8> {
    if op.is_empty() {
        return op.to_vec();
    }
    if cmp_le(ex, op) == core::cmp::Ordering::Greater {
        resized(ex, op.len())
    } else {
        op.to_vec()
    }
}

/// Writes the 10-byte versionstamp: big-endian commit version, then big-endian batch index.
pub fn place_versionstamp(dest: &mut [u8], version: i64, batch_index: u16) {
    dest[..8].copy_from_slice(&version.to_be_bytes());
    dest[8..10].copy_from_slice(&batch_index.to_be_bytes());
}

/// The offset a versionstamped key or value carries in its last four bytes (little-endian),
/// checked against the length of the rest, as the client checks it before sending.
///
/// Deliberately stricter than libfdb_c 7.3.77 for offsets within 9 of `i32::MAX`: its check
/// (`pos + 10 > size`, in RYW's `atomicOp` and `getVersionstampKeyRange`) overflows `int32`
/// and lets them through, and fdbserver then crashes (SIGSEGV) placing the stamp 2 GiB past
/// the value in `transformVersionstampMutation`. Here they are `client_invalid_operation`.
pub fn versionstamp_offset(param: &[u8]) -> Option<usize> {
    if param.len() < 4 {
        return None;
    }
    let n = param.len() - 4;
    let pos = i32::from_le_bytes(param[n..].try_into().ok()?);
    let pos = usize::try_from(pos).ok()?;
    (pos.checked_add(10)? <= n).then_some(pos)
}

/// Resolves a versionstamped parameter at commit: drops the 4-byte offset and writes the stamp
/// there. A parameter with a bad offset loses its offset but is otherwise left alone, as the
/// commit proxy does.
pub fn transform_versionstamp(param: &[u8], version: i64, batch_index: u16) -> Vec<u8> {
    if param.len() < 4 {
        return param.to_vec();
    }
    let pos = versionstamp_offset(param);
    let mut out = param[..param.len() - 4].to_vec();
    if let Some(pos) = pos {
        place_versionstamp(&mut out[pos..pos + 10], version, batch_index);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// `apply(op, existing, operand)` gives `want`.
    fn applies(op: u8, existing: Option<&[u8]>, operand: &[u8], want: Option<&[u8]>) {
        assert_eq!(apply(op, existing, operand).as_deref(), want);
    }

    #[test]
    fn add_carries_and_truncates_to_operand() {
        applies(mt::ADD_VALUE, Some(&[0xff, 0x00]), &[1, 0], Some(&[0, 1]));
        applies(
            mt::ADD_VALUE,
            Some(&[0xff, 0xff, 7]),
            &[1, 0],
            Some(&[0, 0]),
        );
        applies(mt::ADD_VALUE, None, &[5], Some(&[5]));
        applies(mt::ADD_VALUE, Some(&[1]), &[2, 0, 0], Some(&[3, 0, 0]));
    }

    #[test]
    fn and_v1_and_v2_differ_on_missing() {
        applies(mt::AND, None, &[0xff], Some(&[0]));
        applies(mt::AND_V2, None, &[0xff], Some(&[0xff]));
        applies(mt::AND_V2, Some(&[0x0f]), &[0xff, 0xff], Some(&[0x0f, 0]));
    }

    #[test]
    fn or_xor_keep_operand_tail() {
        applies(mt::OR, Some(&[0x01]), &[0x10, 0x20], Some(&[0x11, 0x20]));
        applies(mt::XOR, Some(&[0xff, 0xff]), &[0x0f], Some(&[0xf0]));
    }

    #[test]
    fn max_min_little_endian() {
        // existing 0x0100 (256) vs operand 0x00ff (255)
        applies(
            mt::MAX,
            Some(&[0x00, 0x01]),
            &[0xff, 0x00],
            Some(&[0x00, 0x01]),
        );
        applies(
            mt::MIN,
            Some(&[0x00, 0x01]),
            &[0xff, 0x00],
            Some(&[0xff, 0x00]),
        );
        applies(mt::MIN, None, &[3], Some(&[0]));
        applies(mt::MIN_V2, None, &[3], Some(&[3]));
        applies(mt::MAX, Some(&[9, 9, 9]), &[1, 0], Some(&[9, 9]));
    }

    #[test]
    fn byte_min_max_lexicographic() {
        applies(mt::BYTE_MAX, Some(b"b"), b"ab", Some(b"b"));
        applies(mt::BYTE_MIN, Some(b"b"), b"ab", Some(b"ab"));
        applies(mt::BYTE_MIN, None, b"z", Some(b"z"));
    }

    #[test]
    fn append_and_compare_and_clear() {
        applies(mt::APPEND_IF_FITS, Some(b"ab"), b"cd", Some(b"abcd"));
        let big = vec![1u8; VALUE_SIZE_LIMIT];
        applies(mt::APPEND_IF_FITS, Some(&big), b"x", Some(&big));
        applies(mt::COMPARE_AND_CLEAR, Some(b"v"), b"v", None);
        applies(mt::COMPARE_AND_CLEAR, Some(b"v"), b"w", Some(b"v"));
    }

    #[test]
    #[allow(deprecated)]
    fn mutation_types_carry_the_fdb_options_codes() {
        let codes: Vec<(u8, &str)> = MutationType::ALL
            .iter()
            .map(|m| (m.code(), m.name()))
            .collect();
        assert_eq!(
            codes,
            vec![
                (2, "add"),
                (6, "bit_and"),
                (7, "bit_or"),
                (8, "bit_xor"),
                (9, "append_if_fits"),
                (12, "max"),
                (13, "min"),
                (14, "set_versionstamped_key"),
                (15, "set_versionstamped_value"),
                (16, "byte_min"),
                (17, "byte_max"),
                (20, "compare_and_clear"),
            ]
        );
        assert_eq!(MutationType::And.code(), MutationType::BitAnd.code());
        assert_eq!(MutationType::from_code(6), Some(MutationType::BitAnd));
        for code in [0, 1, 3, 4, 5, 10, 11, 18, 19, 21, 22, 23, 24, 255] {
            assert_eq!(MutationType::from_code(code), None, "{code}");
        }
    }

    #[test]
    fn versionstamps() {
        let mut p = b"ab0123456789cd".to_vec();
        p.extend_from_slice(&2u32.to_le_bytes());
        let out = transform_versionstamp(&p, 0x0102_0304_0506_0708, 0x090a);
        assert_eq!(
            out,
            b"ab\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0acd".to_vec()
        );
        let mut bad = b"short".to_vec();
        bad.extend_from_slice(&3u32.to_le_bytes());
        assert_eq!(versionstamp_offset(&bad), None);
        assert_eq!(transform_versionstamp(&bad, 1, 0), b"short".to_vec());
        // Offsets whose `pos + 10` overflows an i32 (libfdb_c lets them through) are refused.
        for pos in [i32::MAX - 9, i32::MAX - 1, i32::MAX] {
            let mut p = b"abcd".to_vec();
            p.extend_from_slice(&pos.to_le_bytes());
            assert_eq!(versionstamp_offset(&p), None, "{pos:#x}");
        }
    }
}
