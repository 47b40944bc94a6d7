//! The tuple layer against the Python binding's `fdb.tuple` (FDB 7.3.77, the bindingtester's
//! reference): thousands of random tuples of every type, packed by both and compared byte for
//! byte; our bytes decoded by Python; `pack_with_versionstamp` behind random prefixes; and
//! Python's `fdb.tuple.compare` against our ordering.
//!
//! Needs `python3 -m pip install foundationdb==7.3.77`. Without it the test prints a notice
//! and passes, unless `FDB_SHARED_DIR` is set (CI), where it is required. `fdb.tuple` loads
//! without libfdb_c; with libfdb_c on the library path the script also selects API version
//! 730 first, as an application would.

use fdb_tests::to_hex as hex;
use std::io::Write;
use std::process::{Command, Stdio};

use fdb_protocol::tuple::{
    pack, pack_into_like_python, pack_into_with_versionstamp_like_python, BigInt, Bytes, Element,
    Uuid, Versionstamp,
};

const SCRIPT: &str = r#"
import sys, struct, uuid
import fdb
try:
    fdb.api_version(730)
    mode = "with libfdb_c, api_version(730)"
except Exception:
    # Without libfdb_c: fdb.tuple needs fdb.impl only for one isinstance check.
    import types
    fdb.impl = types.SimpleNamespace(Value=type("Value", (), {}))
    mode = "fdb.tuple without libfdb_c"
import fdb.tuple as T
def F(h): return T.SingleFloat(struct.unpack('>f', bytes.fromhex(h))[0])
def D(h): return struct.unpack('>d', bytes.fromhex(h))[0]
def B(h): return bytes.fromhex(h)
def S(h): return bytes.fromhex(h).decode('utf-8')
def U(h): return uuid.UUID(bytes=bytes.fromhex(h))
def V(h, u): return T.Versionstamp(bytes.fromhex(h) if h else None, u)
def I(neg, h):
    v = int(h, 16)
    return -v if neg else v
print(mode)
for line in sys.stdin:
    op, arg = line.rstrip('\n').split(' ', 1)
    if op == 'pack':
        print(T.pack(eval(arg)).hex())
    elif op == 'repack':
        print(T.pack(T.unpack(bytes.fromhex(arg))).hex())
    elif op == 'vpack':
        prefix, expr = arg.split(' ', 1)
        print(T.pack_with_versionstamp(eval(expr), prefix=bytes.fromhex(prefix[1:])).hex())
    elif op == 'cmp':
        a, b = eval(arg)
        print(T.compare(a, b))
"#;

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

fn random_element(r: &mut Rng, depth: usize) -> Element<'static> {
    match r.below(if depth < 3 { 12 } else { 11 }) {
        0 => Element::Nil,
        1 => {
            let n = r.below(12);
            let v: Vec<u8> = (0..n)
                .map(|_| [0u8, 0xff, 1, r.next() as u8][r.below(4)])
                .collect();
            Element::Bytes(Bytes::from(v))
        }
        2 => {
            let n = r.below(8);
            let s: String = (0..n)
                .map(|_| match r.below(5) {
                    0 => '\0',
                    1 => '\u{ff}',
                    2 => '\u{10ffff}',
                    3 => 'a',
                    _ => char::from_u32(r.next() as u32 % 0x11_0000).unwrap_or('\u{fffd}'),
                })
                .collect();
            Element::String(s.into())
        }
        3 => Element::Int(match r.below(3) {
            0 => r.next() as i64,
            1 => r.below(600) as i64 - 300,
            _ => (r.next() as i64) >> r.below(64),
        }),
        4 => {
            // Around 2^63, 2^64 (the bindings' disagreement sits at 2^64 - 1) and beyond.
            let base: u128 = [1 << 63, 1 << 64, 1 << 64, u128::MAX >> 3][r.below(4)];
            let m = base - 3 + r.below(7) as u128;
            let neg = r.below(2) == 0;
            Element::from(BigInt::from_magnitude(neg, BigInt::from(m).magnitude()).unwrap())
        }
        5 => {
            let n = r.below(256);
            let m = r.bytes(n);
            Element::from(BigInt::from_magnitude(r.below(2) == 0, &m).unwrap())
        }
        6 => {
            // Python's SingleFloat goes through C doubles, which may quiet a signalling
            // NaN: keep NaNs quiet.
            let mut bits = match r.below(3) {
                0 => [
                    0,
                    0x8000_0000,
                    0x7f80_0000,
                    0xff80_0000,
                    0x7fc0_0000,
                    0xffff_ffff,
                ][r.below(6)],
                _ => r.next() as u32,
            };
            if f32::from_bits(bits).is_nan() {
                bits |= 0x0040_0000;
            }
            Element::Float(f32::from_bits(bits))
        }
        7 => Element::Double(f64::from_bits(match r.below(3) {
            0 => [
                0,
                1 << 63,
                0x7ff0 << 48,
                0xfff0 << 48,
                0x7ff8 << 48,
                u64::MAX,
            ][r.below(6)],
            _ => r.next(),
        })),
        8 => Element::Bool(r.below(2) == 0),
        9 => Element::Uuid(Uuid::from_u128(
            ((r.next() as u128) << 64) | r.next() as u128,
        )),
        10 => {
            let mut v = [0u8; 10];
            v.copy_from_slice(&r.bytes(10));
            if v == [0xff; 10] {
                v[0] = 0;
            }
            Element::Versionstamp(Versionstamp::complete(v, r.next() as u16))
        }
        _ => Element::Tuple(random_tuple(r, depth + 1)),
    }
}

fn random_tuple(r: &mut Rng, depth: usize) -> Vec<Element<'static>> {
    let n = r.below(6);
    (0..n).map(|_| random_element(r, depth)).collect()
}

/// The element as a Python expression (using the script's helpers).
fn py(e: &Element) -> String {
    match e {
        Element::Nil => "None".into(),
        Element::Bytes(b) => format!("B('{}')", hex(b)),
        Element::String(s) => format!("S('{}')", hex(s.as_bytes())),
        Element::Tuple(v) => py_tuple(v),
        Element::Int(i) => format!("({i})"),
        Element::BigInt(b) => format!(
            "I({}, '{}')",
            if b.is_negative() { "True" } else { "False" },
            if b.magnitude().is_empty() {
                "0".into()
            } else {
                hex(b.magnitude())
            }
        ),
        Element::Float(f) => format!("F('{}')", hex(&f.to_bits().to_be_bytes())),
        Element::Double(f) => format!("D('{}')", hex(&f.to_bits().to_be_bytes())),
        Element::Bool(b) => if *b { "True" } else { "False" }.into(),
        Element::Uuid(u) => format!("U('{}')", hex(u.as_bytes())),
        Element::Versionstamp(v) if v.is_complete() => {
            format!(
                "V('{}', {})",
                hex(v.transaction_version()),
                v.user_version()
            )
        }
        Element::Versionstamp(v) => format!("V('', {})", v.user_version()),
    }
}

fn py_tuple(v: &[Element]) -> String {
    let items: Vec<String> = v.iter().map(py).collect();
    match items.len() {
        1 => format!("({},)", items[0]),
        _ => format!("({})", items.join(", ")),
    }
}

/// Whether the tuple holds 2^64 - 1 or -(2^64 - 1), which Python packs in its long form.
fn holds_python_edge(v: &[Element]) -> bool {
    v.iter().any(|e| match e {
        Element::BigInt(b) => b.magnitude() == [0xff; 8],
        Element::Tuple(t) => holds_python_edge(t),
        _ => false,
    })
}

fn python_pack(t: &[Element]) -> Vec<u8> {
    let mut out = Vec::new();
    pack_into_like_python(&t.to_vec(), &mut out);
    out
}

/// Puts one incomplete versionstamp somewhere in `t`, maybe inside a nested tuple.
fn with_incomplete_stamp(r: &mut Rng, t: &mut Vec<Element<'static>>) {
    let stamp = Element::Versionstamp(Versionstamp::incomplete(r.next() as u16));
    let at = r.below(t.len() + 1);
    match t.get_mut(at) {
        Some(Element::Tuple(inner)) if r.below(2) == 0 => {
            let at = r.below(inner.len() + 1);
            inner.insert(at, stamp);
        }
        _ => t.insert(at, stamp),
    }
}

/// Runs the script over `input`; `None` when Python's `fdb` is not importable here.
fn run_python(input: &str) -> Option<Vec<String>> {
    let probe = Command::new("python3")
        .args(["-c", "import fdb.tuple"])
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        let why = match probe {
            Ok(o) => String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
                .to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            std::env::var_os("FDB_SHARED_DIR").is_none(),
            "FDB_SHARED_DIR is set but Python's fdb is not importable \
             (python3 -m pip install foundationdb==7.3.77): {why}"
        );
        println!(
            "skipped: Python's fdb binding is not importable ({why}); \
                  python3 -m pip install foundationdb==7.3.77 to run this test"
        );
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "the Python script failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    println!("Python binding: {}", lines.remove(0));
    Some(lines)
}

#[test]
fn python_binding_packs_compares_and_reads_the_same() {
    let mut r = Rng(0x5eed_7475_706c_6573);
    let tuples: Vec<Vec<Element<'static>>> = (0..3000).map(|_| random_tuple(&mut r, 0)).collect();
    // Pairs sharing a prefix, so comparisons get past the first element.
    let pairs: Vec<(Vec<Element>, Vec<Element>)> = (0..1500)
        .map(|_| {
            let a = random_tuple(&mut r, 0);
            let mut b = a[..r.below(a.len() + 1)].to_vec();
            b.extend(random_tuple(&mut r, 0));
            (a, b)
        })
        .collect();
    let stamped: Vec<(Vec<u8>, Vec<Element>)> = (0..800)
        .map(|_| {
            let mut t = random_tuple(&mut r, 0);
            with_incomplete_stamp(&mut r, &mut t);
            let n = r.below(6);
            (r.bytes(n), t)
        })
        .collect();

    let mut input = String::new();
    for t in &tuples {
        input += &format!("pack {}\n", py_tuple(t));
        input += &format!("repack {}\n", hex(&pack(t)));
    }
    for (a, b) in &pairs {
        input += &format!("cmp ({}, {})\n", py_tuple(a), py_tuple(b));
    }
    for (prefix, t) in &stamped {
        input += &format!("vpack x{} {}\n", hex(prefix), py_tuple(t));
    }
    let Some(lines) = run_python(&input) else {
        return;
    };
    let mut lines = lines.into_iter();
    let mut edges = 0;
    for t in &tuples {
        let theirs = lines.next().unwrap();
        assert_eq!(
            theirs,
            hex(&python_pack(t)),
            "Python packs {t:?} differently"
        );
        let ours = pack(t);
        if hex(&ours) != theirs {
            assert!(
                holds_python_edge(t),
                "{t:?}: ours {} theirs {theirs}",
                hex(&ours)
            );
            edges += 1;
        }
        // Python read our bytes as the same tuple.
        assert_eq!(
            lines.next().unwrap(),
            theirs,
            "Python reads {} differently",
            hex(&ours)
        );
    }
    for (a, b) in &pairs {
        let theirs: i32 = lines.next().unwrap().parse().unwrap();
        let ours = a.cmp(b) as i32;
        assert_eq!(ours, theirs, "compare({a:?}, {b:?})");
    }
    for (prefix, t) in &stamped {
        let theirs = lines.next().unwrap();
        let mut ours = prefix.clone();
        pack_into_with_versionstamp_like_python(&t.clone(), &mut ours).unwrap();
        assert_eq!(
            theirs,
            hex(&ours),
            "pack_with_versionstamp({t:?}, prefix={prefix:x?})"
        );
    }
    assert!(lines.next().is_none());
    assert!(
        edges > 0,
        "no tuple held ±(2^64 - 1); the generator lost its edge cases"
    );
    println!(
        "{} tuples packed and read back, {} comparisons, {} versionstamped keys: equal; \
         {edges} tuples with ±(2^64 - 1) differ only there, as expected",
        tuples.len(),
        pairs.len(),
        stamped.len()
    );
}
