//! Why a cell misses its target (issue 25's, against libfdb_c), told from what the same
//! invocation measured, so that a reader can check every reason in the report itself: the
//! latency the cluster leaves a client, the thread hand-offs of a runtime, the traffic the
//! cluster received. A miss these numbers do not explain is said to be so.

use std::fmt::Write as _;

use crate::arms;
use crate::bench::{Cell, Comparison, Ratio, Results};
use crate::harness::{Metric, Summary};
use crate::report::{f, interval, verdict};
use crate::wire::WirePerTxn;

/// Writes the sections that explain the cells a comparison against libfdb_c misses.
pub fn write(s: &mut String, r: &Results) {
    latency_misses(s, r);
    p99_misses(s, r);
    cpu_misses(s, r);
}

/// The least mean latency `ours` could reach in a cell if it spent no CPU at all, from what
/// was measured around its runs, in µs, and how it was found. Two lower bounds, whichever is
/// higher:
/// * with N closed-loop workers, every transaction needs the cluster's busiest thread for S
///   µs on average, so throughput is at most 1/S and (Little's law) latency at least N × S;
/// * with one worker nothing overlaps: the time the transaction was not on the client's CPU
///   (latency minus the client's whole CPU per transaction) is spent waiting for the cluster
///   and the kernel, and no client change removes it.
pub fn latency_bound(ours: &Summary, workers: usize) -> Option<(f64, &'static str)> {
    let serial = ours.server_busiest_us_per_txn? * workers as f64;
    let waiting = if workers == 1 {
        off_cpu(ours.mean_us, ours)
    } else {
        0.0
    };
    Some(if waiting > serial {
        (waiting, "latency minus all client CPU (one worker)")
    } else {
        (
            serial,
            "workers × the busiest fdbserver thread's CPU per transaction",
        )
    })
}

/// How much CPU per transaction the client itself could spend and still meet a mean-latency
/// `target` (µs) in this cell, if the cluster's part stayed what was measured around `ours`'
/// runs; negative when no client could. Two regimes, as measured on the 2-core machines:
/// * one worker: nothing overlaps, so the time the transaction was off the client's CPU
///   (latency minus client CPU) stays, and the client has what is left of the target;
/// * N workers: the closed loop takes turns, the busiest server thread serving the burst of
///   requests while the client waits, then the client handling the burst of replies, so the
///   mean latency is about N × (S + C) (S: that thread's CPU per transaction, C: the client's;
///   [`turns_model`] shows how close that is in each cell), and the client has target / N − S.
pub fn client_cpu_allowed(ours: &Summary, workers: usize, target: f64) -> Option<f64> {
    if workers == 1 {
        return Some(target - off_cpu(ours.mean_us, ours));
    }
    Some(target / workers as f64 - ours.server_busiest_us_per_txn?)
}

/// The turn-taking estimate of the mean latency with N workers, N × (S + C), in µs (see
/// [`client_cpu_allowed`]); none for one worker or without the server's numbers.
pub fn turns_model(ours: &Summary, workers: usize) -> Option<f64> {
    (workers > 1)
        .then_some(())
        .and(ours.server_busiest_us_per_txn)
        .map(|s| workers as f64 * (s + ours.cpu_us_per_txn))
}

/// The tail wait a client that spent no CPU would still see with one worker, in µs: nothing
/// overlaps, so a transaction's latency is its client CPU plus its wait for the cluster and
/// the kernel, and with about the same client CPU in every transaction the p99 wait is the p99
/// latency less the mean client CPU. An estimate, not a bound (the slowest transactions' own
/// CPU may differ from the mean).
pub fn p99_wait(ours: &Summary) -> f64 {
    off_cpu(ours.p99_us, ours)
}

/// With one worker, the part of a latency not spent on the client's CPU (the arm's CPU per
/// transaction taken off): the wait for the cluster and the kernel.
fn off_cpu(latency_us: f64, ours: &Summary) -> f64 {
    (latency_us - ours.cpu_us_per_txn).max(0.0)
}

/// A missed ratio's target as an amount of libfdb_c's own figure (`baseline`'s), in that
/// metric's unit: the mean, p99 or CPU this arm would have had to stay at or under.
fn target_us(x: &Ratio, baseline: &Summary) -> Option<f64> {
    Some(x.metric.target(x.cell.workers)? * baseline.metric(x.metric)?)
}

/// An arm's numbers in a cell, pooled over the blocks.
fn pooled(r: &Results, arm: &str, cell: Cell) -> Option<Summary> {
    r.cells
        .iter()
        .find(|c| c.arm == arm && c.cell == cell)
        .and_then(|c| c.pooled)
}

/// The ratios against libfdb_c whose target is not met, with both arms' pooled numbers
/// (ours, then libfdb_c's).
fn missed(r: &Results) -> impl Iterator<Item = (&Ratio, &Comparison, Summary, Summary)> + '_ {
    r.ratios.iter().filter_map(move |x| {
        let comp = &r.comparisons[x.comparison];
        if !comp.has_targets() || matches!(verdict(x, comp), None | Some("met")) {
            return None;
        }
        let ours = pooled(r, &comp.ours, x.cell)?;
        Some((x, comp, ours, pooled(r, &comp.baseline, x.cell)?))
    })
}

/// Where the mean-latency target is missed against libfdb_c, whether any client doing this
/// arm's requests could meet it on this cluster ([`latency_bound`]), and how cheap the client
/// would have to be ([`client_cpu_allowed`]).
fn latency_misses(s: &mut String, r: &Results) {
    let mut lines = Vec::new();
    for (x, comp, o, b) in missed(r).filter(|(x, ..)| x.metric == Metric::Mean) {
        let Some((bound, how)) = latency_bound(&o, x.cell.workers) else {
            continue;
        };
        let Some(target) = target_us(x, &b) else {
            continue;
        };
        let allowed = client_cpu_allowed(&o, x.cell.workers, target);
        let why = match allowed {
            _ if bound > target => {
                "unreachable on this cluster: the cluster's own time is above the target"
                    .to_string()
            }
            Some(a) => format!(
                "reachable only with a client at ≤ {:.2} × libfdb_c's CPU (ours: {:.2} ×)",
                a / b.cpu_us_per_txn,
                o.cpu_us_per_txn / b.cpu_us_per_txn,
            ),
            None => "reachable: the gap is the client's (or the machine's scheduling)".to_string(),
        };
        let model = turns_model(&o, x.cell.workers)
            .map(|m| format!("{:.2}", o.mean_us / m))
            .unwrap_or_else(|| "—".to_string());
        lines.push(format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {model} | {} | {} | {why} |",
            comp.ours,
            x.cell.workload.name(),
            x.cell.workers,
            f(o.mean_us),
            f(b.mean_us),
            f(bound),
            bound / b.mean_us,
            how,
            allowed.map(f).unwrap_or_else(|| "—".to_string()),
            f(o.cpu_us_per_txn),
        ));
    }
    section(
        s,
        "mean-latency",
        "For each cell where the mean target (≤ 0.6 × libfdb_c at one worker, ≤ 1.0 × at more) is not met: the least mean latency this arm could reach on this cluster if it spent no CPU at all (the higher of two lower bounds measured around its own runs: workers × the busiest fdbserver thread's CPU per transaction, by Little's law; and, with one worker, latency minus the client's whole CPU per transaction). Where that bound is above the target, no client sending these requests can meet the target here.\n\nWhere it is below, the client CPU per transaction that would meet the target if the cluster's part stayed as measured: with one worker, the target minus the time spent off the client's CPU; with N workers, target / N − S. The second comes from the closed loop taking turns on a shared machine: the busiest server thread serves a burst of requests while the client waits, then the client handles the burst of replies, so the mean latency is about N × (S + C), S and C the server thread's and the client's CPU per transaction. \"mean / N(S+C)\" shows how well that holds in each cell (near 1: turns; below 1: the two overlap on the cores).",
        "| arm | workload | workers | mean µs | libfdb_c mean µs | bound µs | bound / libfdb_c | bound from | mean / N(S+C) | client CPU allowed µs | client CPU µs | verdict |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|",
        &lines,
    );
}

/// Where the p99 target at one worker (0.6 × libfdb_c's) is missed, and whether a client
/// spending no CPU would still miss it on this cluster ([`p99_wait`]). With more workers no
/// such estimate is made: Little's law bounds the mean, not the tail.
fn p99_misses(s: &mut String, r: &Results) {
    let mut lines = Vec::new();
    for (x, comp, o, b) in
        missed(r).filter(|(x, ..)| x.metric == Metric::P99 && x.cell.workers == 1)
    {
        let Some(target) = target_us(x, &b) else {
            continue;
        };
        let wait = p99_wait(&o);
        let why = if wait > target {
            "unreachable on this cluster: the wait alone is above the target".to_string()
        } else {
            format!(
                "reachable with a client at ≤ {} µs a transaction",
                f(target - wait)
            )
        };
        lines.push(format!(
            "| {} | {} | {} | {} | {} | {:.2} | {} | {why} |",
            comp.ours,
            x.cell.workload.name(),
            f(o.p99_us),
            f(b.p99_us),
            f(wait),
            wait / b.p99_us,
            f(o.cpu_us_per_txn),
        ));
    }
    section(
        s,
        "one-worker p99",
        "For each one-worker cell where the p99 target (≤ 0.6 × libfdb_c's) is not met: the p99 latency less the arm's mean client CPU per transaction, an estimate of the tail a client that spent no CPU would still see on this cluster (with one worker nothing overlaps, so the rest is the wait for the cluster and the kernel). Where that wait is above the target, no client sending these requests can meet it here.",
        "| arm | workload | p99 µs | libfdb_c p99 µs | p99 wait µs | wait / libfdb_c p99 | client CPU µs | verdict |\n|---|---|---:|---:|---:|---:|---:|---|",
        &lines,
    );
}

/// How far from each other two per-transaction counts of traffic may be and still be the
/// same traffic: encodings differ by a few bytes, and a segment count by the odd packet.
const SAME_BYTES: f64 = 1.03;
const SAME_SEGMENTS: f64 = 1.05;

/// Why an arm's client CPU is above half of libfdb_c's in a cell. `mio` is rust-mio in the
/// same cell, with whether it met the target: both run the same protocol core, so what
/// rust-tokio spends beyond rust-mio while its threads go to sleep more often is the runtime
/// handing work between its threads (each sleep a thread woken again); what rust-mio itself
/// spends over the target is the client's own work, split between its code and the kernel
/// and shown beside the floor ([`own_work`]).
pub fn client_cpu_reason(
    arm: &str,
    ours: &Summary,
    mio: Option<(&Summary, bool)>,
    floor: Option<&Summary>,
    allowed_us: f64,
) -> String {
    let Some((m, mio_met)) =
        mio.filter(|(m, _)| arm == arms::RUST_TOKIO && ours.switches_per_txn > m.switches_per_txn)
    else {
        return own_work(ours, floor, allowed_us);
    };
    let extra = format!(
        "{:.2} more sleeps and {} µs more a transaction than rust-mio",
        ours.switches_per_txn - m.switches_per_txn,
        f(ours.cpu_us_per_txn - m.cpu_us_per_txn),
    );
    if mio_met {
        format!("the runtime's hand-offs: {extra}, whose same protocol work meets the target")
    } else {
        format!(
            "{}, as rust-mio misses here too; and the runtime's hand-offs: {extra}",
            own_work(m, floor, allowed_us)
        )
    }
}

/// The client's own work in a cell, split between its code (user time) and the kernel (system
/// time): where its code alone is over the target, no saving in socket calls meets it. Shown
/// beside the floor arm there: the same bytes moved over raw
/// sockets by one epoll loop, one exchange a transaction on a connection of its own, with no
/// protocol at all. It is a scale, not a bound: a client that batches many transactions into
/// one socket call can spend less in the kernel than the floor. Where the floor alone spends
/// more than the target allows (`allowed_us` a transaction), no client moving these bytes
/// that way meets it.
fn own_work(ours: &Summary, floor: Option<&Summary>, allowed_us: f64) -> String {
    let user = |s: &Summary| (s.cpu_us_per_txn - s.kernel_us_per_txn).max(0.0);
    let split = |s: &Summary| {
        format!(
            "{} µs in its code, {} µs in the kernel",
            f(user(s)),
            f(s.kernel_us_per_txn)
        )
    };
    let mine = split(ours);
    let Some(fl) = floor else {
        return format!(
            "the client's own work ({mine}): not explained by these numbers (profile it)"
        );
    };
    let base = fl.cpu_us_per_txn;
    let scale = format!(
        "the floor, the same bytes over raw sockets, one exchange a transaction, no protocol: {}",
        split(fl)
    );
    if allowed_us <= base {
        format!(
            "the floor alone spends {} µs, more than the {} µs the target allows ({scale}); \
             the client: {mine}",
            f(base),
            f(allowed_us)
        )
    } else if user(ours) > allowed_us {
        format!(
            "the client's own code: {mine}, its code alone over the {} µs target ({scale}); \
             profile it",
            f(allowed_us)
        )
    } else {
        format!(
            "the client's own work: {mine}, against a target of {} µs ({scale}); profile it",
            f(allowed_us)
        )
    }
}

/// Why an arm's server CPU per transaction is not clearly under libfdb_c's in a cell, from
/// what the cluster received from each. `noise`: the ratio's interval reaches 1 or below, so
/// the two are not told apart.
pub fn server_cpu_reason(ours: &WirePerTxn, base: &WirePerTxn, noise: bool) -> String {
    let segs = ours.c2s_segs / base.c2s_segs;
    let bytes = ours.c2s_bytes / base.c2s_bytes;
    let more = if segs > SAME_SEGMENTS {
        Some(format!(
            "more arrivals at the cluster than libfdb_c's (×{segs:.2} the segments)"
        ))
    } else if bytes > SAME_BYTES {
        Some(format!(
            "more bytes to the cluster than libfdb_c's (×{bytes:.2})"
        ))
    } else {
        None
    };
    let no_more =
        format!("the cluster received no more from it (segments ×{segs:.2}, bytes ×{bytes:.2})");
    match (noise, more) {
        (true, None) => {
            format!("as libfdb_c's within the noise (the interval reaches 1); {no_more}")
        }
        (true, Some(more)) => {
            format!("within the noise (the interval reaches 1), though it sent {more}")
        }
        (false, Some(more)) => format!("{more}: the cause to work on"),
        (false, None) => format!("{no_more} and still spent more: not explained by these numbers"),
    }
}

/// The client-CPU and server-CPU cells a comparison against libfdb_c does not meet, each with
/// its numbers and [`client_cpu_reason`] / [`server_cpu_reason`].
fn cpu_misses(s: &mut String, r: &Results) {
    let mio_met = |cell| {
        r.ratios.iter().any(|x| {
            let comp = &r.comparisons[x.comparison];
            comp.ours == arms::RUST_MIO
                && x.cell == cell
                && x.metric == Metric::Cpu
                && verdict(x, comp) == Some("met")
        })
    };
    let (mut client, mut server) = (Vec::new(), Vec::new());
    for (x, comp, o, b) in missed(r) {
        let head = format!(
            "| {} | {} | {} | {} |",
            comp.ours,
            x.cell.workload.name(),
            x.cell.workers,
            interval(x.estimate)
        );
        match x.metric {
            Metric::Cpu => {
                let mio = pooled(r, arms::RUST_MIO, x.cell).map(|m| (m, mio_met(x.cell)));
                let floor = pooled(r, arms::FLOOR, x.cell);
                let Some(allowed) = target_us(x, &b) else {
                    continue;
                };
                let why = client_cpu_reason(
                    &comp.ours,
                    &o,
                    mio.as_ref().map(|(m, met)| (m, *met)),
                    floor.as_ref(),
                    allowed,
                );
                let (mc, ms) = mio.map_or(("—".into(), "—".into()), |(m, _)| {
                    (f(m.cpu_us_per_txn), format!("{:.2}", m.switches_per_txn))
                });
                let fc = floor.map_or("—".into(), |fl| f(fl.cpu_us_per_txn));
                client.push(format!(
                    "{head} {} | {} | {:.2} | {mc} | {ms} | {fc} | {why} |",
                    f(o.cpu_us_per_txn),
                    f(b.cpu_us_per_txn),
                    o.switches_per_txn,
                ));
            }
            Metric::ServerCpu => {
                let (Some(ow), Some(bw)) = (o.wire, b.wire) else {
                    continue;
                };
                let noise = x.estimate.is_some_and(|e| e.lo <= 1.0);
                let turns = |v: Option<f64>| v.map_or("n/a".to_string(), |t| format!("{t:.2}"));
                server.push(format!(
                    "{head} {} | {} | {} / {} | {:.2} / {:.2} | {:.0} / {:.0} | {} |",
                    o.server_cpu_us_per_txn.map_or("n/a".into(), f),
                    b.server_cpu_us_per_txn.map_or("n/a".into(), f),
                    turns(o.server_turns_per_txn),
                    turns(b.server_turns_per_txn),
                    ow.c2s_segs,
                    bw.c2s_segs,
                    ow.c2s_bytes,
                    bw.c2s_bytes,
                    server_cpu_reason(&ow, &bw, noise),
                ));
            }
            _ => {}
        }
    }
    section(
        s,
        "client-CPU",
        "For each cell where the client CPU target (≤ 0.5 × libfdb_c's, whole interval) is not met: the arm's CPU and sleeps (voluntary context switches) per transaction beside rust-mio's in the same cell. Both drivers run the same protocol core; where rust-mio meets the target and rust-tokio's threads slept more often, the difference is the multi-threaded runtime handing woken tasks to its other worker (\"Where rust-tokio's extra client CPU goes\" in BENCHMARKS.md), which a runtime with one worker thread does not pay. What rust-mio itself spends over the target is the client's own work, split between its own code (user time) and the kernel (system time: socket calls, page faults) and shown beside the floor arm in the same cell (the same bytes over raw sockets, one exchange a transaction, no protocol). The floor is a scale, not a bound: a client that batches many transactions into one socket call can spend less in the kernel than it does. Where the floor alone is above the target, no client moving these bytes that way meets it.",
        "| arm | workload | workers | CPU / libfdb_c | CPU µs | libfdb_c CPU µs | switches/txn | rust-mio CPU µs | rust-mio switches/txn | floor CPU µs | why |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
        &client,
    );
    section(
        s,
        "server-CPU",
        &format!("For each cell where the server CPU target (≤ 1.0 × libfdb_c's, whole interval) is not met: what the cluster received from this arm and from libfdb_c per transaction (data segments, each one arrival on loopback, and bytes, client → server; see the wire table) and its busiest thread's turns on a CPU. Where the arm sent no more than libfdb_c (segments within ×{SAME_SEGMENTS}, bytes within ×{SAME_BYTES}) and the interval reaches 1, the two cost the cluster the same within the noise, and the arm asked no more of it. Where it sent more, that is the cause to work on; where it sent no more and the cluster still spent more, these numbers do not say why."),
        "| arm | workload | workers | server CPU / libfdb_c | server CPU µs | libfdb_c's | server turns/txn (ours / libfdb_c) | c→s segs (ours / libfdb_c) | c→s B (ours / libfdb_c) | why |\n|---|---|---:|---|---:|---:|---|---|---|---|",
        &server,
    );
}

/// One "Why … cells miss" section: its title, what it shows, and a table of `rows` under
/// `header` (the header line and its alignment line); nothing where no cell misses.
fn section(s: &mut String, what: &str, intro: &str, header: &str, rows: &[String]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Why {what} cells miss\n\n{intro}\n\n{header}");
    for l in rows {
        let _ = writeln!(s, "{l}");
    }
}

#[cfg(test)]
mod tests {
    use super::{
        client_cpu_allowed, client_cpu_reason, latency_bound, p99_wait, server_cpu_reason,
        turns_model,
    };
    use crate::arms;
    use crate::harness::Summary;
    use crate::wire::WirePerTxn;

    fn summary(mean: f64, cpu: f64, busiest: Option<f64>) -> Summary {
        Summary {
            mean_us: mean,
            cpu_us_per_txn: cpu,
            server_busiest_us_per_txn: busiest,
            ..Summary::default()
        }
    }

    #[test]
    fn the_bound_is_the_higher_of_the_serial_server_time_and_the_wait() {
        // One worker: 1000 µs of latency of which 200 on the client's CPU leaves 800 waited,
        // more than the server thread's 100 µs.
        let (b, how) = latency_bound(&summary(1000.0, 200.0, Some(100.0)), 1).unwrap();
        assert_eq!(b, 800.0);
        assert!(how.contains("one worker"));
        // Eight workers share the server thread: at least 8 × 100 µs, whatever the client does.
        let (b, how) = latency_bound(&summary(1000.0, 200.0, Some(100.0)), 8).unwrap();
        assert_eq!(b, 800.0);
        assert!(how.contains("busiest"));
        let (b, _) = latency_bound(&summary(1000.0, 200.0, Some(150.0)), 8).unwrap();
        assert_eq!(b, 1200.0);
        // Without the server's numbers there is no bound.
        assert!(latency_bound(&summary(1000.0, 200.0, None), 8).is_none());
    }

    #[test]
    fn the_client_gets_what_the_target_leaves_after_the_cluster() {
        // One worker: 800 µs were spent off the client's CPU; a 900 µs target leaves 100.
        let one = summary(1000.0, 200.0, Some(100.0));
        assert_eq!(client_cpu_allowed(&one, 1, 900.0), Some(100.0));
        assert_eq!(client_cpu_allowed(&one, 1, 600.0), Some(-200.0));
        assert_eq!(turns_model(&one, 1), None);
        // Eight workers taking turns with a 100 µs server thread: 8 × (100 + 200) µs, and a
        // 1200 µs target leaves 1200 / 8 − 100 = 50 µs of client CPU.
        let eight = summary(2400.0, 200.0, Some(100.0));
        assert_eq!(turns_model(&eight, 8), Some(2400.0));
        assert_eq!(client_cpu_allowed(&eight, 8, 1200.0), Some(50.0));
        assert_eq!(
            client_cpu_allowed(&summary(2400.0, 200.0, None), 8, 1200.0),
            None
        );
    }

    fn wire(segs: f64, bytes: f64) -> WirePerTxn {
        WirePerTxn {
            c2s_segs: segs,
            c2s_bytes: bytes,
            ..WirePerTxn::default()
        }
    }

    #[test]
    fn a_server_cpu_miss_names_the_extra_traffic_or_its_absence() {
        let base = wire(1.0, 400.0);
        let same = server_cpu_reason(&wire(1.02, 405.0), &base, true);
        assert!(same.starts_with("as libfdb_c's within the noise"), "{same}");
        let unexplained = server_cpu_reason(&wire(0.8, 400.0), &base, false);
        assert!(
            unexplained.ends_with("not explained by these numbers"),
            "{unexplained}"
        );
        let more = server_cpu_reason(&wire(1.2, 405.0), &base, false);
        assert!(
            more.contains("more arrivals") && more.contains("1.20"),
            "{more}"
        );
        assert!(more.ends_with("the cause to work on"), "{more}");
        let bigger = server_cpu_reason(&wire(1.0, 480.0), &base, true);
        assert!(
            bigger.starts_with("within the noise") && bigger.contains("more bytes"),
            "{bigger}"
        );
    }

    #[test]
    fn a_client_cpu_miss_is_put_on_the_runtime_only_beyond_what_rust_mio_spends() {
        let tokio = Summary {
            cpu_us_per_txn: 30.0,
            switches_per_txn: 0.6,
            ..Summary::default()
        };
        let mio = Summary {
            cpu_us_per_txn: 20.0,
            switches_per_txn: 0.1,
            ..Summary::default()
        };
        let why = client_cpu_reason(arms::RUST_TOKIO, &tokio, Some((&mio, true)), None, 15.0);
        assert!(why.starts_with("the runtime's hand-offs"), "{why}");
        assert!(
            why.contains("0.50 more sleeps") && why.contains("10.00 µs"),
            "{why}"
        );
        // rust-mio missing too: the client's own work, and the runtime's part beside it.
        let both = client_cpu_reason(arms::RUST_TOKIO, &tokio, Some((&mio, false)), None, 15.0);
        assert!(
            both.starts_with("the client's own work") && both.contains("0.50 more sleeps"),
            "{both}"
        );
        // rust-mio itself, no rust-mio to compare with, or no more sleeps than rust-mio.
        let calm = Summary {
            switches_per_txn: 0.05,
            ..tokio
        };
        for why in [
            client_cpu_reason(arms::RUST_MIO, &mio, Some((&mio, false)), None, 15.0),
            client_cpu_reason(arms::RUST_TOKIO, &tokio, None, None, 15.0),
            client_cpu_reason(arms::RUST_TOKIO, &calm, Some((&mio, true)), None, 15.0),
        ] {
            assert!(
                why.starts_with("the client's own work (")
                    && why.ends_with("): not explained by these numbers (profile it)"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_client_s_own_work_is_split_between_its_code_and_the_kernel() {
        let mio = Summary {
            cpu_us_per_txn: 17.5,
            kernel_us_per_txn: 4.5,
            ..Summary::default()
        };
        let floor = Summary {
            cpu_us_per_txn: 13.5,
            kernel_us_per_txn: 12.5,
            ..Summary::default()
        };
        // 13 µs in its code is under a 15 µs target: the kernel's part decides.
        let why = client_cpu_reason(arms::RUST_MIO, &mio, None, Some(&floor), 15.0);
        assert!(
            why.starts_with("the client's own work: 13.00 µs in its code, 4.50 µs in the kernel")
                && why.contains("target of 15.00 µs")
                && why.contains("no protocol: 1.00 µs in its code, 12.50 µs in the kernel"),
            "{why}"
        );
        // Its code alone (15 µs) over a 13.6 µs target that the floor (13.5) is under.
        let busy = Summary {
            kernel_us_per_txn: 2.5,
            ..mio
        };
        let over = client_cpu_reason(arms::RUST_MIO, &busy, None, Some(&floor), 13.6);
        assert!(
            over.starts_with("the client's own code: 15.00 µs in its code")
                && over.contains("its code alone over the 13.60 µs target"),
            "{over}"
        );
        // rust-tokio beside a missing rust-mio: rust-mio's own work, then the hand-offs.
        let tokio = Summary {
            cpu_us_per_txn: 25.0,
            switches_per_txn: 0.5,
            ..Summary::default()
        };
        let both = client_cpu_reason(
            arms::RUST_TOKIO,
            &tokio,
            Some((&mio, false)),
            Some(&floor),
            15.0,
        );
        assert!(
            both.starts_with("the client's own work: 13.00 µs in its code")
                && both.contains("the runtime's hand-offs: 0.50 more sleeps"),
            "{both}"
        );
        // A floor above the target: no client moving these bytes that way meets it.
        let above = client_cpu_reason(arms::RUST_MIO, &mio, None, Some(&floor), 12.0);
        assert!(
            above.starts_with("the floor alone spends 13.50 µs, more than the 12.00 µs"),
            "{above}"
        );
        // No floor arm: the split alone.
        let alone = client_cpu_reason(arms::RUST_MIO, &mio, None, None, 15.0);
        assert_eq!(
            alone,
            "the client's own work (13.00 µs in its code, 4.50 µs in the kernel): not explained \
             by these numbers (profile it)"
        );
    }

    #[test]
    fn the_one_worker_tail_wait_is_the_p99_less_the_client_cpu() {
        let one = Summary {
            p99_us: 1500.0,
            cpu_us_per_txn: 100.0,
            ..Summary::default()
        };
        assert_eq!(p99_wait(&one), 1400.0);
        let busy = Summary {
            p99_us: 50.0,
            ..one
        };
        assert_eq!(p99_wait(&busy), 0.0);
    }
}
