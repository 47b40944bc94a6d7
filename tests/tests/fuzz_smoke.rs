//! The fuzz targets (`fdb_protocol::fuzzing::TARGETS`) on stable, without libFuzzer: every
//! body over real captured traffic, over truncated and bit-flipped captured messages, and over
//! deterministic pseudo-random inputs. Passing means nothing panicked and every round-trip
//! property the bodies assert held.
//!
//! `committed_corpus` runs the minimized libFuzzer corpus committed in `fuzz/corpus/NAME/`.
//!
//! `cargo test -p fdb-tests --test fuzz_smoke seed_fuzz_corpus -- --ignored` writes the
//! captured inputs to `fuzz/corpus/NAME/` as a starting corpus for `cargo fuzz run NAME`.

use fdb_tests::to_hex as hex;
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use bytes::Bytes;
use fdb_protocol::fuzzing::TARGETS;
use fdb_protocol::messages::{decode_any, AnyMessage, ErrorOr};
use fdb_tests::{load_captures, Capture, Dir};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Runs every target on `input`; on a panic, names the target and the input.
fn run_all(what: &str, input: &[u8]) {
    for (name, f) in TARGETS {
        if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
            panic!(
                "fuzz target {name} panicked on {what} ({} bytes): {}",
                input.len(),
                hex(&input[..input.len().min(256)])
            );
        }
    }
}

/// Distinct captured messages (token stripped), with where they came from.
fn captured_messages(caps: &[Capture]) -> Vec<(String, Vec<u8>)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for cap in caps {
        for f in cap.frames.iter().filter(|f| !f.is_connect) {
            let m = f.message().to_vec();
            if seen.insert(m.clone()) {
                out.push((format!("{} {:?} seq {}", cap.name, f.dir, f.seq), m));
            }
        }
    }
    out
}

#[test]
fn targets_match_the_fuzz_crate() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    assert_eq!(TARGETS.len(), 20);
    for (name, _) in TARGETS {
        let path = dir.join(format!("fuzz_targets/{name}.rs"));
        let src =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            src.contains(&format!("fdb_protocol::fuzzing::{name}(")),
            "{name}"
        );
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}");
    }
}

#[test]
fn captured_frames_and_streams() {
    // The 7.3.77 captures and the 7.4.6 ones.
    let mut caps = load_captures();
    caps.extend(fdb_tests::load_captures_in(&fdb_tests::captures_v74_dir()));
    let mut n = 0;
    for cap in &caps {
        for f in &cap.frames {
            let what = format!("{} {:?} seq {}", cap.name, f.dir, f.seq);
            run_all(&what, &f.wire_bytes());
            if !f.is_connect {
                run_all(&what, &f.message());
            }
            n += 1;
        }
        for dir in [Dir::ClientToServer, Dir::ServerToClient] {
            run_all(&format!("{} {dir:?} stream", cap.name), &cap.stream(dir));
        }
    }
    assert!(n > 200, "only {n} frames");
}

#[test]
fn truncated_and_bit_flipped_messages() {
    let caps = load_captures();
    let msgs = captured_messages(&caps);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut runs = 0;
    for (what, m) in &msgs {
        // Small messages get many mutations, the 50-80 KB range replies a few.
        let budget = (4 << 20) / m.len().max(1);
        let budget = budget.clamp(16, 512);
        let mut cuts: BTreeSet<usize> = (0..m.len().min(24)).collect();
        cuts.extend((0..budget).map(|_| rng.below(m.len())));
        cuts.insert(m.len().saturating_sub(1));
        for cut in cuts {
            run_all(&format!("{what} cut to {cut}"), &m[..cut]);
            runs += 1;
        }
        // Every bit of the header, then bits anywhere.
        let header_bits = 64.min(8 * m.len());
        let flips = (0..header_bits).chain((0..budget).map(|_| rng.below(8 * m.len())));
        let mut buf = m.clone();
        for bit in flips {
            buf[bit / 8] ^= 1 << (bit % 8);
            run_all(&format!("{what} bit {bit} flipped"), &buf);
            buf[bit / 8] ^= 1 << (bit % 8);
            runs += 1;
        }
        // A few whole bytes set to hostile values (counts, offsets, tags).
        for _ in 0..budget / 4 {
            let at = rng.below(m.len());
            let old = buf[at];
            for v in [0x00, 0x03, 0x7f, 0x80, 0xff] {
                buf[at] = v;
                run_all(&format!("{what} byte {at} set to {v:#x}"), &buf);
                runs += 1;
            }
            buf[at] = old;
        }
    }
    println!("{} messages, {runs} mutated inputs", msgs.len());
}

#[test]
fn pseudo_random_inputs() {
    let caps = load_captures();
    let msgs = captured_messages(&caps);
    let small: Vec<&Vec<u8>> = msgs
        .iter()
        .map(|(_, m)| m)
        .filter(|m| m.len() <= 4096)
        .collect();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for i in 0..6000 {
        let input = match i % 3 {
            // Plain noise.
            0 => {
                let n = rng.below(600);
                rng.bytes(n)
            }
            // Noise behind a real header (small root offset, a real file identifier), so
            // the readers get past the identifier check.
            1 => {
                let m = small[rng.below(small.len())];
                let n = 8 + rng.below(600);
                let mut v = rng.bytes(n);
                v[..8].copy_from_slice(&m[..8]);
                v[0] = (8 + 4 * rng.below(16)) as u8;
                v[1..4].fill(0);
                v
            }
            // A real message with a random window overwritten.
            _ => {
                let mut v = small[rng.below(small.len())].clone();
                let at = rng.below(v.len());
                let len = 1 + rng.below(16);
                for b in v.iter_mut().skip(at).take(len) {
                    *b = rng.next() as u8;
                }
                v
            }
        };
        run_all(&format!("random input #{i}"), &input);
    }
}

/// Every file of the committed, minimized corpus (`fuzz/corpus/NAME/`) through its target's
/// body: what libFuzzer found interesting once guards against regressions in every test run.
#[test]
fn committed_corpus() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut total = 0;
    for (name, f) in TARGETS {
        let dir = root.join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name} has no committed corpus");
        for path in &files {
            let input = std::fs::read(path).unwrap();
            if catch_unwind(AssertUnwindSafe(|| f(&input))).is_err() {
                panic!("fuzz target {name} panicked on {}", path.display());
            }
        }
        total += files.len();
    }
    println!("{total} corpus inputs");
}

/// Writes the captured inputs as a seed corpus for `cargo fuzz run NAME`, each in the shape its
/// target reads: stream prefixes for `frame_decoder`, connect packets for `connect_packet`, the
/// coordinators' serialized leader info for `leader_info`, each capture's server replies as
/// session records for `client_session`, packed tuples for `tuple_decoder`, and every captured
/// message for the message targets.
#[test]
#[ignore = "writes fuzz/corpus/; run by hand before fuzzing"]
fn seed_fuzz_corpus() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let caps = load_captures();
    let write = |target: &str, name: &str, data: &[u8]| {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), data).unwrap();
    };
    for cap in &caps {
        for dir in [Dir::ClientToServer, Dir::ServerToClient] {
            // Whole streams run up to 1 MB; libFuzzer mutates a 64 KB prefix far faster, and
            // it still holds many complete frames.
            let s = cap.stream(dir);
            let s = &s[..s.len().min(SEED_STREAM_PREFIX)];
            write("frame_decoder", &format!("{}-{dir:?}", cap.name), s);
        }
        let replies: Vec<Bytes> = cap
            .packets(Dir::ServerToClient)
            .map(|f| f.message())
            .collect();
        if !replies.is_empty() {
            write(
                "client_session",
                &cap.name,
                &session_records(replies.iter().map(|m| &m[..])),
            );
        }
        for f in &cap.frames {
            let name = format!("{}-{:?}-{}", cap.name, f.dir, f.seq);
            if f.is_connect {
                write("connect_packet", &name, &f.wire_bytes());
                continue;
            }
            let m = f.message();
            if let Ok(AnyMessage::Leader(ErrorOr::Ok(l))) = decode_any(&m) {
                if let Some(l) = l.0 {
                    write("leader_info", &name, &l.serialized_info);
                }
            }
            for (target, _) in TARGETS {
                if !NOT_MESSAGE_TARGETS.contains(target) {
                    write(target, &name, &m);
                }
            }
        }
    }
    for (i, t) in tuple_seeds().iter().enumerate() {
        write("tuple_decoder", &format!("tuple-{i}"), t);
    }
    println!("seed corpus written to {}", root.display());
}

/// The longest stream prefix `seed_fuzz_corpus` writes for `frame_decoder`.
const SEED_STREAM_PREFIX: usize = 64 << 10;

/// Targets whose input is not one whole message.
const NOT_MESSAGE_TARGETS: &[&str] = &[
    "frame_decoder",
    "connect_packet",
    "leader_info",
    "client_session",
    "tuple_decoder",
    "protocol_handshake",
];

/// `client_session`'s input: one record `[selector, time step, len lo, len hi, body]` per reply,
/// each answering the oldest open request with no time passing.
///
/// Replies too big to fit are left out: a session input stays under `SEED_SESSION_MAX`, since
/// libFuzzer explores small inputs far faster.
fn session_records<'a>(bodies: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut data = Vec::new();
    for body in bodies {
        if data.len() + 4 + body.len() > SEED_SESSION_MAX {
            continue;
        }
        data.extend_from_slice(&[0, 0]);
        data.extend_from_slice(&(body.len() as u16).to_le_bytes());
        data.extend_from_slice(body);
    }
    data
}

/// The longest session input `seed_fuzz_corpus` writes for `client_session`.
const SEED_SESSION_MAX: usize = 16 << 10;

/// The client-session target fed real server replies, sent to whichever request the input
/// picks: well-formed messages of the wrong type, replies out of order, time jumps.
#[test]
fn client_session_with_misrouted_captured_replies() {
    let replies: Vec<Vec<u8>> = load_captures()
        .iter()
        .flat_map(|c| {
            c.packets(Dir::ServerToClient)
                .map(|f| f.message().to_vec())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!replies.is_empty());
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    for _ in 0..200 {
        let mut data = Vec::new();
        for _ in 0..(1 + rng.below(24)) {
            let body = &replies[rng.below(replies.len())];
            data.push(rng.next() as u8);
            data.push(rng.next() as u8);
            data.extend_from_slice(&(body.len() as u16).to_le_bytes());
            data.extend_from_slice(body);
        }
        fdb_protocol::fuzzing::client_session(&data);
    }
}

/// The tuple decoder target over packed tuples of every type, truncated, bit-flipped and with
/// bytes set to type codes and to the escape: inputs one byte away from something valid.
#[test]
fn tuple_decoder_over_mutated_tuples() {
    let seeds = tuple_seeds();
    let tuple_decoder = fdb_protocol::fuzzing::tuple_decoder;
    let mut rng = Rng(0x7475_706c_6500_0001);
    let mut runs = 0;
    for seed in &seeds {
        tuple_decoder(seed);
        for cut in 0..seed.len() {
            tuple_decoder(&seed[..cut]);
            tuple_decoder(&seed[cut..]);
        }
        let mut buf = seed.clone();
        for bit in 0..8 * buf.len() {
            buf[bit / 8] ^= 1 << (bit % 8);
            tuple_decoder(&buf);
            buf[bit / 8] ^= 1 << (bit % 8);
        }
        for _ in 0..200 {
            let at = rng.below(buf.len());
            let old = buf[at];
            for v in [
                0x00, 0x01, 0x02, 0x05, 0x0b, 0x0c, 0x14, 0x1c, 0x1d, 0x20, 0x21, 0x33, 0xff,
            ] {
                buf[at] = v;
                tuple_decoder(&buf);
                runs += 1;
            }
            buf[at] = old;
        }
    }
    // Random splices of the seeds.
    for _ in 0..2000 {
        let a = &seeds[rng.below(seeds.len())];
        let b = &seeds[rng.below(seeds.len())];
        let mut v = a[..rng.below(a.len() + 1)].to_vec();
        v.extend_from_slice(&b[rng.below(b.len() + 1)..]);
        tuple_decoder(&v);
        runs += 1;
    }
    println!("{runs} tuple inputs");
}

/// Packed tuples of every element type, nested, at the integer size limits and with escapes:
/// the seeds of `tuple_decoder`, here and in its libFuzzer corpus.
fn tuple_seeds() -> Vec<Vec<u8>> {
    use fdb_protocol::tuple::{pack, BigInt, Element, Uuid, Versionstamp};
    vec![
        pack(&("a\0b", b"\x00\xff".to_vec(), -1i64, 1u64 << 63)),
        pack(&(
            (Element::Nil, ((), (Element::Nil,))),
            BigInt::from(-(1i128 << 90)),
            1.5f32,
        )),
        pack(&(f64::NAN, -0.0f64, true, false, Uuid::from_u128(u128::MAX))),
        pack(&(
            Versionstamp::incomplete(7),
            Versionstamp::complete([0; 10], 1),
        )),
        pack(&BigInt::from_magnitude(true, &[0xff; 255]).unwrap()),
        b"\x1d\x08\xff\xff\xff\xff\xff\xff\xff\xff\x0b\xf7\x00\x00\x00\x00\x00\x00\x00\x00"
            .to_vec(),
        [vec![0x05; 300], vec![0x00; 300]].concat(),
        pack(&(i64::MIN, i64::MAX, 0i64)),
        pack(&("\u{e9}\u{1f600}", -255i64, 256u64)),
    ]
}
