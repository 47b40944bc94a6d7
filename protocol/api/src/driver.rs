//! For driver writers: what a driver provides the API — a loop running an [`Engine`], which
//! the API talks to by sending it [`Op`]s — and what the API gives drivers to build on.
//! Everything the API does (calls, writes, cancellation) is an op, so a driver is only a
//! runtime: sockets, timers and wake-ups. Applications need this module only to write code
//! generic over drivers (`D: Driver`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use fdb_protocol::{Call, Client, Completion, Instant, Outcome};
use futures_channel::oneshot;

use crate::error::Error;

pub use crate::cluster_file::persist_cluster_file;
pub use crate::engine::{entropy_seed, seed_thread_randomness, Clock, Engine, IoRequest, Op};
pub use crate::retry::{Next, RetryLoop};
#[cfg(feature = "tls")]
pub use crate::tls::server_name;
pub use crate::tls::{LoadedTls, Tls};
pub use fdb_protocol::Census;

/// A runtime that runs an [`Engine`]'s loop. Cheap to clone: every clone is a handle to the
/// same loop.
pub trait Driver: Clone + Send + Sync + 'static {
    /// Starts a loop around `engine` and returns a handle to it.
    fn start(engine: Engine) -> Result<Self, Error>;

    /// Runs `op` on the loop, after every op this handle's loop received before it. `false`
    /// if the loop is gone.
    fn send(&self, op: Op) -> bool;

    /// The loop's clock (the engine's).
    fn clock(&self) -> Clock;

    /// The clock a new database's engine runs on: the wall clock, or a simulation's
    /// virtual one.
    fn new_clock() -> Clock {
        Clock::start()
    }

    /// Whether this driver can make TLS connections (its `tls` feature). Without it a
    /// `:tls` cluster file is refused when the database opens.
    fn supports_tls() -> bool {
        false
    }

    /// The core's time now.
    fn now(&self) -> Instant {
        self.clock().now()
    }
}

/// Starts `call` on the loop and returns its completion as a future of `T`. Dropping the
/// future before it completes cancels the request in the core.
pub fn submit<D, T, F>(driver: &D, call: F) -> Pending<D, T>
where
    D: Driver,
    T: Outcome,
    F: FnOnce(&mut Client, Instant) -> Call<T> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let sent = driver.send(Box::new(move |e: &mut Engine| {
        let now = e.now();
        let req = call(e.client(), now).id();
        e.expect(req, tx);
    }));
    Pending {
        rx,
        driver: sent.then(|| driver.clone()),
        local: None,
        _t: std::marker::PhantomData,
    }
}

/// A request in flight (see [`submit`]).
#[must_use = "a request does nothing the application can see unless awaited"]
pub struct Pending<D: Driver, T> {
    rx: oneshot::Receiver<Completion>,
    /// Set while the request may still be running, for cancelling it on drop.
    driver: Option<D>,
    /// A request the API answers itself after reads of its own (the tenant special keys),
    /// instead of one call into the core. Dropping it drops those reads.
    local: Option<LocalFuture<T>>,
    _t: std::marker::PhantomData<fn() -> T>,
}

type LocalFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

impl<D: Driver, T> Pending<D, T> {
    /// A request answered by `fut`, run as this future is polled.
    pub(crate) fn local(fut: impl Future<Output = Result<T, Error>> + Send + 'static) -> Self {
        Pending {
            rx: oneshot::channel().1,
            driver: None,
            local: Some(Box::pin(fut)),
            _t: std::marker::PhantomData,
        }
    }
}

impl<D: Driver, T> Unpin for Pending<D, T> {}

impl<D: Driver, T: Outcome> Future for Pending<D, T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(fut) = self.local.as_mut() {
            return fut.as_mut().poll(cx);
        }
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                self.driver = None;
                Poll::Ready(match r {
                    Ok(done) => T::from_completion(done).map_err(Error::Client),
                    Err(_) => Err(Error::Shutdown),
                })
            }
        }
    }
}

impl<D: Driver, T> Drop for Pending<D, T> {
    fn drop(&mut self) {
        if let Some(d) = self.driver.take() {
            // The receiver goes first, so the loop sees it gone when it reaps.
            self.rx.close();
            d.send(Box::new(|e: &mut Engine| e.reap()));
        }
    }
}

/// Runs `f` on the loop without waiting for anything.
pub fn apply<D: Driver>(driver: &D, f: impl FnOnce(&mut Client, Instant) + Send + 'static) {
    driver.send(Box::new(move |e: &mut Engine| {
        let now = e.now();
        f(e.client(), now)
    }));
}

/// Runs `f` on the loop and returns what it returns.
pub async fn query<D: Driver, R: Send + 'static>(
    driver: &D,
    f: impl FnOnce(&mut Client, Instant) -> R + Send + 'static,
) -> Result<R, Error> {
    let (tx, rx) = oneshot::channel();
    driver.send(Box::new(move |e: &mut Engine| {
        let now = e.now();
        let _ = tx.send(f(e.client(), now));
    }));
    rx.await.map_err(|_| Error::Shutdown)
}
