//! Idle cost of the mio driver's non-blocking form: one `Database`, one `Executor`, the
//! connections up, then (a) no task and (b) 64 tasks each waiting on a watch nobody fires,
//! with the caller's loop calling `Executor::tick` with a 1 s limit. Prints the process CPU
//! and the ticks per second of each phase; an idle loop should sleep in `epoll`, so both stay
//! near zero.
//!
//!     cargo run --release -p fdb-bench --example mio_idle -- CLUSTER_FILE [SECONDS]

use std::time::{Duration, Instant};

use fdb_driver_mio::{AsyncDatabase, Executor};

fn cpu() -> Duration {
    // SAFETY: getrusage only writes the struct we hand it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn idle(ex: &mut Executor, secs: u64, label: &str) {
    let (t0, c0) = (Instant::now(), cpu());
    let mut ticks = 0u64;
    while t0.elapsed() < Duration::from_secs(secs) {
        ex.tick(Some(Instant::now() + Duration::from_secs(1)))
            .expect("the loop turns");
        ticks += 1;
    }
    let (wall, used) = (t0.elapsed().as_secs_f64(), (cpu() - c0).as_secs_f64());
    println!(
        "{label}: {:.2} ms CPU per second idle ({:.3}% of a core), {:.1} ticks/s",
        used * 1e3 / wall,
        used * 100.0 / wall,
        ticks as f64 / wall
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: mio_idle CLUSTER_FILE [SECONDS]");
    let secs: u64 = args.next().map_or(10, |s| s.parse().expect("seconds"));
    let db = AsyncDatabase::open_file_with_seed(path.as_ref(), 7).expect("the database opens");
    let mut ex = Executor::new(db.driver());
    let d = db.clone();
    ex.run_until(async move { d.create_transaction().get_read_version().await })
        .expect("the loop turns")
        .expect("a read version");
    idle(&mut ex, secs, "no task");
    for i in 0..64u32 {
        let db = db.clone();
        ex.spawn(async move {
            let tx = db.create_transaction();
            let w = tx.watch(format!("fdb-bench/idle/{i}"));
            let _ = tx.commit().await;
            let _ = w.await;
        });
    }
    idle(&mut ex, secs, "64 watches");
}
