//! Prints every packet of the named captures (all when none is named) as decoded messages:
//! `cargo run -p fdb-tests --example dump_capture -- get set_commit`. A reading aid for the
//! captures in `tests/data/fdb-captures`.

use fdb_protocol::messages::decode_any;
use fdb_tests::{load_captures, Dir};
fn main() {
    let want: Vec<String> = std::env::args().skip(1).collect();
    for cap in load_captures() {
        if !want.is_empty() && !want.contains(&cap.name) {
            continue;
        }
        println!("=== {}", cap.name);
        for f in cap.frames.iter().filter(|f| !f.is_connect) {
            let m = decode_any(&f.message()).unwrap();
            let s = format!("{:?}", m);
            let s = if s.len() > 1500 {
                format!("{}...", &s[..1500])
            } else {
                s
            };
            println!(
                "{} {} tok={:?} len={} {}",
                if f.dir == Dir::ClientToServer {
                    "C>"
                } else {
                    "S>"
                },
                f.seq,
                f.token(),
                f.len,
                s
            );
        }
    }
}
