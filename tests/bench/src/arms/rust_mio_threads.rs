//! `rust-mio-threads`: this client over the mio driver's blocking API, the old shape of the
//! `rust-mio` arm: each worker is a thread with its own blocking `Database` (its own event
//! loop and connections). Not in the default arms; `rust-mio` runs every worker level on one
//! thread instead.

use bytes::Bytes;
use fdb_driver_mio::Database;
use fdb_protocol::messages::types::KeySelector;

use super::rust_tokio::range_options;
use super::{Arm, Ctx, RUST_MIO_THREADS};
use crate::harness::{run_threads, Counts, RunStats};
use crate::workload::{Op, Rng, Workload};

pub struct MioThreadsArm;

impl Arm for MioThreadsArm {
    fn name(&self) -> &'static str {
        RUST_MIO_THREADS
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
        let op = w.op();
        let begin =
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(&ctx.keys.range_begin));
        let end = KeySelector::first_greater_or_equal(Bytes::copy_from_slice(&ctx.keys.range_end));
        run_threads(counts, &ctx.probes, |worker| {
            let db =
                Database::from_cluster_file(ctx.cluster.clone(), seed.wrapping_add(worker as u64))
                    .map_err(|e| e.to_string())?;
            let keys = ctx.keys.clone();
            let mut rng = Rng::new(seed.wrapping_add(worker as u64));
            let (begin, end) = (begin.clone(), end.clone());
            let mut seq = 0u64;
            Ok(move || {
                seq += 1;
                let tx = db.create_transaction();
                let e = |e: fdb_driver_mio::Error| e.to_string();
                match op {
                    Op::Grv => {
                        tx.get_read_version().map_err(e)?;
                    }
                    Op::Get { value_len } => {
                        let ks = keys.read_keys(value_len);
                        let v = tx.get(&ks[rng.below(ks.len())]).map_err(e)?;
                        if v.map(|v| v.len()) != Some(value_len) {
                            return Err("get returned the wrong value".into());
                        }
                    }
                    Op::Range { rows, .. } => {
                        let r = tx
                            .get_range_batch(begin.clone(), end.clone(), range_options(rows), false)
                            .map_err(e)?;
                        if r.rows.len() != rows {
                            return Err(format!("range read {} rows, not {rows}", r.rows.len()));
                        }
                    }
                    Op::Sets { count, value_len } => {
                        tx.get_read_version().map_err(e)?;
                        let value = keys.value(value_len);
                        for k in keys.write_keys(worker, seq, count) {
                            tx.set(k, value);
                        }
                        tx.commit().map_err(e)?;
                    }
                }
                Ok(())
            })
        })
    }
}
