//! Many transactions on one thread: futures of the async API, polled when woken, with the
//! mio loop turned in between. This is the non-blocking form of the driver — one thread and
//! one set of connections for any number of concurrent transactions.
//!
//! ```no_run
//! use fdb_driver_mio::{AsyncDatabase, Executor};
//!
//! let db = AsyncDatabase::open(None).unwrap();
//! let mut ex = Executor::new(db.driver());
//! let handles: Vec<_> = (0..64u8)
//!     .map(|i| {
//!         let db = db.clone();
//!         ex.spawn(async move {
//!             let tx = db.create_transaction();
//!             tx.set(&[b'k', i], b"v");
//!             tx.commit().await.map(|_| i)
//!         })
//!     })
//!     .collect();
//! ex.run().unwrap();
//! for h in handles {
//!     h.try_take().unwrap().unwrap();
//! }
//! ```
//!
//! A program with its own event loop calls [`Executor::tick`] with the time it may wait; the
//! loop sleeps in `epoll` while nothing is ready (no polling of idle tasks, no spinning).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant as StdInstant;

use fdb_api::Error;

use crate::event_loop::MioDriver;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// The slots woken since they were last polled.
struct ReadyQueue {
    slots: Mutex<Vec<usize>>,
    driver: MioDriver,
}

/// One task slot's waker. It is made once per slot and reused by every task that slot
/// holds: a late wake of a finished task only polls its successor once more, which futures
/// allow.
struct SlotWaker {
    slot: usize,
    queued: AtomicBool,
    ready: Arc<ReadyQueue>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.ready
                .slots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(self.slot);
            // The loop must not sleep before the task is polled (and is woken if it does).
            self.ready.driver.notify();
        }
    }
}

struct Slot {
    task: Option<Task>,
    waker: Arc<SlotWaker>,
}

/// Futures spawned and not yet taken into a slot (also from inside running tasks).
type Incoming = Rc<RefCell<Vec<Task>>>;

/// Runs spawned futures on the calling thread, turning `driver`'s loop while they wait.
///
/// Tasks are polled only when woken; between polls the thread waits in the loop's `poll`
/// for IO, the core's next deadline, or a wake-up. Spawning reuses finished tasks' slots,
/// so a steady stream of transactions allocates only their futures' boxes.
pub struct Executor {
    driver: MioDriver,
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: usize,
    ready: Arc<ReadyQueue>,
    /// Reused: the slots taken from the ready queue in one pass.
    batch: Vec<usize>,
    incoming: Incoming,
}

impl Executor {
    /// An executor for futures that use `driver`'s loop.
    pub fn new(driver: &MioDriver) -> Executor {
        Executor {
            driver: driver.clone(),
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            ready: Arc::new(ReadyQueue {
                slots: Mutex::new(Vec::new()),
                driver: driver.clone(),
            }),
            batch: Vec::new(),
            incoming: Rc::new(RefCell::new(Vec::new())),
        }
    }

    /// Adds a future; it first runs in the next [`Executor::tick`] (or [`Executor::run`]).
    /// The handle gives its output once it finished.
    pub fn spawn<T: 'static>(&mut self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        self.spawner().spawn(fut)
    }

    /// A handle that spawns onto this executor, for use inside its tasks.
    pub fn spawner(&self) -> Spawner {
        Spawner {
            incoming: self.incoming.clone(),
            driver: self.driver.clone(),
        }
    }

    /// Tasks spawned and not finished.
    pub fn len(&self) -> usize {
        self.live + self.incoming.borrow().len()
    }

    /// No task is left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs every spawned future (and those they spawn) to completion.
    pub fn run(&mut self) -> Result<(), Error> {
        while self.step(None, false)? {}
        Ok(())
    }

    /// Runs the tasks until `fut` completes, and returns its output (the other tasks may
    /// still be unfinished).
    pub fn run_until<T: 'static>(
        &mut self,
        fut: impl Future<Output = T> + 'static,
    ) -> Result<T, Error> {
        let handle = self.spawn(fut);
        loop {
            if let Some(v) = handle.try_take() {
                return Ok(v);
            }
            self.step(None, false)?;
        }
    }

    /// One step for a program that runs its own loop around this one: polls the tasks that
    /// were woken, then turns the loop once — running the operations they sent, doing the
    /// IO that is ready, and, if no task is ready, waiting for IO, a wake-up or the core's
    /// next deadline, but not past `until` (`None`: no limit of the caller's). Returns
    /// whether tasks remain. With no task left it still turns the loop (the connections
    /// are served, and the call waits as told), so a caller's loop never spins.
    pub fn tick(&mut self, until: Option<StdInstant>) -> Result<bool, Error> {
        self.step(until, true)
    }

    fn step(&mut self, until: Option<StdInstant>, turn_when_empty: bool) -> Result<bool, Error> {
        // Wakes seen from here on are new: a stale "nudge" must not cost an empty turn.
        self.driver.clear_nudge();
        self.adopt();
        self.poll_ready();
        self.adopt();
        if self.live == 0 && !turn_when_empty {
            return Ok(false);
        }
        self.driver.turn(until)?;
        Ok(self.live > 0)
    }

    /// Moves spawned futures into slots and marks them ready.
    fn adopt(&mut self) {
        loop {
            let Some(task) = self.incoming.borrow_mut().pop() else {
                return;
            };
            let slot = match self.free.pop() {
                Some(i) => i,
                None => {
                    let i = self.slots.len();
                    self.slots.push(Slot {
                        task: None,
                        waker: Arc::new(SlotWaker {
                            slot: i,
                            queued: AtomicBool::new(false),
                            ready: self.ready.clone(),
                        }),
                    });
                    i
                }
            };
            self.slots[slot].task = Some(task);
            self.live += 1;
            self.slots[slot].waker.wake_by_ref();
        }
    }

    /// Polls every task woken, until none is.
    fn poll_ready(&mut self) {
        loop {
            self.batch.clear();
            std::mem::swap(
                &mut self.batch,
                &mut *self.ready.slots.lock().unwrap_or_else(|e| e.into_inner()),
            );
            if self.batch.is_empty() {
                return;
            }
            for k in 0..self.batch.len() {
                let i = self.batch[k];
                let slot = &mut self.slots[i];
                // Cleared before the poll: a wake during it queues the task again.
                slot.waker.queued.store(false, Ordering::Release);
                let Some(task) = slot.task.as_mut() else {
                    continue;
                };
                let waker = Waker::from(slot.waker.clone());
                if task
                    .as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready()
                {
                    slot.task = None;
                    self.free.push(i);
                    self.live -= 1;
                }
            }
        }
    }
}

/// Spawns onto an [`Executor`] from inside its tasks (or anywhere on its thread).
#[derive(Clone)]
pub struct Spawner {
    incoming: Incoming,
    driver: MioDriver,
}

impl Spawner {
    /// Adds a future to the executor; it first runs in its next tick.
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let state = Rc::new(RefCell::new(Join {
            value: None,
            waiter: None,
        }));
        let done = state.clone();
        self.incoming.borrow_mut().push(Box::pin(async move {
            let v = fut.await;
            let mut j = done.borrow_mut();
            j.value = Some(v);
            if let Some(w) = j.waiter.take() {
                w.wake();
            }
        }));
        // A task spawned from another task's poll must not wait for the loop's next event.
        self.driver.notify();
        JoinHandle { state }
    }
}

struct Join<T> {
    value: Option<T>,
    waiter: Option<Waker>,
}

/// A spawned task's output: await it (from another task of the same executor), or take it
/// once the executor ran the task to the end.
pub struct JoinHandle<T> {
    state: Rc<RefCell<Join<T>>>,
}

impl<T> JoinHandle<T> {
    /// The output, if the task finished (and it was not taken yet).
    pub fn try_take(&self) -> Option<T> {
        self.state.borrow_mut().value.take()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut j = self.state.borrow_mut();
        match j.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                j.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
