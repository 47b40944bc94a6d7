//! FlowTransport framing (`fdbrpc/FlowTransport.actor.cpp`).
//!
//! A connection starts with one [`ConnectPacket`] from each side (the client's first). After
//! that every packet is `u32 len | u64 checksum | len bytes`, where the payload is the 16-byte
//! destination token followed by an ObjectSerializer message. The checksum is XXH3-64 of the
//! payload and exists only on plain TCP: FDB leaves it out on TLS connections, where the TLS
//! record MAC already protects the bytes (`checksumEnabled = !isTLS()`).

use bytes::{BufMut, Bytes, BytesMut};
use core::fmt;
use nom::number::complete::{le_u16, le_u32, le_u64};

use crate::uid::Uid;

/// A FoundationDB protocol version as it travels in the ConnectPacket.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ProtocolVersion(pub u64);

impl ProtocolVersion {
    /// FDB 7.3 (`FDB_PV_DEFAULT_VERSION` in `flow/ProtocolVersions.cmake`).
    pub const V7_3: ProtocolVersion = ProtocolVersion(0x0FDB_00B0_7300_0000);
    /// FDB 7.4 (`FDB_PV_DEFAULT_VERSION` at 7.4.6).
    pub const V7_4: ProtocolVersion = ProtocolVersion(0x0FDB_00B0_7400_0000);
    /// Set by peers that speak the ObjectSerializer, which all 7.x peers must.
    pub const OBJECT_SERIALIZER_FLAG: u64 = 0x1000_0000_0000_0000;
    /// Bits that must match for two versions to talk (the low 16 bits are free).
    pub const COMPATIBLE_MASK: u64 = 0xFFFF_FFFF_FFFF_0000;
    const VERSION_MASK: u64 = 0x0FFF_FFFF_FFFF_FFFF;

    /// The version without flag bits.
    pub const fn version(self) -> u64 {
        self.0 & Self::VERSION_MASK
    }
    /// Whether the version carries the object-serializer flag (every 7.x peer sets it).
    pub const fn has_object_serializer_flag(self) -> bool {
        self.0 & Self::OBJECT_SERIALIZER_FLAG != 0
    }
    /// The version with the object-serializer flag set.
    pub const fn with_object_serializer_flag(self) -> Self {
        ProtocolVersion(self.0 | Self::OBJECT_SERIALIZER_FLAG)
    }
    /// FDB's `isCompatible`: equal once the low 16 bits are masked away.
    pub const fn is_compatible(self, other: ProtocolVersion) -> bool {
        self.version() & Self::COMPATIBLE_MASK == other.version() & Self::COMPATIBLE_MASK
    }
    /// What a peer needs to accept us: the object-serializer flag and a compatible version.
    pub const fn accepts(self, peer: ProtocolVersion) -> bool {
        peer.has_object_serializer_flag() && self.is_compatible(peer)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.version())
    }
}

/// Bytes a connect packet occupies after its own length field, as FDB 7.3 sends it.
pub const CONNECT_PACKET_BODY_LEN: u32 = 40;
/// The oldest connect packet layout (length, version, port); anything shorter is not one.
const CONNECT_PACKET_V0_SIZE: usize = 14;
/// Bytes before each packet's payload: length, then the checksum unless on TLS.
pub const PACKET_LEN_WIDTH: usize = 4;
/// Bytes of the XXH3-64 checksum after a packet's length (absent on TLS connections).
pub const CHECKSUM_WIDTH: usize = 8;
/// Packets at least this large get a buffer of their own (see `FrameDecoder::feed`); smaller
/// ones share one, as many small replies arrive in one read.
const SPILL_AFTER: usize = 16 * 1024;

/// How many buffers of large packets a decoder keeps for reuse (a 10,000-row range read
/// arrives in about 17 replies of 80 KB).
const SPARES: usize = 24;

/// The largest packet whose buffer is kept (storage replies are at most ~80 KB of rows), so
/// a connection keeps at most `SPARES` × this.
const SPARE_MAX: usize = 256 * 1024;

/// `FLOW_KNOBS->PACKET_LIMIT` (`flow/Knobs.cpp`): FDB drops the connection above this.
pub const PACKET_LIMIT: u32 = 100 << 20;
/// The smallest packet: it must at least hold a destination token.
pub const MIN_PACKET_LEN: u32 = 16;

/// The first thing each side of a connection sends (`struct ConnectPacket`, packed).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ConnectPacket {
    /// The sender's protocol version, with the object-serializer flag.
    pub protocol_version: u64,
    /// The port to reach the sender at; 0 for clients, which do not listen.
    pub canonical_remote_port: u16,
    /// Shared by the connections of one multi-version client; 0 otherwise.
    pub connection_id: u64,
    /// The sender's IPv4 address, when it is not IPv6.
    pub canonical_remote_ip4: u32,
    /// Bit 0 set means the address is `canonical_remote_ip6`.
    pub flags: u16,
    /// The sender's IPv6 address, when [`ConnectPacket::FLAG_IPV6`] is set.
    pub canonical_remote_ip6: [u8; 16],
}

impl ConnectPacket {
    /// The sender's address is IPv6.
    pub const FLAG_IPV6: u16 = 1;

    /// What a client sends: no listening address, current protocol.
    pub fn client(version: ProtocolVersion) -> Self {
        ConnectPacket {
            protocol_version: version.with_object_serializer_flag().0,
            ..Default::default()
        }
    }

    /// The protocol version the packet announces.
    pub fn protocol_version(&self) -> ProtocolVersion {
        ProtocolVersion(self.protocol_version)
    }

    /// Appends the 44 wire bytes.
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.reserve(4 + CONNECT_PACKET_BODY_LEN as usize);
        dst.put_u32_le(CONNECT_PACKET_BODY_LEN);
        dst.put_u64_le(self.protocol_version);
        dst.put_u16_le(self.canonical_remote_port);
        dst.put_u64_le(self.connection_id);
        dst.put_u32_le(self.canonical_remote_ip4);
        dst.put_u16_le(self.flags);
        dst.put_slice(&self.canonical_remote_ip6);
    }

    /// Parses a complete connect packet (length field included). Older, shorter layouts leave
    /// the missing fields at zero, as FDB does for peers without them.
    pub fn decode(buf: &[u8]) -> Result<ConnectPacket, FrameError> {
        if buf.len() < CONNECT_PACKET_V0_SIZE {
            return Err(FrameError::Truncated);
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if !(10..=CONNECT_PACKET_BODY_LEN).contains(&len) {
            return Err(FrameError::BadConnectPacket { len });
        }
        let body = buf.get(4..4 + len as usize).ok_or(FrameError::Truncated)?;
        let mut full = [0u8; CONNECT_PACKET_BODY_LEN as usize];
        full[..body.len()].copy_from_slice(body);
        let (_, pkt) =
            parse_connect_body(&full).map_err(|_| FrameError::BadConnectPacket { len })?;
        Ok(pkt)
    }
}

fn parse_connect_body(i: &[u8]) -> nom::IResult<&[u8], ConnectPacket> {
    let (i, protocol_version) = le_u64(i)?;
    let (i, canonical_remote_port) = le_u16(i)?;
    let (i, connection_id) = le_u64(i)?;
    let (i, canonical_remote_ip4) = le_u32(i)?;
    let (i, flags) = le_u16(i)?;
    let (i, ip6) = nom::bytes::complete::take(16usize)(i)?;
    let mut canonical_remote_ip6 = [0u8; 16];
    canonical_remote_ip6.copy_from_slice(ip6);
    Ok((
        i,
        ConnectPacket {
            protocol_version,
            canonical_remote_port,
            connection_id,
            canonical_remote_ip4,
            flags,
            canonical_remote_ip6,
        },
    ))
}

/// Why a byte stream could not be framed. Each of these ends the connection, as in FDB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Not enough bytes (only from the one-shot decoders; the stream decoder waits).
    Truncated,
    /// A connect packet with an impossible length.
    BadConnectPacket {
        /// The length the packet announced.
        len: u32,
    },
    /// A packet longer than the limit (FDB: `PacketLimitExceeded`).
    PacketTooLarge {
        /// The length the packet announced.
        len: u32,
        /// The most this decoder accepts.
        limit: u32,
    },
    /// A packet too short to hold a token (FDB: `PacketTooSmall`).
    PacketTooSmall {
        /// The length the packet announced.
        len: u32,
    },
    /// The payload does not hash to the checksum sent with it (FDB: `checksum_failed`).
    ChecksumMismatch {
        /// The checksum the packet carried.
        expected: u64,
        /// The checksum of what arrived.
        computed: u64,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated => write!(f, "truncated frame"),
            FrameError::BadConnectPacket { len } => write!(f, "bad connect packet length {len}"),
            FrameError::PacketTooLarge { len, limit } => {
                write!(f, "packet of {len} bytes exceeds the limit of {limit}")
            }
            FrameError::PacketTooSmall { len } => write!(f, "packet of {len} bytes has no token"),
            FrameError::ChecksumMismatch { expected, computed } => {
                write!(
                    f,
                    "checksum mismatch: sent {expected:016x}, computed {computed:016x}"
                )
            }
        }
    }
}

/// One packet: where it goes and the ObjectSerializer message it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The endpoint the packet is for.
    pub token: Uid,
    /// The serialized message.
    pub message: Bytes,
}

/// What the stream decoder yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// The peer's connect packet (first on every connection).
    Connect(ConnectPacket),
    /// A packet for an endpoint.
    Packet(Packet),
}

/// XXH3-64 with seed 0, the packet checksum.
pub fn checksum(payload: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(payload)
}

/// Appends one packet: length, checksum (unless TLS), token, message.
pub fn encode_packet(dst: &mut BytesMut, token: Uid, message: &[u8], with_checksum: bool) {
    let len = 16 + message.len();
    dst.reserve(PACKET_LEN_WIDTH + CHECKSUM_WIDTH + len);
    dst.put_u32_le(len as u32);
    let sum_at = dst.len();
    if with_checksum {
        dst.put_u64_le(0);
    }
    let payload_at = dst.len();
    dst.put_slice(&token.to_bytes());
    dst.put_slice(message);
    if with_checksum {
        let sum = checksum(&dst[payload_at..]);
        dst[sum_at..sum_at + 8].copy_from_slice(&sum.to_le_bytes());
    }
}

/// Incremental decoder for one direction of a connection.
///
/// Feed it bytes in chunks of any size (one at a time works); take whole frames out. It holds
/// at most one partial packet, and refuses a packet's length before buffering it, so a
/// hostile length costs nothing.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    /// Bytes after a large packet that `buf` holds whole (see `feed`); they move to `buf`
    /// once that packet is taken.
    spill: BytesMut,
    /// Handles on the buffers of recent large packets (see `keep_spare`), at most `SPARES`.
    spares: heapless::Vec<BytesMut, SPARES>,
    expect_connect: bool,
    with_checksum: bool,
    limit: u32,
    failed: Option<FrameError>,
}

impl FrameDecoder {
    /// `expect_connect`: the stream starts with a ConnectPacket. `with_checksum`: plain TCP.
    pub fn new(expect_connect: bool, with_checksum: bool) -> Self {
        FrameDecoder {
            buf: BytesMut::new(),
            spill: BytesMut::new(),
            spares: heapless::Vec::new(),
            expect_connect,
            with_checksum,
            limit: PACKET_LIMIT,
            failed: None,
        }
    }

    /// Lowers the largest packet accepted (never above FDB's own limit).
    pub fn with_limit(mut self, limit: u32) -> Self {
        self.limit = limit.min(PACKET_LIMIT);
        self
    }

    /// Adds received bytes.
    ///
    /// Frames are handed out as slices of the buffer they arrived in (their rows and values
    /// live on in the caller), so a buffer is given up, not reused, once a frame is cut from
    /// it. A buffer that must grow is sized for the packet being received (from its length
    /// field; at most twice what has arrived plus 64 KiB, so a hostile length costs
    /// nothing), and bytes that follow a large packet they complete go to a buffer of their
    /// own: a large reply costs one allocation of its own size, not a doubling series whose
    /// unused tail its rows would keep alive, nor a copy into a buffer shared with the next.
    pub fn feed(&mut self, data: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if !self.spill.is_empty() {
            self.append_to(true, data);
            return;
        }
        match self.large_tail(data) {
            Some(cut) => {
                self.append_to(false, &data[..cut]);
                self.append_to(true, &data[cut..]);
            }
            None => self.append_to(false, data),
        }
    }

    /// Where to cut `data` so that a large packet has a buffer of its own: before one that
    /// starts in `data` after other bytes, or after one that started in `buf` (which holds at
    /// most the start of one packet, at its front) when more bytes follow it.
    fn large_tail(&self, data: &[u8]) -> Option<usize> {
        let (held, end) = (self.buf.len(), self.buf.len() + data.len());
        let mut pos = 0;
        loop {
            let total = self.packet_total_at(&self.buf, data, pos)?;
            if total >= SPILL_AFTER {
                if pos > 0 && pos >= held {
                    return Some(pos - held);
                }
                if pos + total < end && pos + total > held {
                    return Some(pos + total - held);
                }
            }
            if pos + total >= end {
                return None;
            }
            pos += total;
        }
    }

    /// Appends to the buffer (`spill`: the one after it), growing it as `feed` says.
    fn append_to(&mut self, spill: bool, data: &[u8]) {
        let held = if spill { &self.spill } else { &self.buf };
        let need = held.len() + data.len();
        let grown = if need > held.capacity() {
            // The capacity for `need` bytes: the packet's size if known, within bounds.
            let cap = match self.packet_total(held, data) {
                Some(total) => total.min(need + need.max(64 * 1024)).max(need),
                None => need,
            };
            Some(cap)
        } else {
            None
        };
        let b = if spill {
            &mut self.spill
        } else {
            &mut self.buf
        };
        if let Some(cap) = grown {
            if !b.try_reclaim(data.len()) {
                // A large packet's old buffer whose frames are all gone, else a new one.
                let reused = (cap >= SPILL_AFTER)
                    .then(|| self.spares.iter_mut().position(|s| s.try_reclaim(cap)))
                    .flatten()
                    .map(|i| self.spares.swap_remove(i));
                let mut fresh = reused.unwrap_or_else(|| BytesMut::with_capacity(cap));
                let b = if spill {
                    &mut self.spill
                } else {
                    &mut self.buf
                };
                fresh.extend_from_slice(b);
                *b = fresh;
            }
        }
        let b = if spill {
            &mut self.spill
        } else {
            &mut self.buf
        };
        b.extend_from_slice(data);
    }

    /// Keeps the buffer a large packet was just cut from (now empty: the packet was all it
    /// held), to be reused once the caller drops every frame in it. Without this a reader of
    /// many large replies would allocate (and the system allocator map and fault in) a new
    /// buffer for every one.
    fn keep_spare(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() == 0 {
            let b = core::mem::take(&mut self.buf);
            if self.spares.is_full() {
                self.spares.remove(0);
            }
            // Room was just made.
            let _ = self.spares.push(b);
        }
    }

    /// The whole size (header included) of the packet starting `held`, whose length field
    /// is in `held` followed by `more`.
    fn packet_total(&self, held: &[u8], more: &[u8]) -> Option<usize> {
        self.packet_total_at(held, more, 0)
    }

    /// The whole size of the packet at `pos` of `held` followed by `more`; `None` before the
    /// connect packet, when its length field is not all there yet, or when it is one
    /// `next_frame` refuses.
    fn packet_total_at(&self, held: &[u8], more: &[u8], pos: usize) -> Option<usize> {
        if self.expect_connect {
            return None;
        }
        let mut len = [0u8; 4];
        for (i, b) in len.iter_mut().enumerate() {
            let at = pos + i;
            *b = match held.get(at) {
                Some(b) => *b,
                None => *more.get(at - held.len())?,
            };
        }
        let len = u32::from_le_bytes(len);
        if len > self.limit || len < MIN_PACKET_LEN {
            return None;
        }
        let header = PACKET_LEN_WIDTH
            + if self.with_checksum {
                CHECKSUM_WIDTH
            } else {
                0
            };
        Some(header + len as usize)
    }

    /// Bytes held but not yet framed.
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.spill.len()
    }

    /// The next whole frame, `Ok(None)` if more bytes are needed. After an error the stream is
    /// unusable and every later call returns the same error.
    pub fn next_frame(&mut self) -> Result<Option<Incoming>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buf.is_empty() && !self.spill.is_empty() {
            self.buf = core::mem::take(&mut self.spill);
        }
        let r = self.next_inner();
        if let Err(e) = &r {
            self.failed = Some(e.clone());
            self.buf = BytesMut::new();
            self.spill = BytesMut::new();
        }
        r
    }

    fn next_inner(&mut self) -> Result<Option<Incoming>, FrameError> {
        if self.expect_connect {
            if self.buf.len() < CONNECT_PACKET_V0_SIZE {
                return Ok(None);
            }
            let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
            if !(10..=CONNECT_PACKET_BODY_LEN).contains(&len) {
                return Err(FrameError::BadConnectPacket { len });
            }
            let total = 4 + len as usize;
            if self.buf.len() < total {
                return Ok(None);
            }
            let pkt = ConnectPacket::decode(&self.buf[..total])?;
            let _ = self.buf.split_to(total);
            self.expect_connect = false;
            return Ok(Some(Incoming::Connect(pkt)));
        }
        let header = PACKET_LEN_WIDTH
            + if self.with_checksum {
                CHECKSUM_WIDTH
            } else {
                0
            };
        if self.buf.len() < header {
            return Ok(None);
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len > self.limit {
            return Err(FrameError::PacketTooLarge {
                len,
                limit: self.limit,
            });
        }
        if len < MIN_PACKET_LEN {
            return Err(FrameError::PacketTooSmall { len });
        }
        let total = header + len as usize;
        if self.buf.len() < total {
            // `feed` grows the buffer towards the announced length as bytes arrive: a hostile
            // length costs nothing.
            return Ok(None);
        }
        let mut frame = self.buf.split_to(total).freeze();
        if (SPILL_AFTER..=SPARE_MAX).contains(&total) {
            self.keep_spare();
        }
        if self.with_checksum {
            let mut sum = [0u8; 8];
            sum.copy_from_slice(&frame[4..12]);
            let expected = u64::from_le_bytes(sum);
            let computed = checksum(&frame[header..]);
            if expected != computed {
                return Err(FrameError::ChecksumMismatch { expected, computed });
            }
        }
        let payload = frame.split_off(header);
        let token = Uid::from_bytes(&payload[..16]).unwrap_or_default();
        Ok(Some(Incoming::Packet(Packet {
            token,
            message: payload.slice(16..),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn client_connect_packet_bytes() {
        let mut b = BytesMut::new();
        ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut b);
        assert_eq!(b.len(), 44);
        assert_eq!(&b[..12], &[40, 0, 0, 0, 0, 0, 0, 0x73, 0xb0, 0, 0xdb, 0x1f]);
        assert!(b[12..].iter().all(|&x| x == 0));
        let p = ConnectPacket::decode(&b).unwrap();
        assert_eq!(
            p.protocol_version(),
            ProtocolVersion::V7_3.with_object_serializer_flag()
        );
    }

    #[test]
    fn compatibility_rules() {
        let v = ProtocolVersion::V7_3;
        assert!(v.accepts(v.with_object_serializer_flag()));
        assert!(!v.accepts(v)); // no object-serializer flag
        assert!(v.accepts(ProtocolVersion(0x1FDB_00B0_7300_0001))); // low bits free
        assert!(!v.accepts(ProtocolVersion(0x1FDB_00B0_7200_0000))); // 7.2
        assert!(!v.accepts(ProtocolVersion(0x1FDB_00B0_7400_0000))); // 7.4
    }

    #[test]
    fn large_packets_between_small_ones_survive_any_read_size() {
        let big = |n: usize, seed: u8| -> Vec<u8> { (0..n).map(|i| (i as u8) ^ seed).collect() };
        let msgs: Vec<Vec<u8>> = vec![
            b"small".to_vec(),
            big(80_000, 1),
            big(50_000, 2),
            b"x".to_vec(),
            big(20_000, 3),
            Vec::new(),
            big(16 * 1024, 4),
        ];
        let mut b = BytesMut::new();
        for (i, m) in msgs.iter().enumerate() {
            encode_packet(&mut b, Uid::new(i as u64, 0), m, true);
        }
        for read in [1usize, 7, 1000, 16 * 1024, 65_536, 200_000] {
            let mut d = FrameDecoder::new(false, true);
            let mut got = Vec::new();
            for chunk in b.chunks(read) {
                d.feed(chunk);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(d.buffered(), 0, "reads of {read}");
            assert_eq!(got.len(), msgs.len(), "reads of {read}");
            // The stream again, each frame dropped once checked: the buffers of large ones
            // are reused, and what comes out is still every packet intact.
            let mut n = 0;
            for chunk in b.chunks(read).chain(b.chunks(read)) {
                d.feed(chunk);
                while let Some(Incoming::Packet(p)) = d.next_frame().unwrap() {
                    let i = n % msgs.len();
                    assert_eq!(p.token, Uid::new(i as u64, 0));
                    assert_eq!(
                        &p.message[..],
                        &msgs[i][..],
                        "again, packet {i}, reads of {read}"
                    );
                    n += 1;
                }
            }
            assert_eq!(n, 2 * msgs.len(), "reads of {read}");
            for (i, (f, m)) in got.iter().zip(&msgs).enumerate() {
                let Incoming::Packet(p) = f else {
                    panic!("not a packet")
                };
                assert_eq!(p.token, Uid::new(i as u64, 0));
                assert_eq!(&p.message[..], &m[..], "packet {i}, reads of {read}");
            }
        }
    }

    #[test]
    fn spare_buffers_stay_bounded_while_frames_are_held() {
        // More large packets than `SPARES`, every frame kept alive: no buffer can be reused,
        // the decoder lets the oldest handles go, and every packet still comes out whole.
        let n = SPARES + 6;
        let mut d = FrameDecoder::new(false, true);
        let mut held = Vec::new();
        for i in 0..n {
            let msg = vec![i as u8; SPILL_AFTER + 100];
            let mut b = BytesMut::new();
            encode_packet(&mut b, Uid::new(i as u64, 0), &msg, true);
            d.feed(&b);
            let Some(Incoming::Packet(p)) = d.next_frame().unwrap() else {
                panic!("packet {i} not whole")
            };
            assert_eq!(&p.message[..], &msg[..], "packet {i}");
            held.push(p);
        }
        assert_eq!(d.spares.len(), SPARES);
        assert_eq!(held.len(), n);
    }

    #[test]
    fn packet_roundtrip_one_byte_at_a_time() {
        let mut b = BytesMut::new();
        ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut b);
        let tok = Uid::new(1, 2);
        encode_packet(&mut b, tok, b"hello, flow", true);
        encode_packet(&mut b, Uid::new(3, 4), &[], true);
        let mut d = FrameDecoder::new(true, true);
        let mut out = Vec::new();
        for byte in b.iter() {
            d.feed(&[*byte]);
            while let Some(f) = d.next_frame().unwrap() {
                out.push(f);
            }
        }
        assert_eq!(out.len(), 3);
        assert!(matches!(out[0], Incoming::Connect(_)));
        assert_eq!(
            out[1],
            Incoming::Packet(Packet {
                token: tok,
                message: Bytes::from_static(b"hello, flow")
            })
        );
        assert_eq!(d.buffered(), 0);
    }

    /// What a new decoder (`connect`: a connect packet first; `checksum`: plain TCP) makes of
    /// `bytes` first.
    fn first_frame(
        bytes: &[u8],
        connect: bool,
        checksum: bool,
    ) -> Result<Option<Incoming>, FrameError> {
        let mut d = FrameDecoder::new(connect, checksum);
        d.feed(bytes);
        d.next_frame()
    }

    #[test]
    fn hostile_lengths_are_refused_before_buffering() {
        let mut d = FrameDecoder::new(false, true);
        d.feed(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            d.next_frame(),
            Err(FrameError::PacketTooLarge {
                len: u32::MAX,
                limit: PACKET_LIMIT
            })
        );
        // Stays failed, and drops what it held.
        d.feed(&[1, 2, 3]);
        assert!(d.next_frame().is_err());
        assert_eq!(d.buffered(), 0);

        assert_eq!(
            first_frame(&[3, 0, 0, 0, 1, 2, 3], false, false),
            Err(FrameError::PacketTooSmall { len: 3 })
        );

        assert!(matches!(
            first_frame(&[0xff; 14], true, true),
            Err(FrameError::BadConnectPacket { .. })
        ));
    }

    #[test]
    fn bad_checksum_is_an_error() {
        let mut b = BytesMut::new();
        encode_packet(&mut b, Uid::new(1, 2), b"payload", true);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(
            first_frame(&b, false, true),
            Err(FrameError::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn tls_frames_have_no_checksum() {
        let mut b = BytesMut::new();
        encode_packet(&mut b, Uid::new(1, 2), b"x", false);
        assert_eq!(b.len(), 4 + 16 + 1);
        assert!(matches!(
            first_frame(&b, false, false),
            Ok(Some(Incoming::Packet(_)))
        ));
    }

    #[test]
    fn truncated_connect_packet() {
        assert_eq!(
            ConnectPacket::decode(&[40, 0, 0]),
            Err(FrameError::Truncated)
        );
        let mut b = BytesMut::new();
        ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut b);
        assert_eq!(ConnectPacket::decode(&b[..30]), Err(FrameError::Truncated));
    }
}
