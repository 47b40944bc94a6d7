//! `getMappedKeyValues` as fdbserver 7.3.77's storage server serves it: the range read of
//! `getKeyValues` (its index bytes cut to a fifth of the byte limit), then for each row the
//! key or range the mapper derives from it, read at the request's version, ten rows at a
//! time until the byte limit is spent. The mapper rules (`preprocessMappedKey`,
//! `constructMappedKey`): a packed tuple whose string elements `{K[i]}` / `{V[i]}` take the
//! i-th element of the row's key / value tuple (the index read as `std::stoi` reads it), a
//! last element `{...}` makes it a range read of everything under the rest, an element with
//! `{{` or `}}` is a literal byte string with those unescaped, and everything else is copied
//! byte for byte. Tuples are read as fdbserver 7.3's `Tuple` reads them (leniently, and
//! without nested tuples).

use fdb_protocol::messages::storage::{
    GetMappedKeyValuesReply, GetMappedKeyValuesRequest, GetRangeReqAndResult, GetValueReqAndResult,
    MappedKeyValue, MappedReqAndResult, RangeResultTable,
};

use fdb_protocol::KeyValue;

use super::*;

/// `SERVER_KNOBS->MAX_PARALLEL_QUICK_GET_VALUE`: rows mapped per batch.
const MAX_PARALLEL_QUICK_GET_VALUE: usize = 10;
/// `SERVER_KNOBS->FRACTION_INDEX_BYTELIMIT_PREFETCH`: the index read's share of the bytes.
const FRACTION_INDEX_BYTELIMIT_PREFETCH: f64 = 0.2;
/// `SERVER_KNOBS->QUICK_GET_KEY_VALUES_LIMIT` and `..._LIMIT_BYTES`: a local mapped range.
const QUICK_GET_KEY_VALUES_LIMIT: i32 = 2000;
const QUICK_GET_KEY_VALUES_LIMIT_BYTES: i32 = 10_000_000;
/// `sizeof(KeyValueRef)` on a 64-bit fdbserver, counted for every index row.
const KEY_VALUE_REF_SIZE: i64 = 32;

/// FDB 7.3's `Tuple` as fdbserver unpacks it: only element offsets, found leniently (a
/// string may be unterminated, a number cut short; nested tuples, UUIDs and big integers are
/// not tuples to it).
struct Tuple<'a> {
    data: &'a [u8],
    offsets: Vec<usize>,
}

impl<'a> Tuple<'a> {
    fn unpack(data: &'a [u8]) -> Option<Tuple<'a>> {
        let mut offsets = Vec::new();
        let mut i = 0;
        while i < data.len() {
            offsets.push(i);
            i += match data[i] {
                0x01 | 0x02 => string_terminator(data, i + 1) + 1 - i,
                c @ 0x0c..=0x1c => (c as i32 - 0x14).unsigned_abs() as usize + 1,
                0x20 => 5,
                0x21 => 9,
                0x26 | 0x27 | 0x00 => 1,
                0x33 => 13,
                _ => return None,
            };
        }
        Some(Tuple { data, offsets })
    }

    fn len(&self) -> usize {
        self.offsets.len()
    }

    /// `subTupleRawString`: element `i`'s bytes.
    fn raw(&self, i: usize) -> &'a [u8] {
        let end = self.offsets.get(i + 1).copied().unwrap_or(self.data.len());
        &self.data[self.offsets[i]..end.min(self.data.len())]
    }

    /// `getString` of a byte or text string element (its escaped nulls restored).
    fn string(&self, i: usize) -> Option<Vec<u8>> {
        let raw = self.raw(i);
        if raw.first() != Some(&0x01) && raw.first() != Some(&0x02) {
            return None;
        }
        let mut out = Vec::new();
        let mut j = 1;
        while j < raw.len() {
            if raw[j] == 0x00 {
                if j + 1 < raw.len() {
                    out.push(0x00);
                }
                j += 2;
            } else {
                out.push(raw[j]);
                j += 1;
            }
        }
        Some(out)
    }
}

/// `findStringTerminator`: the null ending a string that starts at `from` (a null followed by
/// `\xff` is an escaped null), or the last byte's index when there is none.
fn string_terminator(data: &[u8], from: usize) -> usize {
    let mut i = from;
    while i + 1 < data.len() && !(data[i] == 0x00 && data[i + 1] != 0xff) {
        i += if data[i] == 0x00 { 2 } else { 1 };
    }
    i
}

/// One element of a parsed mapper.
enum Part {
    /// Bytes copied as they are.
    Raw(Vec<u8>),
    Key(i64),
    Value(i64),
}

struct Mapper {
    parts: Vec<Part>,
    range: bool,
}

/// `std::stoi`: leading white space, a sign, at least one digit; what follows is ignored.
fn stoi(s: &[u8]) -> Option<i64> {
    let t: &[u8] = {
        let skip = s
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
            .count();
        &s[skip..]
    };
    let (neg, digits) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let v: i64 = std::str::from_utf8(&digits[..n]).ok()?.parse().ok()?;
    let v = if neg { -v } else { v };
    i32::try_from(v).ok().map(i64::from)
}

/// `unescapeLiterals`: every `from` replaced by `to`, left to right; whether any was.
fn unescape(s: &mut Vec<u8>, from: &[u8], to: &[u8]) -> bool {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    let mut any = false;
    while i < s.len() {
        if s[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
            any = true;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    *s = out;
    any
}

/// A byte string element (`Tuple::makeTuple(std::string)`).
fn byte_string(s: &[u8]) -> Vec<u8> {
    let mut out = vec![0x01];
    for &b in s {
        out.push(b);
        if b == 0x00 {
            out.push(0xff);
        }
    }
    out.push(0x00);
    out
}

impl Mapper {
    /// `preprocessMappedKey` after `Tuple::unpack(mapper)`.
    fn parse(mapper: &[u8]) -> Result<Mapper, ErrorCode> {
        let t = Tuple::unpack(mapper).ok_or(ErrorCode::MAPPER_NOT_TUPLE)?;
        let n = t.len();
        let mut parts = Vec::with_capacity(n);
        let mut range = false;
        for i in 0..n {
            let Some(mut s) = t.string(i) else {
                parts.push(Part::Raw(t.raw(i).to_vec()));
                continue;
            };
            let sz = s.len();
            let escaped = unescape(&mut s, b"{{", b"{");
            let escaped = unescape(&mut s, b"}}", b"}") || escaped;
            if escaped {
                parts.push(Part::Raw(byte_string(&s)));
            } else if sz > 5
                && s[0] == b'{'
                && (s[1] == b'K' || s[1] == b'V')
                && s[2] == b'['
                && s[sz - 2] == b']'
                && s[sz - 1] == b'}'
            {
                // A bad index fails when a row is mapped.
                let idx = stoi(&s[3..sz - 2]).unwrap_or(-1);
                parts.push(if s[1] == b'K' {
                    Part::Key(idx)
                } else {
                    Part::Value(idx)
                });
            } else if s == b"{...}" {
                if i != n - 1 {
                    return Err(ErrorCode::MAPPER_BAD_RANGE_DECRIPTOR);
                }
                range = true;
            } else {
                parts.push(Part::Raw(t.raw(i).to_vec()));
            }
        }
        Ok(Mapper { parts, range })
    }

    /// `constructMappedKey`: the row's key and value are unpacked only if a part needs them.
    fn key_for(&self, kv: &KeyValue) -> Result<Vec<u8>, ErrorCode> {
        let mut key_tuple: Option<Tuple> = None;
        let mut value_tuple: Option<Tuple> = None;
        let mut out = Vec::new();
        for p in &self.parts {
            let (tuple, idx) = match p {
                Part::Raw(r) => {
                    out.extend_from_slice(r);
                    continue;
                }
                Part::Key(i) => {
                    if key_tuple.is_none() {
                        key_tuple = Some(Tuple::unpack(&kv.key).ok_or(ErrorCode::KEY_NOT_TUPLE)?);
                    }
                    (key_tuple.as_ref(), *i)
                }
                Part::Value(i) => {
                    if value_tuple.is_none() {
                        value_tuple =
                            Some(Tuple::unpack(&kv.value).ok_or(ErrorCode::VALUE_NOT_TUPLE)?);
                    }
                    (value_tuple.as_ref(), *i)
                }
            };
            let t = tuple.ok_or(ErrorCode::INTERNAL_ERROR)?;
            if idx < 0 || idx as usize >= t.len() {
                return Err(ErrorCode::MAPPER_BAD_INDEX);
            }
            out.extend_from_slice(t.raw(idx as usize));
        }
        Ok(out)
    }
}

/// `strinc`, for a non-empty prefix that is not all `\xff`.
fn strinc(key: &[u8]) -> Option<Vec<u8>> {
    let i = key.iter().rposition(|&b| b != 0xff)?;
    let mut k = key[..=i].to_vec();
    k[i] += 1;
    Some(k)
}

impl State {
    /// `getMappedKeyValuesQ`.
    pub(super) fn get_mapped_key_values(
        &self,
        ss: usize,
        r: &GetMappedKeyValuesRequest,
        v: Version,
        tenant: Option<&[u8]>,
    ) -> Result<GetMappedKeyValuesReply, ErrorCode> {
        let (mut rb, mut re) = (r.begin.clone(), r.end.clone());
        rb.key = with_prefix(tenant, &rb.key);
        re.key = with_prefix(tenant, &re.key);
        let (sb, se) = self.shard_range(ss, &rb)?;
        let end_ok =
            selector_in_range(&re, &sb, &se) || (is_first_greater_or_equal(&re) && re.key == se);
        if !end_ok {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        let (sb, se) = clamp_to_tenant(tenant, sb, se);
        let resolve = |sel: &KeySelector| {
            if is_first_greater_or_equal(sel) {
                (sel.key.clone(), 0)
            } else {
                self.store.find_key(sel, &sb, &se, v)
            }
        };
        let (begin, o1) = resolve(&rb);
        let (end, o2) = resolve(&re);
        if (o1 != 0 && o1 != 1) || (o2 != 0 && o2 != 1) {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        // No raw mapped reads where tenants are required, nor over a tenant's keys.
        if tenant.is_none()
            && (self.cfg.tenant_mode == 2 || self.intersects_a_tenant(&begin, &end, v))
        {
            return Err(ErrorCode::TENANT_NAME_REQUIRED);
        }
        if begin >= end {
            // No rows: the mapper is not even parsed.
            return Ok(GetMappedKeyValuesReply {
                penalty: 1.0,
                version: v,
                ..Default::default()
            });
        }
        let index_bytes = r
            .limit_bytes
            .min((r.limit_bytes as f64 * FRACTION_INDEX_BYTELIMIT_PREFETCH) as i32);
        let (mut rows, more) = self.store.read_range(&begin, &end, r.limit, index_bytes, v);
        if tenant.is_some() {
            for row in rows.iter_mut() {
                row.key = without_prefix(tenant, row.key.clone());
            }
        }
        let mapper = Mapper::parse(&r.mapper)?;
        let mut remaining = r.limit_bytes as i64;
        let mut data: Vec<MappedKeyValue> = Vec::with_capacity(rows.len());
        let mut offset = 0;
        while offset < rows.len() && remaining > 0 {
            let batch = &rows[offset..rows.len().min(offset + MAX_PARALLEL_QUICK_GET_VALUE)];
            // Every key of the batch is made before any is read: the first bad row fails it.
            let keys = batch
                .iter()
                .map(|kv| mapper.key_for(kv))
                .collect::<Result<Vec<_>, _>>()?;
            for (kv, key) in batch.iter().zip(keys) {
                let m = self.map_one(ss, &mapper, kv, key, v, tenant)?;
                remaining -= KEY_VALUE_REF_SIZE
                    + (kv.key.len() + kv.value.len()) as i64
                    + mapped_size(&m.mapped);
                data.push(m);
            }
            offset += MAX_PARALLEL_QUICK_GET_VALUE;
        }
        // The first and last rows keep their key and value (the continuation).
        let n = data.len();
        if n > 0 {
            data[0].kv = rows[0].clone();
            data[n - 1].kv = rows[n - 1].clone();
        }
        Ok(GetMappedKeyValuesReply {
            penalty: 1.0,
            error: None,
            more: more || n < rows.len(),
            data,
            version: v,
            cached: false,
        })
    }

    /// `rangeIntersectsAnyTenant`: a tenant's keys (its 8-byte id prefix) meet `[begin, end)`.
    fn intersects_a_tenant(&self, begin: &[u8], end: &[u8], v: Version) -> bool {
        const MAP: &[u8] = b"\xff/tenant/map/";
        let (tenants, _) = self
            .store
            .read_range(MAP, b"\xff/tenant/map0", i32::MAX, i32::MAX, v);
        tenants.iter().any(|t| {
            let id = &t.key[MAP.len()..];
            id < end && strinc(id).is_none_or(|id_end| begin < &id_end[..])
        })
    }

    /// `mapSubquery`: a point read (the row keeps no key or value) or a range read of
    /// everything under the mapped key (the row keeps both). A key or range this server does
    /// not hold is read anyway (`QUICK_GET_*_FALLBACK`: a transaction on the server).
    fn map_one(
        &self,
        ss: usize,
        mapper: &Mapper,
        kv: &KeyValue,
        key: Vec<u8>,
        v: Version,
        tenant: Option<&[u8]>,
    ) -> Result<MappedKeyValue, ErrorCode> {
        let full = with_prefix(tenant, &key);
        if !mapper.range {
            return Ok(MappedKeyValue {
                kv: KeyValue::default(),
                mapped: MappedReqAndResult::Value(GetValueReqAndResult {
                    result: self.store.get(&full, v),
                    key: Bytes::from(key),
                }),
            });
        }
        let end = strinc(&key).ok_or(ErrorCode::INTERNAL_ERROR)?;
        let full_end = with_prefix(tenant, &end);
        let (mut rows, more) = if self.serves_range(ss, &full, &full_end) {
            self.store.read_range(
                &full,
                &full_end,
                QUICK_GET_KEY_VALUES_LIMIT,
                QUICK_GET_KEY_VALUES_LIMIT_BYTES,
                v,
            )
        } else {
            (
                self.store
                    .read_range(&full, &full_end, i32::MAX, i32::MAX, v)
                    .0,
                false,
            )
        };
        for row in rows.iter_mut() {
            row.key = without_prefix(tenant, row.key.clone());
        }
        Ok(MappedKeyValue {
            kv: kv.clone(),
            mapped: MappedReqAndResult::Range(GetRangeReqAndResult {
                begin: KeySelector::first_greater_or_equal(Bytes::from(key)),
                end: KeySelector::first_greater_or_equal(Bytes::from(end)),
                result: RangeResultTable {
                    data: rows,
                    more,
                    ..Default::default()
                },
            }),
        })
    }
}

/// `getMappedKeyValueSize`: a point's key and value, or a range's rows (each with its
/// `KeyValueRef`).
fn mapped_size(m: &MappedReqAndResult) -> i64 {
    match m {
        MappedReqAndResult::Value(g) => {
            (g.key.len() + g.result.as_ref().map_or(0, |v| v.len())) as i64
        }
        MappedReqAndResult::Range(g) => g
            .result
            .data
            .iter()
            .map(|kv| KEY_VALUE_REF_SIZE + (kv.key.len() + kv.value.len()) as i64)
            .sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fdb_protocol::tuple::pack;

    #[test]
    fn mapper_rules_as_fdbserver_reads_them() {
        let kv = KeyValue {
            key: Bytes::from(pack(&("index", "blue", 7i64))),
            value: Bytes::from(pack(&("v0",))),
        };
        let m = Mapper::parse(&pack(&("data", "{K[2]}", "{V[0]}", "a{{b}}", 3i64))).unwrap();
        assert!(!m.range);
        let mut want = pack(&("data", 7i64, "v0"));
        want.extend(pack(&(&b"a{b}"[..],)));
        want.extend(pack(&(3i64,)));
        assert_eq!(m.key_for(&kv).unwrap(), want);
        let m = Mapper::parse(&pack(&("data", "{K[ 2x]}", "{...}"))).unwrap();
        assert!(m.range);
        assert_eq!(m.key_for(&kv).unwrap(), pack(&("data", 7i64)));
        let err = |m: &[u8]| Mapper::parse(m).err();
        assert_eq!(
            err(&pack(&("{...}", "x"))),
            Some(ErrorCode::MAPPER_BAD_RANGE_DECRIPTOR)
        );
        assert_eq!(err(b"\x99"), Some(ErrorCode::MAPPER_NOT_TUPLE));
        // A nested tuple is no tuple to fdbserver 7.3.
        assert_eq!(err(&pack(&(("a",),))), Some(ErrorCode::MAPPER_NOT_TUPLE));
        for bad in ["{K[x]}", "{K[9]}", "{K[-1]}"] {
            let m = Mapper::parse(&pack(&(bad,))).unwrap();
            assert_eq!(m.key_for(&kv), Err(ErrorCode::MAPPER_BAD_INDEX), "{bad}");
        }
        let nested = KeyValue {
            key: Bytes::from(pack(&("k", ("nested",)))),
            value: kv.value.clone(),
        };
        let m = Mapper::parse(&pack(&("{K[0]}",))).unwrap();
        assert_eq!(m.key_for(&nested), Err(ErrorCode::KEY_NOT_TUPLE));
        let m = Mapper::parse(&pack(&("{V[0]}",))).unwrap();
        assert!(
            m.key_for(&nested).is_ok(),
            "the key is unpacked only when used"
        );
        // Lenient: an unterminated string is a string to the end.
        let cut = KeyValue {
            key: Bytes::from_static(b"\x02unterminated"),
            value: Bytes::new(),
        };
        let m = Mapper::parse(&pack(&("p", "{K[0]}"))).unwrap();
        assert_eq!(m.key_for(&cut).unwrap(), b"\x02p\x00\x02unterminated");
    }
}
