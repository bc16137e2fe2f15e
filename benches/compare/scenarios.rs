//! The scenarios of `performance-baseline.md`, written once against [`Driver`].

use std::{
    future::Future,
    time::{Duration, Instant},
};

use futures::{future::LocalBoxFuture, stream::FuturesUnordered, FutureExt, Stream, StreamExt};
use serde_json::Value;

use crate::clients::{
    ClientCounters, Driver, SleepOutcome, SoakOutcome, SoakPlan, SOAK_LONG_SLEEP_MS,
};

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
    /// Scenario soak: requests of the warm-up, then of the measured run.
    pub soak_warm: usize,
    pub soak: usize,
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
        soak_warm: 50_000,
        soak: 1_000_000,
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
        soak_warm: 20_000,
        soak: 1_000_000,
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
        soak_warm: 2_000,
        soak: 20_000,
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
        soak_warm: 2_000,
        soak: 20_000,
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
        "soak" => soak(d, s).await,
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
        ("peak_rss_kib", rss_kib("VmHWM:")),
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
    let before = d.stats().await?;
    let elapsed = run_concurrent(d, s.conc, s.in_flight).await?;
    let mut m = vec![
        ("req_per_s", s.conc as f64 / elapsed.as_secs_f64()),
        ("peak_rss_kib", rss_kib("VmHWM:")),
    ];
    // Over HTTP/1.1 each request in flight holds a connection; a client that opens more than it
    // has requests in flight pays for each in memory.
    // The server counts connections in its HTTP mode only (over stdio: none).
    let after = d.stats().await?;
    let count = |stats: &Value, key: &str| stats[key].as_u64().unwrap_or(0);
    if count(&after, "connections") > 0 {
        let opened = count(&after, "connections").saturating_sub(count(&before, "connections"));
        m.push(("connections_opened", opened as f64));
        m.push(("connections_peak", count(&after, "connections_peak") as f64));
    }
    Ok(m)
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
    let mut m = vec![
        ("server_applied_all_ms", applied_ms),
        ("peak_rss_kib", rss_kib("VmHWM:")),
    ];
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

/// The soak's generator seed: every run draws the same plans.
const SOAK_SEED: u64 = 0x5eed_50a4;
/// RSS after the run may exceed RSS after the warm-up by this much.
const SOAK_RSS_BUDGET_MIB: f64 = 8.0;

/// soak: `soak` requests, `in_flight` at a time, each with a plan drawn by a seeded generator:
/// ~60% complete (`echo` of a text unique in the window, or a 1–5 ms `sleep`), ~10% each
/// cancelled by a token once running at the server, by dropping the future 0–20 ms after its
/// first poll, by a 1–20 ms timeout, and by a token cancelled before the call. Every caller's
/// outcome is checked against its plan. At the end: the client's table and the server's running
/// requests empty, no cancel ahead of its request or for an unknown id, the server's request and
/// cancel counters agreeing with what the client wrote (per cancel style), and RSS back within
/// [`SOAK_RSS_BUDGET_MIB`] of RSS after a warm-up of the same mix.
async fn soak<D: Driver>(d: &D, s: Sizes) -> Result<Metrics, String> {
    let observed = soak_observe(d, s).await?;
    let counts = SoakCounts::new(&observed);
    Ok(soak_metrics(s, &observed, &counts))
}

/// What the soak saw: both sides' counters before and after, the callers' outcomes, the time
/// and the memory.
struct SoakObserved {
    server0: Value,
    server1: Value,
    client0: ClientCounters,
    client1: ClientCounters,
    /// The measured run's outcomes.
    tally: SoakTally,
    /// The warm-up's and the run's outcomes together.
    all: SoakTally,
    elapsed: Duration,
    /// The `stats` calls the settling made, after the warm-up and after the run: requests too.
    stats_calls: u64,
    rss_start: f64,
    rss_end: f64,
    rss_peak: f64,
}

/// The warm-up, then the measured run, each settled (tables empty) before memory is read.
async fn soak_observe<D: Driver>(d: &D, s: Sizes) -> Result<SoakObserved, String> {
    // Both sides' counters before anything: the checks cover the warm-up too. Server first: its
    // own request is then among the client's writes already.
    let server0 = d.stats().await?;
    let client0 = d
        .soak_counters()
        .await
        .ok_or("this client has no soak scenario")?;
    let mut rng = fastrand::Rng::with_seed(SOAK_SEED);
    let mut all = soak_run(d, &mut rng, s.soak_warm, s.in_flight).await;
    let (_, _, warm_stats_calls) = soak_settle(d).await?;
    let rss_start = rss_kib("VmRSS:");
    let start = Instant::now();
    let tally = soak_run(d, &mut rng, s.soak, s.in_flight).await;
    let elapsed = start.elapsed();
    let (server1, client1, stats_calls) = soak_settle(d).await?;
    let rss_end = rss_kib("VmRSS:");
    let rss_peak = rss_kib("VmHWM:");
    all.add(&tally);
    Ok(SoakObserved {
        server0,
        server1,
        client0,
        client1,
        tally,
        all,
        elapsed,
        stats_calls: warm_stats_calls + stats_calls,
        rss_start,
        rss_end,
        rss_peak,
    })
}

/// The counters' changes over the soak (warm-up included), the client's and the server's, and
/// what the transport says about how they must relate.
struct SoakCounts {
    written: i64,
    before_write: i64,
    /// Handed to the transport, held there, cancelled: in both counts above, never at the server.
    held_cancelled: i64,
    cancels_sent: i64,
    aborted: i64,
    late: i64,
    server_cancels: i64,
    matched: i64,
    unknown: i64,
    ahead: i64,
    /// Callers cancelled by a token (once running at the server).
    token: i64,
    /// Written requests the server never read (a POST aborted before it did).
    unread: i64,
    /// 2025-11-25 over HTTP/1.1: a request and its cancel are two POSTs on two connections, and
    /// the server may read the cancel first. The client then aborts the request's POST, and the
    /// server (hyper) drops a request whose connection closed before it was read: the cancel was
    /// for an id it never saw. Counted, and each must be such a pair.
    cross_connection: bool,
    /// The client's transport: over HTTP, and cancelling a written request by aborting its POST.
    http: bool,
    cancels_by_abort: bool,
}

impl SoakCounts {
    fn new(o: &SoakObserved) -> Self {
        let sv = |key: &str| {
            o.server1[key].as_u64().unwrap_or(0) as i64
                - o.server0[key].as_u64().unwrap_or(0) as i64
        };
        let cl = |f: fn(&ClientCounters) -> u64| f(&o.client1) as i64 - f(&o.client0) as i64;
        let written = cl(|c| c.requests_written);
        let held_cancelled = cl(|c| c.cancelled_while_held);
        let server_requests = sv("requests");
        let client = &o.client1;
        SoakCounts {
            written,
            before_write: cl(|c| c.cancelled_before_write),
            held_cancelled,
            cancels_sent: cl(|c| c.cancels_sent),
            aborted: cl(|c| c.requests_aborted),
            late: cl(|c| c.late_responses),
            server_cancels: sv("cancels"),
            matched: sv("cancels_matched"),
            unknown: sv("cancels_unknown"),
            ahead: sv("cancels_ahead"),
            token: o.all.token as i64,
            unread: written - held_cancelled - server_requests,
            cross_connection: client.http && !client.http2 && !client.cancels_by_abort,
            http: client.http,
            cancels_by_abort: client.cancels_by_abort,
        }
    }

    /// Requests written against requests submitted, and the cancels for an id the server never
    /// saw that nothing explains: `(write_count_mismatch, cancels_unknown)`.
    fn write_check(&self, submitted: i64) -> (i64, i64) {
        // Every call but the pre-cancelled ones (plus the settling `stats` calls) was either
        // written or cancelled before it was; the server read every written one, except a POST
        // aborted before it did (cancel by abort; or the cross-connection case).
        let mut write_mismatch =
            (self.written + self.before_write - self.held_cancelled - submitted).abs()
                + shortfall(self.unread, 0);
        let unexplained_unknown = if self.cross_connection {
            (self.unknown - self.unread).abs()
        } else {
            write_mismatch += if self.cancels_by_abort {
                0
            } else {
                self.unread.abs()
            };
            self.unknown
        };
        (write_mismatch, unexplained_unknown)
    }

    /// The cancels the client sent against those the server counted (`cancel_counter_mismatch`).
    fn cancel_check(&self) -> i64 {
        // Cancelled sleeps are long: no answer races a cancel, so every cancel on the wire meets
        // its request running at the server (or, cross-connection, unseen), and a token cancel
        // (made once the sleep ran) always goes on the wire.
        let mut cancel_mismatch = self.late;
        if self.cancels_by_abort {
            // 2026-07-28 over HTTP: the POST is aborted, no notification; the server counts a
            // cancel when it notices a POST gone before its answer, i.e. with its request
            // running.
            cancel_mismatch += self.cancels_sent + (self.server_cancels - self.matched).abs();
            cancel_mismatch +=
                shortfall(self.aborted, self.matched) + shortfall(self.matched, self.token);
        } else {
            let unseen = if self.cross_connection {
                self.unknown
            } else {
                0
            };
            cancel_mismatch += self.aborted + (self.matched + unseen - self.cancels_sent).abs();
            cancel_mismatch += shortfall(self.cancels_sent, self.token);
            cancel_mismatch += if self.http {
                // Legacy HTTP: the request's POST is aborted once its cancel was POSTed; the
                // server counts that disconnect as a second, unmatched cancel.
                shortfall(self.server_cancels, self.cancels_sent)
            } else {
                (self.server_cancels - self.cancels_sent).abs()
            };
        }
        cancel_mismatch
    }
}

/// How far `have` falls short of `floor` (0 if it does not).
fn shortfall(have: i64, floor: i64) -> i64 {
    (floor - have).max(0)
}

/// The soak's figures: the measured run's first, then the checks over warm-up and run together.
fn soak_metrics(s: Sizes, o: &SoakObserved, c: &SoakCounts) -> Metrics {
    let submitted = (s.soak_warm + s.soak - o.all.pre) as i64 + o.stats_calls as i64;
    let (write_mismatch, unexplained_unknown) = c.write_check(submitted);
    let cancel_mismatch = c.cancel_check();
    let tally = &o.tally;
    let mib = |kib: f64| kib / 1024.0;
    vec![
        ("req_per_s", s.soak as f64 / o.elapsed.as_secs_f64()),
        ("duration_s", o.elapsed.as_secs_f64()),
        ("requests", s.soak as f64),
        ("completed", (tally.echo + tally.sleep) as f64),
        ("cancelled_token", tally.token as f64),
        ("cancelled_drop", tally.drop as f64),
        ("cancelled_timeout", tally.timeout as f64),
        ("cancelled_pre", tally.pre as f64),
        // From here on: warm-up and run together.
        ("mismatched_outcomes", o.all.mismatches as f64),
        ("in_flight_after", o.client1.in_flight as f64),
        ("server_pending_after", count(&o.server1, "pending")),
        ("cancels_ahead", c.ahead as f64),
        ("cancels_unknown", unexplained_unknown as f64),
        (
            "cancels_before_unread_request",
            if c.cross_connection {
                c.unknown as f64
            } else {
                0.0
            },
        ),
        ("cancels_sent", c.cancels_sent as f64),
        ("requests_aborted", c.aborted as f64),
        ("server_cancels", c.server_cancels as f64),
        ("server_cancels_matched", c.matched as f64),
        ("written_not_read_by_server", c.unread as f64),
        ("cancelled_before_write", c.before_write as f64),
        ("cancelled_while_held", c.held_cancelled as f64),
        ("cancel_counter_mismatch", cancel_mismatch as f64),
        ("write_count_mismatch", write_mismatch as f64),
        ("rss_start_mib", mib(o.rss_start)),
        ("rss_end_mib", mib(o.rss_end)),
        ("rss_peak_mib", mib(o.rss_peak)),
        (
            "rss_over_budget_mib",
            (mib(o.rss_end - o.rss_start) - SOAK_RSS_BUDGET_MIB).max(0.0),
        ),
    ]
}

/// What the soak's callers saw, by plan.
#[derive(Default)]
struct SoakTally {
    echo: usize,
    sleep: usize,
    token: usize,
    drop: usize,
    timeout: usize,
    pre: usize,
    mismatches: usize,
}

impl SoakTally {
    fn add(&mut self, other: &SoakTally) {
        self.echo += other.echo;
        self.sleep += other.sleep;
        self.token += other.token;
        self.drop += other.drop;
        self.timeout += other.timeout;
        self.pre += other.pre;
        self.mismatches += other.mismatches;
    }

    fn record(&mut self, plan: SoakPlan, verdict: Result<(), String>) {
        *match plan {
            SoakPlan::Echo(_) => &mut self.echo,
            SoakPlan::Sleep(_) => &mut self.sleep,
            SoakPlan::Token => &mut self.token,
            SoakPlan::Drop(_) => &mut self.drop,
            SoakPlan::Timeout(_) => &mut self.timeout,
            SoakPlan::PreCancelled => &mut self.pre,
        } += 1;
        if let Err(why) = verdict {
            self.mismatches += 1;
            if self.mismatches <= 10 {
                eprintln!("soak: mismatch: {why}");
            }
        }
    }
}

fn soak_plan(rng: &mut fastrand::Rng, n: u64) -> SoakPlan {
    match rng.u32(0..100) {
        0..30 => SoakPlan::Echo(n),
        30..60 => SoakPlan::Sleep(rng.u64(1..=5)),
        60..70 => SoakPlan::Token,
        70..80 => SoakPlan::Drop(rng.u64(0..=20)),
        80..90 => SoakPlan::Timeout(rng.u64(1..=20)),
        _ => SoakPlan::PreCancelled,
    }
}

async fn soak_run<D: Driver>(
    d: &D,
    rng: &mut fastrand::Rng,
    total: usize,
    in_flight: usize,
) -> SoakTally {
    let mut tally = SoakTally::default();
    let mut running = FuturesUnordered::new();
    let mut started = 0;
    loop {
        while started < total && running.len() < in_flight {
            running.push(soak_one(d, soak_plan(rng, started as u64)));
            started += 1;
        }
        match running.next().await {
            Some((plan, verdict)) => tally.record(plan, verdict),
            None => return tally,
        }
    }
}

/// One soak request carried out to its plan, and whether its caller saw what the plan says.
fn soak_one<D: Driver>(
    d: &D,
    plan: SoakPlan,
) -> LocalBoxFuture<'static, (SoakPlan, Result<(), String>)> {
    if let SoakPlan::Drop(after) = plan {
        let call = d.sleep(SOAK_LONG_SLEEP_MS);
        return async move {
            let mut call = std::pin::pin!(call);
            if after == 0 {
                // Dropped right after its first poll, which submitted it: still in the inbox.
                let verdict = match futures::poll!(call.as_mut()) {
                    std::task::Poll::Pending => Ok(()),
                    std::task::Poll::Ready(early) => {
                        Err(format!("{plan:?} ended at its first poll: {early:?}"))
                    }
                };
                return (plan, verdict);
            }
            // Polled first: the call is submitted before its drop.
            let verdict = tokio::select! {
                biased;
                early = &mut call => Err(format!("{plan:?} ended before its drop: {early:?}")),
                _ = sleep(Duration::from_millis(after)) => Ok(()),
            };
            (plan, verdict)
        }
        .boxed_local();
    }
    let Some(call) = d.soak_call(plan) else {
        return futures::future::ready((plan, Err("this client has no soak call".to_owned())))
            .boxed_local();
    };
    async move {
        let outcome = call.await;
        let ok = match (plan, &outcome) {
            (SoakPlan::Echo(n), SoakOutcome::Ok(text)) => *text == n.to_string(),
            (SoakPlan::Sleep(ms), SoakOutcome::Ok(text)) => *text == format!("slept {ms} ms"),
            (SoakPlan::Token | SoakPlan::PreCancelled, SoakOutcome::Cancelled) => true,
            (SoakPlan::Timeout(_), SoakOutcome::Timeout) => true,
            _ => false,
        };
        let verdict = match outcome {
            _ if ok => Ok(()),
            SoakOutcome::Failed(why) => Err(format!("{plan:?} failed: {why}")),
            other => Err(format!("{plan:?} ended {other:?}")),
        };
        (plan, verdict)
    }
    .boxed_local()
}

/// Waits (10 s at most) until the client's table and the server's running requests are empty;
/// returns the last counters of both and how many `stats` calls it made.
async fn soak_settle<D: Driver>(d: &D) -> Result<(Value, ClientCounters, u64), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut calls = 0;
    loop {
        let server = d.stats().await?;
        calls += 1;
        let client = d.soak_counters().await.ok_or("no client counters")?;
        if (client.in_flight == 0 && server["pending"] == 0) || Instant::now() > deadline {
            return Ok((server, client, calls));
        }
        sleep(Duration::from_millis(5)).await;
    }
}
