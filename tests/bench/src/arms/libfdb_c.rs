//! `libfdb_c`: the official C client (API 730) through the `foundationdb` crate, on the same
//! tokio runtime and with the same worker tasks as `rust-tokio`. Its network thread is
//! started once per process, here, and stopped when the arm is dropped.

use std::sync::Arc;

use foundationdb::api::{FdbApiBuilder, NetworkAutoStop};
use foundationdb::options::StreamingMode;
use foundationdb::{Database, KeySelector, RangeOption};

use super::{Arm, Ctx, LIBFDB_C};
use crate::harness::{run_tokio, AsyncWorker, Counts, RunStats};
use crate::workload::{KeySet, Op, Rng, Workload};

pub struct FdbCArm {
    _network: NetworkAutoStop,
}

impl FdbCArm {
    pub fn boot() -> Result<FdbCArm, String> {
        let builder = FdbApiBuilder::default()
            .set_runtime_version(730)
            .build()
            .map_err(|e| format!("libfdb_c: select API 730: {e}"))?;
        // SAFETY: booted once per process; the guard lives as long as the arm.
        let network = unsafe { builder.boot() }.map_err(|e| format!("libfdb_c: boot: {e}"))?;
        Ok(FdbCArm { _network: network })
    }
}

impl Arm for FdbCArm {
    fn name(&self) -> &'static str {
        LIBFDB_C
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
        let path = ctx.cluster_path.to_string_lossy().into_owned();
        let db = Arc::new(Database::new(Some(&path)).map_err(|e| format!("libfdb_c: open: {e}"))?);
        let workers = (0..counts.workers)
            .map(|i| FdbCWorker {
                db: db.clone(),
                op: w.op(),
                keys: ctx.keys.clone(),
                rng: Rng::new(seed.wrapping_add(i as u64)),
                worker: i,
                seq: 0,
            })
            .collect();
        run_tokio(&ctx.rt, counts, &ctx.probes, workers)
    }
}

struct FdbCWorker {
    db: Arc<Database>,
    op: Op,
    keys: Arc<KeySet>,
    rng: Rng,
    worker: usize,
    seq: u64,
}

fn err(e: impl std::fmt::Display) -> String {
    format!("libfdb_c: {e}")
}

impl AsyncWorker for FdbCWorker {
    async fn txn(&mut self) -> Result<(), String> {
        self.seq += 1;
        let trx = self.db.create_trx().map_err(err)?;
        match self.op {
            Op::Grv => {
                trx.get_read_version().await.map_err(err)?;
            }
            Op::Get { value_len } => {
                let keys = self.keys.read_keys(value_len);
                let key = &keys[self.rng.below(keys.len())];
                let v = trx.get(key, false).await.map_err(err)?;
                if v.map(|v| v.len()) != Some(value_len) {
                    return Err("libfdb_c: get returned the wrong value".into());
                }
            }
            Op::Range { rows, .. } => {
                // Batch after batch until the limit or the end, as the bindings' range
                // iterators do (one call for `range100`; `rangeN` may take several).
                let mut opt = RangeOption {
                    limit: Some(rows),
                    mode: StreamingMode::WantAll,
                    ..RangeOption::from((
                        KeySelector::first_greater_or_equal(&self.keys.range_begin[..]),
                        KeySelector::first_greater_or_equal(&self.keys.range_end[..]),
                    ))
                };
                let (mut read, mut iteration) = (0, 1);
                loop {
                    let got = trx.get_range(&opt, iteration, false).await.map_err(err)?;
                    read += got.len();
                    match opt.next_range(&got) {
                        Some(next) => (opt, iteration) = (next, iteration + 1),
                        None => break,
                    }
                }
                if read != rows {
                    return Err(format!("libfdb_c: range read {read} rows, not {rows}"));
                }
            }
            Op::Sets { count, value_len } => {
                trx.get_read_version().await.map_err(err)?;
                let value = self.keys.value(value_len);
                for k in self.keys.write_keys(self.worker, self.seq, count) {
                    trx.set(k, value);
                }
                trx.commit().await.map_err(err)?;
            }
        }
        Ok(())
    }
}
