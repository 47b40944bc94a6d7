//! The mio loop: sockets, the poll, and the ops sent to the engine. Any thread may turn it;
//! one at a time does, and a thread sending work to a loop another thread is blocked in
//! wakes that thread.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll as TaskPoll, Waker as TaskWaker};
use std::time::{Duration, Instant as StdInstant};

use fdb_api::driver::{persist_cluster_file, Clock, Driver, Engine, IoRequest, Op};
use fdb_api::Error;
use fdb_protocol::ConnectionId;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::socket::{Arrived, ReadOutcome, Socket};

/// How long a blocking call waits by default (the loop's `block_on` callers use it).
pub const CALL_LIMIT: Duration = Duration::from_secs(30);

/// The poll token of the loop's waker (connections use their id).
const WAKE: Token = Token(usize::MAX);

/// What only the thread turning the loop touches.
struct Loop {
    engine: Engine,
    poll: Poll,
    events: Events,
    sockets: HashMap<ConnectionId, Socket>,
    /// Reused each turn: the ops taken from the inbox, the sockets that became ready.
    ops: VecDeque<Op>,
    ready: Vec<(ConnectionId, bool, bool)>,
    /// Reused: the sockets whose write failed in one flush.
    failed: Vec<ConnectionId>,
    /// Reused by every read: a fresh 64 KiB buffer on the stack was zeroed per readable
    /// event, a `memset` that cost more than the core's work on a small reply.
    read_buf: Box<[u8]>,
}

struct Shared {
    /// Ops sent and not yet run.
    inbox: Mutex<VecDeque<Op>>,
    /// A thread is blocked in `poll` and must be woken for new ops.
    polling: AtomicBool,
    /// A waiting future was woken: the loop must not sleep before it is polled again.
    nudged: AtomicBool,
    waker: Waker,
    state: Mutex<Loop>,
    /// Threads in `block_on` whose loop another thread is turning, oldest first. A thread
    /// that stops turning wakes the first, to turn it in its place; untold, they would have
    /// to keep checking whether the loop is free.
    waiting: Mutex<VecDeque<std::thread::Thread>>,
    clock: Clock,
}

/// A handle to a database's mio loop. Cheap to clone; the loop (and its connections) is
/// dropped with the last handle.
#[derive(Clone)]
pub struct MioDriver {
    shared: Arc<Shared>,
}

impl Driver for MioDriver {
    fn start(engine: Engine) -> Result<Self, Error> {
        let poll = Poll::new().map_err(Error::Io)?;
        let waker = Waker::new(poll.registry(), WAKE).map_err(Error::Io)?;
        let clock = engine.clock();
        Ok(MioDriver {
            shared: Arc::new(Shared {
                inbox: Mutex::new(VecDeque::new()),
                polling: AtomicBool::new(false),
                nudged: AtomicBool::new(false),
                waker,
                state: Mutex::new(Loop {
                    engine,
                    poll,
                    events: Events::with_capacity(256),
                    sockets: HashMap::new(),
                    ops: VecDeque::new(),
                    ready: Vec::new(),
                    failed: Vec::new(),
                    read_buf: vec![0u8; 64 * 1024].into_boxed_slice(),
                }),
                waiting: Mutex::new(VecDeque::new()),
                clock,
            }),
        })
    }

    fn send(&self, op: Op) -> bool {
        lock(&self.shared.inbox).push_back(op);
        if self.shared.polling.load(Ordering::Acquire) {
            let _ = self.shared.waker.wake();
        }
        true
    }

    fn clock(&self) -> Clock {
        self.shared.clock.clone()
    }

    fn supports_tls() -> bool {
        cfg!(feature = "tls")
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wakes a thread waiting in [`MioDriver::block_on`] when its future may progress: it may be
/// parked, or turning the loop itself.
struct Unpark {
    thread: std::thread::Thread,
    /// Weak, so the cached waker does not keep the loop alive.
    driver: std::sync::Weak<Shared>,
}

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.driver.upgrade() {
            (MioDriver { shared }).notify();
        }
        self.thread.unpark();
    }
}

impl MioDriver {
    /// A future waiting on this loop can progress: the loop must not sleep before the thread
    /// waiting for it polls it (it wakes a thread blocked in `poll`).
    pub fn notify(&self) {
        self.shared.nudged.store(true, Ordering::Release);
        if self.shared.polling.load(Ordering::Acquire) {
            let _ = self.shared.waker.wake();
        }
    }

    /// Forgets a pending "do not sleep" (the [`crate::Executor`] does, right before it polls
    /// every task woken, so that wake-ups it is about to serve cost no empty turn).
    pub(crate) fn clear_nudge(&self) {
        self.shared.nudged.store(false, Ordering::Release);
    }

    /// This thread's waker for this loop, made once per thread and loop (a blocking call
    /// should not allocate one each time).
    fn thread_waker(&self) -> TaskWaker {
        thread_local! {
            static WAKERS: std::cell::RefCell<Vec<(std::sync::Weak<Shared>, TaskWaker)>> =
                const { std::cell::RefCell::new(Vec::new()) };
        }
        WAKERS.with(|w| {
            let mut w = w.borrow_mut();
            w.retain(|(s, _)| s.strong_count() > 0);
            if let Some((_, waker)) = w
                .iter()
                .find(|(s, _)| std::ptr::eq(s.as_ptr(), Arc::as_ptr(&self.shared)))
            {
                return waker.clone();
            }
            let waker = TaskWaker::from(Arc::new(Unpark {
                thread: std::thread::current(),
                driver: Arc::downgrade(&self.shared),
            }));
            w.push((Arc::downgrade(&self.shared), waker.clone()));
            waker
        })
    }

    /// Runs `fut` to completion on this thread, turning the loop while it waits, for at most
    /// `limit` (then the future is dropped, which cancels what it was waiting for).
    pub fn block_on<F: Future>(&self, fut: F, limit: Duration) -> Result<F::Output, Error> {
        let deadline = StdInstant::now() + limit;
        let waker = self.thread_waker();
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin!(fut);
        // Set once this thread has turned the loop, or was woken to turn it: on the way out
        // (a panic too) it must then wake the next waiting thread, which may need the loop.
        let mut turner = Turner {
            driver: self,
            owes_turn: false,
        };
        loop {
            if let TaskPoll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return Ok(v);
            }
            if StdInstant::now() >= deadline {
                return Err(Error::TimedOut);
            }
            if let Some(mut state) = self.take_loop_or_wait(deadline, &mut turner.owes_turn) {
                turner.owes_turn = true;
                state.turn(&self.shared, Some(deadline))?;
            }
        }
    }

    /// The loop, when no other thread is turning it; otherwise sleeps until this thread's
    /// completion arrives or the turning thread stops (or `deadline`), and returns `None`.
    fn take_loop_or_wait(
        &self,
        deadline: StdInstant,
        chosen: &mut bool,
    ) -> Option<MutexGuard<'_, Loop>> {
        if let Ok(state) = self.shared.state.try_lock() {
            return Some(state);
        }
        // Listed first, then looked again, so a turner that stopped in between is not missed.
        let me = std::thread::current();
        lock(&self.shared.waiting).push_back(me.clone());
        let state = self.shared.state.try_lock().ok();
        if state.is_none() {
            std::thread::park_timeout(deadline.saturating_duration_since(StdInstant::now()));
        }
        self.unlist(&me, chosen);
        state
    }

    /// Takes this thread off the waiting list; not finding it there means a turner chose it
    /// to take the loop over.
    fn unlist(&self, me: &std::thread::Thread, chosen: &mut bool) {
        let mut waiting = lock(&self.shared.waiting);
        match waiting.iter().position(|t| t.id() == me.id()) {
            Some(i) => {
                waiting.remove(i);
            }
            None => *chosen = true,
        }
    }

    /// This thread stops turning the loop: the oldest waiting thread takes over.
    fn hand_off(&self) {
        if let Some(next) = lock(&self.shared.waiting).pop_front() {
            next.unpark();
        }
    }

    /// One turn of the loop: runs the ops sent, does the IO that is ready, and waits at most
    /// until `until` (or the core's next deadline) for more. A thread blocked in
    /// [`MioDriver::block_on`] meanwhile is woken afterwards, in case no one turns it again.
    pub fn turn(&self, until: Option<StdInstant>) -> Result<(), Error> {
        let turned = lock(&self.shared.state).turn(&self.shared, until);
        self.hand_off();
        turned
    }
}

/// A thread in [`MioDriver::block_on`]; if it turned the loop, it passes the loop on when
/// it leaves.
struct Turner<'a> {
    driver: &'a MioDriver,
    owes_turn: bool,
}

impl Drop for Turner<'_> {
    fn drop(&mut self) {
        if self.owes_turn {
            self.driver.hand_off();
        }
    }
}

impl Loop {
    fn turn(&mut self, shared: &Shared, until: Option<StdInstant>) -> Result<(), Error> {
        self.settle(shared)?;
        let deadline = match (self.engine.deadline(), until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // No sleeping while ops wait: `polling` is set before the inbox is looked at, so a
        // sender either sees it and wakes us, or its op is seen here.
        shared.polling.store(true, Ordering::Release);
        let busy = !lock(&shared.inbox).is_empty() || shared.nudged.swap(false, Ordering::AcqRel);
        let timeout = if busy {
            Some(Duration::ZERO)
        } else {
            deadline.map(|d| d.saturating_duration_since(StdInstant::now()))
        };
        let polled = self.poll.poll(&mut self.events, timeout);
        shared.polling.store(false, Ordering::Release);
        match polled {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Io(e)),
        }
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        ready.extend(
            self.events
                .iter()
                .filter(|ev| ev.token() != WAKE)
                .map(|ev| {
                    (
                        ConnectionId(ev.token().0 as u64),
                        ev.is_writable(),
                        ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    )
                }),
        );
        for &(id, writable, readable) in &ready {
            if writable {
                self.on_writable(id);
            }
            if readable {
                self.on_readable(id);
            }
        }
        self.ready = ready;
        if self
            .engine
            .deadline()
            .is_some_and(|d| StdInstant::now() >= d)
        {
            self.engine.handle_timeout();
        }
        self.settle(shared)
    }

    /// Runs the ops sent, then carries out what the engine asks until it asks nothing more.
    fn settle(&mut self, shared: &Shared) -> Result<(), Error> {
        loop {
            // Swap the inbox for the (empty) reused queue: one lock, no allocation.
            std::mem::swap(&mut self.ops, &mut *lock(&shared.inbox));
            let any = !self.ops.is_empty();
            while let Some(op) = self.ops.pop_front() {
                op(&mut self.engine);
            }
            while let Some(io) = self.engine.poll_io() {
                self.carry_out(io)?;
            }
            while let Some(t) = self.engine.poll_transmit() {
                if let Some(s) = self.sockets.get_mut(&t.conn) {
                    s.out.extend(t.data.iter());
                }
            }
            self.flush_all();
            if !any {
                return Ok(());
            }
        }
    }

    fn carry_out(&mut self, io: IoRequest) -> Result<(), Error> {
        match io {
            IoRequest::Connect { conn, addr, tls } => match TcpStream::connect(addr) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    let Some(mut socket) = self.socket(stream, addr, tls) else {
                        self.engine.handle_connect_failed(conn);
                        return Ok(());
                    };
                    self.poll
                        .registry()
                        .register(
                            &mut socket.stream,
                            Token(conn.0 as usize),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .map_err(Error::Io)?;
                    self.sockets.insert(conn, socket);
                }
                Err(_) => self.engine.handle_connect_failed(conn),
            },
            IoRequest::Close { conn } => {
                if let Some(mut s) = self.sockets.remove(&conn) {
                    let _ = self.poll.registry().deregister(&mut s.stream);
                }
            }
            IoRequest::Resolve { host, port } => {
                // Blocking, as the rest of this loop's waiting is.
                let ips: Vec<IpAddr> = match (host.as_str(), port).to_socket_addrs() {
                    Ok(addrs) => addrs.map(|a| a.ip()).collect(),
                    Err(e) => {
                        tracing::warn!(%host, port, error = %e, "host name lookup failed");
                        Vec::new()
                    }
                };
                self.engine.handle_resolved(&host, port, &ips);
            }
            IoRequest::WriteClusterFile { path, cluster } => persist_cluster_file(&path, &cluster),
        }
        Ok(())
    }

    /// The socket for a new connection: plain, or wrapped in TLS for a TLS address (`None`:
    /// TLS is not available, and a TLS address is never connected to in plaintext).
    fn socket(&self, stream: TcpStream, addr: SocketAddr, tls: bool) -> Option<Socket> {
        if !tls {
            return Some(Socket::plain(stream, addr));
        }
        #[cfg(feature = "tls")]
        {
            let made = self.engine.tls().client_config().map_err(|e| e.to_string());
            let made = made.and_then(|config| {
                rustls::ClientConnection::new(config, fdb_api::driver::server_name(addr.ip()))
                    .map_err(|e| e.to_string())
            });
            match made {
                Ok(session) => Some(Socket::tls(stream, addr, session)),
                Err(error) => {
                    tracing::warn!(%addr, %error, "refusing a TLS connection");
                    None
                }
            }
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = stream;
            tracing::warn!(%addr, error = %fdb_api::TlsError::NotBuilt, "refusing a TLS connection");
            None
        }
    }

    fn on_writable(&mut self, id: ConnectionId) {
        let Some(s) = self.sockets.get_mut(&id) else {
            return;
        };
        if !s.tcp {
            match s.stream.peer_addr() {
                Ok(_) => s.tcp = true,
                Err(e) if e.kind() == ErrorKind::NotConnected => {
                    if matches!(s.stream.take_error(), Ok(Some(_)) | Err(_)) {
                        self.fail(id, None);
                    }
                    return;
                }
                Err(_) => {
                    self.fail(id, None);
                    return;
                }
            }
        }
        self.flush(id);
        self.check_ready(id);
    }

    /// Tells the core a connection is up once TCP connected and any TLS handshake finished.
    fn check_ready(&mut self, id: ConnectionId) {
        let Some(s) = self.sockets.get_mut(&id) else {
            return;
        };
        if s.connected || !s.is_ready() {
            return;
        }
        s.connected = true;
        self.engine.handle_connected(id);
        while let Some(t) = self.engine.poll_transmit() {
            if let Some(s) = self.sockets.get_mut(&t.conn) {
                s.out.extend(t.data.iter());
            }
        }
        self.flush(id);
    }

    /// Writes what every socket has queued; without collecting the ids (this runs twice a
    /// turn, and a list of ids was an allocation each time).
    fn flush_all(&mut self) {
        let mut failed = std::mem::take(&mut self.failed);
        failed.clear();
        for (&id, s) in self.sockets.iter_mut() {
            if s.write().is_err() {
                failed.push(id);
            }
        }
        for &id in &failed {
            self.fail(id, None);
        }
        self.failed = failed;
    }

    fn flush(&mut self, id: ConnectionId) {
        let Some(s) = self.sockets.get_mut(&id) else {
            return;
        };
        if s.write().is_err() {
            self.fail(id, None);
        }
    }

    fn on_readable(&mut self, id: ConnectionId) {
        let buf = &mut self.read_buf;
        let Some(s) = self.sockets.get_mut(&id) else {
            return;
        };
        if !s.tcp {
            return;
        }
        let engine = &mut self.engine;
        let outcome = s.read(buf, &mut |arrived| match arrived {
            Arrived::Up => engine.handle_connected(id),
            Arrived::Data(data) => engine.handle_input(id, data),
        });
        match outcome {
            // A TLS read may have finished the handshake or queued records to send; what the
            // core transmits in answer is written when the turn settles.
            ReadOutcome::Open => self.flush(id),
            ReadOutcome::Closed(why) => self.fail(id, why),
        }
    }

    /// The connection is gone; `why` is the TLS failure, if it was one.
    fn fail(&mut self, id: ConnectionId, why: Option<String>) {
        let connected = match self.sockets.remove(&id) {
            Some(mut s) => {
                let _ = self.poll.registry().deregister(&mut s.stream);
                if let Some(error) = why {
                    tracing::warn!(addr = %s.addr, %error, "TLS connection failed");
                }
                s.connected
            }
            None => return,
        };
        if connected {
            self.engine.handle_closed(id);
        } else {
            self.engine.handle_connect_failed(id);
        }
    }
}
