//! Many transactions on one thread: futures of the async API, polled when woken, with the
//! mio loop turned in between. This is the non-blocking form of the driver — one thread and
//! one set of connections for any number of concurrent transactions.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Instant as StdInstant;

use fdb_api::Error;

use crate::event_loop::MioDriver;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// A task's wake-up flag; waking it also keeps the loop from sleeping.
struct Flag(AtomicBool, MioDriver);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
        self.1.notify();
    }
}

/// Runs spawned futures on the calling thread, turning `driver`'s loop while they wait.
pub struct Executor {
    driver: MioDriver,
    tasks: Vec<(Task, Arc<Flag>)>,
}

impl Executor {
    /// An executor for futures that use `driver`'s loop.
    pub fn new(driver: &MioDriver) -> Executor {
        Executor {
            driver: driver.clone(),
            tasks: Vec::new(),
        }
    }

    /// Adds a future; it first runs in [`Executor::run`].
    pub fn spawn(&mut self, fut: impl Future<Output = ()> + 'static) {
        self.tasks.push((
            Box::pin(fut),
            Arc::new(Flag(AtomicBool::new(true), self.driver.clone())),
        ));
    }

    /// Runs every spawned future to completion.
    pub fn run(&mut self) -> Result<(), Error> {
        while !self.tasks.is_empty() {
            let mut i = 0;
            while i < self.tasks.len() {
                let (task, flag) = &mut self.tasks[i];
                if flag.0.swap(false, Ordering::AcqRel) {
                    let waker = Waker::from(flag.clone());
                    if task
                        .as_mut()
                        .poll(&mut Context::from_waker(&waker))
                        .is_ready()
                    {
                        drop(self.tasks.swap_remove(i));
                        continue;
                    }
                }
                i += 1;
            }
            if self.tasks.is_empty() {
                break;
            }
            if !self.tasks.iter().any(|(_, f)| f.0.load(Ordering::Acquire)) {
                // Nothing to poll: wait for IO, a deadline, or more work.
                self.driver.turn(None::<StdInstant>)?;
            }
        }
        Ok(())
    }
}
