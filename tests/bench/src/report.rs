//! Outputs: `results.json` (everything, per run), `results.md` (tables) and `ratios.svg`
//! (paired ratios per workload × worker level, with their 95% intervals).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::{json, Value};

use crate::bench::{Comparison, Ratio, Results};
use crate::harness::{Metric, Summary};
use crate::stats::Estimate;
use crate::workload::{wire_exchanges, KeySet, Workload};

fn summary_json(s: &Summary) -> Value {
    json!({
        "txns": s.txns,
        "mean_us": s.mean_us,
        "p50_us": s.p50_us,
        "p99_us": s.p99_us,
        "max_us": s.max_us,
        "throughput_tps": s.tps,
        "cpu_us_per_txn": s.cpu_us_per_txn,
        "kernel_cpu_us_per_txn": s.kernel_us_per_txn,
        "client_switches_per_txn": s.switches_per_txn,
        "allocs_per_txn": s.allocs_per_txn,
        "heap_bytes_per_txn": s.bytes_per_txn,
        "server_cpu_us_per_txn": s.server_cpu_us_per_txn,
        "server_busiest_thread_us_per_txn": s.server_busiest_us_per_txn,
        "server_busiest_thread_busy": s.server_busy,
        "server_busiest_thread_turns_per_txn": s.server_turns_per_txn,
        "wire_per_txn": s.wire.map(|w| json!({
            "connections": w.conns,
            "client_to_server_segments": w.c2s_segs,
            "client_to_server_bytes": w.c2s_bytes,
            "server_to_client_segments": w.s2c_segs,
            "server_to_client_bytes": w.s2c_bytes,
            "client_send_calls": w.client_sends,
            "client_recv_calls": w.client_recvs,
            "client_epoll_waits": w.client_epolls,
            "server_send_calls": w.server_sends,
            "server_recv_calls": w.server_recvs,
            "server_epoll_waits": w.server_epolls,
        })),
    })
}

/// The verdict against a target, judged on the interval's upper end.
pub fn verdict(ratio: &Ratio, comp: &Comparison) -> Option<&'static str> {
    let target = ratio.metric.target(ratio.cell.workers)?;
    if !comp.has_targets() {
        return None;
    }
    let e = ratio.estimate?;
    Some(if e.hi <= target {
        "met"
    } else if e.geomean <= target {
        "point estimate only"
    } else {
        "missed"
    })
}

pub fn to_json(r: &Results) -> Value {
    let c = &r.config;
    let runs: Vec<Value> = r
        .runs
        .iter()
        .map(|run| {
            let mut v = json!({
                "block": run.block,
                "pass": run.pass,
                "arm": run.arm,
                "workload": run.cell.workload.name(),
                "workers": run.cell.workers,
            });
            match &run.result {
                Ok(s) => {
                    v["ok"] = json!(true);
                    v["wall_s"] = json!(s.wall.as_secs_f64());
                    v["summary"] = summary_json(&s.summary());
                    if let Some(req) = &s.requests {
                        v["requests"] = json!(req);
                    }
                }
                Err(e) => {
                    v["ok"] = json!(false);
                    v["error"] = json!(e);
                }
            }
            v
        })
        .collect();
    let cells: Vec<Value> = r
        .cells
        .iter()
        .map(|ca| {
            json!({
                "workload": ca.cell.workload.name(),
                "workers": ca.cell.workers,
                "arm": ca.arm,
                "pooled": ca.pooled.as_ref().map(summary_json),
                "blocks": ca.blocks.iter().map(|b| b.as_ref().map(summary_json)).collect::<Vec<_>>(),
                "failures": ca.failures,
                "requests_per_txn": ca.requests_per_txn,
            })
        })
        .collect();
    let ratios: Vec<Value> = r
        .ratios
        .iter()
        .map(|x| {
            let comp = &r.comparisons[x.comparison];
            json!({
                "ours": comp.ours,
                "baseline": comp.baseline,
                "workload": x.cell.workload.name(),
                "workers": x.cell.workers,
                "metric": x.metric.name(),
                "block_ratios": x.per_block,
                "geomean": x.estimate.map(|e| e.geomean),
                "ci95": x.estimate.map(|e| [e.lo, e.hi]),
                "target": if comp.has_targets() { x.metric.target(x.cell.workers) } else { None },
                "verdict": verdict(x, comp),
            })
        })
        .collect();
    json!({
        "tool": "fdb-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "started_unix": r.started_unix,
        "elapsed_s": r.elapsed.as_secs_f64(),
        "server_processes_read": r.server_processes,
        "machine": { "cores": r.cores, "os": std::env::consts::OS, "arch": std::env::consts::ARCH },
        "target": { "description": r.target, "cluster": r.cluster },
        "config": {
            "arms": c.arms,
            "workloads": c.workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
            "workers": c.workers,
            "warmup": c.warmup,
            "transactions": c.transactions,
            "min_run_ms": c.min_run.as_millis() as u64,
            "blocks": c.blocks,
            "seed": c.seed,
            "tokio_threads": c.tokio_threads,
            "resamples": c.resamples,
        },
        "units": {
            "latency": "microseconds",
            "throughput": "transactions per second",
            "cpu": "process user+system microseconds per transaction",
            "heap": "bytes requested from the allocator per transaction",
            "allocations_counted_at": crate::alloc::COUNTED_AT,
        },
        "skipped": r.skipped.iter().map(|s| json!({
            "arm": s.arm, "workload": s.workload.name(), "reason": s.reason,
        })).collect::<Vec<_>>(),
        "runs": runs,
        "cells": cells,
        "comparisons": r.comparisons.iter().map(|c| json!({
            "ours": c.ours, "baseline": c.baseline, "targets_apply": c.has_targets(),
        })).collect::<Vec<_>>(),
        "ratios": ratios,
        "floor_exchanges": floor_exchanges(&c.workloads),
    })
}

/// The request and reply sizes the floor arm replays per transaction, by workload.
fn floor_exchanges(workloads: &[Workload]) -> Value {
    let rows = workloads.iter().map(|w| w.range_rows()).max().unwrap_or(0);
    let keys = KeySet::new(1, rows);
    let m: serde_json::Map<String, Value> = workloads
        .iter()
        .map(|&w| {
            let ex: Vec<Value> = wire_exchanges(w, &keys)
                .iter()
                .map(|e| json!({ "request_bytes": e.request, "reply_bytes": e.reply }))
                .collect();
            (w.name(), Value::Array(ex))
        })
        .collect();
    Value::Object(m)
}

/// A ratio as the tables show it: `geomean [lo, hi]`, or `n/a` where none was measured.
pub(crate) fn interval(e: Option<Estimate>) -> String {
    match e {
        Some(e) => format!("{:.2} [{:.2}, {:.2}]", e.geomean, e.lo, e.hi),
        None => "n/a".into(),
    }
}

pub(crate) fn f(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn to_markdown(r: &Results) -> String {
    let c = &r.config;
    let mut s = String::new();
    let _ = writeln!(s, "# fdb-bench results\n");
    let _ = writeln!(
        s,
        "Target: {} (`{}`). Machine: {} cores, {}/{}. Arms: {}. {} block(s) × ABBA, {} warmup + {} measured transactions per run (more where the window is shorter than {} ms), seed {}, tokio runtime with {} thread(s). Took {:.0} s.\n",
        r.target,
        r.cluster,
        r.cores,
        std::env::consts::OS,
        std::env::consts::ARCH,
        c.arms.join(", "),
        c.blocks,
        c.warmup,
        c.transactions,
        c.min_run.as_millis(),
        c.seed,
        c.tokio_threads,
        r.elapsed.as_secs_f64()
    );
    let _ = writeln!(s, "## Per arm (pooled over blocks)\n");
    let _ = writeln!(
        s,
        "Allocations are counted at {}; CPU is the client process's user + system time. Server CPU is the cluster's ({} process(es) read from /proc; all threads, and in brackets its busiest thread; the total includes what the server spent after the run until it was quiet again, up to 5 s, before the next run began), \"server busy\" that thread's share of the wall time, and \"server turns\" the times that thread was put on a CPU per transaction (about its run loop's turns: fewer when requests arrive together). \"Client switches\" are this process's voluntary context switches per transaction: each is one of its threads going to sleep to be woken again, the cost of handing work between threads.\n",
        crate::alloc::COUNTED_AT,
        r.server_processes
    );
    let _ = writeln!(
        s,
        "| workload | workers | arm | mean µs | p50 µs | p99 µs | txn/s | CPU µs/txn | allocs/txn | heap B/txn | server CPU µs/txn | server busy | server turns/txn | client switches/txn |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for ca in &r.cells {
        match &ca.pooled {
            Some(p) => {
                let server = match (p.server_cpu_us_per_txn, p.server_busiest_us_per_txn) {
                    (Some(t), Some(b)) => format!("{} ({})", f(t), f(b)),
                    _ => "n/a".into(),
                };
                let busy = p.server_busy.map_or("n/a".into(), |b| format!("{b:.2}"));
                let turns = p
                    .server_turns_per_txn
                    .map_or("n/a".into(), |t| format!("{t:.2}"));
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {:.0} | {server} | {busy} | {turns} | {:.2} |",
                    ca.cell.workload.name(),
                    ca.cell.workers,
                    ca.arm,
                    f(p.mean_us),
                    f(p.p50_us),
                    f(p.p99_us),
                    p.tps,
                    f(p.cpu_us_per_txn),
                    f(p.allocs_per_txn),
                    p.bytes_per_txn,
                    p.switches_per_txn
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | failed | | | | | | | | | | |",
                    ca.cell.workload.name(),
                    ca.cell.workers,
                    ca.arm
                );
            }
        }
    }
    for (ci, comp) in r.comparisons.iter().enumerate() {
        let rows: Vec<&Ratio> = r.ratios.iter().filter(|x| x.comparison == ci).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n## Ratios {} (geometric mean of per-block ratios [95% block-bootstrap interval]; below 1 means {} is lower)\n", comp.label(), comp.ours);
        if comp.has_targets() {
            let _ = writeln!(s, "Targets (issue 25): mean and p99 ≤ 0.6 at one worker and ≤ 1.0 at more, client CPU ≤ 0.5, server CPU ≤ 1.0, allocations ≤ 1.0; \"met\" means the whole interval is at or below the target.\n");
        }
        let _ = writeln!(
            s,
            "| workload | workers | mean | p99 | CPU/txn | server CPU/txn | allocs/txn |{}",
            if comp.has_targets() { " targets |" } else { "" }
        );
        let _ = writeln!(
            s,
            "|---|---:|---|---|---|---|---|{}",
            if comp.has_targets() { "---|" } else { "" }
        );
        let mut cells: Vec<_> = rows.iter().map(|x| x.cell).collect();
        cells.dedup();
        for cell in cells {
            let get = |m: Metric| {
                rows.iter()
                    .find(|x| x.cell == cell && x.metric == m)
                    .copied()
            };
            let show = |m: Metric| interval(get(m).and_then(|x| x.estimate));
            let mut line = format!("| {} | {} |", cell.workload.name(), cell.workers);
            for m in Metric::COMPARED {
                line.push_str(&format!(" {} |", show(m)));
            }
            if comp.has_targets() {
                let v: Vec<String> = Metric::COMPARED
                    .iter()
                    .map(|&m| {
                        let verdict = get(m).and_then(|x| verdict(x, comp)).unwrap_or("n/a");
                        format!("{} {verdict}", m.name())
                    })
                    .collect();
                line.push_str(&format!(" {} |", v.join(", ")));
            }
            let _ = writeln!(s, "{line}");
        }
    }
    crate::misses::write(&mut s, r);
    wire_table(&mut s, r);
    requests_table(&mut s, r);
    if !r.skipped.is_empty() {
        let _ = writeln!(s, "\n## Skipped (no numbers reported)\n");
        let _ = writeln!(s, "| arm | workload | reason |");
        let _ = writeln!(s, "|---|---|---|");
        for k in &r.skipped {
            let _ = writeln!(s, "| {} | {} | {} |", k.arm, k.workload.name(), k.reason);
        }
    }
    let failed: Vec<_> = r.cells.iter().filter(|c| !c.failures.is_empty()).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n## Failed runs\n");
        for ca in failed {
            for e in &ca.failures {
                let _ = writeln!(
                    s,
                    "* {} {} x{}: {e}",
                    ca.arm,
                    ca.cell.workload.name(),
                    ca.cell.workers
                );
            }
        }
    }
    s
}

/// The traffic to and from the cluster per transaction, for every arm: what the server
/// receives and how it is spread over packets, receive calls and run-loop turns.
fn wire_table(s: &mut String, r: &Results) {
    if !r
        .cells
        .iter()
        .any(|c| c.pooled.is_some_and(|p| p.wire.is_some()))
    {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Wire work per transaction (as the cluster receives it)\n"
    );
    let _ = writeln!(s, "Pooled over blocks. From this process's sockets to the cluster (`TCP_INFO`): connections that carried data, data segments (on loopback with `TCP_NODELAY`, one segment is one arrival at the other end) and bytes, client → server and back. From perf counters on the `sys_enter_*` tracepoints of every thread: this process's socket send calls (`sendto`, `sendmsg`, `writev`) and `epoll_wait`s, and the cluster's socket receive calls (`recvfrom`, `recvmsg`: fdbserver reads each readable socket until it would block, so about two per arrival it serves), send calls and `epoll_wait`s (its run loop's sleeps). \"n/a\": not counted (no permission or no tracefs).\n");
    let _ = writeln!(s, "| workload | workers | arm | conns | c→s segs | c→s B | s→c segs | s→c B | client sends | client epoll waits | server recvs | server sends | server epoll waits | server turns |");
    let _ = writeln!(
        s,
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let o = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2}"));
    for ca in &r.cells {
        let Some(p) = &ca.pooled else { continue };
        let Some(w) = p.wire else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.2} | {:.0} | {:.2} | {:.0} | {} | {} | {} | {} | {} | {} |",
            ca.cell.workload.name(),
            ca.cell.workers,
            ca.arm,
            w.conns,
            w.c2s_segs,
            w.c2s_bytes,
            w.s2c_segs,
            w.s2c_bytes,
            o(w.client_sends),
            o(w.client_epolls),
            o(w.server_recvs),
            o(w.server_sends),
            o(w.server_epolls),
            o(p.server_turns_per_txn),
        );
    }
}

/// The request kinds a transaction's own work is made of, first in the table; any other kind
/// seen in a measured window (location lookups, pings, …) follows.
const WORK_KINDS: [&str; 5] = [
    "GetReadVersion",
    "GetValue",
    "GetKeyValues",
    "Commit",
    "GetKeyServerLocations",
];

/// Requests per transaction by kind, from the in-process cluster's counters: whether the arms
/// do the same work on the wire.
fn requests_table(s: &mut String, r: &Results) {
    let mut kinds: Vec<String> = WORK_KINDS.iter().map(|k| k.to_string()).collect();
    let mut any = false;
    for ca in &r.cells {
        for k in ca.requests_per_txn.iter().flat_map(|m| m.keys()) {
            any = true;
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
    }
    if !any {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Requests per transaction (the in-process cluster's counters over the measured windows)\n"
    );
    let _ = writeln!(s, "| workload | workers | arm | {} |", kinds.join(" | "));
    let _ = writeln!(s, "|---|---:|---|{}", "---:|".repeat(kinds.len()));
    for ca in &r.cells {
        let Some(m) = &ca.requests_per_txn else {
            continue;
        };
        let cols: Vec<String> = kinds
            .iter()
            .map(|k| m.get(k).map_or("0".to_string(), |&v| format!("{v:.2}")))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            ca.cell.workload.name(),
            ca.cell.workers,
            ca.arm,
            cols.join(" | ")
        );
    }
}

const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

fn color(w: Workload) -> RGBColor {
    COLORS[Workload::ALL.iter().position(|&x| x == w).unwrap_or(0) % COLORS.len()]
}

/// Labels only 1, 2 and 5 times a power of ten, so log axes stay readable.
fn nice_label(y: &f64) -> String {
    if !(y.is_finite() && *y > 0.0) {
        return String::new();
    }
    let exp = y.log10().floor();
    let mant = y / 10f64.powf(exp);
    let near = |m: f64| (mant - m).abs() < 0.02 * m;
    if near(1.0) || near(2.0) || near(5.0) || near(10.0) {
        if *y >= 10.0 {
            format!("{y:.0}")
        } else if *y >= 1.0 {
            format!("{y:.1}")
        } else {
            format!("{y:.2}")
        }
    } else {
        String::new()
    }
}

/// One panel per comparison (rows) × metric (columns); x: worker levels, y: ratio (log
/// scale), one line per workload, error bars for the 95% interval, a dashed line at 1 and,
/// against libfdb_c, a red line at the target.
pub fn write_svg(r: &Results, path: &Path) -> Result<(), String> {
    let comps: Vec<usize> = (0..r.comparisons.len())
        .filter(|&ci| {
            r.ratios
                .iter()
                .any(|x| x.comparison == ci && x.estimate.is_some())
        })
        .collect();
    let cols = Metric::COMPARED.len();
    let rows = comps.len().max(1);
    let (w, h) = (420 * cols as u32, 60 + 300 * rows as u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<std::io::Error>| format!("svg: {e}");
    root.fill(&WHITE).map_err(e)?;
    let (legend, body) = root.split_vertically(60);
    // Legend: one swatch per workload present.
    let workloads: Vec<Workload> = r.config.workloads.clone();
    for (i, &wl) in workloads.iter().enumerate() {
        let x = 10 + 150 * (i as i32 % 8);
        let y = 12 + 24 * (i as i32 / 8);
        legend
            .draw(&Rectangle::new(
                [(x, y), (x + 14, y + 10)],
                color(wl).filled(),
            ))
            .map_err(e)?;
        legend
            .draw(&Text::new(
                wl.name(),
                (x + 20, y - 1),
                ("sans-serif", 14).into_font(),
            ))
            .map_err(e)?;
    }
    if comps.is_empty() {
        body.draw(&Text::new(
            "no paired ratios (need two arms with numbers in the same cells)",
            (20, 40),
            ("sans-serif", 16).into_font(),
        ))
        .map_err(e)?;
        root.present().map_err(e)?;
        return Ok(());
    }
    let levels: Vec<usize> = r.config.workers.clone();
    let panels = body.split_evenly((rows, cols));
    for (ri, &ci) in comps.iter().enumerate() {
        let comp = &r.comparisons[ci];
        for (mi, &metric) in Metric::COMPARED.iter().enumerate() {
            let area = &panels[ri * cols + mi];
            let pts: Vec<&Ratio> = r
                .ratios
                .iter()
                .filter(|x| x.comparison == ci && x.metric == metric && x.estimate.is_some())
                .collect();
            let mut lo = f64::MAX;
            let mut hi = f64::MIN;
            for x in &pts {
                let est = x.estimate.unwrap();
                lo = lo.min(est.lo);
                hi = hi.max(est.hi);
            }
            lo = lo.min(1.0);
            hi = hi.max(1.0);
            if comp.has_targets() {
                for &lvl in &levels {
                    if let Some(t) = metric.target(lvl) {
                        lo = lo.min(t);
                    }
                }
            }
            let (lo, hi) = (lo / 1.25, hi * 1.25);
            let mut chart = ChartBuilder::on(area)
                .caption(
                    format!("{}: {}", comp.label(), metric.label()),
                    ("sans-serif", 15),
                )
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(48)
                .build_cartesian_2d(-0.5f64..(levels.len() as f64 - 0.5), (lo..hi).log_scale())
                .map_err(e)?;
            let lv = levels.clone();
            chart
                .configure_mesh()
                .x_labels(levels.len())
                .x_label_formatter(&move |x| {
                    let i = x.round();
                    if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < lv.len() {
                        format!("{}", lv[i as usize])
                    } else {
                        String::new()
                    }
                })
                .x_desc("workers")
                .y_desc("ratio")
                .y_labels(12)
                .y_label_formatter(&nice_label)
                .light_line_style(WHITE)
                .draw()
                .map_err(e)?;
            let xmax = levels.len() as f64 - 0.5;
            let dashed = |y: f64, c: RGBColor| -> Vec<PathElement<(f64, f64)>> {
                let n = 24;
                (0..n)
                    .filter(|i| i % 2 == 0)
                    .map(|i| {
                        let a = -0.5 + (xmax + 0.5) * i as f64 / n as f64;
                        let b = -0.5 + (xmax + 0.5) * (i + 1) as f64 / n as f64;
                        PathElement::new(vec![(a, y), (b, y)], c.stroke_width(1))
                    })
                    .collect()
            };
            chart
                .draw_series(dashed(1.0, RGBColor(90, 90, 90)))
                .map_err(e)?;
            if comp.has_targets() {
                // The target can differ by worker level (latency at one worker): a red
                // segment under each level's column.
                let segments = levels.iter().enumerate().filter_map(|(li, &lvl)| {
                    let t = metric.target(lvl)?;
                    let x = li as f64;
                    Some(PathElement::new(
                        vec![(x - 0.45, t), (x + 0.45, t)],
                        RED.stroke_width(1),
                    ))
                });
                chart.draw_series(segments).map_err(e)?;
            }
            for (wi, &wl) in workloads.iter().enumerate() {
                let offset = (wi as f64 - (workloads.len() as f64 - 1.0) / 2.0) * 0.05;
                let mut line = Vec::new();
                for (li, &lvl) in levels.iter().enumerate() {
                    let Some(x) = pts
                        .iter()
                        .find(|x| x.cell.workload == wl && x.cell.workers == lvl)
                    else {
                        continue;
                    };
                    let est = x.estimate.unwrap();
                    let px = li as f64 + offset;
                    line.push((px, est.geomean));
                    let c = color(wl);
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(px, est.lo), (px, est.hi)],
                            c.stroke_width(1),
                        )))
                        .map_err(e)?;
                    chart
                        .draw_series(std::iter::once(Circle::new(
                            (px, est.geomean),
                            3,
                            c.filled(),
                        )))
                        .map_err(e)?;
                }
                if line.len() > 1 {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            line,
                            color(wl).stroke_width(1),
                        )))
                        .map_err(e)?;
                }
            }
        }
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Writes all three files; returns their paths.
pub fn write_all(r: &Results, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let json_path = dir.join("results.json");
    let md_path = dir.join("results.md");
    let svg_path = dir.join("ratios.svg");
    let text = serde_json::to_string_pretty(&to_json(r)).map_err(|e| format!("json: {e}"))?;
    std::fs::write(&json_path, text + "\n")
        .map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    std::fs::write(&md_path, to_markdown(r))
        .map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    write_svg(r, &svg_path)?;
    Ok(vec![json_path, md_path, svg_path])
}
