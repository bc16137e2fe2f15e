//! The scenarios of `performance-baseline.md`, written once against [`Driver`].

use std::{
    future::Future,
    time::{Duration, Instant},
};

use futures::{stream::FuturesUnordered, Stream, StreamExt};
use serde_json::Value;

use crate::clients::{Driver, SleepOutcome};

pub type Metrics = Vec<(&'static str, f64)>;

/// Request counts: the baseline's, or a small smoke run.
#[derive(Clone, Copy)]
pub struct Sizes {
    pub seq_warm: usize,
    pub seq: usize,
    pub conc_warm: usize,
    pub conc: usize,
    pub in_flight: usize,
    pub cancel: usize,
    pub immediate: usize,
    pub single: usize,
    pub mem: usize,
    pub scale_total: usize,
    pub scale_small_in_flight: usize,
    /// Tasks started, then cancelled (scenario t).
    pub tasks: usize,
}

impl Sizes {
    pub const FULL: Sizes = Sizes {
        seq_warm: 2_000,
        seq: 20_000,
        conc_warm: 10_000,
        conc: 100_000,
        in_flight: 256,
        cancel: 10_000,
        immediate: 10_000,
        single: 2_000,
        mem: 10_000,
        scale_total: 100_000,
        tasks: 1_000,
        scale_small_in_flight: 1_000,
    };

    /// Over HTTP every request in flight holds a connection (HTTP/1.1): smaller storms.
    pub const HTTP: Sizes = Sizes {
        seq_warm: 200,
        seq: 2_000,
        conc_warm: 2_000,
        conc: 20_000,
        in_flight: 256,
        cancel: 2_000,
        immediate: 2_000,
        single: 500,
        mem: 2_000,
        scale_total: 10_000,
        tasks: 200,
        scale_small_in_flight: 256,
    };

    pub const HTTP_SMOKE: Sizes = Sizes {
        seq_warm: 20,
        seq: 200,
        conc_warm: 100,
        conc: 1_000,
        in_flight: 64,
        cancel: 200,
        immediate: 200,
        single: 50,
        mem: 200,
        scale_total: 1_000,
        tasks: 50,
        scale_small_in_flight: 64,
    };

    pub const SMOKE: Sizes = Sizes {
        seq_warm: 50,
        seq: 500,
        conc_warm: 200,
        conc: 2_000,
        in_flight: 256,
        cancel: 1_000,
        immediate: 1_000,
        single: 100,
        mem: 1_000,
        scale_total: 5_000,
        tasks: 100,
        scale_small_in_flight: 100,
    };
}

pub async fn run<D: Driver>(d: &D, scenario: &str, s: Sizes) -> Result<Metrics, String> {
    match scenario {
        "a" => seq(d, s).await,
        "b" => conc(d, s).await,
        "c1" => cancel_explicit(d, s).await,
        "c2" => cancel_drop(d, s).await,
        "c3" => cancel_immediate(d, s).await,
        "c4" => cancel_single(d, s).await,
        "d" => mem(d, s).await,
        "scale" => scale(d, s).await,
        "t" => tasks(d, s).await,
        other => Err(format!("unknown scenario {other}")),
    }
}

async fn seq<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    for _ in 0..s.seq_warm {
        d.echo("x").await?;
    }
    let mut lat = Vec::with_capacity(s.seq);
    let start = Instant::now();
    for _ in 0..s.seq {
        let t = Instant::now();
        d.echo("x").await?;
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    Ok(vec![
        ("req_per_s", s.seq as f64 / total.as_secs_f64()),
        ("p50_us", micros(percentile(&mut lat, 50.0))),
        ("p99_us", micros(percentile(&mut lat, 99.0))),
    ])
}

async fn run_concurrent<D: Driver>(
    d: &D,
    total: usize,
    in_flight: usize,
) -> Result<Duration, String> {
    let start = Instant::now();
    let mut running = FuturesUnordered::new();
    let mut started = 0;
    while started < total.min(in_flight) {
        running.push(d.echo("x"));
        started += 1;
    }
    while let Some(result) = running.next().await {
        result?;
        if started < total {
            running.push(d.echo("x"));
            started += 1;
        }
    }
    Ok(start.elapsed())
}

async fn conc<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    run_concurrent(d, s.conc_warm, s.in_flight).await?;
    let elapsed = run_concurrent(d, s.conc, s.in_flight).await?;
    Ok(vec![
        ("req_per_s", s.conc as f64 / elapsed.as_secs_f64()),
        ("peak_rss_kib", rss_kib("VmHWM:")),
    ])
}

/// c1: every call in flight at the server, then cancelled through the explicit API.
async fn cancel_explicit<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let n = s.cancel;
    let mut handles = Vec::with_capacity(n);
    let mut calls = FuturesUnordered::new();
    for _ in 0..n {
        let (handle, call) = d.sleep_cancellable(10_000);
        handles.push(handle);
        calls.push(call);
    }
    drive_while(&mut calls, wait_stat(d, "pending", n as u64)).await?;

    let trigger = Instant::now();
    let mut cancel_calls = Vec::with_capacity(n);
    for handle in &handles {
        let t = Instant::now();
        d.cancel(handle);
        cancel_calls.push(t.elapsed());
    }
    let (outcomes, applied) = futures::join!(
        calls.collect::<Vec<SleepOutcome>>(),
        wait_applied(d, n as u64, trigger)
    );
    let (applied_ms, stats) = applied?;
    let mut seen: Vec<Duration> = outcomes
        .iter()
        .map(|o| o.seen_at.saturating_duration_since(trigger))
        .collect();
    // Clients whose cancel call is asynchronous report its duration from inside the call.
    let async_calls: Vec<Duration> = outcomes.iter().filter_map(|o| o.cancel_call).collect();
    if !async_calls.is_empty() {
        cancel_calls = async_calls;
    }
    let not_cancelled = outcomes.iter().filter(|o| !o.cancelled).count();
    let mut m = vec![
        (
            "cancel_call_p50_us",
            micros(percentile(&mut cancel_calls, 50.0)),
        ),
        (
            "cancel_call_p99_us",
            micros(percentile(&mut cancel_calls, 99.0)),
        ),
        (
            "caller_sees_cancel_p99_us",
            micros(percentile(&mut seen, 99.0)),
        ),
        ("server_applied_all_ms", applied_ms),
        ("callers_not_cancelled", not_cancelled as f64),
        ("peak_rss_kib", rss_kib("VmHWM:")),
    ];
    m.extend(correctness(&stats, n));
    Ok(m)
}

/// c2: every call in flight, then every future dropped.
async fn cancel_drop<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let n = s.cancel;
    let mut calls: FuturesUnordered<_> = (0..n).map(|_| d.sleep(10_000)).collect();
    drive_while(&mut calls, wait_stat(d, "pending", n as u64)).await?;
    let trigger = Instant::now();
    drop(calls);
    let (applied_ms, stats) = wait_applied(d, n as u64, trigger).await?;
    let mut m = vec![("server_applied_all_ms", applied_ms)];
    m.extend(correctness(&stats, n));
    Ok(m)
}

/// c3: send, then cancel at once, with 256 such operations concurrent.
async fn cancel_immediate<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let n = s.immediate;
    let one = || async {
        let (handle, call) = d.sleep_cancellable(10_000);
        let mut call = std::pin::pin!(call);
        // One poll puts the request on its way (lazy clients send on first poll).
        let _ = futures::poll!(call.as_mut());
        d.cancel(&handle);
        call.await
    };
    let mut running = FuturesUnordered::new();
    let mut started = 0;
    while started < n.min(s.in_flight) {
        running.push(one());
        started += 1;
    }
    while running.next().await.is_some() {
        if started < n {
            running.push(one());
            started += 1;
        }
    }
    // Settle: every request that reached the server must have been cancelled there.
    let deadline = Instant::now() + Duration::from_secs(5);
    let stats = loop {
        let stats = d.stats().await?;
        if stats["pending"] == 0 || Instant::now() > deadline {
            break stats;
        }
        sleep(Duration::from_millis(2)).await;
    };
    Ok(vec![
        ("overtaking_cancels", count(&stats, "cancels_ahead")),
        ("left_running", count(&stats, "pending")),
        ("cancels_at_server", count(&stats, "cancels")),
    ])
}

/// c4: one sleep in flight at a time, then one cancel, timed until the caller sees it.
async fn cancel_single<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let mut lat = Vec::with_capacity(s.single);
    for _ in 0..s.single {
        let (handle, call) = d.sleep_cancellable(10_000);
        let mut call = std::pin::pin!(call);
        // Poll the sleep once before the echo exists: a lazy call sends nothing until polled, and
        // `drive_while` polls the echo first. Submitted in this order, the sleep goes on the wire
        // before the echo, so an echo answered means the server has read the sleep. (Otherwise the
        // cancel could find the sleep still queued: correctly never written, but not the
        // "one request in flight" this scenario times, and counted as a lost cancel.)
        if futures::poll!(call.as_mut()).is_ready() {
            return Err("a 10 s sleep ended at once".into());
        }
        drive_while(&mut futures::stream::once(call.as_mut()), d.echo("x")).await?;
        let trigger = Instant::now();
        d.cancel(&handle);
        let outcome = call.await;
        lat.push(outcome.seen_at.saturating_duration_since(trigger));
    }
    let (_, stats) = wait_applied(d, s.single as u64, Instant::now()).await?;
    let mut m = vec![
        ("single_cancel_p50_us", micros(percentile(&mut lat, 50.0))),
        ("single_cancel_p99_us", micros(percentile(&mut lat, 99.0))),
    ];
    m.extend(correctness(&stats, s.single));
    Ok(m)
}

/// d: RSS growth per request held in flight.
async fn mem<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    run_concurrent(d, 1_000, 64).await?;
    let before = rss_kib("VmRSS:");
    let mut calls: FuturesUnordered<_> = (0..s.mem).map(|_| d.sleep(60_000)).collect();
    drive_while(&mut calls, wait_stat(d, "pending", s.mem as u64)).await?;
    let after = rss_kib("VmRSS:");
    drop(calls);
    Ok(vec![(
        "rss_bytes_per_in_flight",
        (after - before).max(0.0) * 1024.0 / s.mem as f64,
    )])
}

/// scale: throughput with the whole load in flight against a modest window.
async fn scale<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let window = run_concurrent(d, s.scale_total, s.scale_small_in_flight).await?;
    let all = run_concurrent(d, s.scale_total, s.scale_total).await?;
    let small = s.scale_total as f64 / window.as_secs_f64();
    let big = s.scale_total as f64 / all.as_secs_f64();
    Ok(vec![
        ("req_per_s_small_window", small),
        ("req_per_s_all_in_flight", big),
        ("all_in_flight_over_small_window", big / small),
        ("peak_rss_kib", rss_kib("VmHWM:")),
    ])
}

/// Lost cancels, cancels ahead of their request, requests left running: from the server.
fn correctness(stats: &Value, n: usize) -> Metrics {
    vec![
        ("lost_cancels", n as f64 - count(stats, "cancels_matched")),
        ("overtaking_cancels", count(stats, "cancels_ahead")),
        ("left_running", count(stats, "pending")),
    ]
}

fn count(stats: &Value, key: &str) -> f64 {
    stats[key].as_f64().unwrap_or(f64::NAN)
}

/// Polls `running` (so its futures make progress) while waiting for `until`.
async fn drive_while<S, F>(running: &mut S, until: F) -> F::Output
where
    S: Stream + Unpin,
    F: Future,
{
    let mut until = std::pin::pin!(until);
    let mut exhausted = false;
    loop {
        tokio::select! {
            biased;
            out = &mut until => return out,
            item = running.next(), if !exhausted => exhausted = item.is_none(),
        }
    }
}

async fn wait_stat<D: Driver>(d: &D, key: &str, want: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = d.stats().await?;
        if stats[key].as_u64() == Some(want) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{key} never reached {want}: {stats}"));
        }
        sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the server matched `n` cancels (or 5 s passed); returns ms since `trigger`.
async fn wait_applied<D: Driver>(d: &D, n: u64, trigger: Instant) -> Result<(f64, Value), String> {
    let deadline = trigger + Duration::from_secs(5);
    loop {
        let stats = d.stats().await?;
        let done = stats["cancels_matched"].as_u64() >= Some(n) && stats["pending"] == 0;
        if done || Instant::now() > deadline {
            let ms = trigger.elapsed().as_secs_f64() * 1e3;
            return Ok((if done { ms } else { f64::NAN }, stats));
        }
        sleep(Duration::from_micros(200)).await;
    }
}

/// t: `tasks` tool calls run as tasks, all working at the server, then every one cancelled
/// through its token: each must end `cancelled` at the server (by `tasks/cancel`, never
/// `notifications/cancelled`), none left working.
async fn tasks<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let n = s.tasks;
    let mut tokens = Vec::with_capacity(n);
    let mut calls = FuturesUnordered::new();
    for _ in 0..n {
        let (token, call) = d
            .task_cancellable(600_000)
            .ok_or("this client has no tasks")?;
        tokens.push(token);
        calls.push(call);
    }
    let working = async {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let stats = d.stats().await?;
            if stats["tasks"]["working"].as_u64() == Some(n as u64) {
                return Ok::<(), String>(());
            }
            if Instant::now() > deadline {
                return Err(format!("the tasks never all ran: {stats}"));
            }
            sleep(Duration::from_millis(5)).await;
        }
    };
    drive_while(&mut calls, working).await?;
    let trigger = Instant::now();
    for token in &tokens {
        d.cancel(token);
    }
    let outcomes = calls.collect::<Vec<SleepOutcome>>().await;
    let mut seen: Vec<Duration> = outcomes
        .iter()
        .map(|o| o.seen_at.saturating_duration_since(trigger))
        .collect();
    let deadline = trigger + Duration::from_secs(30);
    let (applied_ms, stats) = loop {
        let stats = d.stats().await?;
        let done = stats["tasks"]["cancelled"].as_u64() == Some(n as u64);
        if done || Instant::now() > deadline {
            let ms = trigger.elapsed().as_secs_f64() * 1e3;
            break (if done { ms } else { f64::NAN }, stats);
        }
        sleep(Duration::from_millis(1)).await;
    };
    let cancelled = stats["tasks"]["cancelled"].as_u64().unwrap_or(0) as f64;
    Ok(vec![
        (
            "caller_sees_cancel_p99_us",
            micros(percentile(&mut seen, 99.0)),
        ),
        ("server_cancelled_all_ms", applied_ms),
        (
            "callers_not_cancelled",
            outcomes.iter().filter(|o| !o.cancelled).count() as f64,
        ),
        ("lost_cancels", n as f64 - cancelled),
        ("left_running", count(&stats["tasks"], "working")),
        (
            "task_cancel_notifications",
            count(&stats, "cancels_for_tasks"),
        ),
        ("peak_rss_kib", rss_kib("VmHWM:")),
    ])
}

async fn sleep(d: Duration) {
    tokio::time::sleep(d).await;
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn percentile(values: &mut [Duration], p: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

/// A line of /proc/self/status, in KiB.
pub fn rss_kib(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(f64::NAN)
}
