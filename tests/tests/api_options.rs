//! The typed options and atomic ops against `fdb.options` at 7.3.77, as the Python binding
//! generates it (`fdb/fdboptions.py`): every transaction option, database option and
//! mutation type the binding offers exists here with the same code and value kind, and each
//! is either accepted or refused with `unsupported_operation` — none is unknown.
//!
//! Needs `python3 -m pip install foundationdb==7.3.77`; without it the test prints a notice
//! and passes (it fails if `FDB_SHARED_DIR` is set, as CI sets it).

use std::process::Command;

use fdb_protocol::error::ErrorCode;
use fdb_protocol::{DatabaseOption, MutationType, TransactionOption};

/// Prints `scope name code kind` for every option of the binding.
const SCRIPT: &str = r#"
import fdb.fdboptions as o
for scope in ("TransactionOption", "DatabaseOption", "MutationType"):
    for name, v in getattr(o, scope).items():
        print(scope, name, v[0], v[2].__name__)
"#;

fn python_options() -> Option<Vec<(String, String, i32, String)>> {
    let out = Command::new("python3").args(["-c", SCRIPT]).output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => e.to_string(),
            };
            assert!(
                std::env::var_os("FDB_SHARED_DIR").is_none(),
                "FDB_SHARED_DIR is set but Python's fdb is not importable: {why}"
            );
            println!(
                "skipped: Python's fdb binding is not importable ({why}); \
                 python3 -m pip install foundationdb==7.3.77 to run this test"
            );
            return None;
        }
    };
    let text = String::from_utf8(out.stdout).expect("utf-8");
    Some(
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f.len(), 4, "{l}");
                (
                    f[0].to_string(),
                    f[1].to_string(),
                    f[2].parse().expect("a code"),
                    f[3].to_string(),
                )
            })
            .collect(),
    )
}

/// A well-formed value of the binding's kind, as `fdb_*_set_option` receives it.
fn value(kind: &str) -> Option<Vec<u8>> {
    match kind {
        "NoneType" => None,
        "int" => Some(100i64.to_le_bytes().to_vec()),
        "str" | "bytes" => Some(b"abc".to_vec()),
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn every_binding_option_is_typed_with_its_code() {
    let Some(options) = python_options() else {
        return;
    };
    let (mut tx, mut db, mut mt) = (0, 0, 0);
    for (scope, name, code, kind) in &options {
        let v = value(kind);
        match scope.as_str() {
            "TransactionOption" => {
                let opt = TransactionOption::from_code(*code, v.as_deref())
                    .unwrap_or_else(|e| panic!("{name} ({code}, {kind}): {e:?}"));
                assert_eq!(opt.code(), *code, "{name}");
                // Accepted, or refused as unsupported: never an unknown option.
                if let Err(e) = opt.check_supported() {
                    assert_eq!(e.code(), ErrorCode::UNSUPPORTED_OPERATION, "{name}");
                }
                // An integer option without its value is malformed. (A value given to an
                // option that takes none is ignored by some, as NativeAPI's `setOption`
                // ignores it for `read_priority_*`, say.)
                if kind == "int" {
                    assert_eq!(
                        TransactionOption::from_code(*code, None),
                        Err(ErrorCode::INVALID_OPTION_VALUE),
                        "{name} without its value"
                    );
                }
                tx += 1;
            }
            "DatabaseOption" => {
                let opt = DatabaseOption::from_code(*code, v.as_deref())
                    .unwrap_or_else(|e| panic!("{name} ({code}, {kind}): {e:?}"));
                assert_eq!(opt.code(), *code, "{name}");
                if let Err(e) = opt.check() {
                    assert_eq!(e.code(), ErrorCode::UNSUPPORTED_OPERATION, "{name}");
                }
                db += 1;
            }
            "MutationType" => {
                let op = MutationType::from_code(u8::try_from(*code).expect("a u8 code"))
                    .unwrap_or_else(|| panic!("{name} ({code}) is no MutationType"));
                assert_eq!(op.code() as i32, *code, "{name}");
                // The deprecated names share their code with the bitwise ops.
                let canonical = match name.as_str() {
                    "and" => "bit_and",
                    "or" => "bit_or",
                    "xor" => "bit_xor",
                    n => n,
                };
                assert_eq!(op.name(), canonical);
                mt += 1;
            }
            other => panic!("scope {other}"),
        }
    }
    // The binding's 7.3.77 tables (hidden options are not in it).
    assert_eq!((tx, db, mt), (49, 19, 15));
    // Codes outside the tables are unknown options.
    assert_eq!(
        TransactionOption::from_code(12_345, None),
        Err(ErrorCode::INVALID_OPTION)
    );
    assert_eq!(
        DatabaseOption::from_code(12_345, None),
        Err(ErrorCode::INVALID_OPTION)
    );
}

/// The two transaction options 7.4 adds (the replica consistency check) are known and taken
/// (`replica_check.rs` tests what they do).
#[test]
fn the_options_7_4_adds_are_typed_and_taken() {
    let added = [
        TransactionOption::from_code(4000, None),
        TransactionOption::from_code(4001, Some(&(-2i64).to_le_bytes())),
    ];
    assert_eq!(
        added,
        [
            Ok(TransactionOption::EnableReplicaConsistencyCheck),
            Ok(TransactionOption::ConsistencyCheckRequiredReplicas(-2))
        ]
    );
    for opt in added.into_iter().flatten() {
        assert_eq!(opt.code() / 1000, 4);
        assert_eq!(opt.check_supported().map_err(|e| e.code()), Ok(()));
    }
}
