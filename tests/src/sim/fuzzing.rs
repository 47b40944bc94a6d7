//! A whole session on the simulated world, driven by bytes: the fuzz target `sim_session`
//! (`fuzz/`) and its stable smoke test (`tests/tests/sim.rs`) share this body. The bytes
//! pick the seed, the faults and a program of transactions (sets, clears, range clears,
//! point and range reads over eight keys); the simulated cluster answers. Every read must
//! agree with a model of what committed before it plus the transaction's own writes, and the
//! cluster must hold the model at the end: one sequential client, idempotent writes, so a
//! retried commit (after `commit_unknown_result`) changes nothing the model does not know.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Faults, Sim};
use crate::cluster::TestClusterBuilder;

/// One operation of a transaction.
#[derive(Clone, Copy, Debug)]
enum Op {
    Set(u8, u8),
    Clear(u8),
    ClearRange(u8, u8),
    Get(u8),
    GetRange,
}

fn key(k: u8) -> Vec<u8> {
    format!("k{}", k % 8).into_bytes()
}

/// The faults one byte picks: each bit turns one on, at rates that hit a short session
/// (bit 5: client clocks drift and jump; bit 6: coordinators are killed, paused and changed).
fn faults(bits: u8) -> Faults {
    Faults {
        min_delay: Duration::from_micros(10),
        max_delay: Duration::from_micros(if bits & 1 != 0 { 5_000 } else { 100 }),
        reset_every: (bits & 2 != 0).then(|| Duration::from_millis(5)),
        kill_every: (bits & 4 != 0).then(|| Duration::from_millis(20)),
        max_downtime: Duration::from_millis(300),
        pause_every: (bits & 8 != 0).then(|| Duration::from_millis(20)),
        move_every: (bits & 16 != 0).then(|| Duration::from_millis(5)),
        clock_drift: if bits & 32 != 0 { 300 } else { 0 },
        clock_jump_every: (bits & 32 != 0).then(|| Duration::from_millis(200)),
        max_clock_jump: Duration::from_millis(500),
        coordinator_faults: bits & 64 != 0,
        coordinator_change_every: (bits & 64 != 0).then(|| Duration::from_millis(500)),
        partition_every: (bits & 128 != 0).then(|| Duration::from_millis(10)),
        until: Duration::from_secs(2),
    }
}

/// The program `data` spells: transactions of operations, a `0xff` byte ending each.
fn program(data: &[u8]) -> Vec<Vec<Op>> {
    let mut txs = vec![Vec::new()];
    let mut it = data.iter().copied();
    while let Some(b) = it.next() {
        if b == 0xff {
            txs.push(Vec::new());
            continue;
        }
        let arg = it.next().unwrap_or(0);
        let op = match b % 5 {
            0 => Op::Set(b / 5, arg),
            1 => Op::Clear(b / 5),
            2 => Op::ClearRange(b / 5, arg),
            3 => Op::Get(b / 5),
            _ => Op::GetRange,
        };
        let tx = txs.last_mut().expect("one at least");
        if tx.len() < 16 {
            tx.push(op);
        }
    }
    txs.truncate(8);
    txs
}

/// Applies a transaction's writes to `m`.
fn apply(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Set(k, v) => {
                m.insert(key(k), vec![v]);
            }
            Op::Clear(k) => {
                m.remove(&key(k));
            }
            Op::ClearRange(a, b) => {
                let (a, b) = (key(a), key(b));
                m.retain(|k, _| !(a <= *k && *k < b));
            }
            Op::Get(_) | Op::GetRange => {}
        }
    }
}

/// Runs the session `data` spells; panics on a read that disagrees with the model, on a
/// final state that does, and on a run that does not finish.
pub fn session(data: &[u8]) {
    let mut seed = [0u8; 8];
    let n = data.len().min(8);
    seed[..n].copy_from_slice(&data[..n]);
    let bits = data.get(8).copied().unwrap_or(0);
    let txs = program(data.get(9..).unwrap_or(&[]));
    let mut world = Sim::with(
        u64::from_le_bytes(seed),
        TestClusterBuilder::default(),
        faults(bits),
    );
    world.limit = Duration::from_secs(120);
    let model = world.run(move |db| async move {
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for ops in txs {
            let before = model.clone();
            // After a maybe-committed attempt, a retry may read the transaction's own
            // earlier commit: its reads then see `before` with the whole transaction applied.
            let mut after = before.clone();
            apply(&mut after, &ops);
            let mut attempt = 0;
            let done = db
                .run(|tx| {
                    attempt += 1;
                    let (ops, mut view) = (ops.clone(), before.clone());
                    let mut again = (attempt > 1).then(|| after.clone());
                    async move {
                        for op in &ops {
                            match *op {
                                Op::Set(k, v) => tx.set(key(k), [v]),
                                Op::Clear(k) => tx.clear(key(k)),
                                Op::ClearRange(a, b) => tx.clear_range(key(a), key(b)),
                                Op::Get(k) => {
                                    let got = tx.get(key(k)).await?.map(|v| v.to_vec());
                                    let alt = again.as_ref().map(|a| a.get(&key(k)).cloned());
                                    if alt != Some(got.clone()) {
                                        assert_eq!(got, view.get(&key(k)).cloned(), "{op:?}");
                                    }
                                }
                                Op::GetRange => {
                                    let rows = tx.get_range(b"k", b"l", 0).await?;
                                    let got: Vec<(Vec<u8>, Vec<u8>)> = rows
                                        .iter()
                                        .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
                                        .collect();
                                    let want: Vec<(Vec<u8>, Vec<u8>)> =
                                        view.clone().into_iter().collect();
                                    let alt: Option<Vec<(Vec<u8>, Vec<u8>)>> =
                                        again.clone().map(|a| a.into_iter().collect());
                                    if alt.as_ref() != Some(&got) {
                                        assert_eq!(got, want, "range read");
                                    }
                                }
                            }
                            apply(&mut view, std::slice::from_ref(op));
                            if let Some(a) = &mut again {
                                apply(a, std::slice::from_ref(op));
                            }
                        }
                        Ok(())
                    }
                })
                .await;
            match done {
                Ok(()) => apply(&mut model, &ops),
                // Given up on: it may have committed or not; learn which from the cluster.
                Err(_) => {
                    model = loop {
                        let read = db.run(|tx| async move { tx.get_range(b"k", b"l", 0).await });
                        if let Ok(rows) = read.await {
                            break rows
                                .iter()
                                .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
                                .collect();
                        }
                        super::sleep(Duration::from_millis(100)).await;
                    };
                }
            }
        }
        model
    });
    let held: BTreeMap<Vec<u8>, Vec<u8>> = world
        .cluster()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"k"))
        .collect();
    assert_eq!(held, model, "the cluster holds what committed");
}
