//! The client core driven with the server side of real captures: no sockets, no clock.
//! The server's replies are re-addressed to the reply tokens our client chose (its tokens
//! come from its seed, libfdb_c's from its own randomness); everything else is replayed as
//! captured.

use bytes::{Bytes, BytesMut};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::framing::{encode_packet, FrameDecoder, Incoming, Packet};
use fdb_protocol::messages::{decode_any, AnyMessage};
use fdb_protocol::time::Instant;
use fdb_protocol::{Client, ClientConfig, Event, Priority};
use fdb_tests::{load_captures, Capture, Dir};

fn requests(d: &mut FrameDecoder, data: &[u8]) -> Vec<Packet> {
    d.feed(data);
    let mut out = Vec::new();
    while let Some(f) = d.next_frame().unwrap() {
        if let Incoming::Packet(p) = f {
            out.push(p);
        }
    }
    out
}

fn reply_token(p: &Packet) -> fdb_protocol::Uid {
    match decode_any(&p.message).unwrap() {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.reply.token,
        AnyMessage::GetReadVersionRequest(r) => r.reply.token,
        other => panic!("unexpected request {}", other.name()),
    }
}

fn server_frames(cap: &Capture) -> Vec<fdb_tests::CapturedFrame> {
    let mut v: Vec<_> = cap
        .frames
        .iter()
        .filter(|f| f.dir == Dir::ServerToClient)
        .cloned()
        .collect();
    v.sort_by_key(|f| f.seq);
    v
}

#[test]
fn grv_capture_replayed_gives_the_read_version() {
    let caps = load_captures();
    let cap = caps.iter().find(|c| c.name == "grv").unwrap();
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fdb_tests::captures_dir().join("grv.result.json")).unwrap(),
    )
    .unwrap();
    let want = want["result"]["read_version"].as_i64().unwrap();

    let t0 = Instant::ZERO;
    let cluster = ClusterFile::parse("test:test@127.0.0.1:4500").unwrap();
    let mut client = Client::new(ClientConfig::new(cluster, 42), t0);
    let conn = match client.poll_event() {
        Some(Event::Connect { conn, addr }) => {
            assert_eq!(addr.to_string(), "127.0.0.1:4500");
            conn
        }
        other => panic!("expected a connect request, got {other:?}"),
    };
    let req = client.get_read_version(t0, Priority::Default);
    assert!(
        client.poll_transmit().is_none(),
        "nothing is written before the socket connects"
    );
    client.handle_connected(conn, t0);

    let mut from_client = FrameDecoder::new(true, true);
    let sent = client.poll_transmit().unwrap();
    assert_eq!(sent.conn, conn);
    let reqs = requests(&mut from_client, &sent.data);
    assert_eq!(reqs.len(), 1);
    let open_db = &reqs[0];
    assert_eq!(
        open_db.token,
        fdb_protocol::uid::well_known::CLIENT_LEADER_REG_OPEN_DATABASE
    );

    // Our OpenDatabaseCoordRequest has libfdb_c's exact layout: with the captured request's
    // reply token swapped in, the bytes are identical.
    let real_open_db = cap.packets(Dir::ClientToServer).next().unwrap();
    let mut ours = match decode_any(&open_db.message).unwrap() {
        AnyMessage::OpenDatabaseCoordRequest(r) => r,
        _ => unreachable!(),
    };
    let real = match decode_any(&real_open_db.message()).unwrap() {
        AnyMessage::OpenDatabaseCoordRequest(r) => r,
        _ => unreachable!(),
    };
    ours.reply = real.reply.clone();
    assert_eq!(ours, real);
    assert_eq!(
        AnyMessage::OpenDatabaseCoordRequest(ours).encode(),
        real_open_db.message()[..]
    );

    // Server: ConnectPacket, then ClientDBInfo addressed to our token.
    let s2c = server_frames(cap);
    let mut input = BytesMut::new();
    input.extend_from_slice(&s2c[0].wire_bytes());
    encode_packet(&mut input, reply_token(open_db), &s2c[1].message(), true);
    client.handle_input(conn, Instant::from_secs_f64(0.001), &input);
    match client.poll_event() {
        Some(Event::ClusterInfo {
            grv_proxies: 1,
            commit_proxies: 1,
            ..
        }) => {}
        other => panic!("expected cluster info, got {other:?}"),
    }

    // Now the GRV goes to the captured GRV proxy token, on the same connection.
    let sent = client.poll_transmit().unwrap();
    let reqs = requests(&mut from_client, &sent.data);
    let grv = reqs
        .iter()
        .find(|p| {
            matches!(
                decode_any(&p.message),
                Ok(AnyMessage::GetReadVersionRequest(_))
            )
        })
        .unwrap();
    let real_grv = cap
        .packets(Dir::ClientToServer)
        .find(|f| {
            matches!(
                decode_any(&f.message()),
                Ok(AnyMessage::GetReadVersionRequest(_))
            )
        })
        .unwrap();
    assert_eq!(grv.token, real_grv.token());
    let (mut ours, real) = match (
        decode_any(&grv.message).unwrap(),
        decode_any(&real_grv.message()).unwrap(),
    ) {
        (AnyMessage::GetReadVersionRequest(a), AnyMessage::GetReadVersionRequest(b)) => (a, b),
        _ => unreachable!(),
    };
    ours.reply = real.reply.clone();
    assert_ne!(ours.span_context.span_id, 0, "a span id is always sent");
    ours.span_context.span_id = real.span_context.span_id;
    assert_eq!(
        AnyMessage::GetReadVersionRequest(ours).encode(),
        real_grv.message()[..]
    );
    // And the long poll for the next ClientDBInfo carries the id just received.
    let long_poll = reqs
        .iter()
        .find(|p| p.token == open_db.token)
        .expect("long poll");
    match decode_any(&long_poll.message).unwrap() {
        AnyMessage::OpenDatabaseCoordRequest(r) => {
            assert_eq!(
                Some(r.known_client_info_id),
                client.cluster_info().map(|i| i.id)
            )
        }
        _ => unreachable!(),
    }

    // The GetReadVersionReply, re-addressed.
    let grv_reply = s2c
        .iter()
        .find(|f| {
            !f.is_connect
                && matches!(
                    decode_any(&f.message()),
                    Ok(AnyMessage::GetReadVersionReply(_))
                )
        })
        .unwrap();
    let mut input = BytesMut::new();
    encode_packet(&mut input, reply_token(grv), &grv_reply.message(), true);
    client.handle_input(conn, Instant::from_secs_f64(0.002), &input);
    let Some(Event::Complete(done)) = client.poll_event() else {
        panic!("the read version completes")
    };
    assert_eq!(req.take(done), Ok(want));
    let _ = Bytes::new();
}

#[test]
fn same_seed_same_bytes() {
    let run = |seed| {
        let cluster = ClusterFile::parse("a:b@10.0.0.1:4500,10.0.0.2:4500,10.0.0.3:4500").unwrap();
        let mut c = Client::new(ClientConfig::new(cluster, seed), Instant::ZERO);
        let Some(Event::Connect { conn, addr }) = c.poll_event() else {
            panic!()
        };
        c.handle_connected(conn, Instant::ZERO);
        (addr, c.poll_transmit().unwrap().data)
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7).1, run(8).1, "reply tokens come from the seed");
}
