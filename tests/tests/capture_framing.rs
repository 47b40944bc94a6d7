//! The framer against real traffic: every stream of every capture splits into exactly the
//! frames libfdb_c and fdbserver sent, whatever the chunking, with every checksum verified.

use fdb_protocol::framing::{
    encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion,
};
use fdb_tests::{load_captures, Dir};

fn split(stream: &[u8], chunk: impl Fn(usize) -> usize) -> Vec<Incoming> {
    let mut d = FrameDecoder::new(true, true);
    let mut out = Vec::new();
    let mut i = 0;
    let mut n = 0;
    while i < stream.len() {
        let end = (i + chunk(n).max(1)).min(stream.len());
        d.feed(&stream[i..end]);
        while let Some(f) = d.next_frame().expect("real traffic frames cleanly") {
            out.push(f);
        }
        i = end;
        n += 1;
    }
    assert_eq!(d.buffered(), 0, "bytes left over");
    out
}

#[test]
fn every_stream_frames_exactly() {
    let mut total = 0;
    for cap in load_captures() {
        for dir in [Dir::ClientToServer, Dir::ServerToClient] {
            let stream = cap.stream(dir);
            let mut frames: Vec<_> = cap.frames.iter().filter(|f| f.dir == dir).collect();
            frames.sort_by_key(|f| f.seq);
            for chunking in [usize::MAX, 1, 7, 1500] {
                let got = split(&stream, |n| {
                    if chunking == 7 {
                        1 + (n * 31) % 97
                    } else {
                        chunking
                    }
                });
                assert_eq!(got.len(), frames.len(), "{} {dir:?}", cap.name);
                for (g, f) in got.iter().zip(&frames) {
                    match g {
                        Incoming::Connect(c) => {
                            assert!(f.is_connect);
                            assert!(ProtocolVersion::V7_3.accepts(c.protocol_version()));
                        }
                        Incoming::Packet(p) => {
                            assert_eq!(p.token, f.token());
                            assert_eq!(p.message, f.message());
                        }
                    }
                }
            }
            total += frames.len();
        }
        println!("{}: {} frames framed", cap.name, cap.frames.len());
    }
    assert!(
        total > 200,
        "expected the full capture set, got {total} frames"
    );
}

#[test]
fn encoder_reproduces_wire_bytes() {
    for cap in load_captures() {
        for f in &cap.frames {
            let mut b = bytes::BytesMut::new();
            if f.is_connect {
                let c = ConnectPacket::decode(&f.wire_bytes()).unwrap();
                c.encode(&mut b);
            } else {
                encode_packet(&mut b, f.token(), &f.message(), true);
            }
            assert_eq!(
                &b[..],
                &f.wire_bytes()[..],
                "{} {:?} {}",
                cap.name,
                f.dir,
                f.seq
            );
        }
    }
}

#[test]
fn the_client_connect_packet_is_what_we_send() {
    let mut ours = bytes::BytesMut::new();
    ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut ours);
    for cap in load_captures() {
        let first = cap
            .frames
            .iter()
            .find(|f| f.dir == Dir::ClientToServer && f.seq == 0)
            .unwrap();
        assert!(first.is_connect);
        assert_eq!(&ours[..], &first.wire_bytes()[..], "{}", cap.name);
    }
}
