//! The tuple layer and subspaces (`fdb_protocol::tuple`): the test vectors of FDB's spec
//! (`design/tuple.md`) and of the other bindings' own tests (Java's `TupleSerializationTest`,
//! foundationdb-rs' bindingtester cases, Go's and Python's nil cases), versionstamped keys as
//! the commit proxy resolves them, and property tests: unpack(pack(t)) == t, and packed bytes
//! sort exactly as the tuples do (FDB's tuple order: type, then value; integers across the
//! 64-bit boundary; floats in IEEE total order with NaNs and -0.0; nested tuples and nulls).

use fdb_tests::to_hex as hex;
use std::borrow::Cow;
use std::cmp::Ordering;

use fdb_protocol::atomic::{transform_versionstamp, versionstamp_offset};
use fdb_protocol::tuple::{
    pack, pack_into_like_python, pack_into_with_versionstamp_like_python, pack_with_versionstamp,
    range, unpack, BigInt, Bytes, Element, PackError, Subspace, TuplePack, TupleUnpack, Uuid,
    Versionstamp,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn s(v: &str) -> Element<'static> {
    Element::String(Cow::Owned(v.to_string()))
}

fn b(v: &[u8]) -> Element<'static> {
    Element::Bytes(Bytes(Cow::Owned(v.to_vec())))
}

fn big(v: i128) -> Element<'static> {
    Element::from(BigInt::from(v))
}

fn t(v: Vec<Element<'static>>) -> Element<'static> {
    Element::Tuple(v)
}

/// Packs `v`, checks the bytes, and checks that the bytes unpack to `v` again as `T`.
#[track_caller]
fn vector<T>(v: T, packed: &[u8])
where
    T: TuplePack + for<'de> TupleUnpack<'de> + PartialEq + std::fmt::Debug,
{
    assert_eq!(hex(&pack(&v)), hex(packed), "packing {v:?}");
    assert_eq!(
        unpack::<T>(packed).as_ref(),
        Ok(&v),
        "unpacking {}",
        hex(packed)
    );
}

/// The same for a whole tuple of elements.
#[track_caller]
fn elements(v: Vec<Element<'static>>, packed: &[u8]) {
    assert_eq!(hex(&pack(&v)), hex(packed), "packing {v:?}");
    let back: Vec<Element> = unpack(packed).unwrap();
    assert_eq!(back, v, "unpacking {}", hex(packed));
    let as_element: Element = unpack(packed).unwrap();
    assert_eq!(as_element, Element::Tuple(v));
}

// ---------------------------------------------------------------------------------------------
// Vectors

#[test]
fn spec_vectors() {
    // design/tuple.md, one test case per type.
    vector(b"foo\x00bar".to_vec(), b"\x01foo\x00\xffbar\x00");
    vector(
        "F\u{d4}O\u{0}bar".to_string(),
        b"\x02F\xc3\x94O\x00\xffbar\x00",
    );
    elements(
        vec![t(vec![b(b"foo\x00bar"), Element::Nil, t(vec![])])],
        b"\x05\x01foo\x00\xffbar\x00\x00\xff\x05\x00\x00",
    );
    vector(-5551212i64, b"\x11\xabK\x93");
    vector(-42f32, b"\x20\x3d\xd7\xff\xff");
    // The empty tuple and the tuple holding only null, as nested tuples.
    elements(vec![t(vec![])], b"\x05\x00");
    elements(vec![t(vec![Element::Nil])], b"\x05\x00\xff\x00");
    assert!(pack(&vec![t(vec![])]) < pack(&vec![t(vec![Element::Nil])]));
}

#[test]
#[allow(clippy::approx_constant)]
fn java_serialization_vectors() {
    // bindings/java/src/junit/.../tuple/TupleSerializationTest.java
    const FF: u8 = 0xff;
    elements(vec![], b"");
    for (v, packed) in [
        (0i128, &b"\x14"[..]),
        (1, b"\x15\x01"),
        (-1, b"\x13\xfe"),
        (255, b"\x15\xff"),
        (-255, b"\x13\x00"),
        (256, b"\x16\x01\x00"),
        (-256, b"\x12\xfe\xff"),
        (65536, b"\x17\x01\x00\x00"),
        (-65536, b"\x11\xfe\xff\xff"),
        (i64::MAX as i128, b"\x1c\x7f\xff\xff\xff\xff\xff\xff\xff"),
        (
            i64::MAX as i128 + 1,
            b"\x1c\x80\x00\x00\x00\x00\x00\x00\x00",
        ),
        ((1 << 64) - 1, b"\x1c\xff\xff\xff\xff\xff\xff\xff\xff"),
        (1 << 64, b"\x1d\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00"),
        (-((1 << 32) - 1), b"\x10\x00\x00\x00\x00"),
        (
            i64::MIN as i128 + 2,
            b"\x0c\x80\x00\x00\x00\x00\x00\x00\x01",
        ),
        (
            i64::MIN as i128 + 1,
            b"\x0c\x80\x00\x00\x00\x00\x00\x00\x00",
        ),
        (i64::MIN as i128, b"\x0c\x7f\xff\xff\xff\xff\xff\xff\xff"),
        (
            i64::MIN as i128 - 1,
            b"\x0c\x7f\xff\xff\xff\xff\xff\xff\xfe",
        ),
        (-((1 << 64) - 1), b"\x0c\x00\x00\x00\x00\x00\x00\x00\x00"),
    ] {
        vector(v, packed);
        elements(vec![big(v)], packed);
        if let Ok(v) = i64::try_from(v) {
            vector(v, packed);
        }
    }
    vector(0x3019i16, b"\x16\x30\x19");
    vector(3.14f32, b"\x20\xc0\x48\xf5\xc3");
    vector(-3.14f32, b"\x20\x3f\xb7\x0a\x3c");
    vector(3.14f64, b"\x21\xc0\x09\x1e\xb8\x51\xeb\x85\x1f");
    vector(-3.14f64, b"\x21\x3f\xf6\xe1\x47\xae\x14\x7a\xe0");
    vector(0.0f32, b"\x20\x80\x00\x00\x00");
    vector(-0.0f32, b"\x20\x7f\xff\xff\xff");
    vector(0.0f64, b"\x21\x80\x00\x00\x00\x00\x00\x00\x00");
    vector(-0.0f64, b"\x21\x7f\xff\xff\xff\xff\xff\xff\xff");
    vector(f32::INFINITY, b"\x20\xff\x80\x00\x00");
    vector(f32::NEG_INFINITY, b"\x20\x00\x7f\xff\xff");
    vector(f64::INFINITY, b"\x21\xff\xf0\x00\x00\x00\x00\x00\x00");
    vector(f64::NEG_INFINITY, b"\x21\x00\x0f\xff\xff\xff\xff\xff\xff");
    // NaNs, bit for bit: the largest positive one and the all-ones negative one.
    for (bits, packed) in [
        (i32::MAX as u32, &b"\x20\xff\xff\xff\xff"[..]),
        (!0u32, b"\x20\x00\x00\x00\x00"),
    ] {
        let f = f32::from_bits(bits);
        assert_eq!(pack(&f), packed);
        assert_eq!(unpack::<f32>(packed).unwrap().to_bits(), bits);
        elements(vec![Element::Float(f)], packed);
    }
    for (bits, packed) in [
        (
            i64::MAX as u64,
            &b"\x21\xff\xff\xff\xff\xff\xff\xff\xff"[..],
        ),
        (!0u64, b"\x21\x00\x00\x00\x00\x00\x00\x00\x00"),
    ] {
        let f = f64::from_bits(bits);
        assert_eq!(pack(&f), packed);
        assert_eq!(unpack::<f64>(packed).unwrap().to_bits(), bits);
        elements(vec![Element::Double(f)], packed);
    }
    vector(Vec::<u8>::new(), b"\x01\x00");
    vector(vec![1u8, 2, 3], b"\x01\x01\x02\x03\x00");
    vector(vec![0u8, 0, 0, 4], b"\x01\x00\xff\x00\xff\x00\xff\x04\x00");
    vector(String::new(), b"\x02\x00");
    vector("hello".to_string(), b"\x02hello\x00");
    vector(
        "\u{4e2d}\u{6587}".to_string(),
        b"\x02\xe4\xb8\xad\xe6\x96\x87\x00",
    );
    vector(
        "\u{3bc}\u{3ac}\u{3b8}\u{3b7}\u{3bc}\u{3b1}".to_string(),
        b"\x02\xce\xbc\xce\xac\xce\xb8\xce\xb7\xce\xbc\xce\xb1\x00",
    );
    vector("\u{1f525}".to_string(), b"\x02\xf0\x9f\x94\xa5\x00");
    vector("\u{10ffff}".to_string(), b"\x02\xf4\x8f\xbf\xbf\x00");
    elements(vec![t(vec![Element::Nil])], &[0x05, 0x00, FF, 0x00]);
    elements(
        vec![t(vec![Element::Nil, s("hello")])],
        b"\x05\x00\xff\x02hello\x00\x00",
    );
    elements(
        vec![t(vec![Element::Nil, s("hell\0")])],
        b"\x05\x00\xff\x02hell\x00\xff\x00\x00",
    );
    elements(
        vec![t(vec![Element::Nil]), s("hello")],
        b"\x05\x00\xff\x00\x02hello\x00",
    );
    elements(
        vec![t(vec![Element::Nil]), s("hello"), b(b"\x01\x00"), b(b"")],
        b"\x05\x00\xff\x00\x02hello\x00\x01\x01\x00\xff\x00\x01\x00",
    );
    // new UUID(0xba5eba11, 0x5ca1ab1e): two sign-extended longs.
    let uuid =
        Uuid::from_bytes(*b"\xff\xff\xff\xff\xba\x5e\xba\x11\x00\x00\x00\x00\x5c\xa1\xab\x1e");
    vector(
        uuid,
        b"\x30\xff\xff\xff\xff\xba\x5e\xba\x11\x00\x00\x00\x00\x5c\xa1\xab\x1e",
    );
    vector(false, b"\x26");
    vector(true, b"\x27");
    vector(
        Versionstamp::complete(*b"\xaa\xbb\xcc\xdd\xee\xff\x00\x01\x02\x03", 0),
        b"\x33\xaa\xbb\xcc\xdd\xee\xff\x00\x01\x02\x03\x00\x00",
    );
    vector(
        Versionstamp::complete(*b"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 657),
        b"\x33\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x02\x91",
    );
}

#[test]
fn bindingtester_instruction_vectors() {
    // Instructions as the bindingtester (Python) writes them; foundationdb-rs' test cases.
    elements(vec![s("NEW_TRANSACTION")], b"\x02NEW_TRANSACTION\x00");
    elements(
        vec![s("PUSH"), b(b"\x01tester_output\x00\x01results\x00\x14")],
        b"\x02PUSH\x00\x01\x01tester_output\x00\xff\x01results\x00\xff\x14\x00",
    );
    elements(vec![s("PUSH"), Element::Nil], b"\x02PUSH\x00\x00");
    elements(
        vec![
            s("PUSH"),
            t(vec![
                Element::Nil,
                Element::Float(3299069000000.0),
                Element::Float(-0.000000000000000000000000000000000000011883096),
            ]),
        ],
        b"\x02PUSH\x00\x05\x00\xff \xd4@\x07\xf5 \x7f~\x9a\xc2\x00",
    );
    elements(
        vec![s("PUSH"), Element::Int(-133525682914243904)],
        b"\x02PUSH\x00\x0c\xfe%\x9f\x19M\x81J\xbf",
    );
    elements(vec![Element::Nil, Element::Nil], b"\x00\x00");
    elements(
        vec![s("PUSH"), t(vec![Element::Double(-8.251343508909708e-15)])],
        b"\x02PUSH\x00\x05!B\xfdkl\x9f\xcc\x8eK\x00",
    );
}

#[test]
fn nil_cases() {
    // Go's NilCases: strings made of 0x00 and 0xff.
    elements(
        vec![s("\0"), s("\0\u{ff}"), s("\0\0\0"), s("\u{ff}\0"), s("")],
        b"\x02\x00\xff\x00\x02\x00\xff\xc3\xbf\x00\x02\x00\xff\x00\xff\x00\xff\x00\x02\xc3\xbf\x00\xff\x00\x02\x00",
    );
    vector(vec![0xffu8, 0, 0xff], b"\x01\xff\x00\xff\xff\x00");
    // Null at the root is one byte, inside a nested tuple two; deeper stays two.
    elements(vec![Element::Nil], b"\x00");
    elements(
        vec![t(vec![t(vec![Element::Nil, Element::Nil])])],
        b"\x05\x05\x00\xff\x00\xff\x00\x00",
    );
    // Typed: Option and () (the empty nested tuple).
    vector((None::<i64>, Some(1i64)), b"\x00\x15\x01");
    vector(((None::<i64>, ()),), b"\x05\x00\xff\x05\x00\x00");
    vector((1i64, ()), b"\x15\x01\x05\x00");
}

#[test]
fn python_writes_the_ends_of_64_bits_in_the_long_form() {
    // The Python binding (fdb/tuple.py `_encode`) switches to 0x1d / 0x0b at |v| >= 2^64 - 1
    // where the spec and the Java, Go and Ruby bindings switch at > 2^64 - 1. Both decode.
    let max = (1u128 << 64) - 1;
    let canonical = b"\x1c\xff\xff\xff\xff\xff\xff\xff\xff";
    let python = b"\x1d\x08\xff\xff\xff\xff\xff\xff\xff\xff";
    let neg_canonical = b"\x0c\x00\x00\x00\x00\x00\x00\x00\x00";
    let neg_python = b"\x0b\xf7\x00\x00\x00\x00\x00\x00\x00\x00";
    assert_eq!(pack(&max), canonical);
    let mut out = Vec::new();
    pack_into_like_python(&max, &mut out);
    assert_eq!(out, python);
    out.clear();
    pack_into_like_python(&-(max as i128), &mut out);
    assert_eq!(out, neg_python);
    assert_eq!(pack(&-(max as i128)), neg_canonical);
    for bytes in [&canonical[..], python] {
        assert_eq!(unpack::<u64>(bytes), Ok(u64::MAX));
        assert_eq!(unpack::<u128>(bytes), Ok(max));
        assert_eq!(unpack::<Element>(bytes).unwrap(), t(vec![big(max as i128)]));
    }
    for bytes in [&neg_canonical[..], neg_python] {
        assert_eq!(unpack::<i128>(bytes), Ok(-(max as i128)));
        assert_eq!(unpack::<i64>(bytes), Err(PackError::IntOutOfRange));
    }
    // Every other value packs the same both ways, also one step either side.
    for v in [max - 1, max + 1, 1 << 63, 0, 255] {
        for v in [v as i128, -(v as i128)] {
            let mut out = Vec::new();
            pack_into_like_python(&vec![big(v)], &mut out);
            assert_eq!(out, pack(&v), "{v}");
        }
    }
    // And nested inside a versionstamped key.
    let mut key = b"p".to_vec();
    pack_into_with_versionstamp_like_python(&(max, Versionstamp::incomplete(1)), &mut key).unwrap();
    assert_eq!(&key[1..11], python);
    assert_eq!(&key[key.len() - 4..], &12u32.to_le_bytes());
}

#[test]
fn arbitrary_precision_integers() {
    // 255 bytes of magnitude is the most a length byte can say.
    let m = [0xabu8; 255];
    for negative in [false, true] {
        let v = BigInt::from_magnitude(negative, &m).unwrap();
        let packed = pack(&v);
        assert_eq!(packed.len(), 257);
        assert_eq!(packed[0], if negative { 0x0b } else { 0x1d });
        assert_eq!(packed[1], if negative { 0 } else { 255 });
        assert_eq!(unpack::<BigInt>(&packed), Ok(v.clone()));
        assert_eq!(
            unpack::<Element>(&packed).unwrap(),
            t(vec![Element::BigInt(v)])
        );
        assert_eq!(unpack::<i128>(&packed), Err(PackError::IntOutOfRange));
    }
    assert_eq!(BigInt::from_magnitude(false, &[1; 256]), None);
    // Leading zeros do not count, and zero has no sign.
    let mut with_zeros = vec![0u8; 10];
    with_zeros.extend_from_slice(&m);
    assert!(BigInt::from_magnitude(false, &with_zeros).is_some());
    assert_eq!(
        BigInt::from_magnitude(true, &[0, 0]),
        Some(BigInt::from(0i64))
    );
    assert_eq!(pack(&BigInt::from_magnitude(true, &[0]).unwrap()), b"\x14");
    // The Python/Java 9..255-byte forms: 2^64 and -(2^64) (flipped length byte).
    vector(
        BigInt::from(1i128 << 64),
        b"\x1d\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00",
    );
    vector(
        BigInt::from(-(1i128 << 64)),
        b"\x0b\xf6\xfe\xff\xff\xff\xff\xff\xff\xff\xff",
    );
    // 16 bytes: the length byte is 0x10, flipped to 0xef for negatives.
    vector(i128::MIN, &[&[0x0b, 0xef, 0x7f][..], &[0xff; 15]].concat());
    vector(u128::MAX, &[&[0x1d, 0x10][..], &[0xff; 16]].concat());
    // Integers of every width from the same bytes, with range checks.
    assert_eq!(unpack::<i16>(b"\x16\x7f\xff"), Ok(i16::MAX));
    assert_eq!(
        unpack::<i16>(b"\x16\x80\x00"),
        Err(PackError::IntOutOfRange)
    );
    assert_eq!(unpack::<u16>(b"\x16\x80\x00"), Ok(0x8000));
    assert_eq!(unpack::<u32>(b"\x13\xfe"), Err(PackError::IntOutOfRange));
    assert_eq!(unpack::<i32>(b"\x13\xfe"), Ok(-1));
    assert_eq!(
        unpack::<i64>(b"\x1c\x80\x00\x00\x00\x00\x00\x00\x00"),
        Err(PackError::IntOutOfRange)
    );
    assert_eq!(
        unpack::<u64>(b"\x1c\x80\x00\x00\x00\x00\x00\x00\x00"),
        Ok(1 << 63)
    );
    assert_eq!(unpack::<usize>(b"\x14"), Ok(0));
    assert_eq!(unpack::<isize>(b"\x12\xfe\xff"), Ok(-256));
    // Non-minimal forms decode to their value (a negative zero is zero).
    assert_eq!(unpack::<i64>(b"\x16\x00\x05"), Ok(5));
    assert_eq!(unpack::<i64>(b"\x13\xff"), Ok(0));
    assert_eq!(unpack::<i64>(b"\x1d\x01\x05"), Ok(5));
    assert_eq!(
        unpack::<Element>(b"\x1d\x01\x05").unwrap(),
        t(vec![Element::Int(5)])
    );
    assert_eq!(unpack::<i64>(b"\x0b\xfe\xfa"), Ok(-5));
    assert_eq!(
        unpack::<Element>(b"\x0b\xfe\xfa").unwrap(),
        t(vec![Element::Int(-5)])
    );
}

#[test]
fn typed_tuples_refuse_the_wrong_shape() {
    let packed = pack(&(1i64, "a", (2i64, None::<i64>)));
    assert_eq!(packed, b"\x15\x01\x02a\x00\x05\x15\x02\x00\xff\x00");
    assert_eq!(
        unpack::<(i64, String, (i64, Option<i64>))>(&packed),
        Ok((1, "a".to_string(), (2, None)))
    );
    assert_eq!(
        unpack::<(i64, String)>(&packed),
        Err(PackError::TrailingBytes)
    );
    assert_eq!(
        unpack::<(i64, String, (i64,))>(&packed),
        Err(PackError::UnexpectedType {
            expected: "end of nested tuple",
            found: 0x00
        })
    );
    assert_eq!(
        unpack::<(i64, String, (i64, i64, i64))>(&packed),
        Err(PackError::UnexpectedType {
            expected: "integer",
            found: 0x00
        })
    );
    assert_eq!(
        unpack::<(String,)>(&packed),
        Err(PackError::UnexpectedType {
            expected: "string",
            found: 0x15
        })
    );
    assert_eq!(unpack::<(i64, i64)>(b"\x15\x01"), Err(PackError::Truncated));
    assert_eq!(
        unpack::<Vec<i64>>(b"\x15\x01\x15\x02\x14"),
        Ok(vec![1, 2, 0])
    );
    assert_eq!(
        unpack::<(i64, Vec<String>)>(b"\x15\x01\x05\x02a\x00\x02b\x00\x00"),
        Ok((1, vec!["a".to_string(), "b".to_string()]))
    );
    // A single value reads as the one-element tuple it packs as.
    assert_eq!(pack(&7i64), pack(&(7i64,)));
    assert_eq!(unpack::<i64>(b"\x15\x07"), Ok(7));
    // Borrowed where nothing was escaped.
    let packed = pack(&("plain", b"raw\x00".to_vec()));
    let (a, b): (Cow<str>, Bytes) = unpack(&packed).unwrap();
    assert!(matches!(a, Cow::Borrowed("plain")));
    assert!(matches!(b.0, Cow::Owned(_)));
    assert_eq!(&*b, b"raw\x00");
}

// ---------------------------------------------------------------------------------------------
// Versionstamps

#[test]
fn pack_with_versionstamp_gives_the_offset_the_commit_proxy_reads() {
    let stamp = Versionstamp::incomplete(657);
    let key = pack_with_versionstamp(&("foo", stamp)).unwrap();
    assert_eq!(
        key,
        b"\x02foo\x00\x33\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02\x91\x06\x00\x00\x00"
    );
    // Nested, behind a prefix, after an escaped null.
    let sub = Subspace::from_bytes(b"pre\x00".to_vec());
    let key = sub
        .pack_with_versionstamp(&(b"a\x00b".to_vec(), (Element::Nil, stamp)))
        .unwrap();
    let offset = versionstamp_offset(&key).unwrap();
    assert_eq!(offset, 4 + 6 + 3 + 1); // prefix, bytes, 0x05 and an escaped null, 0x33
    assert_eq!(
        &key[offset - 1..offset + 12],
        b"\x33\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02\x91"
    );
    // What the commit proxy writes there is a complete versionstamp of the same user version.
    let committed = transform_versionstamp(&key, 0x0102_0304_0506_0708, 0x090a);
    assert_eq!(committed.len(), key.len() - 4);
    let (v, (nil, got)): (Vec<u8>, (Option<i64>, Versionstamp)) = sub.unpack(&committed).unwrap();
    assert_eq!((v.as_slice(), nil), (&b"a\x00b"[..], None));
    assert!(got.is_complete());
    assert_eq!(
        got.transaction_version(),
        b"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"
    );
    assert_eq!(got.user_version(), 657);
    // Values (set_versionstamped_value) use the same format.
    let value = pack_with_versionstamp(&vec![Element::Versionstamp(stamp)]).unwrap();
    assert_eq!(versionstamp_offset(&value), Some(1));
    // Plain pack writes the placeholder as is, with no offset.
    assert_eq!(pack(&(stamp,)).len(), 13);
}

#[test]
fn pack_with_versionstamp_needs_exactly_one_incomplete_stamp() {
    let done = Versionstamp::complete([1; 10], 0);
    let open = Versionstamp::incomplete(0);
    assert_eq!(
        pack_with_versionstamp(&("a", done)),
        Err(PackError::NoIncompleteVersionstamp)
    );
    assert_eq!(
        pack_with_versionstamp(&(open, ("x", open))),
        Err(PackError::MultipleIncompleteVersionstamps)
    );
    let sub = Subspace::from("s");
    assert_eq!(
        sub.pack_with_versionstamp(&(1i64,)),
        Err(PackError::NoIncompleteVersionstamp)
    );
    // Incomplete stamps in the subspace's own prefix are plain bytes, as in Python.
    let sub = Subspace::from((open,));
    assert_eq!(
        sub.pack_with_versionstamp(&(1i64,)),
        Err(PackError::NoIncompleteVersionstamp)
    );
    let e = Element::Tuple(vec![
        Element::Versionstamp(open),
        t(vec![Element::Versionstamp(open)]),
    ]);
    assert_eq!(e.count_incomplete_versionstamp(), 2);
    assert_eq!(
        pack_with_versionstamp(&e),
        Err(PackError::MultipleIncompleteVersionstamps)
    );
}

// ---------------------------------------------------------------------------------------------
// Subspaces

#[test]
fn subspaces() {
    let app = Subspace::from(("app", 1i64));
    assert_eq!(app.bytes(), b"\x02app\x00\x15\x01");
    let users = app.subspace(&("users",));
    assert_eq!(users.bytes(), pack(&("app", 1i64, "users")).as_slice());
    assert_eq!(users, Subspace::from(("app", 1i64, "users")));
    let key = users.pack(&(42i64, "name"));
    assert_eq!(key, pack(&("app", 1i64, "users", 42i64, "name")));
    assert!(users.contains(&key) && app.contains(&key) && users.is_start_of(&key));
    assert_eq!(users.unpack::<(i64, String)>(&key), Ok((42, "name".into())));
    assert_eq!(
        app.unpack::<(String, i64, String)>(&key),
        Ok(("users".into(), 42, "name".into()))
    );
    let other = Subspace::from("other");
    assert!(!other.contains(&key));
    assert_eq!(
        other.unpack::<Vec<Element>>(&key),
        Err(PackError::NotInSubspace)
    );
    // FDB's range: prefix + 0x00 .. prefix + 0xff.
    let (begin, end) = users.range();
    assert_eq!(begin, [users.bytes(), b"\x00"].concat());
    assert_eq!(end, [users.bytes(), b"\xff"].concat());
    assert!(begin <= key && key < end);
    assert!(begin.as_slice() > users.bytes());
    assert_eq!(range(&("app", 1i64, "users")), (begin, end));
    // Raw prefixes, and a raw prefix before a tuple.
    let raw = Subspace::from_bytes(b"\xfe\x01".to_vec());
    assert_eq!(raw.pack(&(1i64,)), b"\xfe\x01\x15\x01");
    assert_eq!(raw.unpack::<(i64,)>(b"\xfe\x01\x15\x01"), Ok((1,)));
    assert_eq!(
        Subspace::from_tuple_with_prefix(b"\xfe", &("a",)).bytes(),
        b"\xfe\x02a\x00"
    );
    assert_eq!(Subspace::all().bytes(), b"");
    assert_eq!(Subspace::all().range(), (vec![0x00], vec![0xff]));
    assert_eq!(raw.clone().into_bytes(), b"\xfe\x01");
    // A key that is the prefix followed by something that is no tuple.
    assert_eq!(
        raw.unpack::<Vec<Element>>(b"\xfe\x01\xff"),
        Err(PackError::UnknownTypeCode(0xff))
    );
}

// ---------------------------------------------------------------------------------------------
// Properties

fn element() -> impl Strategy<Value = Element<'static>> {
    let int = prop_oneof![
        any::<i64>().prop_map(Element::Int),
        (-300i64..300).prop_map(Element::Int),
        // Across the 64-bit boundary and beyond.
        (any::<bool>(), 0u128..20, 0u32..3).prop_map(|(neg, d, which)| {
            let base: u128 = [1 << 63, 1 << 64, u128::MAX >> 1][which as usize];
            let m = if d < 10 { base - d } else { base + (d - 10) };
            let v = BigInt::from(m);
            Element::from(BigInt::from_magnitude(neg, v.magnitude()).unwrap())
        }),
        (any::<bool>(), vec(any::<u8>(), 0..=255))
            .prop_map(|(neg, m)| { Element::from(BigInt::from_magnitude(neg, &m).unwrap()) }),
    ];
    let special_f64 = prop_oneof![
        Just(0.0f64),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::MIN_POSITIVE),
        Just(-f64::MIN_POSITIVE),
    ];
    let leaf = prop_oneof![
        Just(Element::Nil),
        vec(
            prop_oneof![Just(0u8), Just(0xff), Just(1), any::<u8>()],
            0..12
        )
        .prop_map(|v| b(&v)),
        "[\\x00a\\x01\\x{ff}\\x{10ffff}é]{0,8}".prop_map(|v| s(&v)),
        int,
        any::<u32>().prop_map(|x| Element::Float(f32::from_bits(x))),
        special_f64.clone().prop_map(|x| Element::Float(x as f32)),
        any::<u64>().prop_map(|x| Element::Double(f64::from_bits(x))),
        special_f64.prop_map(Element::Double),
        any::<bool>().prop_map(Element::Bool),
        any::<[u8; 16]>().prop_map(|x| Element::Uuid(Uuid::from_bytes(x))),
        (any::<[u8; 10]>(), any::<u16>())
            .prop_map(|(v, u)| Element::Versionstamp(Versionstamp::complete(v, u))),
        any::<u16>().prop_map(|u| Element::Versionstamp(Versionstamp::incomplete(u))),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| vec(inner, 0..5).prop_map(Element::Tuple))
}

fn tuple() -> impl Strategy<Value = Vec<Element<'static>>> {
    vec(element(), 0..6)
}

/// Two tuples that often share a prefix, so comparisons reach the interesting elements.
fn tuple_pair() -> impl Strategy<Value = (Vec<Element<'static>>, Vec<Element<'static>>)> {
    (tuple(), tuple(), any::<prop::sample::Index>()).prop_map(|(a, tail, cut)| {
        let keep = cut.index(a.len() + 1);
        let mut b = a[..keep].to_vec();
        b.extend(tail);
        (a, b)
    })
}

/// Element equality that also tells NaN payloads and zero signs apart (what `==` does on
/// `Element`; this spells it out on the bits for the round-trip check).
fn identical(a: &Element, b: &Element) -> bool {
    match (a, b) {
        (Element::Float(x), Element::Float(y)) => x.to_bits() == y.to_bits(),
        (Element::Double(x), Element::Double(y)) => x.to_bits() == y.to_bits(),
        (Element::Tuple(x), Element::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| identical(a, b))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn unpack_of_pack_is_identity(tup in tuple()) {
        let packed = pack(&tup);
        let back: Vec<Element> = unpack(&packed).unwrap();
        prop_assert!(identical(&Element::Tuple(back.clone()), &Element::Tuple(tup.clone())),
            "{tup:?} -> {} -> {back:?}", hex(&packed));
        prop_assert_eq!(pack(&back), packed);
    }

    #[test]
    fn packed_bytes_sort_like_tuples((a, b) in tuple_pair()) {
        let (pa, pb) = (pack(&a), pack(&b));
        prop_assert_eq!(a.cmp(&b), pa.cmp(&pb), "{:?} vs {:?}: {} vs {}", a, b, hex(&pa), hex(&pb));
        prop_assert_eq!(a == b, pa == pb);
    }

    #[test]
    fn range_holds_exactly_the_extensions(a in tuple(), e in element(), other in tuple()) {
        // Python's tuple_tests.py: t + (x,) is in range(t), t itself is not, a tuple that
        // does not start with t is not, and t sorts before t + (x,).
        let (begin, end) = range(&a);
        let pa = pack(&a);
        let mut longer = a.clone();
        longer.push(e);
        let pl = pack(&longer);
        prop_assert!(begin <= pl && pl < end);
        prop_assert!(!(begin <= pa && pa < end));
        prop_assert!(pa < pl);
        let po = pack(&other);
        let is_prefix = other.len() > a.len() && other[..a.len()] == a[..];
        prop_assert_eq!(begin <= po && po < end, is_prefix);
    }

    #[test]
    fn integers_sort_across_the_64_bit_boundary(
        x in prop_oneof![any::<i128>(), (-(1i128 << 66))..(1i128 << 66)],
        y in prop_oneof![any::<i128>(), (-(1i128 << 66))..(1i128 << 66)],
    ) {
        prop_assert_eq!(x.cmp(&y), pack(&x).cmp(&pack(&y)));
        prop_assert_eq!(unpack::<i128>(&pack(&x)), Ok(x));
        prop_assert_eq!(unpack::<BigInt>(&pack(&x)), Ok(BigInt::from(x)));
        prop_assert_eq!(BigInt::from(x).cmp(&BigInt::from(y)), x.cmp(&y));
        if let Ok(v) = i64::try_from(x) {
            prop_assert_eq!(pack(&v), pack(&x));
            prop_assert_eq!(unpack::<i64>(&pack(&x)), Ok(v));
        } else {
            prop_assert_eq!(unpack::<i64>(&pack(&x)), Err(PackError::IntOutOfRange));
        }
        if let Ok(v) = u64::try_from(x) {
            prop_assert_eq!(pack(&v), pack(&x));
        }
    }

    #[test]
    fn floats_sort_in_ieee_total_order(x in any::<u64>(), y in any::<u64>(), a in any::<u32>(), b in any::<u32>()) {
        let (x, y) = (f64::from_bits(x), f64::from_bits(y));
        prop_assert_eq!(x.total_cmp(&y), pack(&x).cmp(&pack(&y)));
        prop_assert_eq!(unpack::<f64>(&pack(&x)).unwrap().to_bits(), x.to_bits());
        let (a, b) = (f32::from_bits(a), f32::from_bits(b));
        prop_assert_eq!(a.total_cmp(&b), pack(&a).cmp(&pack(&b)));
        prop_assert_eq!(unpack::<f32>(&pack(&a)).unwrap().to_bits(), a.to_bits());
    }

    #[test]
    fn byte_strings_and_strings_sort_like_their_bytes(
        x in vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..8),
        y in vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..8),
        p in ".{0,6}", q in ".{0,6}",
    ) {
        prop_assert_eq!(x.cmp(&y), pack(&x).cmp(&pack(&y)));
        prop_assert_eq!(p.as_bytes().cmp(q.as_bytes()), pack(&p).cmp(&pack(&q)));
        prop_assert_eq!(unpack::<Vec<u8>>(&pack(&x)), Ok(x));
        prop_assert_eq!(unpack::<String>(&pack(&p)), Ok(p));
    }
}

#[test]
fn element_order_by_type() {
    // null < bytes < string < nested < integer < float < double < false < true < UUID < stamp
    let order = [
        Element::Nil,
        b(b"\xff"),
        s("\u{10ffff}"),
        t(vec![]),
        t(vec![Element::Nil]),
        big(-(1 << 100)),
        Element::Int(i64::MIN),
        Element::Int(0),
        Element::Int(i64::MAX),
        big(1 << 64),
        Element::Float(f32::from_bits(!0)),
        Element::Float(f32::NEG_INFINITY),
        Element::Float(-0.0),
        Element::Float(0.0),
        Element::Float(f32::NAN),
        Element::Double(f64::NEG_INFINITY),
        Element::Double(f64::NAN),
        Element::Bool(false),
        Element::Bool(true),
        Element::Uuid(Uuid::from_u128(0)),
        Element::Uuid(Uuid::from_u128(u128::MAX)),
        Element::Versionstamp(Versionstamp::complete([0; 10], 0)),
        Element::Versionstamp(Versionstamp::incomplete(0)),
    ];
    for (i, x) in order.iter().enumerate() {
        for (j, y) in order.iter().enumerate() {
            assert_eq!(x.cmp(y), i.cmp(&j), "{x:?} vs {y:?}");
            assert_eq!(
                pack(&vec![x.clone()]).cmp(&pack(&vec![y.clone()])),
                i.cmp(&j),
                "bytes of {x:?} vs {y:?}"
            );
        }
    }
    assert_eq!(Element::Int(5), Element::BigInt(BigInt::from(5i64)));
    assert_eq!(Element::Int(5).cmp(&big(6)), Ordering::Less);
    assert_ne!(Element::Double(0.0), Element::Double(-0.0));
    assert_eq!(Element::Double(f64::NAN), Element::Double(f64::NAN));
}

// ---------------------------------------------------------------------------------------------
// On a cluster: the server is the judge of versionstamped keys and of key order.

#[test]
fn versionstamped_tuple_keys_and_tuple_order_on_a_cluster() {
    use fdb_protocol::MutationType;
    fdb_tests::dual::run(
        "rust-fdb-tuple",
        std::time::Duration::from_secs(30),
        |t| async move {
            let sub = Subspace::from_bytes(t.prefix.clone()).subspace(&("tuple",));
            // Three versionstamped keys and values in one transaction, told apart by their
            // user versions.
            let tx = t.db.create_transaction();
            for i in 0..3u16 {
                let key = sub
                    .pack_with_versionstamp(&("vs", Versionstamp::incomplete(i), i as i64))
                    .unwrap();
                tx.atomic_op(&key, pack(&(i as i64,)), MutationType::SetVersionstampedKey);
                let value =
                    pack_with_versionstamp(&("at", Versionstamp::incomplete(100 + i))).unwrap();
                let vkey = sub.pack(&("value", i as i64));
                tx.atomic_op(&vkey, &value, MutationType::SetVersionstampedValue);
            }
            // Integers across the 64-bit boundary, written in scrambled order.
            let ints: Vec<i128> = vec![
                1 << 64,
                -1,
                (1 << 64) - 1,
                i64::MIN as i128 - 1,
                0,
                -(1 << 64),
                i64::MAX as i128 + 1,
                -((1 << 64) - 1),
                i64::MIN as i128,
                300,
                i64::MAX as i128,
            ];
            for x in &ints {
                tx.set(sub.pack(&("int", *x)), b"");
            }
            tx.commit().await.unwrap();
            let stamp = tx.versionstamp().await.unwrap().unwrap();

            let tx = t.db.create_transaction();
            let vs = sub.subspace(&("vs",));
            let (begin, end) = vs.range();
            let rows = tx.get_range(&begin, &end, 0).await.unwrap();
            assert_eq!(rows.len(), 3, "{}", t.name);
            for (i, kv) in rows.iter().enumerate() {
                let (got, n): (Versionstamp, i64) = vs.unpack(&kv.key).unwrap();
                assert_eq!(got, Versionstamp::complete(stamp, i as u16), "{}", t.name);
                assert_eq!(
                    (n, unpack::<(i64,)>(&kv.value)),
                    (i as i64, Ok((i as i64,)))
                );
                let v = tx
                    .get(sub.pack(&("value", i as i64)))
                    .await
                    .unwrap()
                    .unwrap();
                let (at, got): (String, Versionstamp) = unpack(&v).unwrap();
                assert_eq!(at, "at");
                assert_eq!(
                    got,
                    Versionstamp::complete(stamp, 100 + i as u16),
                    "{}",
                    t.name
                );
            }
            // The server returns the packed integers in numeric order.
            let (begin, end) = sub.subspace(&("int",)).range();
            let rows = tx.get_range(&begin, &end, 0).await.unwrap();
            let got: Vec<i128> = rows
                .iter()
                .map(|kv| sub.unpack::<(String, i128)>(&kv.key).unwrap().1)
                .collect();
            let mut want = ints.clone();
            want.sort();
            assert_eq!(got, want, "{}", t.name);
        },
    );
}
