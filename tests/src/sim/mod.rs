//! Deterministic simulation: the application's async code, this client's core and the test
//! cluster on one thread, one virtual clock and one simulated network, everything drawn
//! from one seed. The same seed gives the same run, message for message; [`Sim::trace_hash`]
//! is the proof a test can check.
//!
//! * The **cluster** is the test cluster's own core ([`crate::cluster`]'s `State`, the one
//!   [`crate::cluster::TestCluster`] runs on sockets): its coordinators, proxies, resolver
//!   and storage servers as one state machine, fed the bytes and the time by the world.
//! * Each **database** is an `fdb-api` [`Database`] on the [`SimDriver`]: the same API as the
//!   tokio and mio drivers, its engine run by the world between the application's polls.
//! * The **network** ([`net`]) delivers each connection's bytes in order with a delay from
//!   the seed; connections overtake each other. [`Faults`] adds resets, kills, pauses, shard
//!   moves, client clock drift and jumps, coordinator changes and partitions.
//! * The **executor** ([`executor`]) polls the application's tasks in wake order.
//!
//! Time moves only when nothing can run without it: to the next message, timer or fault.
//!
//! ```no_run
//! let total = fdb_tests::sim::run(7, |db| async move {
//!     db.run(|tx| async move { tx.set(b"k", b"v"); Ok(()) }).await.unwrap();
//!     db.run(|tx| async move { Ok(tx.get(b"k").await?) }).await.unwrap()
//! });
//! assert_eq!(total.as_deref(), Some(&b"v"[..]));
//! ```

mod cluster;
mod driver;
mod executor;
pub mod fuzzing;
mod net;
#[cfg(feature = "planted-bugs")]
pub mod plant;
pub mod workloads;

pub use cluster::SimCluster;
pub use driver::{Database, SimDriver};

use std::cell::RefCell;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fdb_api::driver::{Engine, IoRequest};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::Instant;

use crate::cluster::server::{Io, State};
use crate::cluster::{Role, TestClusterBuilder};
use executor::Executor;
use net::{Ev, Net};

/// The faults a run draws from its seed. Each is off unless set; [`Faults::swarm`] lets the
/// seed pick a mix, as FDB's swarm testing does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Faults {
    /// Every message's delay is drawn from `min_delay..=max_delay`.
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Mean time between connection resets (`None`: none).
    pub reset_every: Option<Duration>,
    /// Mean time between process kills, each followed by a restart (`None`: none). Storage
    /// servers and the proxies are killed; a killed proxies process makes a recovery.
    pub kill_every: Option<Duration>,
    /// How long a killed process stays down, or a paused one stopped (at most).
    pub max_downtime: Duration,
    /// Mean time between process pauses (`SIGSTOP`, then `SIGCONT`; `None`: none). A paused
    /// proxies process stalls commits, and one paused long enough makes a recovery.
    pub pause_every: Option<Duration>,
    /// Mean time between shard moves (a random key's shard to a random storage server;
    /// `None`: none).
    pub move_every: Option<Duration>,
    /// Clock drift on the clients: each database's clock runs at a rate drawn from
    /// `1000 ± clock_drift` per mille of the world's (0: the world's clock). Its timers
    /// (pings, backoffs, timeouts) fire early or late against the cluster's.
    pub clock_drift: u32,
    /// Kills and pauses may pick a coordinator too.
    pub coordinator_faults: bool,
    /// Mean time between clock jumps (`None`: none): a random database's clock steps, up
    /// to `max_clock_jump` forward or a quarter of that backward (a clock set by hand or
    /// by NTP); the core must take time going back without a panic or a hang.
    pub clock_jump_every: Option<Duration>,
    pub max_clock_jump: Duration,
    /// Mean time between coordinator changes (`None`: none), as `fdbcli coordinators`
    /// makes them: some of the current coordinators kept, maybe a new one added; the old
    /// ones forward clients to the new set, and the cluster recovers.
    pub coordinator_change_every: Option<Duration>,
    /// Mean time between partitions (`None`: none): one direction of a random open
    /// connection loses everything sent on it (a close included) until the connection is
    /// reset, by its client noticing or after at most `max_downtime`.
    pub partition_every: Option<Duration>,
    /// Faults stop after this much virtual time, so the workload can finish.
    pub until: Duration,
}

impl Default for Faults {
    /// No faults; every message takes 100 µs.
    fn default() -> Self {
        Faults {
            min_delay: Duration::from_micros(100),
            max_delay: Duration::from_micros(100),
            reset_every: None,
            kill_every: None,
            max_downtime: Duration::from_secs(2),
            pause_every: None,
            move_every: None,
            clock_drift: 0,
            coordinator_faults: false,
            clock_jump_every: None,
            max_clock_jump: Duration::from_secs(2),
            coordinator_change_every: None,
            partition_every: None,
            until: Duration::from_secs(60),
        }
    }
}

impl Faults {
    /// A mix of faults picked by `seed`: message delays from 10 µs up to one of 50 µs..20 ms
    /// (so messages on different connections reorder), connection resets every 20..300 ms
    /// in half of the seeds, a process killed every 100 ms..1 s (and restarted within
    /// 50 ms..1.5 s) in a third, a process paused as often in a third, a shard moved every
    /// 20..500 ms in half; client clocks drifting by up to 5..50 % in a third, coordinators
    /// among the processes killed and paused in half, a partition every 100 ms..1 s in a
    /// third; a client clock jump (up to 0.1..5 s) every 100 ms..2 s in a quarter, a
    /// coordinator change every 300 ms..3 s in a quarter.
    pub fn swarm(seed: u64) -> Faults {
        let mut rng = seed ^ 0x5eed_fa17;
        let mut pick = |n: u64| splitmix(&mut rng) % n;
        let max_delay = [50, 500, 2_000, 20_000][pick(4) as usize];
        let mut f = Faults {
            min_delay: Duration::from_micros(10),
            max_delay: Duration::from_micros(max_delay),
            reset_every: (pick(2) == 0).then(|| Duration::from_millis(20 + pick(280))),
            kill_every: (pick(3) == 0).then(|| Duration::from_millis(100 + pick(900))),
            max_downtime: Duration::from_millis(50 + pick(1450)),
            pause_every: (pick(3) == 0).then(|| Duration::from_millis(100 + pick(900))),
            move_every: (pick(2) == 0).then(|| Duration::from_millis(20 + pick(480))),
            until: Duration::from_secs(30),
            ..Faults::default()
        };
        f.clock_drift = if pick(3) == 0 {
            50 + pick(451) as u32
        } else {
            0
        };
        f.coordinator_faults = pick(2) == 0;
        f.partition_every = (pick(3) == 0).then(|| Duration::from_millis(100 + pick(900)));
        f.clock_jump_every = (pick(4) == 0).then(|| Duration::from_millis(100 + pick(1900)));
        f.max_clock_jump = Duration::from_millis(100 + pick(4900));
        f.coordinator_change_every =
            (pick(4) == 0).then(|| Duration::from_millis(300 + pick(2700)));
        f
    }
}

/// The faults a run made so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub resets: u64,
    pub kills: u64,
    pub restarts: u64,
    pub pauses: u64,
    pub moves: u64,
    pub partitions: u64,
    pub clock_jumps: u64,
    pub coordinator_changes: u64,
}

impl FaultCounts {
    /// Both counts added up (a swarm's total).
    pub fn plus(&self, o: &FaultCounts) -> FaultCounts {
        FaultCounts {
            resets: self.resets + o.resets,
            kills: self.kills + o.kills,
            restarts: self.restarts + o.restarts,
            pauses: self.pauses + o.pauses,
            moves: self.moves + o.moves,
            partitions: self.partitions + o.partitions,
            clock_jumps: self.clock_jumps + o.clock_jumps,
            coordinator_changes: self.coordinator_changes + o.coordinator_changes,
        }
    }
}

/// A fault the schedule planned.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// Reset a random open connection (both ends told at once; what was in flight is lost).
    Reset,
    /// Kill a random storage server or the proxies.
    Kill,
    /// Restart a killed role.
    Restart(Role),
    /// Pause a random process.
    Pause,
    /// Continue a paused role.
    Continue(Role),
    /// Move a random key's shard to a random storage server.
    Move,
    /// Cut one direction of a random open connection.
    Partition,
    /// Reset a partitioned connection (if it is still open).
    Heal(u64),
    /// Step a random database's clock.
    ClockJump,
    /// Change the coordinators.
    ChangeCoordinators,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A hash fixed forever (std's hashers may change between releases): eight bytes per
/// multiply-rotate step, as byte-at-a-time FNV cost a few per cent of a run.
/// With its flag, every event is also printed (`SIM_LOG=1`: what a replay shows).
#[derive(Clone, Copy, Debug)]
struct Trace(u64, bool);

impl Trace {
    fn mix(&mut self, w: u64) {
        self.0 = (self.0 ^ w)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    fn add(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.mix(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    fn record(&mut self, now: Duration, tag: u8, id: u64, bytes: &[u8]) {
        if self.1 {
            let what = match tag {
                b'c' => "connect reaches the process",
                b'C' => "client connected",
                b'R' => "connect refused",
                b'>' => "to the cluster",
                b'<' => "to the client",
                b'x' => "the process sees the close",
                b'X' => "the client sees the close",
                b'!' => "connection reset",
                b'k' => "process killed",
                b'r' => "process restarted",
                b'p' => "process paused",
                b'P' => "process continued",
                b'm' => "shard moved",
                b'|' => "connection partitioned",
                b'~' => "partitioned connection reset",
                b'j' => "client clock jumped",
                b'q' => "coordinators changed",
                b't' => "client timer",
                b'w' => "task timer",
                _ => "?",
            };
            eprintln!("{now:>14?} {what} #{id} ({} bytes)", bytes.len());
        }
        self.mix(now.as_nanos() as u64);
        self.mix(tag as u64);
        self.mix(id);
        self.mix(bytes.len() as u64);
        self.add(bytes);
    }
}

/// One database's engine, run by the world.
struct SimClient {
    engine: Engine,
    shared: Arc<driver::Shared>,
    /// Its clock: `base + (world time - since) * rate / 1000` (`base` is where its clock
    /// stood at world time `since`: a jump moves it).
    since: Duration,
    base: Duration,
    rate: u64,
    /// Its next timer as last asked (`poll_timeout` is a good part of a step's cost), and
    /// whether the engine was called since.
    timer: Option<Duration>,
    dirty: bool,
    /// The engine was called since its output (events, connects, bytes) was last taken:
    /// an engine not called has nothing new to give, and asking costs a walk of its
    /// connections.
    touched: bool,
}

impl SimClient {
    /// The engine, to call into (its timer is asked again after).
    fn engine(&mut self) -> &mut Engine {
        self.dirty = true;
        self.touched = true;
        &mut self.engine
    }

    /// The client's next timer, in its own time.
    fn timer(&mut self) -> Option<Duration> {
        if self.dirty {
            self.dirty = false;
            self.timer = self.engine.client().poll_timeout().map(|t| t.0);
        }
        self.timer
    }

    /// The client's time at world time `t`.
    fn local(&self, t: Duration) -> Duration {
        let since = t.saturating_sub(self.since);
        if self.rate == 1000 {
            return self.base + since;
        }
        // In 64 bits while the product fits (always, in sessions of seconds): the same
        // result as the 128-bit path, without its division routine.
        let d = match (since.as_nanos() as u64).checked_mul(self.rate) {
            Some(p) if since.as_nanos() <= u64::MAX as u128 => p / 1000,
            _ => (since.as_nanos() * self.rate as u128 / 1000) as u64,
        };
        self.base + Duration::from_nanos(d)
    }

    /// The first world time at which the client's time reaches `local`.
    /// (A time its clock has passed, or stepped back from: `since`, due now.)
    fn world(&self, local: Duration) -> Duration {
        let ahead = local.saturating_sub(self.base);
        if self.rate == 1000 {
            return self.since + ahead;
        }
        let d = match (ahead.as_nanos() as u64).checked_mul(1000) {
            Some(p) if ahead.as_nanos() <= u64::MAX as u128 => p.div_ceil(self.rate),
            _ => (ahead.as_nanos() * 1000).div_ceil(self.rate as u128) as u64,
        };
        self.since + Duration::from_nanos(d)
    }

    /// Steps its clock by `by` nanoseconds (back if negative, not before its origin) at
    /// world time `now`.
    fn jump(&mut self, now: Duration, by: i64) {
        let at = self.local(now);
        self.base = if by >= 0 {
            at + Duration::from_nanos(by as u64)
        } else {
            at.saturating_sub(Duration::from_nanos(by.unsigned_abs()))
        };
        self.since = now;
        self.shared
            .nanos
            .store(self.base.as_nanos() as u64, Ordering::SeqCst);
    }
}

/// What tasks reach through the thread while a simulation runs ([`spawn`], [`sleep`],
/// [`open`], [`now`], [`note`]).
struct Ctx {
    now: Duration,
    cluster: SimCluster,
    cluster_file: String,
    seed: u64,
    opened: u64,
    timers: Vec<(Duration, Waker)>,
    notes: Trace,
}

thread_local! {
    static CTX: RefCell<Option<Ctx>> = const { RefCell::new(None) };
}

fn with_ctx<R>(f: impl FnOnce(&mut Ctx) -> R) -> R {
    CTX.with(|c| {
        f(c.borrow_mut()
            .as_mut()
            .expect("inside a running simulation"))
    })
}

/// Runs `fut` as a task of the running simulation, beside the others.
pub fn spawn(fut: impl Future<Output = ()> + 'static) {
    executor::spawn_local(Box::pin(fut));
}

/// The running simulation's cluster (see [`SimCluster`]).
pub fn cluster() -> SimCluster {
    with_ctx(|c| c.cluster.clone())
}

/// Virtual time since the simulation started.
pub fn now() -> Duration {
    with_ctx(|c| c.now)
}

/// Opens another database on the running simulation's cluster (a client of its own).
pub fn open() -> Database {
    let cf = with_ctx(|c| c.cluster_file.clone());
    open_with(&ClusterFile::parse(&cf).expect("the cluster's own connection string"))
}

/// Opens a database from a connection string of your own (say, one naming a coordinator
/// that does not exist beside the cluster's).
pub fn open_with(cluster: &ClusterFile) -> Database {
    let seed = with_ctx(|c| {
        c.opened += 1;
        splitmix(&mut (c.seed ^ c.opened))
    });
    Database::from_cluster_file(cluster.clone(), seed).expect("inside a running simulation")
}

/// Adds `bytes` to the trace hash (a workload's own results: what it read, what it was told).
pub fn note(bytes: &[u8]) {
    with_ctx(|c| c.notes.add(bytes))
}

/// Sleeps for `d` of virtual time.
pub fn sleep(d: Duration) -> Sleep {
    Sleep {
        until: now() + d,
        armed: false,
    }
}

/// The future of [`sleep`].
pub struct Sleep {
    until: Duration,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let until = self.until;
        if with_ctx(|c| c.now >= until) {
            return Poll::Ready(());
        }
        if !self.armed {
            self.armed = true;
            with_ctx(|c| c.timers.push((until, cx.waker().clone())));
        }
        Poll::Pending
    }
}

/// Runs `main` with a database in a new simulation of `seed` without faults, and returns
/// what it returns: the one line an application test needs.
pub fn run<F, Fut, T>(seed: u64, main: F) -> T
where
    F: FnOnce(Database) -> Fut,
    Fut: Future<Output = T> + 'static,
    T: 'static,
{
    Sim::new(seed).run(main)
}

/// A simulated world: the cluster, the network, the clock, the databases and tasks.
pub struct Sim {
    seed: u64,
    rng: u64,
    faults: Faults,
    now: Duration,
    clock: Arc<AtomicU64>,
    cluster: Rc<RefCell<State>>,
    /// When the cluster last had its timers run (it is woken at most every millisecond, as
    /// the threaded runner's ticker does).
    cluster_ticked: Duration,
    /// The cluster's next timer as last asked (`None`: ask again). Its `poll_timeout` walks
    /// every process, read and watch, and the world asked twice a step; anything that may
    /// change the cluster (the world's calls, a task run: it may hold a `SimCluster`)
    /// forgets it.
    cluster_timer: Option<Option<Duration>>,
    clients: Vec<SimClient>,
    net: Net,
    /// The buffer the cluster's output is swapped into (see [`State::swap_io`]).
    io: Vec<Io>,
    exec: Executor,
    trace: Trace,
    /// Events handled, for the numbers.
    steps: u64,
    counts: FaultCounts,
    /// Virtual time after which a run gives up (a hang).
    pub limit: Duration,
}

impl Sim {
    /// A world of `seed` with the default cluster and no faults.
    pub fn new(seed: u64) -> Sim {
        Sim::with(seed, TestClusterBuilder::default(), Faults::default())
    }

    /// A world of `seed` with `cluster`'s configuration and `faults`.
    pub fn with(seed: u64, cluster: TestClusterBuilder, faults: Faults) -> Sim {
        let roles = State::initial_roles(&cluster);
        let addrs: Vec<SocketAddr> = (0..roles.len())
            .map(|i| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + i as u8)), 4500))
            .collect();
        let mut more = 0u8;
        let new_addr = Box::new(move || {
            more = more.wrapping_add(1);
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, more)), 4500)
        });
        // The Unix time the cluster's clock starts at: fixed, so stamps replay too.
        let cluster = State::new(
            cluster,
            &addrs,
            seed ^ 0xc1u64 << 56,
            1_700_000_000,
            new_addr,
        );
        let cluster = Rc::new(RefCell::new(cluster));
        let mut sim = Sim {
            seed,
            rng: seed,
            faults,
            now: Duration::ZERO,
            clock: Arc::new(AtomicU64::new(0)),
            cluster,
            cluster_ticked: Duration::ZERO,
            cluster_timer: None,
            clients: Vec::new(),
            net: Net::default(),
            io: Vec::new(),
            exec: Executor::default(),
            trace: Trace(
                0xcbf2_9ce4_8422_2325,
                std::env::var_os("SIM_LOG").is_some_and(|v| v != "0"),
            ),
            counts: FaultCounts::default(),
            steps: 0,
            limit: Duration::from_secs(600),
        };
        if let Some(every) = sim.faults.reset_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::Reset));
        }
        if let Some(every) = sim.faults.kill_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::Kill));
        }
        if let Some(every) = sim.faults.pause_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::Pause));
        }
        if let Some(every) = sim.faults.move_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::Move));
        }
        if let Some(every) = sim.faults.partition_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::Partition));
        }
        if let Some(every) = sim.faults.clock_jump_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::ClockJump));
        }
        if let Some(every) = sim.faults.coordinator_change_every {
            let t = sim.draw(every * 2);
            sim.net.at(t, Ev::Fault(Fault::ChangeCoordinators));
        }
        sim
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time since the start.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The hash of everything that happened: every message delivered (when, on which
    /// connection, its bytes), every connect, close and fault, and what the workload noted.
    pub fn trace_hash(&self) -> u64 {
        self.trace.0
    }

    /// Events handled so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The faults made so far.
    pub fn fault_counts(&self) -> FaultCounts {
        self.counts
    }

    /// The cluster: its state read directly, and its faults (also from inside the run:
    /// [`cluster`]).
    pub fn cluster(&self) -> SimCluster {
        SimCluster(self.cluster.clone())
    }

    /// A duration up to `max`, from the seed.
    fn draw(&mut self, max: Duration) -> Duration {
        let n = max.as_nanos() as u64;
        Duration::from_nanos(if n == 0 {
            0
        } else {
            splitmix(&mut self.rng) % (n + 1)
        })
    }

    /// The cluster, to change: its timer is asked again after.
    fn cluster_mut(&mut self) -> std::cell::RefMut<'_, State> {
        self.cluster_timer = None;
        self.cluster.borrow_mut()
    }

    /// The cluster's next timer (cached until something may have changed it).
    fn cluster_timer(&mut self) -> Option<Duration> {
        if self.cluster_timer.is_none() {
            self.cluster_timer = Some(self.cluster.borrow().poll_timeout().map(|t| t.0));
        }
        self.cluster_timer.flatten()
    }

    fn delay(&mut self) -> Duration {
        let spread = self.faults.max_delay.saturating_sub(self.faults.min_delay);
        self.faults.min_delay + self.draw(spread)
    }

    /// Runs `main` with a fresh database until it finishes, and returns its output. Panics
    /// (naming the seed) when nothing is left to happen or the time limit passes first.
    pub fn run<F, Fut, T>(&mut self, main: F) -> T
    where
        F: FnOnce(Database) -> Fut,
        Fut: Future<Output = T> + 'static,
        T: 'static,
    {
        driver::enter(self.clock.clone(), splitmix(&mut self.rng));
        CTX.with(|c| {
            *c.borrow_mut() = Some(Ctx {
                now: self.now,
                cluster: SimCluster(self.cluster.clone()),
                cluster_file: self.cluster.borrow_mut().cluster_file_string(),
                seed: self.seed,
                opened: 0,
                timers: Vec::new(),
                notes: Trace(0, false),
            })
        });
        let out: Rc<RefCell<Option<T>>> = Rc::new(RefCell::new(None));
        let done = out.clone();
        let db = open();
        let fut = main(db);
        self.exec.spawn(Box::pin(async move {
            let v = fut.await;
            *done.borrow_mut() = Some(v);
        }));
        self.cluster_timer = None;
        let result = self.drive(|| out.borrow().is_some());
        let notes = CTX.with(|c| c.borrow_mut().take().map(|c| c.notes.0));
        self.trace.add(&notes.unwrap_or(0).to_le_bytes());
        driver::leave();
        // The databases end with the run (their handles may outlive it, but nothing runs
        // them any more).
        self.clients.clear();
        if let Err(e) = result {
            panic!("simulation seed {}: {e}", self.seed);
        }
        let v = out.borrow_mut().take().expect("finished");
        v
    }

    /// Runs the world until `done`.
    fn drive(&mut self, done: impl Fn() -> bool) -> Result<(), String> {
        // Rounds in a row at one virtual time: a timer that fires again and again without
        // time moving would spin forever.
        let mut still = 0u32;
        loop {
            self.settle();
            if done() {
                return Ok(());
            }
            let Some(next) = self.next_time() else {
                return Err(format!(
                    "nothing left to happen at {:?} with {} tasks waiting (a deadlock)",
                    self.now,
                    self.exec.live()
                ));
            };
            if next > self.limit {
                return Err(format!("still running at the limit {:?}", self.limit));
            }
            still = if next == self.now { still + 1 } else { 0 };
            if still > 100_000 {
                return Err(format!(
                    "time stopped at {next:?}: a timer fires without end"
                ));
            }
            self.advance(next);
        }
    }

    /// Runs everything that can run without time passing: tasks, the databases' ops and
    /// what they and the cluster want sent.
    fn settle(&mut self) {
        loop {
            let mut busy = self.exec.run_ready();
            if busy {
                self.cluster_timer = None;
            }
            for (engine, shared) in driver::take_opened() {
                let d = self.faults.clock_drift as u64;
                let rate = if d == 0 {
                    1000
                } else {
                    1000 - d.min(999) + splitmix(&mut self.rng) % (2 * d.min(999) + 1)
                };
                self.clients.push(SimClient {
                    engine,
                    shared,
                    since: self.now,
                    base: self.now,
                    rate,
                    timer: None,
                    dirty: true,
                    touched: true,
                });
            }
            for i in 0..self.clients.len() {
                loop {
                    let Some(op) = self.clients[i].shared.next_op() else {
                        break;
                    };
                    op(self.clients[i].engine());
                    busy = true;
                }
                busy |= self.pump_client(i);
            }
            busy |= self.pump_cluster();
            if !busy {
                return;
            }
        }
    }

    /// Takes what client `i`'s engine wants done: connects, closes, bytes.
    fn pump_client(&mut self, i: usize) -> bool {
        if !std::mem::take(&mut self.clients[i].touched) {
            return false;
        }
        let mut busy = false;
        while let Some(io) = self.clients[i].engine.poll_io() {
            busy = true;
            match io {
                IoRequest::Connect { conn, addr, .. } => {
                    let link = self.net.open(i, conn, addr);
                    let d = self.delay();
                    self.net.at(self.now + d, Ev::Connect(link));
                }
                IoRequest::Close { conn } => {
                    let Some(&id) = self.net.by_client.get(&(i, conn)) else {
                        continue;
                    };
                    let d = self.delay();
                    let now = self.now;
                    let l = self.net.links.get_mut(&id).expect("a link");
                    l.client_open = false;
                    if l.server_open && !l.cut_to_server {
                        let at = (now + d).max(l.to_server_at);
                        self.net.at(at, Ev::ServerSeesClose(id));
                    }
                    self.net.reap(id);
                }
                // Coordinators are addresses here; a cluster file written is not kept.
                IoRequest::Resolve { host, port } => {
                    self.clients[i].engine().handle_resolved(&host, port, &[]);
                }
                IoRequest::WriteClusterFile { .. } => {}
            }
        }
        while let Some(t) = self.clients[i].engine.poll_transmit() {
            busy = true;
            let Some(&id) = self.net.by_client.get(&(i, t.conn)) else {
                continue;
            };
            let d = self.delay();
            let now = self.now;
            let l = self.net.links.get_mut(&id).expect("a link");
            if l.client_open && l.server_open && !l.cut_to_server {
                let at = (now + d).max(l.to_server_at);
                l.to_server_at = at;
                self.net.at(at, Ev::ToServer(id, t.data));
            }
        }
        busy
    }

    /// Takes what the cluster wants done: bytes to send, connections to close.
    fn pump_cluster(&mut self) -> bool {
        let mut io = std::mem::take(&mut self.io);
        self.cluster.borrow_mut().swap_io(&mut io);
        let busy = !io.is_empty();
        for action in io.drain(..) {
            let (conn, bytes) = match action {
                Io::Send(c, b) => (c, Some(b)),
                Io::Close(c) => (c, None),
            };
            let d = self.delay();
            let now = self.now;
            let Some(l) = self.net.links.get_mut(&conn.id) else {
                continue;
            };
            if !l.server_open {
                continue;
            }
            let at = (now + d).max(l.to_client_at);
            let cut = l.cut_to_client;
            match bytes {
                Some(b) => {
                    if l.client_open && !cut {
                        l.to_client_at = at;
                        self.net.at(at, Ev::ToClient(conn.id, b));
                    }
                }
                None => {
                    l.server_open = false;
                    if l.client_open && !cut {
                        self.net.at(at, Ev::ClientSeesClose(conn.id));
                    }
                    self.net.reap(conn.id);
                }
            }
        }
        self.io = io;
        busy
    }

    /// When something next happens.
    fn next_time(&mut self) -> Option<Duration> {
        let ticked = self.cluster_ticked;
        let cluster = self
            .cluster_timer()
            .map(|t| t.max(ticked + Duration::from_millis(1)));
        let clients = self
            .clients
            .iter_mut()
            .filter_map(|c| c.timer().map(|t| c.world(t)));
        let timers = CTX.with(|c| {
            c.borrow()
                .as_ref()
                .and_then(|c| c.timers.iter().map(|(t, _)| *t).min())
        });
        self.net
            .next_time()
            .into_iter()
            .chain(clients)
            .chain(cluster)
            .chain(timers)
            .min()
            .map(|t| t.max(self.now))
    }

    /// Moves the clock to `to` and does what is due then.
    fn advance(&mut self, to: Duration) {
        self.now = to;
        // Release, not SeqCst (a locked exchange on x86): the clocks are read on this thread.
        self.clock.store(to.as_nanos() as u64, Ordering::Release);
        for c in &self.clients {
            c.shared
                .nanos
                .store(c.local(to).as_nanos() as u64, Ordering::Release);
        }
        self.cluster.borrow_mut().set_now(Instant(to));
        let wake: Vec<Waker> = CTX.with(|c| {
            let mut c = c.borrow_mut();
            let c = c.as_mut().expect("running");
            c.now = to;
            if !c.timers.iter().any(|(t, _)| *t <= to) {
                return Vec::new();
            }
            let (due, rest) = std::mem::take(&mut c.timers)
                .into_iter()
                .partition(|(t, _)| *t <= to);
            c.timers = rest;
            due.into_iter().map(|(_, w): (Duration, Waker)| w).collect()
        });
        for w in wake {
            self.trace.record(to, b'w', 0, &[]);
            w.wake();
        }
        while let Some(ev) = self.net.pop_due(to) {
            self.steps += 1;
            self.handle(ev);
            // What an event makes goes out before the next event at the same time.
            self.pump_cluster();
            for i in 0..self.clients.len() {
                self.pump_client(i);
            }
        }
        for i in 0..self.clients.len() {
            let local = self.clients[i].local(to);
            let due = self.clients[i].timer().is_some_and(|t| t <= local);
            if due {
                self.steps += 1;
                self.trace.record(to, b't', i as u64, &[]);
                self.clients[i].engine().handle_timeout();
            }
        }
        let cluster_due = to >= self.cluster_ticked + Duration::from_millis(1)
            && self.cluster_timer().is_some_and(|t| t <= to);
        if cluster_due {
            self.steps += 1;
            self.cluster_ticked = to;
            self.cluster_mut().handle_timeout();
        }
    }

    /// One network event.
    fn handle(&mut self, ev: Ev) {
        let now = self.now;
        match ev {
            Ev::Connect(id) => {
                let Some(l) = self.net.links.get(&id) else {
                    return;
                };
                self.trace.record(now, b'c', id, &[]);
                let p = self.cluster.borrow().up_at(l.addr);
                let conn = p.and_then(|p| self.cluster_mut().accept(p, id));
                let d = self.delay();
                let l = self.net.links.get_mut(&id).expect("a link");
                match conn {
                    Some(c) => {
                        l.server = Some(c);
                        l.server_open = true;
                        l.to_client_at = now + d;
                        let gave_up = !l.client_open;
                        self.net.at(now + d, Ev::Connected(id));
                        if gave_up {
                            // The client gave up while connecting: it closes at once.
                            self.net.at(now + d, Ev::ServerSeesClose(id));
                        }
                    }
                    None => self.net.at(now + d, Ev::Refused(id)),
                }
            }
            Ev::Connected(id) => {
                let Some(l) = self.net.links.get_mut(&id) else {
                    return;
                };
                if l.client_open {
                    l.connected = true;
                    let (c, conn) = (l.client, l.conn);
                    self.trace.record(now, b'C', id, &[]);
                    self.clients[c].engine().handle_connected(conn);
                }
            }
            Ev::Refused(id) => {
                let Some(l) = self.net.links.get_mut(&id) else {
                    return;
                };
                if l.client_open {
                    l.client_open = false;
                    let (c, conn) = (l.client, l.conn);
                    self.trace.record(now, b'R', id, &[]);
                    self.clients[c].engine().handle_connect_failed(conn);
                }
                self.net.reap(id);
            }
            Ev::ToServer(id, bytes) => {
                let Some(l) = self.net.links.get(&id) else {
                    return;
                };
                if let (true, false, Some(c)) = (l.server_open, l.cut_to_server, l.server.clone()) {
                    self.trace.record(now, b'>', id, &bytes);
                    self.cluster_mut().input(&c, &bytes);
                }
            }
            Ev::ToClient(id, bytes) => {
                let Some(l) = self.net.links.get(&id) else {
                    return;
                };
                if l.client_open && !l.cut_to_client {
                    let (c, conn) = (l.client, l.conn);
                    self.trace.record(now, b'<', id, &bytes);
                    self.clients[c].engine().handle_input(conn, &bytes);
                }
            }
            Ev::ServerSeesClose(id) => {
                let Some(l) = self.net.links.get_mut(&id) else {
                    return;
                };
                if l.server_open && !l.cut_to_server {
                    l.server_open = false;
                    self.trace.record(now, b'x', id, &[]);
                    if let Some(c) = l.server.clone() {
                        self.cluster_timer = None;
                        self.cluster.borrow_mut().closed(&c);
                    }
                }
                self.net.reap(id);
            }
            Ev::ClientSeesClose(id) => {
                let Some(l) = self.net.links.get_mut(&id) else {
                    return;
                };
                if l.client_open && !l.cut_to_client {
                    l.client_open = false;
                    let (c, conn) = (l.client, l.conn);
                    self.trace.record(now, b'X', id, &[]);
                    self.clients[c].engine().handle_closed(conn);
                }
                self.net.reap(id);
            }
            Ev::Fault(f) => self.fault(f),
        }
    }

    /// A storage server or the proxies (or, with `coordinator_faults`, a coordinator), from
    /// the seed.
    fn random_role(&mut self) -> Role {
        let cluster = self.cluster.clone();
        let cluster = cluster.borrow();
        let n = cluster.storage_server_count() as u64;
        // The coordinators' roles in process order, a run of one role counted once: counted,
        // then walked to (no list built per fault).
        let coordinators = || {
            let mut last = None;
            (cluster.roles())
                .filter(|r| matches!(r, Role::Coordinator(_)))
                .filter(move |r| last.replace(*r) != Some(*r))
        };
        let count = if self.faults.coordinator_faults {
            coordinators().count() as u64
        } else {
            0
        };
        let pick = splitmix(&mut self.rng) % (n + 1 + count);
        if pick < n {
            Role::Storage(pick as usize)
        } else if pick == n {
            Role::Proxies
        } else {
            coordinators()
                .nth((pick - n - 1) as usize)
                .expect("counted")
        }
    }

    /// Closes both ends of link `id` at once (what was in flight is lost).
    fn cut(&mut self, id: u64) {
        let Some(l) = self.net.links.get_mut(&id) else {
            return;
        };
        let (c, conn, server) = (l.client, l.conn, l.server.clone());
        let (client_open, server_open) = (l.client_open, l.server_open);
        l.client_open = false;
        l.server_open = false;
        if let (true, Some(s)) = (server_open, server) {
            self.cluster_mut().closed(&s);
        }
        if client_open {
            self.clients[c].engine().handle_closed(conn);
        }
        self.net.reap(id);
    }

    /// The connections open at both ends and not partitioned (a partitioned one is reset
    /// by its heal), in id order.
    fn open_links(&self) -> impl Iterator<Item = u64> + '_ {
        self.net
            .links
            .iter()
            .filter(|(_, l)| l.connected && l.client_open && l.server_open)
            .filter(|(_, l)| !l.cut_to_server && !l.cut_to_client)
            .map(|(id, _)| *id)
    }

    /// One of the [`Sim::open_links`] from the seed (none drawn when there is none). Counted,
    /// then walked to: a fault every few milliseconds allocates no list.
    fn random_open_link(&mut self) -> Option<u64> {
        let n = self.open_links().count() as u64;
        if n == 0 {
            return None;
        }
        let i = splitmix(&mut self.rng) % n;
        self.open_links().nth(i as usize)
    }

    fn fault(&mut self, f: Fault) {
        let now = self.now;
        let active = now < self.faults.until;
        match f {
            Fault::Reset => {
                if let Some(id) = active.then(|| self.random_open_link()).flatten() {
                    self.trace.record(now, b'!', id, &[]);
                    self.counts.resets += 1;
                    self.cut(id);
                }
                if active {
                    let every = self.faults.reset_every.expect("resets on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::Reset));
                }
            }
            Fault::Kill => {
                if active {
                    let role = self.random_role();
                    if self.cluster_mut().kill(role) {
                        self.trace.record(now, b'k', 0, &[]);
                        self.counts.kills += 1;
                        let down = self.draw(self.faults.max_downtime);
                        self.net.at(now + down, Ev::Fault(Fault::Restart(role)));
                    }
                    let every = self.faults.kill_every.expect("kills on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::Kill));
                }
            }
            Fault::Pause => {
                if active {
                    let role = self.random_role();
                    let cluster = self.cluster.clone();
                    self.cluster_timer = None;
                    let mut cl = cluster.borrow_mut();
                    if cl.is_alive(role) && !cl.role_is_stopped(role) {
                        cl.sigstop(role);
                        drop(cl);
                        self.trace.record(now, b'p', 0, &[]);
                        self.counts.pauses += 1;
                        let down = self.draw(self.faults.max_downtime);
                        self.net.at(now + down, Ev::Fault(Fault::Continue(role)));
                    }
                    let every = self.faults.pause_every.expect("pauses on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::Pause));
                }
            }
            Fault::Continue(role) => {
                self.trace.record(now, b'P', 0, &[]);
                self.cluster_mut().sigcont(role);
            }
            Fault::Move => {
                if active {
                    let key = [b'a' + (splitmix(&mut self.rng) % 26) as u8];
                    let n = self.cluster.borrow().storage_server_count() as u64;
                    let to = (splitmix(&mut self.rng) % n) as usize;
                    self.trace.record(now, b'm', to as u64, &key);
                    self.counts.moves += 1;
                    self.cluster_mut().move_shard(&key, to);
                    let every = self.faults.move_every.expect("moves on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::Move));
                }
            }
            Fault::Partition => {
                if let Some(id) = active.then(|| self.random_open_link()).flatten() {
                    let to_server = splitmix(&mut self.rng) & 1 == 0;
                    self.trace.record(now, b'|', id, &[to_server as u8]);
                    self.counts.partitions += 1;
                    let l = self.net.links.get_mut(&id).expect("open");
                    if to_server {
                        l.cut_to_server = true;
                    } else {
                        l.cut_to_client = true;
                    }
                    let down = self.draw(self.faults.max_downtime);
                    self.net.at(now + down, Ev::Fault(Fault::Heal(id)));
                }
                if active {
                    let every = self.faults.partition_every.expect("partitions on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::Partition));
                }
            }
            Fault::ClockJump => {
                if active && !self.clients.is_empty() {
                    let i = (splitmix(&mut self.rng) % self.clients.len() as u64) as usize;
                    let max = self.faults.max_clock_jump.as_nanos() as i64;
                    // Forward up to the maximum, back up to a quarter of it.
                    let span = (max + max / 4) as u64;
                    let by = (splitmix(&mut self.rng) % (span + 1)) as i64 - max / 4;
                    self.trace.record(now, b'j', i as u64, &by.to_le_bytes());
                    self.counts.clock_jumps += 1;
                    self.clients[i].jump(now, by);
                    // Its engine learns the new time when next called; a timer of its
                    // that is now due fires in this step.
                    self.clients[i].dirty = true;
                }
                if active {
                    let every = self.faults.clock_jump_every.expect("jumps on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::ClockJump));
                }
            }
            Fault::ChangeCoordinators => {
                if active {
                    let current = self.cluster.borrow().coordinator_roles();
                    // Each current one kept or not; one new one added in half the changes,
                    // and whenever none is kept.
                    let keep: Vec<usize> = (current.iter().copied())
                        .filter(|_| splitmix(&mut self.rng) & 1 == 0)
                        .collect();
                    let add = usize::from(keep.is_empty() || splitmix(&mut self.rng) & 1 == 0);
                    self.trace
                        .record(now, b'q', add as u64, &[keep.len() as u8]);
                    self.counts.coordinator_changes += 1;
                    self.cluster_mut().change_coordinators(&keep, add);
                    let every = self.faults.coordinator_change_every.expect("changes on");
                    let t = self.draw(every * 2);
                    self.net.at(now + t, Ev::Fault(Fault::ChangeCoordinators));
                }
            }
            Fault::Heal(id) => {
                if self.net.links.contains_key(&id) {
                    self.trace.record(now, b'~', id, &[]);
                    self.cut(id);
                }
            }
            Fault::Restart(role) => {
                if !self.cluster.borrow().is_alive(role) {
                    self.trace.record(now, b'r', 0, &[]);
                    self.counts.restarts += 1;
                    self.cluster_mut().restart(role);
                }
            }
        }
    }
}
