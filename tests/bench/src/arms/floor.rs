//! `floor`: a raw TCP ping-pong over loopback with the request and reply sizes of each
//! workload's wire exchanges (see [`wire_exchanges`]). One connection per worker, all
//! driven by one thread's epoll loop (as is the server's end): no serialization, no protocol
//! state, no thread hand-offs. It is the cost of moving the same bytes on this machine.
//!
//! It does not batch: each transaction does its own exchanges, where a real client can fold
//! many transactions' read-version requests into one. So at high concurrency a batching
//! client can beat it on `grv`; see BENCHMARKS.md.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::{Arm, Ctx, FLOOR};
use crate::harness::{finish, new_histogram, Counts, Mark, Probes, RunStats};
use crate::workload::{wire_exchanges, Exchange, Workload};

#[derive(Default)]
pub struct FloorArm {
    sizes: HashMap<Workload, Vec<Exchange>>,
}

impl Arm for FloorArm {
    fn name(&self) -> &'static str {
        FLOOR
    }
    fn skip_reason(&self, _ctx: &Ctx, _w: Workload) -> Option<String> {
        None
    }
    fn run(
        &mut self,
        ctx: &Ctx,
        w: Workload,
        counts: Counts,
        _seed: u64,
    ) -> Result<RunStats, String> {
        let exchanges = self
            .sizes
            .entry(w)
            .or_insert_with(|| wire_exchanges(w, &ctx.keys))
            .clone();
        run_floor(ctx.floor, &exchanges, counts)
    }
}

/// The request bytes of one exchange: its own length and the reply length wanted (both
/// `u32` little-endian), then zeros.
pub fn request_bytes(x: &Exchange) -> Vec<u8> {
    let mut b = vec![0u8; x.request.max(8)];
    let len = b.len() as u32;
    b[..4].copy_from_slice(&len.to_le_bytes());
    b[4..8].copy_from_slice(&(x.reply as u32).to_le_bytes());
    b
}

struct Conn {
    stream: TcpStream,
    /// In a transaction: which exchange, and when the transaction started.
    busy: Option<(usize, Instant)>,
    written: usize,
    to_read: usize,
    measured: bool,
    warmups_left: u64,
}

enum Step {
    Blocked,
    Done(Instant, bool),
}

struct Floor<'a> {
    requests: Vec<Vec<u8>>,
    replies: Vec<usize>,
    exchanges: &'a [Exchange],
    buf: Vec<u8>,
}

impl Floor<'_> {
    fn start(&self, c: &mut Conn, measured: bool) {
        c.busy = Some((0, Instant::now()));
        c.written = 0;
        c.to_read = self.replies[0];
        c.measured = measured;
    }

    /// Moves one connection's transaction as far as the socket allows.
    fn drive(&mut self, c: &mut Conn) -> Result<Step, String> {
        loop {
            let Some((ex, started)) = c.busy else {
                return Ok(Step::Blocked);
            };
            let req = &self.requests[ex];
            if c.written < req.len() {
                match c.stream.write(&req[c.written..]) {
                    Ok(0) => return Err("floor: connection closed".into()),
                    Ok(n) => c.written += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Step::Blocked),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("floor write: {e}")),
                }
                continue;
            }
            if c.to_read > 0 {
                let n = c.to_read.min(self.buf.len());
                match c.stream.read(&mut self.buf[..n]) {
                    Ok(0) => return Err("floor: connection closed".into()),
                    Ok(n) => c.to_read -= n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Step::Blocked),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("floor read: {e}")),
                }
                continue;
            }
            if ex + 1 < self.exchanges.len() {
                c.busy = Some((ex + 1, started));
                c.written = 0;
                c.to_read = self.replies[ex + 1];
                continue;
            }
            c.busy = None;
            return Ok(Step::Done(started, c.measured));
        }
    }
}

/// The floor's closed loop: warmup on every connection, then `measured` transactions taken
/// by whichever connection is free, all on this thread.
pub fn run_floor(
    addr: std::net::SocketAddr,
    exchanges: &[Exchange],
    counts: Counts,
) -> Result<RunStats, String> {
    let mut poll = Poll::new().map_err(|e| format!("floor poll: {e}"))?;
    let mut conns = Vec::with_capacity(counts.workers);
    for i in 0..counts.workers {
        let s = std::net::TcpStream::connect(addr).map_err(|e| format!("floor connect: {e}"))?;
        s.set_nodelay(true).map_err(|e| format!("floor: {e}"))?;
        s.set_nonblocking(true).map_err(|e| format!("floor: {e}"))?;
        let mut stream = TcpStream::from_std(s);
        poll.registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| format!("floor register: {e}"))?;
        conns.push(Conn {
            stream,
            busy: None,
            written: 0,
            to_read: 0,
            measured: false,
            warmups_left: counts.warmup_each(),
        });
    }
    let mut floor = Floor {
        requests: exchanges.iter().map(request_bytes).collect(),
        replies: exchanges.iter().map(|x| x.reply).collect(),
        exchanges,
        buf: vec![0u8; 256 * 1024],
    };
    let mut hist = new_histogram();
    let mut events = Events::with_capacity(1024);
    let limit = Duration::from_secs(60);

    // Warmup: every connection does its share; nothing is recorded.
    let mut warming = 0;
    for c in conns.iter_mut() {
        if c.warmups_left > 0 {
            c.warmups_left -= 1;
            floor.start(c, false);
            warming += 1;
        }
    }
    let mut ready: Vec<usize> = (0..conns.len()).collect();
    let mut issued = 0u64;
    let mut completed = 0u64;
    let mut start: Option<Mark> = None;
    let mut last_progress = Instant::now();
    loop {
        // Drive every connection that may have progress, starting new transactions as they
        // finish.
        while let Some(i) = ready.pop() {
            let c = &mut conns[i];
            match floor.drive(c)? {
                Step::Blocked => {}
                Step::Done(t0, measured) => {
                    last_progress = Instant::now();
                    if measured {
                        hist.saturating_record(t0.elapsed().as_nanos() as u64);
                        completed += 1;
                    } else {
                        warming -= 1;
                    }
                    if c.warmups_left > 0 {
                        c.warmups_left -= 1;
                        floor.start(c, false);
                        warming += 1;
                        ready.push(i);
                    } else if start.is_some() && issued < counts.measured {
                        issued += 1;
                        floor.start(c, true);
                        ready.push(i);
                    }
                }
            }
        }
        if start.is_none() && warming == 0 {
            // Every connection is idle and warm: open the measured window.
            start = Some(Mark::start(&Probes::default()));
            for (i, c) in conns.iter_mut().enumerate() {
                if issued < counts.measured {
                    issued += 1;
                    floor.start(c, true);
                    ready.push(i);
                }
            }
            continue;
        }
        if start.is_some() && completed >= counts.measured {
            break;
        }
        if last_progress.elapsed() > limit {
            return Err("floor: no progress for 60 s".into());
        }
        match poll.poll(&mut events, Some(Duration::from_secs(1))) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("floor poll: {e}")),
        }
        for ev in events.iter() {
            ready.push(ev.token().0);
        }
    }
    let mut start = start.expect("measured window opened");
    let end = Mark::end(&Probes::default(), &mut start);
    Ok(finish(start, end, vec![hist]))
}
