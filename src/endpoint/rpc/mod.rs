//! ONC RPC endpoints: the server ([`server`]) and the client ([`client`]),
//! and the client side of the 1989 experiment ([`run_client`]): `reps`
//! repetitions of `calls` calls to SINK with a `size`-byte argument, timed.

pub mod busypoll;
pub mod client;
pub mod fdtable;
pub mod rpcbind;
pub mod server;

use crate::measure::{netstat::Counters, rusage::ProcessUsage, tcpinfo::TcpInfo};
use crate::wire::rpc::Call;
use client::{ClientOptions, Request, Strategy, TcpClient, UdpClient, message, sink_args};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Most calls a repetition makes (`--calls`).
pub const MAX_CALLS: u32 = 1_000_000;
/// Most repetitions a cell makes (`--reps`).
pub const MAX_REPS: u32 = 10_000;
/// Largest SINK argument: a UDP call fits one datagram (`--sizes`).
pub const MAX_ARG_SIZE: usize = 60_000;

impl RpcClientSpec {
    /// The command line's bounds, whoever asks: `--sizes`, `--calls` and
    /// `--reps` take no more, and an agent checks a controller's request
    /// by them too.
    pub fn check_bounds(&self) -> Result<(), String> {
        if self.size > MAX_ARG_SIZE {
            return Err(format!(
                "argument size {} is too large: a UDP call must fit one datagram (at most {MAX_ARG_SIZE} bytes)",
                self.size
            ));
        }
        if !(1..=MAX_CALLS).contains(&self.calls) {
            return Err(format!("--calls {}: from 1 to {MAX_CALLS}", self.calls));
        }
        if !(1..=MAX_REPS).contains(&self.reps) {
            return Err(format!("--reps {}: from 1 to {MAX_REPS}", self.reps));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcClientSpec {
    pub server: SocketAddr,
    pub proto: Proto,
    pub strategy: Strategy,
    pub options: ClientOptions,
    /// SINK argument bytes.
    pub size: usize,
    pub calls: u32,
    pub reps: u32,
    /// Through an agent: the run token, sent first on a TCP connection, or
    /// in the hello a UDP client says before its first call.
    #[serde(default)]
    pub token: Option<crate::endpoint::protocol::Token>,
}

/// Makes `spec.reps` repetitions of `spec.calls` calls, timing each call
/// into `histogram`; returns each repetition's seconds.
fn timed_reps(
    spec: &RpcClientSpec,
    histogram: &mut hdrhistogram::Histogram<u64>,
    mut call: impl FnMut(u32) -> Result<(), client::CallError>,
) -> Result<Vec<f64>, String> {
    let mut xid = std::process::id().wrapping_mul(2_654_435_761);
    let mut rep_seconds = Vec::with_capacity(spec.reps as usize);
    for _ in 0..spec.reps {
        // One clock read per call: a call's end is the next call's start, so
        // a call's time also holds the few nanoseconds of recording the one
        // before it (the repetition's time holds them anyway).
        let rep_start = Instant::now();
        let mut start = rep_start;
        for _ in 0..spec.calls {
            xid = xid.wrapping_add(1);
            call(xid).map_err(|e| format!("call: {e}"))?;
            let end = Instant::now();
            let _ = histogram.record((end - start).as_micros().max(1) as u64);
            start = end;
        }
        rep_seconds.push((start - rep_start).as_secs_f64());
    }
    Ok(rep_seconds)
}

/// Runs the client's side of one cell of the experiment.
pub fn run_client(spec: &RpcClientSpec) -> Result<RpcClientReport, String> {
    if let Some(cpu) = spec.options.cpu {
        crate::endpoint::pin::pin_current_thread(cpu).map_err(|e| e.to_string())?;
    }
    let call = Call::new(0, server::PROGRAM, server::VERSION, server::PROC_SINK);
    let msg = message(&call, &sink_args(spec.size));
    let mut histogram = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)
        .map_err(|e| e.to_string())?;
    let mut report = RpcClientReport::default();
    let counters_before = Counters::read();
    let usage_before = ProcessUsage::now();
    let delay_before = crate::measure::schedstat::thread_run_delay_ns();
    let run_delay = || {
        let now = crate::measure::schedstat::thread_run_delay_ns();
        delay_before
            .zip(now)
            .map(|(then, now)| now.saturating_sub(then))
    };
    match spec.proto {
        Proto::Tcp => {
            let mut request = Request::tcp(&msg, call.header_len(), spec.strategy);
            report.writes_per_call = request.writes.len();
            if spec.options.connect_per_call {
                // TCP_CRR: connect, present the token, call, close; the
                // client closes first, so its side holds the TIME_WAITs.
                let mut syscalls = 0;
                let mut last_info = None;
                report.rep_seconds = timed_reps(spec, &mut histogram, |xid| {
                    let mut client = TcpClient::connect(spec.server, spec.options.clone())?;
                    client.present(spec.token.as_ref())?;
                    client.call(&mut request, xid)?;
                    // connect, the token's write (when there is one), close.
                    syscalls += client.syscalls + 2 + u64::from(spec.token.is_some());
                    last_info = TcpInfo::read(client.stream().as_fd()).ok();
                    Ok(())
                })?;
                report.syscalls = syscalls;
                report.tcp_info = last_info;
                report.connections = Some(u64::from(spec.calls) * u64::from(spec.reps));
                report.run_delay_ns = run_delay();
                report.usage = ProcessUsage::now().since(&usage_before);
                report.counters = Counters::read().delta_reported(&counters_before);
                fill_latency(&mut report, &histogram);
                return Ok(report);
            }
            let mut client = TcpClient::connect(spec.server, spec.options.clone())
                .map_err(|e| format!("connecting to {}: {e}", spec.server))?;
            client
                .present(spec.token.as_ref())
                .map_err(|e| format!("sending the run token to {}: {e}", spec.server))?;
            report.rep_seconds = timed_reps(spec, &mut histogram, |xid| {
                client.call(&mut request, xid).map(drop)
            })?;
            report.syscalls = client.syscalls;
            report.empty_polls = client.empty_polls;
            report.tcp_info = TcpInfo::read(client.stream().as_fd()).ok();
        }
        Proto::Udp => {
            let mut request = Request::udp(&msg);
            report.writes_per_call = 1;
            let mut client =
                UdpClient::connect(spec.server).map_err(|e| format!("UDP socket: {e}"))?;
            if let Some(token) = &spec.token {
                client
                    .ask_consent(token)
                    .map_err(|e| format!("asking {} to consent: {e}", spec.server))?;
            }
            client.busy_poll = busypoll::budget(spec.options.busy_poll_us);
            if let Some(ms) = spec.options.udp_timeout_ms {
                client.timeout = Duration::from_millis(u64::from(ms.max(1)));
            }
            report.rep_seconds = timed_reps(spec, &mut histogram, |xid| {
                client.call(&mut request, xid).map(drop)
            })?;
            report.syscalls = client.syscalls;
            report.empty_polls = client.empty_polls;
            report.udp_retransmissions = client.retransmissions;
        }
    }
    report.run_delay_ns = run_delay();
    report.usage = ProcessUsage::now().since(&usage_before);
    report.counters = Counters::read().delta_reported(&counters_before);
    fill_latency(&mut report, &histogram);
    Ok(report)
}

fn fill_latency(report: &mut RpcClientReport, histogram: &hdrhistogram::Histogram<u64>) {
    report.latency_us_p50 = histogram.value_at_quantile(0.5) as f64;
    report.latency_us_p90 = histogram.value_at_quantile(0.9) as f64;
    report.latency_us_p99 = histogram.value_at_quantile(0.99) as f64;
    report.latency_us_max = histogram.max() as f64;
    report.latency_us_min = histogram.min() as f64;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub fn name(&self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RpcClientReport {
    /// Seconds for each repetition of `calls` calls.
    pub rep_seconds: Vec<f64>,
    /// Per-call latency, µs.
    pub latency_us_p50: f64,
    pub latency_us_p90: f64,
    pub latency_us_p99: f64,
    pub latency_us_max: f64,
    pub latency_us_min: f64,
    /// `write(2)`s per call the strategy makes.
    pub writes_per_call: usize,
    pub syscalls: u64,
    /// Busy-poll receives that found nothing (0 unless busy polling).
    #[serde(default)]
    pub empty_polls: u64,
    pub usage: ProcessUsage,
    pub counters: Counters,
    pub tcp_info: Option<TcpInfo>,
    pub udp_retransmissions: u64,
    /// `--connect-per-call`: the connections opened (one per call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    /// The calling thread's time runnable but waiting for a CPU over the
    /// calls (ns, schedstat); none where it cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use server::ServerOptions;
    use std::net::Ipv4Addr;

    fn serve(options: ServerOptions) -> server::Running {
        server::Server::bind((Ipv4Addr::LOCALHOST, 0).into(), options)
            .unwrap()
            .start()
            .unwrap()
    }

    #[test]
    fn every_strategy_and_udp_complete_their_calls() {
        let running = serve(ServerOptions::default());
        let addr: SocketAddr = (Ipv4Addr::LOCALHOST, running.port()).into();
        for (proto, strategy) in [
            (Proto::Tcp, Strategy::Sun),
            (Proto::Tcp, Strategy::TwoWrite),
            (Proto::Tcp, Strategy::Writev),
            (Proto::Udp, Strategy::Writev),
        ] {
            let report = run_client(&RpcClientSpec {
                server: addr,
                proto,
                strategy,
                options: ClientOptions {
                    nodelay: true,
                    ..Default::default()
                },
                size: 5000,
                calls: 10,
                reps: 2,
                token: None,
            })
            .unwrap();
            assert_eq!(report.rep_seconds.len(), 2);
            assert!(report.latency_us_p50 > 0.0);
        }
        let served = running.stop();
        assert_eq!(served.calls, 80);
        assert_eq!(served.closed_bad_peers, 0);
    }
}
