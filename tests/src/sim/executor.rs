//! The simulation's executor: the application's tasks, polled one at a time in a fixed order
//! (first woken, first polled) on the simulation's thread. Nothing here knows about time or
//! the network; the world polls it until no task is ready.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

type Task = Pin<Box<dyn Future<Output = ()>>>;

thread_local! {
    /// Tasks spawned from inside a task, picked up after its poll.
    static SPAWNED: RefCell<Vec<Task>> = const { RefCell::new(Vec::new()) };
}

/// Queues `fut` on the running simulation's executor (see [`super::spawn`]).
pub(crate) fn spawn_local(fut: Task) {
    SPAWNED.with(|s| s.borrow_mut().push(fut));
}

/// The ids of the tasks ready to run, in the order they were woken, and how many there are:
/// the world asks after every step, and most often none is, which the count tells without
/// taking the lock.
#[derive(Default)]
struct Ready {
    queue: Mutex<VecDeque<usize>>,
    len: AtomicUsize,
}

impl Ready {
    fn lock(&self) -> MutexGuard<'_, VecDeque<usize>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, id: usize) {
        let mut q = self.lock();
        if !q.contains(&id) {
            q.push_back(id);
        }
        self.len.store(q.len(), Ordering::Release);
    }

    fn pop(&self) -> Option<usize> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = self.lock();
        let id = q.pop_front();
        self.len.store(q.len(), Ordering::Release);
        id
    }
}

/// Wakes a task by queueing its id (once).
struct TaskWaker {
    id: usize,
    ready: Arc<Ready>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push(self.id);
    }
}

/// The tasks and which of them are ready.
#[derive(Default)]
pub(crate) struct Executor {
    tasks: Vec<Option<(Task, Waker)>>,
    ready: Arc<Ready>,
}

impl Executor {
    /// Adds a task, ready to run.
    pub(crate) fn spawn(&mut self, fut: Task) {
        let id = self.tasks.len();
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: self.ready.clone(),
        }));
        self.tasks.push(Some((fut, waker)));
        self.ready.push(id);
    }

    /// Polls every ready task (and those they wake or spawn) until none is ready. Whether
    /// any task ran.
    pub(crate) fn run_ready(&mut self) -> bool {
        let mut ran = false;
        loop {
            for t in SPAWNED.with(|s| std::mem::take(&mut *s.borrow_mut())) {
                self.spawn(t);
            }
            let next = self.ready.pop();
            let Some(id) = next else { return ran };
            ran = true;
            let Some((mut fut, waker)) = self.tasks[id].take() else {
                continue;
            };
            let mut cx = Context::from_waker(&waker);
            if fut.as_mut().poll(&mut cx) == Poll::Pending {
                self.tasks[id] = Some((fut, waker));
            }
        }
    }

    /// Tasks not finished.
    pub(crate) fn live(&self) -> usize {
        self.tasks.iter().filter(|t| t.is_some()).count()
    }
}
