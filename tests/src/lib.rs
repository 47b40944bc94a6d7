//! Shared helpers for the workspace tests: reading the real-traffic captures (libfdb_c 7.3.77
//! talking to fdbserver 7.3.77), vendored in `tests/data/fdb-captures/` from the team's
//! recordings (their `*.frames.jsonl` and `*.result.json`; the pcaps are not needed).

pub mod bank;
pub mod cluster;
pub mod differential;
pub mod dual;
pub mod python;
pub mod real;
pub mod replay;
pub mod sim;
pub mod testkit;

use std::path::PathBuf;

use bytes::Bytes;
use fdb_protocol::Uid;

/// Which way a frame went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    ClientToServer,
    ServerToClient,
}

/// One frame of a capture, as `decode_frames.py` split it.
#[derive(Clone, Debug)]
pub struct CapturedFrame {
    pub dir: Dir,
    pub seq: u64,
    pub is_connect: bool,
    /// The length field as sent.
    pub len: u32,
    /// The checksum as sent (packets only).
    pub checksum: Option<u64>,
    /// For a connect packet, the 40 bytes after its length; for a packet, token + message.
    pub payload: Bytes,
}

impl CapturedFrame {
    pub fn token(&self) -> Uid {
        Uid::from_bytes(&self.payload[..16]).expect("packets hold a token")
    }
    pub fn message(&self) -> Bytes {
        self.payload.slice(16..)
    }
    /// The exact bytes this frame occupied on the wire.
    pub fn wire_bytes(&self) -> Vec<u8> {
        let mut v = self.len.to_le_bytes().to_vec();
        if let Some(c) = self.checksum {
            v.extend_from_slice(&c.to_le_bytes());
        }
        v.extend_from_slice(&self.payload);
        v
    }
}

/// One scenario's capture.
#[derive(Clone, Debug)]
pub struct Capture {
    pub name: String,
    pub frames: Vec<CapturedFrame>,
}

impl Capture {
    /// The whole byte stream in one direction, as TCP carried it.
    pub fn stream(&self, dir: Dir) -> Vec<u8> {
        let mut frames: Vec<&CapturedFrame> = self.frames.iter().filter(|f| f.dir == dir).collect();
        frames.sort_by_key(|f| f.seq);
        frames.iter().flat_map(|f| f.wire_bytes()).collect()
    }
    pub fn packets(&self, dir: Dir) -> impl Iterator<Item = &CapturedFrame> {
        self.frames
            .iter()
            .filter(move |f| f.dir == dir && !f.is_connect)
    }
}

/// Bytes as lowercase hex, two digits each (how the tests print keys and compare them with
/// the Python binding's `bytes.hex()`).
pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Where the captures live: `$FDB_CAPTURES_DIR`, else the copy vendored in `tests/data/`
/// (recorded data, so a fresh clone tests against it with nothing beside the project).
pub fn captures_dir() -> PathBuf {
    if let Ok(d) = std::env::var("FDB_CAPTURES_DIR") {
        return PathBuf::from(d);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/fdb-captures")
}

/// The inverse of [`to_hex`], for hex the tests themselves hold (captures, recorded values):
/// panics on anything that is not hex, which in a test is a broken fixture.
pub fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Reads every `*.frames.jsonl` capture, sorted by name. Panics if none are found: the
/// conformance tests must not pass vacuously.
pub fn load_captures() -> Vec<Capture> {
    load_captures_in(&captures_dir())
}

/// Where the FDB 7.4.6 captures live (`tests/data/fdb-captures-7.4`, see its README).
pub fn captures_v74_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/fdb-captures-7.4")
}

/// Every `*.frames.jsonl` capture in `dir`, sorted by name (panics if there is none).
pub fn load_captures_in(dir: &std::path::Path) -> Vec<Capture> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("captures not found at {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".frames.jsonl"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no *.frames.jsonl in {}", dir.display());
    names.iter().map(|p| load_capture(p)).collect()
}

pub fn load_capture(path: &std::path::Path) -> Capture {
    let text = std::fs::read_to_string(path).expect("read capture");
    let name = path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_end_matches(".frames.jsonl")
        .to_string();
    let frames = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            let dir = match v["dir"].as_str() {
                Some("c2s") => Dir::ClientToServer,
                Some("s2c") => Dir::ServerToClient,
                other => panic!("bad dir {other:?}"),
            };
            CapturedFrame {
                dir,
                seq: v["seq"].as_u64().unwrap(),
                is_connect: v["kind"].as_str() == Some("connect"),
                len: v["len"].as_u64().unwrap() as u32,
                checksum: v["checksum"]
                    .as_str()
                    .map(|c| u64::from_str_radix(c, 16).unwrap()),
                payload: Bytes::from(from_hex(v["payload_hex"].as_str().unwrap())),
            }
        })
        .collect();
    Capture { name, frames }
}
