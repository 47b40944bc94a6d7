//! Message conformance against real libfdb_c 7.3.77 <-> fdbserver 7.3.77 traffic:
//! every packet of every capture decodes into a typed message; every client message we
//! re-encode is byte-for-byte what libfdb_c sent; every server message round-trips.

use bytes::Bytes;
use fdb_protocol::messages::{decode_any, AnyMessage};
use fdb_tests::to_hex as hex;
use fdb_tests::{load_captures, Dir};

#[test]
fn every_packet_decodes_and_reencodes() {
    let mut failures = Vec::new();
    let mut total = 0;
    let mut decoded = 0;
    for cap in load_captures() {
        let mut cap_total = 0;
        let mut cap_ok = 0;
        for f in cap.frames.iter().filter(|f| !f.is_connect) {
            cap_total += 1;
            let msg = f.message();
            let m = match decode_any(&msg) {
                Ok(m) => m,
                Err(e) => {
                    failures.push(format!(
                        "{} {:?} seq {}: decode: {e}",
                        cap.name, f.dir, f.seq
                    ));
                    continue;
                }
            };
            let again = m.encode_for(fdb_protocol::version::Protocol::V7_3);
            match f.dir {
                Dir::ClientToServer => {
                    if again != msg[..] {
                        failures.push(format!(
                            "{} c2s seq {} {}: re-encoding differs ({} vs {} bytes)\n ours {}\n real {}",
                            cap.name,
                            f.seq,
                            m.name(),
                            again.len(),
                            msg.len(),
                            hex(&again),
                            hex(&msg)
                        ));
                        continue;
                    }
                }
                Dir::ServerToClient => {
                    let back = decode_any(&Bytes::from(again)).expect("our encoding decodes");
                    if back != m {
                        failures.push(format!(
                            "{} s2c seq {} {}: round trip differs",
                            cap.name,
                            f.seq,
                            m.name()
                        ));
                        continue;
                    }
                }
            }
            cap_ok += 1;
        }
        println!(
            "{:>22}: {cap_ok}/{cap_total} packets decoded and re-encoded",
            cap.name
        );
        total += cap_total;
        decoded += cap_ok;
    }
    println!("all captures: {decoded}/{total}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total > 200);
}

/// Spot checks of decoded values against what the scenarios printed (`*.result.json`).
#[test]
fn decoded_values_match_scenario_results() {
    let caps = load_captures();
    let grv = caps.iter().find(|c| c.name == "grv").unwrap();
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fdb_tests::captures_dir().join("grv.result.json")).unwrap(),
    )
    .unwrap();
    let want = result["result"]["read_version"].as_i64().unwrap();
    let got: Vec<i64> = grv
        .packets(Dir::ServerToClient)
        .filter_map(|f| match decode_any(&f.message()).unwrap() {
            AnyMessage::GetReadVersionReply(r) => Some(r.into_result().unwrap().version),
            _ => None,
        })
        .collect();
    assert_eq!(got, vec![want]);
}
