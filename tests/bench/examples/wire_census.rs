//! Counts the FDB messages in captured traffic, by kind and direction, with their wire sizes:
//! the benchmark's wire check on a real cluster (see BENCHMARKS.md, "Same work on the wire").
//!
//!     cargo run -p fdb-bench --example wire_census -- A.frames.jsonl [B.frames.jsonl]
//!
//! Each file is a capture split into frames by the team's `decode_frames.py`. With two files,
//! the second line of numbers is B minus A: two runs that differ only in their number of
//! measured transactions, so bootstrap, warmup, set-up and clean-up cancel out.
//!
//!     cargo run -p fdb-bench --example wire_census -- --show KIND A.frames.jsonl
//!
//! prints a frame of that kind (e.g. `CommitTransactionRequest`) of its most common size,
//! decoded: the steady-state message, not a set-up or clean-up one.

use std::collections::BTreeMap;

use fdb_protocol::messages::decode_any;
use fdb_tests::{load_capture, Dir};

/// Per (direction, kind): frames and wire bytes (length prefix, checksum, token, message).
type Census = BTreeMap<(&'static str, String), (u64, u64)>;

fn kind_name(message: &bytes::Bytes) -> String {
    match decode_any(message) {
        Ok(m) => m.name().to_string(),
        Err(_) => "(not decoded)".to_string(),
    }
}

fn census(path: &str) -> Census {
    let cap = load_capture(std::path::Path::new(path));
    let mut c = Census::new();
    for f in cap.frames.iter().filter(|f| !f.is_connect) {
        let dir = match f.dir {
            Dir::ClientToServer => "c2s",
            Dir::ServerToClient => "s2c",
        };
        let e = c.entry((dir, kind_name(&f.message()))).or_default();
        e.0 += 1;
        e.1 += f.wire_bytes().len() as u64;
    }
    c
}

fn show(kind: &str, path: &str) {
    let cap = load_capture(std::path::Path::new(path));
    let frames: Vec<_> = cap
        .frames
        .iter()
        .filter(|f| !f.is_connect && kind_name(&f.message()) == kind)
        .collect();
    let mut by_size: BTreeMap<usize, usize> = BTreeMap::new();
    for f in &frames {
        *by_size.entry(f.wire_bytes().len()).or_default() += 1;
    }
    let common = by_size.iter().max_by_key(|(_, n)| **n).map(|(s, _)| *s);
    let pick = frames.iter().find(|f| Some(f.wire_bytes().len()) == common);
    match pick {
        Some(f) => {
            let len = f.wire_bytes().len();
            match decode_any(&f.message()) {
                Ok(m) => {
                    println!(
                        "{len} bytes on the wire ({} of message; re-encoded here: {}): {m:?}",
                        f.message().len(),
                        m.encode().len()
                    );
                    if std::env::var_os("WIRE_CENSUS_HEX").is_some() {
                        let hex =
                            |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                        println!("real {}\nours {}", hex(&f.message()), hex(&m.encode()));
                    }
                }
                Err(e) => println!("{len} bytes on the wire, not decoded: {e:?}"),
            }
        }
        None => println!("no {kind} in {path}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 3 && args[0] == "--show" {
        show(&args[1], &args[2]);
        return;
    }
    if args.is_empty() || args.len() > 2 {
        eprintln!("usage: wire_census A.frames.jsonl [B.frames.jsonl]");
        std::process::exit(2);
    }
    let a = census(&args[0]);
    let b = args.get(1).map(|p| census(p));
    let mut keys: Vec<_> = a.keys().cloned().collect();
    if let Some(b) = &b {
        keys.extend(b.keys().cloned());
    }
    keys.sort();
    keys.dedup();
    println!("| dir | kind | frames | bytes | bytes/frame |");
    println!("|---|---|---:|---:|---:|");
    for k in keys {
        let (n1, b1) = a.get(&k).copied().unwrap_or_default();
        let (n, bytes) = match &b {
            None => (n1 as i64, b1 as i64),
            Some(b) => {
                let (n2, b2) = b.get(&k).copied().unwrap_or_default();
                (n2 as i64 - n1 as i64, b2 as i64 - b1 as i64)
            }
        };
        if n == 0 {
            continue;
        }
        println!(
            "| {} | {} | {n} | {bytes} | {:.1} |",
            k.0,
            k.1,
            bytes as f64 / n as f64
        );
    }
}
