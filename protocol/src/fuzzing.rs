//! Bodies of the fuzz targets in `fuzz/`, kept here so stable tests can run them too.
//!
//! Every function takes arbitrary bytes and must never panic. Besides "no panic", each checks a
//! property that real bugs would break: frames re-encode to exactly the bytes they came from,
//! and anything that decodes re-encodes to something that decodes to the same value (and to
//! the same bytes again). `TARGETS` lists them all, for the smoke test that runs them on stable.

use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};
use core::fmt::Debug;

use crate::framing::{
    encode_packet, ConnectPacket, FrameDecoder, Incoming, CONNECT_PACKET_BODY_LEN,
};
use crate::messages::commit::{CommitID, GetKeyServerLocationsReply};
use crate::messages::coordination::ClientDBInfo;
use crate::messages::grv::GetReadVersionReply;
use crate::messages::storage::{GetKeyReply, GetKeyValuesReply, GetValueReply, WatchValueReply};
use crate::messages::{decode_any, decode_reply, encode_reply, fid, ErrorOr};
use crate::serializer::{decode_root, file_identifier, Message};

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Every fuzz target: its name (also its `fuzz/fuzz_targets/NAME.rs`) and its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("frame_decoder", frame_decoder),
    ("connect_packet", connect_packet),
    ("object_reader", object_reader),
    ("client_db_info", client_db_info),
    ("get_read_version_reply", get_read_version_reply),
    ("commit_id", commit_id),
    (
        "get_key_server_locations_reply",
        get_key_server_locations_reply,
    ),
    ("get_value_reply", get_value_reply),
    ("get_key_reply", get_key_reply),
    ("get_key_values_reply", get_key_values_reply),
    ("get_mapped_key_values_reply", get_mapped_key_values_reply),
    ("watch_value_reply", watch_value_reply),
    ("client_session", client_session),
    ("leader_info", leader_info),
    ("tuple_decoder", tuple_decoder),
    ("tenant_map_entry", tenant_map_entry),
    ("cluster_module_replies", cluster_module_replies),
    ("global_config", global_config),
    ("protocol_handshake", protocol_handshake),
    ("knob", knob),
];

/// `x == x`: false only for values holding a NaN, whose equality cannot be asserted.
#[allow(clippy::eq_op)]
fn reflexive<T: PartialEq>(x: &T) -> bool {
    x == x
}

/// Feeds `data` to a [`FrameDecoder`] in every framing mode and several chunkings (sizes taken
/// from the data itself), checking that each frame re-encodes to the bytes it consumed and that
/// errors are final.
pub fn frame_decoder(data: &[u8]) {
    for (expect_connect, with_checksum) in
        [(true, true), (true, false), (false, true), (false, false)]
    {
        // One shot, then chunk sizes read from the data, then (for small inputs) byte by byte.
        run_frame_decoder(data, expect_connect, with_checksum, None, |_| usize::MAX);
        run_frame_decoder(data, expect_connect, with_checksum, None, |n| {
            1 + data.get(n % data.len().max(1)).copied().unwrap_or(0) as usize
        });
        if data.len() <= 4096 {
            run_frame_decoder(data, expect_connect, with_checksum, None, |_| 1);
        }
    }
    // A lowered limit taken from the data.
    if let Some(&b) = data.first() {
        let limit = 16 + 8 * b as u32;
        run_frame_decoder(data, false, true, Some(limit), |n| 1 + (n * 7) % 61);
    }
}

fn run_frame_decoder(
    data: &[u8],
    expect_connect: bool,
    with_checksum: bool,
    limit: Option<u32>,
    chunk: impl Fn(usize) -> usize,
) {
    let mut d = FrameDecoder::new(expect_connect, with_checksum);
    if let Some(l) = limit {
        d = d.with_limit(l);
    }
    let mut fed = 0usize; // bytes fed so far
    let mut consumed = 0usize; // bytes turned into frames so far
    let mut first = true;
    let mut n = 0;
    while fed < data.len() {
        let end = fed.saturating_add(chunk(n).max(1)).min(data.len());
        n += 1;
        d.feed(&data[fed..end]);
        fed = end;
        loop {
            match d.next_frame() {
                Ok(None) => {
                    assert_eq!(
                        d.buffered(),
                        fed - consumed,
                        "decoder lost or invented bytes"
                    );
                    break;
                }
                Ok(Some(frame)) => {
                    let now = fed - d.buffered();
                    assert!(now > consumed, "a frame consumed no bytes");
                    check_frame(&frame, &data[consumed..now], first, with_checksum);
                    if let Some(l) = limit {
                        if let Incoming::Packet(p) = &frame {
                            assert!(16 + p.message.len() <= l as usize, "limit ignored");
                        }
                    }
                    assert_eq!(
                        matches!(frame, Incoming::Connect(_)),
                        first && expect_connect,
                        "connect packet out of place"
                    );
                    first = false;
                    consumed = now;
                }
                Err(e) => {
                    // Errors are final: the same error again, nothing held, nothing accepted.
                    assert_eq!(d.buffered(), 0, "a failed decoder still holds bytes");
                    d.feed(&data[consumed..fed]);
                    assert_eq!(d.buffered(), 0, "a failed decoder accepted bytes");
                    assert_eq!(d.next_frame(), Err(e), "error not sticky");
                    return;
                }
            }
        }
    }
}

fn check_frame(frame: &Incoming, wire: &[u8], first: bool, with_checksum: bool) {
    match frame {
        Incoming::Connect(c) => {
            assert!(first);
            let len = u32::from_le_bytes([wire[0], wire[1], wire[2], wire[3]]);
            assert_eq!(len as usize + 4, wire.len(), "connect packet length");
            assert!(len <= CONNECT_PACKET_BODY_LEN);
            let mut b = BytesMut::new();
            c.encode(&mut b);
            // An older, shorter layout re-encodes as the full one with zeros after its end.
            assert_eq!(&b[4..wire.len()], &wire[4..], "connect packet re-encoding");
            assert!(b[wire.len()..].iter().all(|&x| x == 0));
            if len == CONNECT_PACKET_BODY_LEN {
                assert_eq!(&b[..], wire);
            }
        }
        Incoming::Packet(p) => {
            let mut b = BytesMut::new();
            encode_packet(&mut b, p.token, &p.message, with_checksum);
            assert_eq!(&b[..], wire, "packet re-encoding");
        }
    }
}

/// `ConnectPacket::decode`; what decodes re-encodes to a packet that decodes the same.
pub fn connect_packet(data: &[u8]) {
    if let Ok(p) = ConnectPacket::decode(data) {
        let mut b = BytesMut::new();
        p.encode(&mut b);
        assert_eq!(
            ConnectPacket::decode(&b),
            Ok(p),
            "connect packet round trip"
        );
        if data.len() >= b.len() && data[..4] == b[..4] {
            assert_eq!(&data[..b.len()], &b[..]);
        }
    }
}

/// `decode_any` on the bytes as a whole message; what decodes round-trips.
pub fn object_reader(data: &[u8]) {
    let msg = Bytes::copy_from_slice(data);
    let Ok(m) = decode_any(&msg) else { return };
    assert_eq!(file_identifier(data), Ok(m.file_identifier()));
    let enc = m.encode();
    let back = match decode_any(&Bytes::from(enc.clone())) {
        Ok(b) => b,
        Err(e) => panic!("our encoding of {} does not decode: {e}", m.name()),
    };
    assert_eq!(back.file_identifier(), m.file_identifier());
    if reflexive(&m) {
        assert_eq!(back, m, "{} round trip", m.name());
    }
    assert_eq!(back.encode(), enc, "{} re-encoding is not stable", m.name());
    // Each supported protocol's shape decodes, and is stable (an older shape only drops the
    // fields its version lacks).
    for p in crate::version::Protocol::SUPPORTED {
        let shaped = m.encode_for(p);
        let again = match decode_any(&Bytes::from(shaped.clone())) {
            Ok(a) => a,
            Err(e) => panic!("{}'s {p} shape does not decode: {e}", m.name()),
        };
        assert_eq!(
            again.encode_for(p),
            shaped,
            "{} {p} shape is not stable",
            m.name()
        );
    }
}

/// A reply of type `T`, decoded both with its file identifier checked and without.
fn reply_target<T: Message + PartialEq + Debug>(data: &[u8]) {
    let msg = Bytes::copy_from_slice(data);
    let typed = decode_reply::<T>(&msg);
    let root = decode_root::<ErrorOr<T>>(&msg);
    let fid_matches = file_identifier(data) == Ok(fid::reply(T::FILE_IDENTIFIER));
    if fid_matches {
        assert_eq!(
            typed.is_ok(),
            root.is_ok(),
            "the file identifier check changed the outcome"
        );
        if let (Err(a), Err(b)) = (&typed, &root) {
            assert_eq!(a, b);
        }
    } else {
        assert!(typed.is_err(), "a wrong file identifier was accepted");
    }
    if let Ok(v) = root {
        roundtrip_reply(&v);
    }
}

fn roundtrip_reply<T: Message + PartialEq + Debug>(v: &ErrorOr<T>) {
    let enc = encode_reply(v);
    let back = match decode_reply::<T>(&Bytes::from(enc.clone())) {
        Ok(b) => b,
        Err(e) => panic!("our encoding does not decode: {e}"),
    };
    if reflexive(v) {
        assert_eq!(&back, v, "reply round trip");
    }
    let again: Vec<u8> = encode_reply(&back);
    assert_eq!(again, enc, "reply re-encoding is not stable");
}

/// A fuzz target for each reply type: [`reply_target`] of it.
macro_rules! reply_targets {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $($(#[$doc])* pub fn $name(data: &[u8]) {
            reply_target::<$ty>(data)
        })*
    };
}

reply_targets! {
    client_db_info: ClientDBInfo;
    get_read_version_reply: GetReadVersionReply;
    commit_id: CommitID;
    get_key_server_locations_reply: GetKeyServerLocationsReply;
    get_value_reply: GetValueReply;
    get_key_reply: GetKeyReply;
    get_key_values_reply: GetKeyValuesReply;
    /// A mapped range reply: nested tables and a two-alternative union per row.
    get_mapped_key_values_reply: crate::messages::storage::GetMappedKeyValuesReply;
    watch_value_reply: WatchValueReply;
}

/// `LeaderInfo::serialized_info` as a coordinator might send it: a protocol version, then the
/// cluster controller's interface. Anything that decodes re-encodes to a value that decodes
/// the same.
pub fn leader_info(data: &[u8]) {
    use crate::messages::coordination::ClusterControllerClientInterface as Cc;
    let Ok((version, cc)) = Cc::from_serialized_info(&Bytes::copy_from_slice(data)) else {
        return;
    };
    let mut again = version.to_le_bytes().to_vec();
    again.extend_from_slice(&crate::serializer::encode(&cc));
    let back = Cc::from_serialized_info(&Bytes::from(again)).expect("our encoding decodes");
    assert_eq!(back, (version, cc));
}

/// A `knob` network option's text (`name=value`, from a program or the environment): either
/// it sets its knob and nothing else, or it changes nothing; a value that is taken is taken
/// again the same.
pub fn knob(data: &[u8]) {
    use crate::knobs::Knobs;
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    let mut knobs = Knobs::default();
    match knobs.set_option(text) {
        Some(Ok(())) => {
            let mut again = Knobs::default();
            assert_eq!(again.set_option(text), Some(Ok(())));
            assert_eq!(again, knobs);
        }
        _ => assert_eq!(knobs, Knobs::default(), "a knob not taken changed nothing"),
    }
}

/// The tuple layer's decoder on arbitrary bytes, read as a dynamic tuple and through the typed
/// decoders. What decodes packs to bytes no longer than the input (only non-minimal integers
/// shrink) that decode to the same tuple and pack to themselves again; a typed decoder that
/// accepts the bytes agrees with the dynamic one; a subspace prefix makes no difference.
pub fn tuple_decoder(data: &[u8]) {
    use crate::tuple::{pack, unpack, BigInt, Element, Subspace};
    let dynamic = unpack::<Vec<Element>>(data);
    if let Ok(t) = &dynamic {
        let again = pack(t);
        assert!(again.len() <= data.len(), "packing grew a decoded tuple");
        let back: Vec<Element> = unpack(&again).expect("our packing decodes");
        assert_eq!(&back, t, "tuple round trip");
        assert_eq!(pack(&back), again, "tuple re-packing is not stable");
        assert_eq!(
            unpack::<Element>(data).ok(),
            Some(Element::Tuple(t.clone()))
        );
    }
    // Typed decoders: never a panic, and no disagreement with the dynamic reading.
    if let Ok(v) = unpack::<Vec<i64>>(data) {
        let t = dynamic
            .as_ref()
            .expect("typed ints decoded, dynamic did not");
        assert!(v.iter().zip(t).all(|(a, e)| e.as_i64() == Some(*a)) && v.len() == t.len());
    }
    if let Ok(v) = unpack::<Vec<BigInt>>(data) {
        let t = dynamic
            .as_ref()
            .expect("typed integers decoded, dynamic did not");
        assert_eq!(v.len(), t.len());
    }
    if let Ok(v) = unpack::<Vec<Option<alloc::string::String>>>(data) {
        let t = dynamic
            .as_ref()
            .expect("typed strings decoded, dynamic did not");
        assert!(v.iter().zip(t).all(|(a, e)| a.as_deref() == e.as_str()));
    }
    let _ = unpack::<(i64, Vec<u8>, (bool, f64, Option<f32>))>(data);
    let _ = unpack::<Vec<Vec<Element>>>(data);
    let _ = unpack::<(crate::tuple::Uuid, crate::tuple::Versionstamp)>(data);
    // Behind a subspace prefix: the same answer.
    if let Some(&cut) = data.first() {
        let cut = (cut as usize).min(data.len());
        let sub = Subspace::from_bytes(&data[..cut]);
        assert_eq!(
            sub.unpack::<Vec<Element>>(data),
            unpack::<Vec<Element>>(&data[cut..])
        );
    }
}

/// The fuzz session's cluster: it answers the first `OpenDatabaseCoordRequest` with one GRV
/// proxy and one commit proxy, and leaves every other request to the fuzz input.
struct Bootstrap {
    info: Option<ClientDBInfo>,
}

impl crate::sim::Server for Bootstrap {
    fn serve(
        &mut self,
        wire: &mut crate::sim::Wire<'_>,
        req: crate::sim::Request,
    ) -> Option<crate::sim::Request> {
        if let crate::messages::AnyMessage::OpenDatabaseCoordRequest(_) = req.msg {
            if let Some(info) = self.info.take() {
                wire.reply(&req, ErrorOr::Ok(info));
                return None;
            }
        }
        Some(req)
    }
}

/// A whole client session against a hostile cluster: after a well-formed bootstrap, `data`
/// decides which outstanding request gets answered, with which message bytes, and how much
/// time passes first (milliseconds or minutes). The transaction engine must turn every
/// malformed or unexpected reply into a typed error or a retry: no panic, no runaway memory.
/// The simulated network ([`crate::sim`]) checks the client's side of the contract on the
/// way: every byte it writes frames and decodes, on connections it was given.
pub fn client_session(data: &[u8]) {
    use crate::client::ClientConfig;
    use crate::cluster_file::ClusterFile;
    use crate::messages::types::KeySelector;
    use crate::sim::{Request, Sim};
    use crate::transaction::RangeOptions;
    use crate::TransactionOption;
    use core::time::Duration;

    let Ok(cluster) = ClusterFile::parse("fuzz:fuzz@127.0.0.1:4500") else {
        return;
    };
    let info = crate::sim::loopback_proxies();
    let mut s = Sim::with_server(
        ClientConfig::new(cluster, 1),
        Bootstrap { info: Some(info) },
    );
    // Pings are the input's to answer too.
    s.set_answer_pings(false);
    s.drive();
    let now = s.now();
    let c = &mut s.client;
    let tx = c.create_transaction(now);
    let _ = c.get(now, tx, b"k", false);
    let _ = c.get_range(
        now,
        tx,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"a")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"z")),
        RangeOptions::default(),
        false,
    );
    let _ = c.get_key(
        now,
        tx,
        KeySelector::last_less_than(Bytes::from_static(b"m")),
        false,
    );
    // A mapped read, in a transaction of its own (no writes of its own to refuse), with the
    // replica consistency check on: its replies are held, sent again and compared.
    let mapped = c.create_transaction(now);
    for opt in [
        TransactionOption::EnableReplicaConsistencyCheck,
        TransactionOption::ConsistencyCheckRequiredReplicas(-1),
    ] {
        let _ = c.set_option(now, mapped, opt);
    }
    let _ = c.get_mapped_range(
        now,
        mapped,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"a")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"z")),
        Bytes::from_static(b"\x02m\x00\x02{K[0]}\x00\x02{...}\x00"),
        RangeOptions::default(),
        false,
    );
    let _ = c.set(tx, b"k", b"v");
    let _ = c.atomic_op(tx, b"n", &[1], crate::atomic::MutationType::Add);
    let _ = c.watch(now, tx, b"w");
    let _ = c.get_estimated_range_size_bytes(now, tx, b"a", b"z");
    let _ = c.get_range_split_points(now, tx, b"a", b"z", 1000);
    let _ = c.commit(now, tx);
    // Requests seen and not yet answered.
    let mut open: Vec<Request> = s.take_requests();
    // Records: [selector, time step, len lo, len hi, body...].
    let mut rest = data;
    while rest.len() >= 4 && !open.is_empty() {
        let pick = rest[0] as usize % open.len();
        // Time steps of up to half a second, or (the high bit set) of up to eight and a
        // half minutes: past the connection monitor's idle close and the coordinators' long
        // poll, time scales a session of small steps never reaches.
        let step = match rest[1] {
            b if b & 0x80 == 0 => Duration::from_millis(b as u64 * 4),
            b => Duration::from_secs((b & 0x7f) as u64 * 4),
        };
        let len = (u16::from_le_bytes([rest[2], rest[3]]) as usize).min(rest.len() - 4);
        let body = &rest[4..4 + len];
        rest = &rest[4 + len..];
        let req = open.swap_remove(pick);
        s.advance_by(step);
        s.reply_bytes(&req, body);
        open.extend(s.take_requests());
        // What the client reports is read and dropped; only its bounds matter here.
        let _ = s.take_events();
        let _ = s.take_completions();
        // Everything the engine keeps is bounded by what it was asked to do.
        assert!(open.len() < 10_000, "requests multiply without bound");
    }
}

/// A `\xff/tenant/map/` value (or a tenant group's) as the database might hold it: the version
/// prefix, then the message. What decodes re-encodes to bytes that decode the same (and to the
/// same bytes again); the typed view accepts exactly the entries with a non-negative id and a
/// known lock state, gives them back unchanged, and renders JSON whose base64 and printable
/// forms have the sizes libb64 and `printable` give.
pub fn tenant_map_entry(data: &[u8]) {
    use crate::messages::commit::TenantMapEntry;
    use crate::tenant_map::{libb64, TenantEntry, TenantEntryError, TenantGroupEntry};

    match TenantMapEntry::decode_value(data) {
        Ok(m) => {
            let enc = m.encode_value();
            let back = TenantMapEntry::decode_value(&enc).expect("our encoding decodes");
            assert_eq!(back, m, "tenant map entry round trip");
            assert_eq!(back.encode_value(), enc, "re-encoding is not stable");
            // The registry reaches it too, after the version prefix.
            let any = decode_any(&Bytes::copy_from_slice(&data[8..]));
            assert_eq!(
                any.ok(),
                Some(crate::messages::AnyMessage::TenantMapEntry(m.clone()))
            );
            match TenantEntry::from_map_entry(&m) {
                Ok(e) => {
                    assert_eq!(e.to_map_entry(), m, "the typed view lost something");
                    let json = e.to_json();
                    assert!(json.starts_with("{\"id\":") && json.ends_with('}'));
                    let b64 = libb64(&m.tenant_name);
                    let groups = m.tenant_name.len() / 3;
                    let digits = m.tenant_name.len().div_ceil(3) * 4;
                    assert_eq!(b64.len(), digits + groups / 18, "libb64 size");
                    assert!(json.contains(&alloc::format!("\"id\":{}", m.id)));
                }
                Err(TenantEntryError::NegativeId(id)) => assert!(id < 0 && id == m.id),
                Err(TenantEntryError::LockState(s)) => assert!(s > 2 && s == m.lock_state),
                Err(TenantEntryError::Decode(e)) => panic!("decoded, then not: {e}"),
            }
        }
        Err(e) => assert_eq!(
            TenantEntry::from_map_value(data),
            Err(TenantEntryError::Decode(e))
        ),
    }
    if let Ok(g) = TenantGroupEntry::decode_value(data) {
        let enc = g.encode_value();
        assert_eq!(TenantGroupEntry::decode_value(&enc), Ok(g));
    }
}

/// The replies behind the special keys filled from the cluster: `GetDDMetricsReply` and
/// `GetHealthMetricsReply` as any reply; the health blob inside (and `data` itself as a blob),
/// which re-encodes under its own version to a blob that decodes the same; and the cluster
/// controller's worker list, which re-encodes to bytes that decode the same.
pub fn cluster_module_replies(data: &[u8]) {
    use crate::messages::metrics::{GetDDMetricsReply, GetHealthMetricsReply, HealthMetrics};
    use crate::messages::workers::{decode_client_workers, encode_client_workers};
    reply_target::<GetDDMetricsReply>(data);
    reply_target::<GetHealthMetricsReply>(data);
    let bytes = Bytes::copy_from_slice(data);
    let mut blobs = alloc::vec![bytes.clone()];
    if let Ok(ErrorOr::Ok(r)) = decode_reply::<GetHealthMetricsReply>(&bytes) {
        blobs.push(r.serialized);
    }
    for blob in blobs {
        if let Ok(m) = HealthMetrics::decode(&blob) {
            let version = u64::from_le_bytes(blob[..8].try_into().expect("8 bytes"));
            let enc = m.encode(version);
            let back = HealthMetrics::decode(&enc).expect("our encoding decodes");
            if reflexive(&m) {
                assert_eq!(back, m, "health metrics round trip");
            }
            assert_eq!(back.encode(version), enc, "re-encoding is not stable");
        }
    }
    if let Ok(w) = decode_client_workers(&bytes) {
        let enc = encode_client_workers(&w);
        let back = decode_client_workers(&Bytes::from(enc)).expect("our encoding decodes");
        assert_eq!(back, w, "worker list round trip");
    }
}

/// The global-configuration refresh reply (`GlobalConfigRefreshReply`), and the client's view
/// fed the bytes as that reply and as a `ClientDBInfo` history.
pub fn global_config(data: &[u8]) {
    use crate::messages::grv::GlobalConfigRefreshReply;
    reply_target::<GlobalConfigRefreshReply>(data);
    crate::global_config::fuzz_view(&Bytes::copy_from_slice(data));
}

/// The coordinator's first bytes are the input: a ConnectPacket of any version (or none, or
/// garbage), then anything. The client must learn a supported protocol (every later connection
/// then speaks it), refuse an unsupported one with `incompatible_client`, or drop a connection
/// that breaks the framing; it never panics, and its reconnections stay paced by the backoff.
pub fn protocol_handshake(data: &[u8]) {
    use crate::client::ClientConfig;
    use crate::cluster_file::ClusterFile;
    use crate::error::ErrorCode;
    use crate::event::Event;
    use crate::grv::Priority;
    use crate::sim::Sim;
    use crate::version::Protocol;
    use core::time::Duration;

    let Ok(cluster) = ClusterFile::parse("fuzz:fuzz@127.0.0.1:4500") else {
        return;
    };
    // The first byte picks the protocol the client starts with.
    let start = match data.first() {
        Some(b) if b & 1 == 1 => Protocol::V7_4,
        _ => Protocol::V7_3,
    };
    let mut config = ClientConfig::new(cluster, 7);
    config.protocol = start;
    let mut s = Sim::new(config);
    s.set_hello(Bytes::copy_from_slice(data.get(1..).unwrap_or_default()));
    let now = s.now();
    let grv = s.client.get_read_version(now, Priority::Default);
    s.drive();
    s.run_until(s.now() + Duration::from_secs(5));
    let mut spoken = start;
    let mut opened = 0;
    for e in s.take_events() {
        match e {
            Event::ProtocolChanged { protocol } => {
                assert_ne!(protocol, spoken, "a change to the protocol already spoken");
                spoken = protocol;
            }
            Event::Connect { conn, .. } => {
                opened += 1;
                // Each connection's own ConnectPacket is the protocol spoken when it opened.
                if let Some(h) = s.client_hello(conn) {
                    assert!(
                        Protocol::of(h.protocol_version()).is_some(),
                        "a connection speaking an unsupported protocol"
                    );
                }
            }
            _ => {}
        }
    }
    // The announced version the input carried, if it is a ConnectPacket.
    let announced = ConnectPacket::decode(data.get(1..).unwrap_or_default())
        .ok()
        .map(|p| p.protocol_version());
    if let Some(v) = announced.filter(|v| v.has_object_serializer_flag()) {
        match Protocol::of(v) {
            Some(p) => assert_eq!(spoken, p, "the coordinator's protocol is spoken"),
            None => {
                assert_eq!(spoken, start);
                if let Some(r) = s.take(grv) {
                    assert_eq!(r.map_err(|e| e.code()), Err(ErrorCode::INCOMPATIBLE_CLIENT));
                }
            }
        }
    }
    // Reconnections are paced by the backoff: a handful in five simulated seconds.
    assert!(opened < 64, "{opened} connects in 5 s");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_survive_trivial_inputs() {
        for (_, f) in TARGETS {
            f(&[]);
            f(&[0]);
            f(&[0xff; 64]);
            f(&[0; 64]);
        }
    }
}
