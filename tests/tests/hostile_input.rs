//! Hostile input, one case at a time, each with the exact error it must produce. The hostile
//! bytes are real captured frames and messages (libfdb_c 7.3.77 <-> fdbserver 7.3.77) with a
//! few bytes patched, so every case is one field away from something that decodes.
//!
//! A counting allocator (per thread) checks that refused lengths and counts cost no memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use fdb_protocol::framing::{
    checksum, encode_packet, ConnectPacket, FrameDecoder, FrameError, Incoming, Packet,
    PACKET_LIMIT,
};
use fdb_protocol::messages::commit::{GetKeyServerLocationsReply, MutationRef};
use fdb_protocol::messages::coordination::{ClientDBInfo, VersionHistory};
use fdb_protocol::messages::storage::{GetKeyReply, GetKeyValuesReply, GetValueReply};
use fdb_protocol::messages::{decode_any, decode_reply, encode_reply, fid, ErrorOr};
use fdb_protocol::serializer::{decode_root, DecodeError, Message};
use fdb_tests::{load_captures, CapturedFrame, Dir};

// ---------------------------------------------------------------------------------------------
// Allocation accounting

struct Counting;

thread_local! {
    /// (counting, bytes requested, largest single request) for the current thread.
    static ALLOCS: Cell<(bool, usize, usize)> = const { Cell::new((false, 0, 0)) };
}

fn note(size: usize) {
    let _ = ALLOCS.try_with(|a| {
        let (on, total, max) = a.get();
        if on {
            a.set((on, total + size, max.max(size)));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning its result, the bytes it allocated in total and its largest allocation.
fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    ALLOCS.with(|a| a.set((true, 0, 0)));
    let r = f();
    let (_, total, max) = ALLOCS.with(|a| a.replace((false, 0, 0)));
    (r, total, max)
}

// ---------------------------------------------------------------------------------------------
// Captured material and byte patching

fn captured_frames() -> Vec<(String, CapturedFrame)> {
    load_captures()
        .into_iter()
        .flat_map(|c| {
            let name = c.name.clone();
            c.frames.into_iter().map(move |f| (name.clone(), f))
        })
        .collect()
}

/// The first captured reply of type `T` that decodes to a value satisfying `pred`.
fn captured_reply<T: Message>(pred: impl Fn(&T) -> bool) -> Vec<u8> {
    for (_, f) in captured_frames() {
        if f.is_connect || f.dir != Dir::ServerToClient {
            continue;
        }
        let m = f.message();
        if let Ok(ErrorOr::Ok(v)) = decode_reply::<T>(&m) {
            if pred(&v) {
                return m.to_vec();
            }
        }
    }
    panic!("no captured reply of the wanted shape");
}

/// The first captured client->server packet, as it was on the wire (with checksum).
fn captured_packet() -> CapturedFrame {
    captured_frames()
        .into_iter()
        .map(|(_, f)| f)
        .find(|f| !f.is_connect && f.dir == Dir::ClientToServer)
        .unwrap()
}

fn u16_at(b: &[u8], p: usize) -> u16 {
    u16::from_le_bytes(b[p..p + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], p: usize) -> u32 {
    u32::from_le_bytes(b[p..p + 4].try_into().unwrap())
}
fn put_u16(b: &mut [u8], p: usize, v: u16) {
    b[p..p + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], p: usize, v: u32) {
    b[p..p + 4].copy_from_slice(&v.to_le_bytes());
}

/// Where the root table is.
fn root(b: &[u8]) -> usize {
    u32_at(b, 0) as usize
}
/// The vtable of the table at `table` (`table - soffset`).
fn vtable_of(b: &[u8], table: usize) -> usize {
    let soff = u32_at(b, table) as i32 as i64;
    (table as i64 - soff) as usize
}
/// Where slot `i` of the table at `table` holds its data.
fn slot(b: &[u8], table: usize, i: usize) -> usize {
    let vt = vtable_of(b, table);
    assert!(
        4 + 2 * i < u16_at(b, vt) as usize,
        "slot {i} not in the vtable"
    );
    let off = u16_at(b, vt + 4 + 2 * i) as usize;
    assert!(off >= 4, "slot {i} absent");
    table + off
}
/// Follows the forward offset stored at `pos`.
fn follow(b: &[u8], pos: usize) -> usize {
    pos + u32_at(b, pos) as usize
}
/// The reply table inside the root `ErrorOr` (root slot 0 is the tag, slot 1 the offset).
fn reply_table(b: &[u8]) -> usize {
    follow(b, slot(b, root(b), 1))
}

fn dec<T: Message>(b: &[u8]) -> Result<ErrorOr<T>, DecodeError> {
    decode_reply::<T>(&Bytes::copy_from_slice(b))
}

fn get_value_reply() -> Vec<u8> {
    captured_reply::<GetValueReply>(|r| r.value.as_ref().is_some_and(|v| v.len() == 100))
}

/// Position of the length of the value string of a `GetValueReply`
/// (slots: penalty, error tag, error, value tag, value, cached).
fn get_value_string(b: &[u8]) -> usize {
    follow(b, slot(b, reply_table(b), 4))
}

// ---------------------------------------------------------------------------------------------
// FlowTransport framing

#[test]
fn truncated_frames_make_the_stream_decoder_wait() {
    let cap = load_captures()
        .into_iter()
        .find(|c| c.name == "get")
        .unwrap();
    let stream = cap.stream(Dir::ServerToClient);
    let mut frames: Vec<_> = cap
        .frames
        .iter()
        .filter(|f| f.dir == Dir::ServerToClient)
        .collect();
    frames.sort_by_key(|f| f.seq);
    // Ends of the first three frames (connect packet, then two packets).
    let mut ends = Vec::new();
    let mut at = 0;
    for f in &frames[..3] {
        at += f.wire_bytes().len();
        ends.push(at);
    }
    for cut in 0..=ends[2] {
        let mut d = FrameDecoder::new(true, true);
        d.feed(&stream[..cut]);
        let mut got = 0;
        while let Some(_f) = d
            .next_frame()
            .expect("a prefix of real traffic is not an error")
        {
            got += 1;
        }
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        assert_eq!(got, whole, "cut at {cut}");
        let consumed = if whole == 0 { 0 } else { ends[whole - 1] };
        assert_eq!(d.buffered(), cut - consumed, "cut at {cut}");
        // The rest completes the frame that was waiting.
        d.feed(&stream[cut..ends[2]]);
        let mut more = 0;
        while d.next_frame().unwrap().is_some() {
            more += 1;
        }
        assert_eq!(got + more, 3);
        assert_eq!(d.buffered(), 0);
    }
}

#[test]
fn truncated_connect_packets_are_truncated_errors() {
    let (_, f) = captured_frames()
        .into_iter()
        .find(|(_, f)| f.is_connect)
        .unwrap();
    let wire = f.wire_bytes();
    assert_eq!(wire.len(), 44);
    assert!(ConnectPacket::decode(&wire).is_ok());
    for cut in 0..wire.len() {
        assert_eq!(
            ConnectPacket::decode(&wire[..cut]),
            Err(FrameError::Truncated),
            "cut at {cut}"
        );
    }
    // An older layout (length 10: version and port only) is complete at 14 bytes.
    let mut old = wire[..14].to_vec();
    put_u32(&mut old, 0, 10);
    let p = ConnectPacket::decode(&old).unwrap();
    assert_eq!(
        p.protocol_version,
        u64::from_le_bytes(wire[4..12].try_into().unwrap())
    );
    assert_eq!((p.connection_id, p.flags), (0, 0));
    assert_eq!(
        ConnectPacket::decode(&old[..13]),
        Err(FrameError::Truncated)
    );
}

/// A real packet header with its length replaced, followed by some of its real payload.
fn packet_with_length(len: u32, with_checksum: bool) -> Vec<u8> {
    let f = captured_packet();
    let mut b = len.to_le_bytes().to_vec();
    if with_checksum {
        b.extend_from_slice(&f.checksum.unwrap().to_le_bytes());
    }
    b.extend_from_slice(&f.payload);
    b
}

#[test]
fn huge_packet_lengths_are_refused_before_buffering() {
    for with_checksum in [true, false] {
        for len in [u32::MAX, PACKET_LIMIT + 1, 0x8000_0000] {
            let bytes = packet_with_length(len, with_checksum);
            let mut d = FrameDecoder::new(false, with_checksum);
            let (r, _, largest) = measure(|| {
                d.feed(&bytes);
                d.next_frame()
            });
            assert_eq!(
                r,
                Err(FrameError::PacketTooLarge {
                    len,
                    limit: PACKET_LIMIT
                })
            );
            assert!(
                largest < 64 * 1024,
                "allocated {largest} bytes for a refused length"
            );
            // Nothing held, nothing accepted afterwards, the same error again.
            assert_eq!(d.buffered(), 0);
            d.feed(&bytes);
            assert_eq!(d.buffered(), 0);
            assert!(matches!(
                d.next_frame(),
                Err(FrameError::PacketTooLarge { .. })
            ));
        }
    }
    // Only the header is needed to refuse: no waiting for the announced bytes.
    let mut d = FrameDecoder::new(false, true);
    d.feed(&packet_with_length(u32::MAX, true)[..12]);
    assert_eq!(d.buffered(), 12);
    assert!(matches!(
        d.next_frame(),
        Err(FrameError::PacketTooLarge { .. })
    ));
    assert_eq!(d.buffered(), 0);
}

#[test]
fn a_lowered_limit_refuses_a_real_large_packet() {
    let f = captured_frames()
        .into_iter()
        .map(|(_, f)| f)
        .find(|f| !f.is_connect && f.len > 50_000)
        .unwrap();
    let mut d = FrameDecoder::new(false, true).with_limit(1024);
    d.feed(&f.wire_bytes()[..12]);
    assert_eq!(
        d.next_frame(),
        Err(FrameError::PacketTooLarge {
            len: f.len,
            limit: 1024
        })
    );
    assert_eq!(d.buffered(), 0);
    // The limit can be lowered, never raised.
    let mut d = FrameDecoder::new(false, true).with_limit(u32::MAX);
    d.feed(&packet_with_length(PACKET_LIMIT + 1, true));
    assert_eq!(
        d.next_frame(),
        Err(FrameError::PacketTooLarge {
            len: PACKET_LIMIT + 1,
            limit: PACKET_LIMIT
        })
    );
}

#[test]
fn a_length_at_the_limit_waits_without_buffering() {
    let mut d = FrameDecoder::new(false, true);
    let bytes = packet_with_length(PACKET_LIMIT, true);
    d.feed(&bytes);
    assert_eq!(d.next_frame(), Ok(None));
    assert_eq!(d.buffered(), bytes.len());
}

#[test]
fn a_length_at_the_limit_does_not_reserve_the_packet() {
    let bytes = packet_with_length(PACKET_LIMIT, true);
    let mut d = FrameDecoder::new(false, true);
    let (r, _, largest) = measure(|| {
        d.feed(&bytes);
        d.next_frame()
    });
    assert_eq!(r, Ok(None));
    assert!(
        largest < 1 << 20,
        "12 header bytes made the decoder allocate {largest} bytes"
    );
}

#[test]
fn packet_lengths_below_a_token_are_too_small() {
    let f = captured_packet();
    for with_checksum in [true, false] {
        for len in [0u32, 1, 8, 15] {
            let mut d = FrameDecoder::new(false, with_checksum);
            d.feed(&packet_with_length(len, with_checksum));
            assert_eq!(d.next_frame(), Err(FrameError::PacketTooSmall { len }));
            assert_eq!(d.buffered(), 0);
        }
        // 16 bytes is a token and an empty message: valid.
        let mut b = BytesMut::new();
        encode_packet(&mut b, f.token(), &[], with_checksum);
        let mut d = FrameDecoder::new(false, with_checksum);
        d.feed(&b);
        assert_eq!(
            d.next_frame(),
            Ok(Some(Incoming::Packet(Packet {
                token: f.token(),
                message: Bytes::new()
            })))
        );
    }
}

#[test]
fn bad_checksums_are_refused() {
    let f = captured_packet();
    let sent = f.checksum.unwrap();
    let wire = f.wire_bytes();
    // A flipped payload bit.
    for at in [12, 12 + 16, wire.len() - 1] {
        let mut w = wire.clone();
        w[at] ^= 0x10;
        let computed = checksum(&w[12..]);
        let mut d = FrameDecoder::new(false, true);
        d.feed(&w);
        let err = FrameError::ChecksumMismatch {
            expected: sent,
            computed,
        };
        assert_eq!(d.next_frame(), Err(err.clone()), "byte {at}");
        assert_eq!(d.buffered(), 0);
        assert_eq!(d.next_frame(), Err(err), "errors are final");
    }
    // A flipped checksum bit.
    let mut w = wire.clone();
    w[4] ^= 1;
    let mut d = FrameDecoder::new(false, true);
    d.feed(&w);
    assert_eq!(
        d.next_frame(),
        Err(FrameError::ChecksumMismatch {
            expected: sent ^ 1,
            computed: sent
        })
    );
    // Without a checksum (TLS framing) nothing can tell: the checksum's bytes are taken as the
    // token and the packet's last 8 bytes are left for the next header.
    let mut d = FrameDecoder::new(false, false);
    d.feed(&wire);
    match d.next_frame() {
        Ok(Some(Incoming::Packet(p))) => assert_ne!(p.token, f.token()),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.buffered(), 8);
}

#[test]
fn bad_connect_packet_lengths_are_refused() {
    let (_, f) = captured_frames()
        .into_iter()
        .find(|(_, f)| f.is_connect && f.dir == Dir::ClientToServer)
        .unwrap();
    let wire = f.wire_bytes();
    for len in [0u32, 9, 41, 44, 0x100_0028, u32::MAX] {
        let mut w = wire.clone();
        put_u32(&mut w, 0, len);
        assert_eq!(
            ConnectPacket::decode(&w),
            Err(FrameError::BadConnectPacket { len })
        );
        let mut d = FrameDecoder::new(true, true);
        d.feed(&w);
        assert_eq!(d.next_frame(), Err(FrameError::BadConnectPacket { len }));
        assert_eq!(d.buffered(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// ObjectSerializer structure

#[test]
fn root_offset_outside_the_buffer() {
    let m = get_value_reply();
    assert!(dec::<GetValueReply>(&m).is_ok());
    let n = m.len();
    for (root, pos) in [
        (n as u32, n),
        (n as u32 - 2, n - 2),
        (u32::MAX, u32::MAX as usize),
    ] {
        let mut b = m.clone();
        put_u32(&mut b, 0, root);
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::OutOfBounds { pos, len: 4 }),
            "root {root}"
        );
    }
    // Shorter than the header.
    assert_eq!(
        dec::<GetValueReply>(&m[..6]),
        Err(DecodeError::OutOfBounds { pos: 4, len: 4 })
    );
    assert_eq!(
        decode_any(&Bytes::copy_from_slice(&m[..3])),
        Err(DecodeError::OutOfBounds { pos: 4, len: 4 })
    );
}

#[test]
fn table_soffset_pointing_outside() {
    let m = get_value_reply();
    let r = root(&m);
    let n = m.len() as i64;
    // vtable before the message, after it, and wildly off either way.
    for soff in [
        r as i64 + 1,
        r as i64 - n,
        r as i64 - n - 1000,
        i32::MAX as i64,
        i32::MIN as i64,
    ] {
        let mut b = m.clone();
        put_u32(&mut b, r, soff as i32 as u32);
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::BadVtable { pos: r }),
            "soffset {soff}"
        );
    }
}

#[test]
fn malformed_vtable_lengths() {
    let m = get_value_reply();
    let r = root(&m);
    let vt = vtable_of(&m, r);
    assert_eq!(
        &m[vt..vt + 8],
        &[8, 0, 9, 0, 8, 0, 4, 0],
        "the root's vtable"
    );
    // Odd, shorter than its header, running past the message, a 30000-slot claim.
    for vt_len in [7u16, 9, 0, 2, m.len() as u16, 4 + 2 * 30_000] {
        let mut b = m.clone();
        put_u16(&mut b, vt, vt_len);
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::BadVtable { pos: vt }),
            "vtable length {vt_len}"
        );
    }
    // A table length too short for the soffset.
    for table_len in [0u16, 3] {
        let mut b = m.clone();
        put_u16(&mut b, vt + 2, table_len);
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::BadVtable { pos: vt })
        );
    }
    // A table length running past the message.
    let mut b = m.clone();
    put_u16(&mut b, vt + 2, 0xffff);
    assert!(m.len() < r + 0xffff);
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::OutOfBounds {
            pos: r,
            len: 0xffff
        })
    );
}

#[test]
fn a_30000_slot_vtable_that_fits_is_read_like_any_newer_vtable() {
    // FlatBuffers lets newer senders add members: slots past the ones a type knows are
    // ignored. A vtable claiming 30000 slots that really fits in the message is therefore not
    // an error, and must cost nothing (no per-slot work or allocation).
    let m = get_value_reply();
    let want = dec::<GetValueReply>(&m).unwrap();
    let vt = vtable_of(&m, root(&m));
    let mut b = m.clone();
    b.resize(vt + 4 + 2 * 30_000 + 8, 0);
    put_u16(&mut b, vt, 4 + 2 * 30_000);
    let bytes = Bytes::from(b);
    let (r, total, _) = measure(|| decode_reply::<GetValueReply>(&bytes));
    assert_eq!(r, Ok(want));
    assert!(total < 4096, "allocated {total} bytes");
}

#[test]
fn field_offsets_beyond_the_table() {
    let m = get_value_reply();
    let r = root(&m);
    let vt = vtable_of(&m, r);
    let table_len = u16_at(&m, vt + 2);
    for off in [table_len, table_len + 1, 0xffff] {
        // Root slot 0 (the ErrorOr tag).
        let mut b = m.clone();
        put_u16(&mut b, vt + 4, off);
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::BadVtable { pos: vt }),
            "offset {off}"
        );
    }
    // Same inside the reply table: slot 4 (the value's offset).
    let t = reply_table(&m);
    let rvt = vtable_of(&m, t);
    let mut b = m.clone();
    put_u16(&mut b, rvt + 4 + 2 * 4, u16_at(&m, rvt + 2));
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::BadVtable { pos: rvt })
    );
}

#[test]
fn self_referencing_tables() {
    let m = get_value_reply();
    let r = root(&m);
    // The root's soffset 0: the table is its own vtable, whose length (0) is impossible.
    let mut b = m.clone();
    put_u32(&mut b, r, 0);
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::BadVtable { pos: r })
    );
    // The ErrorOr's offset 0: it points at itself, read as a table whose soffset is 0.
    let off = slot(&m, r, 1);
    let mut b = m.clone();
    put_u32(&mut b, off, 0);
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::BadVtable { pos: off })
    );
    // The value string's offset 0: its length is read from the offset (0), an empty string.
    let t = reply_table(&m);
    let voff = slot(&m, t, 4);
    let mut b = m.clone();
    put_u32(&mut b, voff, 0);
    match dec::<GetValueReply>(&b) {
        Ok(ErrorOr::Ok(v)) => assert_eq!(v.value.as_deref(), Some(&b""[..])),
        other => panic!("{other:?}"),
    }
    // Offsets are unsigned and forward, so no chain of them can loop back; one that jumps
    // past the end is caught where it lands.
    let mut b = m.clone();
    put_u32(&mut b, off, (m.len() - off) as u32);
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::OutOfBounds {
            pos: m.len(),
            len: 1
        })
    );
    let mut b = m.clone();
    put_u32(&mut b, off, u32::MAX);
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::OutOfBounds {
            pos: off + u32::MAX as usize,
            len: 1
        })
    );
}

#[test]
fn string_length_too_large() {
    let m = get_value_reply();
    let s = get_value_string(&m);
    assert_eq!(u32_at(&m, s), 100);
    let fits = (m.len() - s - 4) as u32;
    for len in [u32::MAX, 0x8000_0000, fits + 1] {
        let mut b = m.clone();
        put_u32(&mut b, s, len);
        let bytes = Bytes::from(b);
        let (r, total, _) = measure(|| decode_reply::<GetValueReply>(&bytes));
        assert_eq!(r, Err(DecodeError::LengthTooLarge { len }));
        assert!(total < 4096, "allocated {total} bytes");
    }
    // Exactly up to the end of the message is fine.
    let mut b = m.clone();
    put_u32(&mut b, s, fits);
    assert!(dec::<GetValueReply>(&b).is_ok());
}

#[test]
fn vector_count_too_large() {
    let m = captured_reply::<GetKeyServerLocationsReply>(|r| !r.results.is_empty());
    let v = follow(&m, slot(&m, reply_table(&m), 0));
    assert!(u32_at(&m, v) >= 1);
    let fits = ((m.len() - v - 4) / 4) as u32;
    for count in [u32::MAX, 0x4000_0000, fits + 1] {
        let mut b = m.clone();
        put_u32(&mut b, v, count);
        let bytes = Bytes::from(b);
        let (r, total, _) = measure(|| decode_reply::<GetKeyServerLocationsReply>(&bytes));
        assert_eq!(r, Err(DecodeError::LengthTooLarge { len: count }));
        assert!(total < 4096, "allocated {total} bytes");
    }
}

#[test]
fn unknown_file_identifiers() {
    let m = get_value_reply();
    let mut b = m.clone();
    put_u32(&mut b, 4, 0xdead_beef);
    assert_eq!(
        decode_any(&Bytes::from(b.clone())),
        Err(DecodeError::FileIdentifier {
            expected: 0,
            found: 0xdead_beef
        })
    );
    assert_eq!(
        dec::<GetValueReply>(&b),
        Err(DecodeError::FileIdentifier {
            expected: fid::reply(GetValueReply::FILE_IDENTIFIER),
            found: 0xdead_beef
        })
    );
    // The bare (unwrapped) identifier is not the reply's.
    put_u32(&mut b, 4, GetValueReply::FILE_IDENTIFIER);
    assert!(matches!(
        decode_any(&Bytes::from(b.clone())),
        Err(DecodeError::FileIdentifier { expected: 0, .. })
    ));
    // A real reply of another type.
    assert_eq!(
        dec::<GetKeyReply>(&m),
        Err(DecodeError::FileIdentifier {
            expected: fid::reply(GetKeyReply::FILE_IDENTIFIER),
            found: fid::reply(GetValueReply::FILE_IDENTIFIER)
        })
    );
}

#[test]
fn union_tags_out_of_range() {
    let m = get_value_reply();
    let tag = slot(&m, root(&m), 0);
    assert_eq!(m[tag], 2, "ErrorOr holds a value");
    for t in [3u8, 4, 0x80, 0xff] {
        let mut b = m.clone();
        b[tag] = t;
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::BadUnionTag { tag: t })
        );
    }
    // An Optional (GetValueReply::value, slot 3 of the reply) has one alternative.
    let vtag = slot(&m, reply_table(&m), 3);
    assert_eq!(m[vtag], 1);
    for t in [2u8, 0xff] {
        let mut b = m.clone();
        b[vtag] = t;
        assert_eq!(
            dec::<GetValueReply>(&b),
            Err(DecodeError::BadUnionTag { tag: t })
        );
    }
    let mut b = m.clone();
    b[vtag] = 0;
    match dec::<GetValueReply>(&b) {
        Ok(ErrorOr::Ok(v)) => assert_eq!(v.value, None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_empty_error_or_is_an_error() {
    let m = get_value_reply();
    let tag = slot(&m, root(&m), 0);
    let mut b = m.clone();
    b[tag] = 0;
    assert_eq!(dec::<GetValueReply>(&b), Err(DecodeError::EmptyUnion));
    assert_eq!(
        decode_any(&Bytes::from(b.clone())),
        Err(DecodeError::EmptyUnion)
    );
    assert_eq!(
        decode_root::<ErrorOr<GetValueReply>>(&Bytes::from(b)),
        Err(DecodeError::EmptyUnion)
    );
}

#[test]
fn key_value_blob_with_hostile_counts() {
    let m = captured_reply::<GetKeyValuesReply>(|r| r.data.0.len() == 90);
    // Slots: penalty, error tag, error, data, version, more, cached.
    let s = follow(&m, slot(&m, reply_table(&m), 3));
    let blob = s + 4;
    let blob_len = u32_at(&m, s) as usize;
    assert_eq!(u32_at(&m, blob), 90, "row count");
    let bad = DecodeError::InvalidValue("key-value string");
    let first_klen = blob + 4;
    let klen = u32_at(&m, first_klen);
    let cases: Vec<(&str, usize, u32, DecodeError)> = vec![
        (
            "count 2^32-1",
            blob,
            u32::MAX,
            DecodeError::LengthTooLarge { len: u32::MAX },
        ),
        (
            "count just over len/8",
            blob,
            (blob_len / 8 + 1) as u32,
            DecodeError::LengthTooLarge {
                len: (blob_len / 8 + 1) as u32,
            },
        ),
        ("one row too many", blob, 91, bad.clone()),
        ("one row too few (trailing bytes)", blob, 89, bad.clone()),
        ("key length 2^32-1", first_klen, u32::MAX, bad.clone()),
        (
            "key length past the blob",
            first_klen,
            blob_len as u32,
            bad.clone(),
        ),
        ("key length one more", first_klen, klen + 1, bad.clone()),
    ];
    for (what, at, v, want) in cases {
        let mut b = m.clone();
        put_u32(&mut b, at, v);
        let bytes = Bytes::from(b);
        let (r, total, largest) = measure(|| decode_reply::<GetKeyValuesReply>(&bytes));
        assert_eq!(r, Err(want), "{what}");
        // At most one 64-byte `KeyValue` per 8 bytes of blob.
        assert!(
            largest <= 64 * (blob_len / 8),
            "{what}: allocated {largest}"
        );
        assert!(total < 64 * 1024, "{what}: allocated {total} in total");
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding cost out of proportion to the message

#[test]
fn a_vector_count_reserves_in_proportion_to_the_message() {
    let m = captured_reply::<GetKeyServerLocationsReply>(|r| !r.results.is_empty());
    let v = follow(&m, slot(&m, reply_table(&m), 0));
    // 1 MiB of zero offsets behind the count: every element points at itself, so the first one
    // already fails, but only after the whole vector was reserved.
    let mut b = m.clone();
    b.resize(m.len() + (1 << 20), 0);
    let count = ((b.len() - v - 4) / 4) as u32;
    put_u32(&mut b, v, count);
    // Element 0 must be the zero offset at v + 4; move the original elements out of the way.
    b[v + 4..v + 4 + 4 * (count as usize).min(64)].fill(0);
    let bytes = Bytes::from(b);
    let len = bytes.len();
    let (r, _, largest) = measure(|| decode_reply::<GetKeyServerLocationsReply>(&bytes));
    assert!(r.is_err());
    assert!(
        largest <= 4 * len,
        "a {len}-byte message made the decoder reserve {largest} bytes"
    );
}

/// Offsets may share subtables (FlatBuffers allows it), but a reader that decodes each
/// reference again turns `4(n + m)` bytes into `n * m` objects. The decode budget (one unit
/// per table, string and element, `message length` units in all) refuses that.
#[test]
fn aliased_nested_vectors_are_too_complex() {
    // One VersionHistory with m mutations; n history entries all pointing at it, and the m
    // mutation entries all pointing at one MutationRef. 4(n + m) bytes of offsets decode into
    // n * m MutationRefs.
    let (n, m) = (1000usize, 1000usize);
    let mutation = MutationRef::new(0, &b"k"[..], &b"v"[..]);
    let big = VersionHistory {
        mutations: vec![mutation; m],
        version: 1,
    };
    let small = VersionHistory {
        mutations: Vec::new(),
        version: 1,
    };
    let mut histories = vec![big];
    histories.extend(std::iter::repeat_n(small, n - 1));
    let info = ClientDBInfo {
        history: histories,
        ..Default::default()
    };
    let mut b = encode_reply(&ErrorOr::Ok(info));
    // Point every history entry at entry 0's table (tables sit after the vectors pointing at
    // them, so every offset stays forward).
    let h = follow(&b, slot(&b, reply_table(&b), 5));
    assert_eq!(u32_at(&b, h), n as u32);
    let target = follow(&b, h + 4);
    for i in 0..n {
        let p = h + 4 + 4 * i;
        put_u32(&mut b, p, (target - p) as u32);
    }
    // And every mutation entry at mutation 0 (they are identical; this only shows the reader
    // does not care).
    let mv = follow(&b, slot(&b, target, 0));
    assert_eq!(u32_at(&b, mv), m as u32);
    let mt = follow(&b, mv + 4);
    for i in 0..m {
        let p = mv + 4 + 4 * i;
        put_u32(&mut b, p, (mt - p) as u32);
    }
    let bytes = Bytes::from(b);
    let len = bytes.len();
    let (r, total, _) = measure(|| decode_reply::<ClientDBInfo>(&bytes));
    assert_eq!(r.map(|_| ()), Err(DecodeError::TooComplex));
    assert!(
        total <= 256 * len,
        "a {len}-byte message made the decoder allocate {total} bytes"
    );
}

/// A coordinator's leader info names the cluster controller for status reads: short, cut or
/// corrupted info is a typed error, never a panic.
#[test]
fn hostile_leader_info_is_a_typed_error() {
    use fdb_protocol::messages::coordination::ClusterControllerClientInterface as Cc;
    use fdb_protocol::messages::AnyMessage;
    for short in [&[][..], &[0u8; 7][..]] {
        assert_eq!(
            Cc::from_serialized_info(&Bytes::copy_from_slice(short)),
            Err(DecodeError::InvalidValue("serialized leader info"))
        );
    }
    let info = captured_frames()
        .into_iter()
        .find_map(|(_, f)| match decode_any(&f.message()) {
            Ok(AnyMessage::Leader(ErrorOr::Ok(l))) => l.0.map(|l| l.serialized_info),
            _ => None,
        })
        .expect("the status_json capture holds leader info");
    assert!(Cc::from_serialized_info(&info).is_ok());
    for cut in 0..info.len() {
        assert!(
            Cc::from_serialized_info(&info.slice(..cut)).is_err(),
            "a cut at {cut} of {} decoded",
            info.len()
        );
    }
    for i in 8..info.len() {
        let mut bad = info.to_vec();
        bad[i] ^= 0xff;
        let _ = Cc::from_serialized_info(&Bytes::from(bad));
    }
}

// ---------------------------------------------------------------------------------------------
// The error of any reply (`reply_error`, read before the reply's own type is known)

#[test]
fn reply_error_reads_only_the_error_alternative_and_refuses_the_rest() {
    use fdb_protocol::error::ErrorCode;
    use fdb_protocol::messages::reply_error;
    // The captured replies are values, except the rejected commit and the tenant lookup after
    // the tenant was deleted. (`too_old`'s storage server puts its error inside the reply,
    // which is a value to the transport.)
    let mut values = 0;
    let mut errors = Vec::new();
    for cap in load_captures() {
        for f in cap.packets(Dir::ServerToClient) {
            match reply_error(&f.message()) {
                None => values += 1,
                Some(e) => errors.push((cap.name.clone(), e)),
            }
        }
    }
    assert!(values > 50);
    errors.sort_by_key(|(name, e)| (name.clone(), e.0));
    assert_eq!(
        errors,
        vec![
            ("conflict".to_string(), ErrorCode::NOT_COMMITTED),
            ("tenant_manage".to_string(), ErrorCode::TENANT_NOT_FOUND)
        ]
    );
    // An error of any reply type is found, whatever the type's identifier.
    let e = encode_reply::<GetValueReply>(&ErrorOr::Err(ErrorCode::BROKEN_PROMISE));
    assert_eq!(
        reply_error(&Bytes::from(e.clone())),
        Some(ErrorCode::BROKEN_PROMISE)
    );
    let e2 = encode_reply::<ClientDBInfo>(&ErrorOr::Err(ErrorCode::NOT_COMMITTED));
    assert_eq!(
        reply_error(&Bytes::from(e2)),
        Some(ErrorCode::NOT_COMMITTED)
    );
    // Every truncation and every single-byte corruption of an error reply: an answer or
    // `None`, never a panic.
    for n in 0..e.len() {
        let _ = reply_error(&Bytes::copy_from_slice(&e[..n]));
    }
    for i in 0..e.len() {
        for b in [0u8, 1, 2, 0x7f, 0xff] {
            let mut m = e.clone();
            m[i] = b;
            let _ = reply_error(&Bytes::from(m));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tuple layer (keys and values an application reads back may be anyone's bytes)

mod tuple {
    use super::measure;
    use fdb_protocol::tuple::{
        pack, unpack, BigInt, Element, PackError, Subspace, Uuid, Versionstamp, MAX_DEPTH,
    };

    fn elements(b: &[u8]) -> Result<Vec<Element<'_>>, PackError> {
        unpack::<Vec<Element>>(b)
    }

    /// Runs `f` on a thread with a small stack: a decoder that recursed per input byte would
    /// overflow it (and abort the process) long before the inputs below end.
    fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::Builder::new()
            .stack_size(512 << 10)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    fn nested(levels: usize) -> Vec<u8> {
        let mut b = vec![0x05; levels];
        b.extend(std::iter::repeat_n(0x00, levels));
        b
    }

    #[test]
    fn deep_nesting_is_refused_without_exhausting_the_stack() {
        on_small_stack(|| {
            // Nothing but 0x05, the size of a big value: refused at the limit, not at the end.
            let hostile = vec![0x05u8; 100_000];
            let (r, total, _) = measure(|| elements(&hostile).map(|_| ()));
            assert_eq!(r, Err(PackError::TooDeep));
            assert!(total < 64 * MAX_DEPTH * 8, "{total} bytes allocated");
            // Well-formed nesting: up to MAX_DEPTH decodes (and drops), one more does not.
            let ok = nested(MAX_DEPTH);
            let t = elements(&ok).unwrap();
            assert_eq!(pack(&t), ok);
            assert_eq!(elements(&nested(MAX_DEPTH + 1)), Err(PackError::TooDeep));
            // The typed decoders share the limit.
            assert_eq!(
                unpack::<Vec<Vec<Element>>>(&hostile).map(|_| ()),
                Err(PackError::TooDeep)
            );
            assert_eq!(
                unpack::<Element>(&hostile).map(|_| ()),
                Err(PackError::TooDeep)
            );
        });
    }

    #[test]
    fn truncated_elements() {
        let packed = pack(&(
            b"by\x00tes".to_vec(),
            "str\u{e9}",
            (Element::Nil, 5i64),
            -1_000_000i64,
            BigInt::from(1i128 << 100),
            BigInt::from(-(1i128 << 100)),
            1.5f32,
            -2.5f64,
            Uuid::from_u128(7),
            Versionstamp::complete([3; 10], 9),
            true,
        ));
        let items: Vec<Element> = unpack(&packed).unwrap();
        let whole = pack(&items);
        let boundaries: Vec<usize> = (0..=items.len()).map(|i| pack(&items[..i]).len()).collect();
        let mut truncated = 0;
        for cut in 0..=whole.len() {
            match elements(&whole[..cut]) {
                // A cut between elements, or right after a 0x00 that an escape or a nested
                // null would have followed (a shorter string, an emptier nested tuple).
                Ok(t) => {
                    assert!(
                        boundaries.contains(&cut) || whole[cut - 1] == 0,
                        "cut at {cut}"
                    );
                    assert_eq!(pack(&t), &whole[..cut]);
                }
                Err(e) => {
                    assert!(!boundaries.contains(&cut), "cut at boundary {cut}: {e:?}");
                    assert_eq!(e, PackError::Truncated, "cut at {cut}");
                    truncated += 1;
                }
            }
        }
        assert!(
            truncated > whole.len() * 3 / 4,
            "{truncated} of {}",
            whole.len()
        );
        // An unterminated byte string costs no allocation however long it is.
        let mut open = vec![0x01];
        open.extend(std::iter::repeat_n(b'x', 100_000));
        let (r, total, _) = measure(|| elements(&open).map(|_| ()));
        assert_eq!(r, Err(PackError::Truncated));
        assert!(total < 1024, "{total} bytes allocated");
        // A nested tuple whose end never comes.
        assert_eq!(elements(b"\x05\x15\x01"), Err(PackError::Truncated));
        assert_eq!(elements(b"\x05\x00\xff"), Err(PackError::Truncated));
    }

    #[test]
    fn unknown_type_codes() {
        // Deprecated (0x03, 0x04 nested, 0x25 true), reserved (0x0a, 0x1e arbitrary-precision,
        // 0x22 long double, 0x23/0x24 decimal, 0x31 id, 0x32 80-bit stamp), user types
        // (0x40..0x4f, which FDB's own C++ tuple decodes only on request) and the escape.
        for code in [
            0x03u8, 0x04, 0x06, 0x0a, 0x1e, 0x1f, 0x22, 0x23, 0x24, 0x25, 0x28, 0x31, 0x32, 0x34,
            0x40, 0x4f, 0x80, 0xfe, 0xff,
        ] {
            assert_eq!(
                elements(&[code, 0, 0]),
                Err(PackError::UnknownTypeCode(code))
            );
            // Also after valid elements and inside a nested tuple.
            assert_eq!(
                elements(&[0x15, 0x01, 0x05, 0x14, code, 0x00]),
                Err(PackError::UnknownTypeCode(code))
            );
        }
        // A bare 0xff after a root-level null (the escape is only for nested nulls).
        assert_eq!(elements(b"\x00\xff"), Err(PackError::UnknownTypeCode(0xff)));
        // A nested end where a nested null was expected by a typed decoder.
        assert_eq!(
            unpack::<((Option<i64>, i64),)>(b"\x05\x00\x15\x01\x00"),
            Err(PackError::UnexpectedType {
                expected: "null",
                found: 0x00
            })
        );
        assert_eq!(elements(b"\x02\xc3\x28\x00"), Err(PackError::BadUtf8));
        assert_eq!(
            unpack::<bool>(b"\x25"),
            Err(PackError::UnexpectedType {
                expected: "boolean",
                found: 0x25
            })
        );
    }

    #[test]
    fn overlong_bigint_lengths() {
        // The length byte promises 255 bytes, three follow: truncated, nothing reserved.
        for hostile in [
            &b"\x1d\xff\x01\x02\x03"[..],
            b"\x0b\x00\x01\x02\x03",
            b"\x1d",
            b"\x0b",
        ] {
            let (r, total, _) = measure(|| elements(hostile).map(|_| ()));
            assert_eq!(r, Err(PackError::Truncated), "{hostile:x?}");
            assert!(total < 1024, "{total} bytes allocated");
            assert_eq!(unpack::<i64>(hostile), Err(PackError::Truncated));
        }
        // Short forms with missing bytes.
        for hostile in [
            &b"\x1c\x01"[..],
            b"\x0c\xff\xff",
            b"\x15",
            b"\x20\x00",
            b"\x21",
            b"\x30\x01",
            b"\x33",
        ] {
            assert_eq!(elements(hostile), Err(PackError::Truncated), "{hostile:x?}");
        }
        // 255 bytes of magnitude is too much for every native integer, not for BigInt.
        let mut big = vec![0x1d, 0xff];
        big.extend([0x7f; 255]);
        assert_eq!(unpack::<i64>(&big), Err(PackError::IntOutOfRange));
        assert_eq!(unpack::<u128>(&big), Err(PackError::IntOutOfRange));
        assert_eq!(unpack::<BigInt>(&big).unwrap().magnitude().len(), 255);
        // The long form with leading zeros is the small number it holds.
        let mut zeros = vec![0x1d, 0xff];
        zeros.extend([0; 254]);
        zeros.push(9);
        assert_eq!(unpack::<i64>(&zeros), Ok(9));
        assert_eq!(elements(&zeros).unwrap(), vec![Element::Int(9)]);
    }

    #[test]
    fn memory_stays_proportional_to_the_input() {
        // The densest tuples: one byte per element (ints, nulls, bools), and escaped nulls.
        for hostile in [
            vec![0x14u8; 100_000],
            vec![0x00; 100_000],
            vec![0x27; 100_000],
        ] {
            let len = hostile.len();
            let (r, total, max) = measure(|| elements(&hostile).map(|t| t.len()));
            assert_eq!(r, Ok(len));
            let per_element = std::mem::size_of::<Element>();
            assert!(
                max <= 2 * per_element * len,
                "largest allocation {max} for {len} bytes"
            );
            assert!(
                total <= 4 * per_element * len,
                "{total} bytes for {len} bytes"
            );
        }
        let mut escaped = vec![0x01];
        for _ in 0..50_000 {
            escaped.extend([0x00, 0xff]);
        }
        escaped.push(0x00);
        let (r, total, _) = measure(|| elements(&escaped).map(|t| t.len()));
        assert_eq!(r, Ok(1));
        assert!(
            total <= 4 * escaped.len(),
            "{total} bytes for {} bytes",
            escaped.len()
        );
    }

    #[test]
    fn keys_outside_a_subspace() {
        let s = Subspace::from("app");
        assert_eq!(
            s.unpack::<Vec<Element>>(b"\x02ap"),
            Err(PackError::NotInSubspace)
        );
        assert_eq!(s.unpack::<Vec<Element>>(b""), Err(PackError::NotInSubspace));
        // In the subspace, but what follows the prefix is no tuple.
        assert_eq!(
            s.unpack::<Vec<Element>>(b"\x02app\x00\x05"),
            Err(PackError::Truncated)
        );
        assert_eq!(s.unpack::<Vec<Element>>(b"\x02app\x00"), Ok(vec![]));
    }
}

/// A tenant map value read from `\xff/tenant/map/` (a server or another client may have written
/// anything there): too short for its version prefix is refused with the exact error, and any
/// truncation or flipped byte of a real value decodes to something self-consistent or fails,
/// never panics.
#[test]
fn tenant_map_values_that_lie() {
    use fdb_protocol::messages::commit::TenantMapEntry;
    let entry = TenantMapEntry {
        id: 7,
        tenant_name: Bytes::from_static(b"tenant"),
        lock_state: 0,
        lock_id: None,
        tenant_group: Some(Bytes::from_static(b"group")),
        configuration_sequence_num: 3,
    };
    let value = entry.encode_value();
    assert_eq!(TenantMapEntry::decode_value(&value), Ok(entry));
    assert_eq!(
        TenantMapEntry::decode_value(&value[..7]),
        Err(DecodeError::OutOfBounds { pos: 0, len: 8 })
    );
    assert!(
        TenantMapEntry::decode_value(&value[..8]).is_err(),
        "no body"
    );
    let consistent = |v: &[u8]| {
        if let Ok(e) = TenantMapEntry::decode_value(v) {
            assert_eq!(TenantMapEntry::decode_value(&e.encode_value()), Ok(e));
        }
    };
    for cut in 8..value.len() {
        consistent(&value[..cut]);
    }
    for i in 8..value.len() {
        for bit in 0..8 {
            let mut v = value.clone();
            v[i] ^= 1 << bit;
            consistent(&v);
        }
    }
}

/// The typed tenant view over hostile map values: a negative id and an unknown lock state are
/// typed errors (FDB would give the first no prefix and hit `UNREACHABLE` rendering the
/// second); every flipped bit of a real value gives an entry, a typed error, or a decode
/// error, and an entry that passes renders JSON and round-trips.
#[test]
fn tenant_entries_that_lie() {
    use fdb_protocol::messages::commit::TenantMapEntry;
    use fdb_protocol::tenant_map::{TenantEntry, TenantEntryError};
    let good = TenantEntry::new(9, Bytes::from_static(b"t\x00\xff"));
    let mut m = good.to_map_entry();
    m.lock_state = 3;
    assert_eq!(
        TenantEntry::from_map_value(&m.encode_value()),
        Err(TenantEntryError::LockState(3))
    );
    let mut m = good.to_map_entry();
    m.id = i64::MIN;
    assert_eq!(
        TenantEntry::from_map_value(&m.encode_value()),
        Err(TenantEntryError::NegativeId(i64::MIN))
    );
    assert_eq!(
        TenantEntry::from_map_value(b"short"),
        Err(TenantEntryError::Decode(DecodeError::OutOfBounds {
            pos: 0,
            len: 8
        }))
    );
    let value = good.to_map_value();
    for i in 0..value.len() {
        for bit in 0..8 {
            let mut v = value.clone();
            v[i] ^= 1 << bit;
            match TenantEntry::from_map_value(&v) {
                Ok(e) => {
                    assert!(e.to_json().starts_with("{\"id\":"));
                    assert_eq!(TenantEntry::from_map_value(&e.to_map_value()), Ok(e));
                }
                Err(TenantEntryError::Decode(_)) => {
                    assert!(TenantMapEntry::decode_value(&v).is_err())
                }
                Err(_) => assert!(TenantMapEntry::decode_value(&v).is_ok()),
            }
        }
    }
}
