//! The simulation's driver: `fdb-api`'s [`Driver`] over an engine the world runs. A handle
//! queues ops; the world runs them on its engine between the application's polls, on its
//! virtual clock. A database opens only inside a running simulation.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fdb_api::driver::{Clock, Driver, Engine, Op};
use fdb_api::Error;

/// What the world shares with a database's handles.
pub(crate) struct Shared {
    ops: Mutex<VecDeque<Op>>,
    /// How many `ops` wait: the world looks after every step, most often for none, which
    /// this tells without taking the lock.
    queued: AtomicUsize,
    pub(crate) clock: Clock,
    /// The database's own clock (nanoseconds), which the world moves: it may drift from the
    /// world's.
    pub(crate) nanos: Arc<AtomicU64>,
}

impl Shared {
    /// The op queued first, if any.
    pub(crate) fn next_op(&self) -> Option<Op> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        let op = ops.pop_front();
        self.queued.store(ops.len(), Ordering::Release);
        op
    }
}

/// A handle to a database's engine in the simulation (see [`super`]). Cheap to clone.
#[derive(Clone)]
pub struct SimDriver {
    shared: Arc<Shared>,
}

/// A database in the simulation: the same `Database` / `Transaction` API as the tokio and
/// mio drivers.
pub type Database = fdb_api::Database<SimDriver>;

thread_local! {
    /// The running simulation's clock (`None` outside one).
    static CLOCK: RefCell<Option<Arc<AtomicU64>>> = const { RefCell::new(None) };
    /// The clock [`SimDriver::new_clock`] made last, for the engine [`SimDriver::start`]
    /// gets next.
    static NEW_CLOCK: RefCell<Option<Arc<AtomicU64>>> = const { RefCell::new(None) };
    /// Engines opened since the world last looked.
    static OPENED: RefCell<Vec<(Engine, Arc<Shared>)>> = const { RefCell::new(Vec::new()) };
}

/// Makes `nanos` the clock of databases opened on this thread until [`leave`], and the
/// API's own randomness (directory prefixes, random UIDs) a sequence from `seed`.
pub(crate) fn enter(nanos: Arc<AtomicU64>, seed: u64) {
    CLOCK.with(|c| *c.borrow_mut() = Some(nanos));
    fdb_api::driver::seed_thread_randomness(Some(seed));
}

/// Ends what [`enter`] began; engines not taken are dropped.
pub(crate) fn leave() {
    CLOCK.with(|c| *c.borrow_mut() = None);
    NEW_CLOCK.with(|n| *n.borrow_mut() = None);
    fdb_api::driver::seed_thread_randomness(None);
    OPENED.with(|o| o.borrow_mut().clear());
}

/// The engines opened since the last call.
pub(crate) fn take_opened() -> Vec<(Engine, Arc<Shared>)> {
    OPENED.with(|o| std::mem::take(&mut *o.borrow_mut()))
}

/// A new clock for a database, starting at the world's time (`None` outside a simulation).
fn sim_clock() -> Option<Clock> {
    let world = CLOCK.with(|c| c.borrow().clone())?;
    let own = Arc::new(AtomicU64::new(world.load(Ordering::SeqCst)));
    NEW_CLOCK.with(|n| *n.borrow_mut() = Some(own.clone()));
    Some(Clock::manual(own))
}

impl Driver for SimDriver {
    fn start(engine: Engine) -> Result<Self, Error> {
        let Some(nanos) = NEW_CLOCK.with(|n| n.borrow_mut().take()) else {
            return Err(Error::Io(std::io::Error::other(
                "a simulated database opens only inside a running simulation",
            )));
        };
        let shared = Arc::new(Shared {
            ops: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            clock: engine.clock(),
            nanos,
        });
        OPENED.with(|o| o.borrow_mut().push((engine, shared.clone())));
        Ok(SimDriver { shared })
    }

    fn send(&self, op: Op) -> bool {
        let mut ops = self.shared.ops.lock().unwrap_or_else(|e| e.into_inner());
        ops.push_back(op);
        self.shared.queued.store(ops.len(), Ordering::Release);
        true
    }

    fn clock(&self) -> Clock {
        self.shared.clock.clone()
    }

    fn new_clock() -> Clock {
        sim_clock().unwrap_or_else(Clock::start)
    }
}
