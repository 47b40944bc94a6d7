//! `rust-tokio`: this client over the tokio driver. One `Database` per run (its bootstrap
//! happens in the warmup), one task per worker on the shared runtime.

use std::sync::Arc;

use bytes::Bytes;
use fdb_api::driver::Driver;
use fdb_driver_tokio::{Database, RangeOptions, TokioDriver};
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::StreamingMode;

use super::{Arm, Ctx, RUST_TOKIO};
use crate::harness::{run_tokio, AsyncWorker, Counts, RunStats};
use crate::workload::{KeySet, Op, Rng, Workload};

pub struct TokioArm;

impl Arm for TokioArm {
    fn name(&self) -> &'static str {
        RUST_TOKIO
    }
    fn skip_reason(&self, ctx: &Ctx, w: Workload) -> Option<String> {
        ctx.data_skip(w)
    }
    fn run(
        &mut self,
        ctx: &Ctx,
        w: Workload,
        counts: Counts,
        seed: u64,
    ) -> Result<RunStats, String> {
        let db = {
            let _guard = ctx.rt.enter();
            Database::from_cluster_file(ctx.cluster.clone(), seed).expect("the driver starts")
        };
        let workers = (0..counts.workers)
            .map(|i| Worker {
                db: db.clone(),
                shape: Shape::new(ctx, w, seed, i),
            })
            .collect();
        drop(db);
        run_tokio(&ctx.rt, counts, &ctx.probes, workers)
    }
}

/// One worker of an async arm: its database handle and what its transactions do.
pub struct Worker<D: Driver> {
    pub db: fdb_api::Database<D>,
    pub shape: Shape,
}

/// What one worker's transactions do, for any driver: the workload, its keys, its RNG and
/// its sequence number (the keys it writes).
pub struct Shape {
    op: Op,
    keys: Arc<KeySet>,
    range: (KeySelector, KeySelector),
    rng: Rng,
    worker: usize,
    seq: u64,
}

impl Shape {
    pub fn new(ctx: &Ctx, w: Workload, seed: u64, worker: usize) -> Shape {
        Shape {
            op: w.op(),
            keys: ctx.keys.clone(),
            range: (
                KeySelector::first_greater_or_equal(Bytes::copy_from_slice(&ctx.keys.range_begin)),
                KeySelector::first_greater_or_equal(Bytes::copy_from_slice(&ctx.keys.range_end)),
            ),
            rng: Rng::new(seed.wrapping_add(worker as u64)),
            worker,
            seq: 0,
        }
    }

    /// One transaction on `db`.
    pub async fn txn<D: Driver>(&mut self, db: &fdb_api::Database<D>) -> Result<(), String> {
        self.seq += 1;
        let tx = db.create_transaction();
        match self.op {
            Op::Grv => {
                tx.get_read_version().await.map_err(err)?;
            }
            Op::Get { value_len } => {
                let keys = self.keys.read_keys(value_len);
                let key = &keys[self.rng.below(keys.len())];
                let v = tx.get(key).await.map_err(err)?;
                if v.map(|v| v.len()) != Some(value_len) {
                    return Err("get returned the wrong value".into());
                }
            }
            Op::Range { rows, .. } => {
                let (b, e) = self.range.clone();
                let got = tx
                    .get_range_with(b, e, range_options(rows), false)
                    .await
                    .map_err(err)?;
                if got.len() != rows {
                    return Err(format!("range read {} rows, not {rows}", got.len()));
                }
            }
            Op::Sets { count, value_len } => {
                tx.get_read_version().await.map_err(err)?;
                let value = self.keys.value(value_len);
                for k in self.keys.write_keys(self.worker, self.seq, count) {
                    tx.set(k, value);
                }
                tx.commit().await.map_err(err)?;
            }
        }
        Ok(())
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Range reads ask for everything at once, as the libfdb_c arm does.
pub fn range_options(rows: usize) -> RangeOptions {
    RangeOptions {
        limit: rows,
        mode: StreamingMode::WantAll,
        ..RangeOptions::default()
    }
}

impl AsyncWorker for Worker<TokioDriver> {
    async fn txn(&mut self) -> Result<(), String> {
        self.shape.txn(&self.db).await
    }
}

/// Writes every key the read workloads expect, 100 sets per transaction, and reads one
/// back.
pub fn populate(ctx: &Ctx) -> Result<(), String> {
    let keys = ctx.keys.clone();
    ctx.rt.block_on(async move {
        let db =
            Database::from_cluster_file(ctx.cluster.clone(), 0x9e11).expect("the driver starts");
        let rows = keys.population();
        for chunk in rows.chunks(100) {
            let tx = db.create_transaction();
            for (k, v) in chunk {
                tx.set(k, v);
            }
            tx.commit().await.map_err(|e| format!("populate: {e}"))?;
        }
        let tx = db.create_transaction();
        let check = tx.get(&keys.read1000[0]).await.map_err(err)?;
        if check.map(|v| v.len()) != Some(1000) {
            return Err("populate: a key written is not read back".to_string());
        }
        Ok(())
    })
}

/// Clears everything the benchmark wrote (the `fdb-bench/` prefix).
pub fn cleanup(ctx: &Ctx) -> Result<(), String> {
    let (begin, end) = KeySet::PREFIX_RANGE;
    ctx.rt.block_on(async move {
        let db =
            Database::from_cluster_file(ctx.cluster.clone(), 0x9e12).expect("the driver starts");
        let tx = db.create_transaction();
        tx.clear_range(begin, end);
        tx.commit()
            .await
            .map(|_| ())
            .map_err(|e| format!("cleanup: {e}"))
    })
}
