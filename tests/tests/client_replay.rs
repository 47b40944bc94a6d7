//! The client core driven with the server side of real captures, on the core's simulated
//! network (`fdb_protocol::sim`): no sockets, no clock. The server's replies are re-addressed
//! to the reply tokens our client chose (its tokens come from its seed, libfdb_c's from its
//! own randomness); everything else is replayed as captured.

use bytes::Bytes;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::messages::{decode_any, AnyMessage};
use fdb_protocol::sim::Sim;
use fdb_protocol::time::Instant;
use fdb_protocol::{ClientConfig, Event, Priority};
use fdb_tests::{load_captures, Capture, Dir};

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

    let cluster = ClusterFile::parse("test:test@127.0.0.1:4500").unwrap();
    let mut sim = Sim::new(ClientConfig::new(cluster, 42));
    sim.set_auto_accept(false);
    // The server speaks first with its captured ConnectPacket.
    let s2c = server_frames(cap);
    sim.set_hello(Bytes::from(s2c[0].wire_bytes()));
    let conn = match sim.take_events().first() {
        Some(Event::Connect { conn, addr }) => {
            assert_eq!(addr.to_string(), "127.0.0.1:4500");
            *conn
        }
        other => panic!("expected a connect request, got {other:?}"),
    };
    let req = sim.client.get_read_version(sim.now(), Priority::Default);
    // (The simulation also fails on any write to a connection not reported connected.)
    assert!(
        sim.take_requests().is_empty(),
        "nothing is written before the socket connects"
    );
    sim.accept(conn);

    let reqs = sim.take_requests();
    assert_eq!(reqs.len(), 1);
    let open_db = &reqs[0];
    assert_eq!(open_db.conn, conn);
    assert_eq!(
        open_db.dest,
        fdb_protocol::uid::well_known::CLIENT_LEADER_REG_OPEN_DATABASE
    );

    // Our OpenDatabaseCoordRequest has libfdb_c's exact layout: with the captured request's
    // reply token swapped in, the bytes are identical.
    let real_open_db = cap.packets(Dir::ClientToServer).next().unwrap();
    let mut ours = match &open_db.msg {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.clone(),
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

    // Server: ClientDBInfo addressed to our token.
    sim.advance_to(Instant::from_secs_f64(0.001));
    sim.reply_bytes(open_db, &s2c[1].message());
    sim.take_events();
    let info = sim.client.cluster_info().expect("the cluster's proxies");
    assert_eq!((info.grv_proxies.len(), info.commit_proxies.len()), (1, 1));

    // Now the GRV goes to the captured GRV proxy token, on the same connection.
    let reqs = sim.take_requests();
    let grv = reqs
        .iter()
        .find(|p| matches!(p.msg, AnyMessage::GetReadVersionRequest(_)))
        .unwrap();
    assert_eq!(grv.conn, conn);
    let real_grv = cap
        .packets(Dir::ClientToServer)
        .find(|f| {
            matches!(
                decode_any(&f.message()),
                Ok(AnyMessage::GetReadVersionRequest(_))
            )
        })
        .unwrap();
    assert_eq!(grv.dest, real_grv.token());
    let (mut ours, real) = match (&grv.msg, decode_any(&real_grv.message()).unwrap()) {
        (AnyMessage::GetReadVersionRequest(a), AnyMessage::GetReadVersionRequest(b)) => {
            (a.clone(), b)
        }
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
        .find(|p| p.dest == open_db.dest)
        .expect("long poll");
    assert_eq!(long_poll.conn, conn);
    match &long_poll.msg {
        AnyMessage::OpenDatabaseCoordRequest(r) => {
            assert_eq!(
                Some(r.known_client_info_id),
                sim.client.cluster_info().map(|i| i.id)
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
    sim.advance_to(Instant::from_secs_f64(0.002));
    sim.reply_bytes(grv, &grv_reply.message());
    assert_eq!(sim.take(req), Some(Ok(want)), "the read version completes");
    assert!(sim.events().is_empty(), "and nothing else happens");
}

#[test]
fn same_seed_same_bytes() {
    // Everything the client writes first: where to, its ConnectPacket, and its requests
    // (tokens and message bytes).
    let run = |seed| {
        let cluster = ClusterFile::parse("a:b@10.0.0.1:4500,10.0.0.2:4500,10.0.0.3:4500").unwrap();
        let mut sim = Sim::new(ClientConfig::new(cluster, seed));
        sim.set_auto_accept(false);
        let Some(Event::Connect { conn, addr }) = sim.take_events().first().cloned() else {
            panic!()
        };
        sim.accept(conn);
        let hello = *sim.client_hello(conn).expect("the client's ConnectPacket");
        (addr, hello, sim.take_requests())
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7).2, run(8).2, "reply tokens come from the seed");
}
