//! `rust-mio`: this client over the mio driver's non-blocking form. Every worker level runs
//! on one thread (the harness's) with one `Database`, so one event loop and one set of
//! connections: each worker is a task of the driver's `Executor`, which polls the tasks that
//! were woken and otherwise waits in the loop's `poll`.

use fdb_driver_mio::{AsyncDatabase, MioDriver};

use super::rust_tokio::{Shape, Worker};
use super::{Arm, Ctx, RUST_MIO};
use crate::harness::{run_local, Counts, LocalWorker, RunStats};
use crate::workload::Workload;

pub struct MioArm;

impl Arm for MioArm {
    fn name(&self) -> &'static str {
        RUST_MIO
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
        let db = AsyncDatabase::from_cluster_file(ctx.cluster.clone(), seed)
            .map_err(|e| e.to_string())?;
        let workers = (0..counts.workers)
            .map(|i| Worker {
                db: db.clone(),
                shape: Shape::new(ctx, w, seed, i),
            })
            .collect();
        run_local(db.driver(), counts, &ctx.probes, workers)
    }
}

impl LocalWorker for Worker<MioDriver> {
    async fn txn(&mut self) -> Result<(), String> {
        self.shape.txn(&self.db).await
    }
}
