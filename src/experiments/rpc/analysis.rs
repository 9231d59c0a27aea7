//! The RPC experiment's records, read: the measured cells, the cliffs among
//! them, the findings their diagnosis reruns and captures support, and the
//! stall ranges a `--find-cliffs` search's probes show. Pure functions over
//! records; `plan` and `cell` run the cells and searches, `report` prints.

use crate::analysis::capture::last_call_timeline;
use crate::analysis::cliff::{Cliff, DEFAULT_FACTOR, MIN_STALL_MS, find_cliffs};
use crate::analysis::costmodel::CostModel;
use crate::analysis::diagnosis::{Diagnosis, Rerun, diagnose};
use crate::endpoint::rpc::Proto;
use crate::experiments::rpc::record::Record;
use crate::experiments::rpc::record::RpcData;
use crate::experiments::rpc::record::{CallPart, CallSplit, Purpose, RpcParams, RpcResult};
use serde::Serialize;

/// One flagged cell and what its reruns showed.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub column: String,
    pub size: usize,
    pub ratio: f64,
    pub ms_per_100_calls: f64,
    pub diagnosis: Option<Diagnosis>,
    /// One stalled call as captured on the client's side of the path.
    pub timeline: Vec<String>,
}

/// A run of argument sizes whose calls stall, found by `--find-cliffs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StallRange {
    pub placement: String,
    pub from: usize,
    pub to: usize,
    /// Whether the range runs to the end of the probed range.
    pub open_ended: bool,
    pub ms_per_call: f64,
}

/// The RPC cells that measured something, with their parameters.
pub fn results(records: &[Record]) -> Vec<(&RpcParams, &RpcResult)> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RpcData {
                params,
                result: Some(result),
            } => Some((params, result.as_ref())),
            _ => None,
        })
        .collect()
}

/// The mean over a cell's repetitions, in ms per 100 calls.
pub fn mean_ms_per_100(result: &RpcResult, calls: u32) -> f64 {
    let reps = &result.client.rep_seconds;
    if reps.is_empty() {
        return 0.0;
    }
    reps.iter().sum::<f64>() / reps.len() as f64 * 1e3 * 100.0 / f64::from(calls.max(1))
}

/// The mean time per call of a cell, ms (a probe's figure).
pub fn mean_ms_per_call(result: &RpcResult, calls: u32) -> f64 {
    mean_ms_per_100(result, calls) / 100.0
}

/// The cells of each column whose median call is far above what their
/// neighbours predict (and by at least [`MIN_STALL_MS`]).
pub fn flag_cliffs(records: &[Record]) -> Vec<(String, Cliff, &RpcParams, &RpcResult)> {
    let measured = results(records);
    let mut columns: Vec<String> = measured.iter().map(|(p, _)| p.column()).collect();
    columns.dedup();
    let mut flagged = Vec::new();
    for column in columns {
        let cells: Vec<&(&RpcParams, &RpcResult)> = measured
            .iter()
            .filter(|(p, _)| p.column() == column)
            .collect();
        // Judged by the median call (ms), so one slow call cannot make a cell a cliff.
        let points: Vec<(f64, f64)> = cells
            .iter()
            .map(|(p, r)| (p.size as f64, r.client.latency_us_p50 / 1e3))
            .collect();
        let (cliffs, _) = find_cliffs(&points, DEFAULT_FACTOR);
        for cliff in cliffs
            .into_iter()
            .filter(|c| c.measured - c.predicted >= MIN_STALL_MS)
        {
            if let Some((params, result)) = cells.iter().find(|(p, _)| p.size as f64 == cliff.size)
            {
                flagged.push((column.clone(), cliff, *params, *result));
            }
        }
    }
    flagged
}

/// The RPC records of the grid itself (not diagnosis reruns or probes).
pub fn measured_records(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| matches!(&r.data, RpcData { params, .. } if params.purpose == Purpose::Measure))
        .cloned()
        .collect()
}

/// The diagnosis reruns of one flagged cell: (change, median ms per call).
pub fn diagnosis_reruns(records: &[Record], column: &str, size: usize) -> Vec<Rerun> {
    results(records)
        .into_iter()
        .filter(|(p, _)| p.column() == column && p.size == size && !p.capture_timeline)
        .filter_map(|(p, r)| match &p.purpose {
            Purpose::Diagnose(change) => Some(Rerun {
                change: change.clone(),
                ms_per_call: r.client.latency_us_p50 / 1e3,
            }),
            _ => None,
        })
        .collect()
}

/// The last call of the captured rerun of a flagged cell, as lines.
pub fn captured_timeline(records: &[Record], column: &str, size: usize) -> Vec<String> {
    results(records)
        .into_iter()
        .filter(|(p, _)| p.capture_timeline && p.column() == column && p.size == size)
        .find_map(|(_, r)| {
            r.capture
                .as_ref()
                .map(|c| last_call_timeline(&c.timeline, r.server_port))
        })
        .unwrap_or_default()
}

/// The findings a run's records hold: the cliffs of its measured cells,
/// diagnosed from the diagnosis reruns and the captured timeline recorded
/// beside them (a cell without reruns is flagged, not diagnosed).
pub fn findings_from_records(records: &[Record]) -> Vec<Finding> {
    let measured = measured_records(records);
    flag_cliffs(&measured)
        .into_iter()
        .map(|(column, cliff, params, result)| {
            let reruns = diagnosis_reruns(records, &column, params.size);
            Finding {
                size: params.size,
                ratio: cliff.ratio,
                ms_per_100_calls: mean_ms_per_100(result, params.calls),
                diagnosis: (!reruns.is_empty()).then(|| {
                    diagnose(
                        result.client.latency_us_p50 / 1e3,
                        result.client.writes_per_call,
                        result.delayed_acks_per_call,
                        &reruns,
                    )
                }),
                timeline: captured_timeline(records, &column, params.size),
                column,
            }
        })
        .collect()
}

/// Whether a probe at `size` taking `ms` per call is a stall: at least
/// [`DEFAULT_FACTOR`] times and [`MIN_STALL_MS`] above the model.
pub fn is_stall(model: &CostModel, size: usize, ms: f64) -> bool {
    let predicted = model.time(size as f64).max(f64::MIN_POSITIVE);
    ms / predicted >= DEFAULT_FACTOR && ms - predicted >= MIN_STALL_MS
}

/// Sizes below the range that anchor the model of the fast regime.
pub const ANCHORS: [usize; 5] = [0, 256, 512, 1024, 2048];

/// The TCP payload of a full segment on a path of this MTU with the
/// timestamp option Linux sends (IP 20 + TCP 20 + 12 bytes of options; an
/// IPv4 datagram is at most 65535 bytes whatever the MTU, as on loopback).
pub fn mss_for_mtu(mtu: u32) -> usize {
    (mtu.min(65_535) as usize).saturating_sub(52)
}

/// A search's first pass: every 500 bytes of `lo..=hi`, every power of
/// two and every multiple of the MSS (and a byte either side), plus the
/// anchors below the range.
pub fn coarse_sizes(lo: usize, hi: usize, mss: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = (lo..=hi).step_by(500).collect();
    sizes.push(hi);
    sizes.extend(ANCHORS.iter().filter(|&&a| a < lo));
    let mut p = 1usize;
    while p <= hi {
        if p >= lo {
            sizes.push(p);
        }
        p *= 2;
    }
    let mut m = mss.max(1);
    while m <= hi {
        for s in [m - 1, m, m + 1] {
            if (lo..=hi).contains(&s) {
                sizes.push(s);
            }
        }
        m += mss.max(1);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The maximal runs of stalled sizes among the probes (size, ms per call)
/// inside `lo..=hi`.
pub fn stall_ranges(
    column: &str,
    probes: &[(usize, f64)],
    model: &CostModel,
    lo: usize,
    hi: usize,
) -> Vec<StallRange> {
    let mut ranges = Vec::new();
    let mut run: Option<(usize, usize, Vec<f64>)> = None;
    let close = |(from, to, ts): (usize, usize, Vec<f64>)| StallRange {
        placement: column.to_string(),
        from,
        to,
        open_ended: to == hi,
        ms_per_call: ts.iter().sum::<f64>() / ts.len() as f64,
    };
    let mut inside: Vec<(usize, f64)> = probes
        .iter()
        .copied()
        .filter(|(s, _)| (lo..=hi).contains(s))
        .collect();
    inside.sort_by_key(|&(s, _)| s);
    for (size, ms) in inside {
        if is_stall(model, size, ms) {
            let r = run.get_or_insert((size, size, Vec::new()));
            r.1 = size;
            r.2.push(ms);
        } else if let Some(open) = run.take() {
            ranges.push(close(open));
        }
    }
    if let Some(open) = run.take() {
        ranges.push(close(open));
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mss_follows_the_mtu_and_the_datagram_limit() {
        assert_eq!(mss_for_mtu(1500), 1448);
        assert_eq!(mss_for_mtu(65536), 65483, "loopback");
    }

    #[test]
    fn coarse_sizes_hold_the_boundaries_a_stall_may_have() {
        let sizes = coarse_sizes(0, 12000, 1448);
        for size in [0, 256, 500, 4096, 1447, 1448, 1449, 8192, 12000] {
            assert!(sizes.contains(&size), "{size}");
        }
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn stall_ranges_are_maximal_runs_of_slow_probes() {
        let model = CostModel {
            fixed: 0.1,
            per_byte: 0.0,
            r_squared: 1.0,
            max_relative_residual: 0.0,
            points: 3,
        };
        let probes = [(0, 0.1), (10, 200.0), (11, 200.0), (12, 0.1), (20, 190.0)];
        let ranges = stall_ranges("TCP local", &probes, &model, 0, 20);
        assert_eq!(ranges.len(), 2);
        assert_eq!((ranges[0].from, ranges[0].to), (10, 11));
        assert!(!ranges[0].open_ended);
        assert_eq!((ranges[1].from, ranges[1].to), (20, 20));
        assert!(ranges[1].open_ended);
    }
}

/// Ethernet's per-frame overhead on the wire: 14-byte header, 4-byte FCS,
/// 8-byte preamble and start delimiter, 12-byte inter-frame gap (IEEE
/// 802.3).
pub const ETHERNET_OVERHEAD: u64 = 14 + 4 + 8 + 12;

/// The smallest Ethernet frame (header to FCS), padded up to if shorter.
pub const ETHERNET_MIN_FRAME: u64 = 64;

/// An ONC RPC call header with AUTH_NONE credentials and verifier (RFC 5531:
/// xid, type, rpcvers, prog, vers, proc, two opaque_auth of 8 bytes each).
pub const RPC_CALL_HEADER: u64 = 40;

/// IPv4 header without options (RFC 791).
pub const IP_HEADER: u64 = 20;

/// Bytes on the wire for `payload` bytes of `proto` at `mtu`.
fn wire_bytes(payload: u64, proto: Proto, mtu: u64) -> u64 {
    let transport = match proto {
        Proto::Tcp => 20,
        Proto::Udp => 8,
    };
    // TCP segments carry their header in every frame; a UDP datagram's
    // header rides in the first IP fragment only.
    let per_frame = match proto {
        Proto::Tcp => mtu - IP_HEADER - transport,
        Proto::Udp => mtu - IP_HEADER,
    };
    let data = match proto {
        Proto::Tcp => payload,
        Proto::Udp => payload + transport,
    };
    let frames = data.div_ceil(per_frame).max(1);
    let mut bytes = 0;
    let mut left = data;
    for _ in 0..frames {
        let here = left.min(per_frame);
        left -= here;
        let ip = here
            + IP_HEADER
            + match proto {
                Proto::Tcp => transport,
                Proto::Udp => 0,
            };
        bytes += (ip + 14 + 4).max(ETHERNET_MIN_FRAME) + 8 + 12;
    }
    bytes
}

/// Bytes on the wire of one call of `arg_bytes` at `mtu`: its request, and
/// a null reply (a minimum frame at least), each with Ethernet's framing.
pub fn rpc_call_wire_bytes(arg_bytes: u64, proto: Proto, mtu: u64) -> (u64, u64) {
    let record_mark = match proto {
        Proto::Tcp => 4,
        Proto::Udp => 0,
    };
    let request = wire_bytes(arg_bytes + RPC_CALL_HEADER + record_mark, proto, mtu);
    let reply = ETHERNET_MIN_FRAME + 8 + 12;
    (request, reply)
}

/// The least time (ms) one call of `arg_bytes` can take over a link of
/// `bits_per_s` and `mtu`: its request and a null reply on the wire.
pub fn rpc_call_wire_ms(arg_bytes: u64, proto: Proto, mtu: u64, bits_per_s: f64) -> f64 {
    let (request, reply) = rpc_call_wire_bytes(arg_bytes, proto, mtu);
    (request + reply) as f64 * 8.0 / bits_per_s * 1e3
}

/// A figure below its physical bound.
#[derive(Debug, Clone, PartialEq)]
pub struct BelowBound {
    pub column: String,
    pub arg_bytes: u64,
    /// The figure, in ms per call as read.
    pub ms_per_call: f64,
    pub bound_ms_per_call: f64,
}

/// The remote (over-the-link) cells of an RPC table whose figures, read as
/// `ms_per_call_of(figure)`, are below the wire time of their call.
/// `rows` are `[arg_bytes, figure per column...]`, `columns` name them
/// (`tcp_remote`, `udp_local`, ...); local columns have no wire and no bound.
pub fn rpc_below_bound(
    columns: &[String],
    rows: &[Vec<f64>],
    ms_per_call_of: impl Fn(f64) -> f64,
    mtu: u64,
    bits_per_s: f64,
) -> Vec<BelowBound> {
    let mut found = Vec::new();
    for row in rows {
        let Some(&size) = row.first() else { continue };
        for (column, &figure) in columns.iter().zip(row).skip(1) {
            let proto = match column.as_str() {
                c if c.starts_with("tcp") => Proto::Tcp,
                c if c.starts_with("udp") => Proto::Udp,
                _ => continue,
            };
            if !column.ends_with("remote") {
                continue;
            }
            let bound = rpc_call_wire_ms(size as u64, proto, mtu, bits_per_s);
            let read = ms_per_call_of(figure);
            if read < bound {
                found.push(BelowBound {
                    column: column.clone(),
                    arg_bytes: size as u64,
                    ms_per_call: read,
                    bound_ms_per_call: bound,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod bounds_tests {
    use super::*;

    const ETHER10: f64 = 10e6;

    #[test]
    fn an_8192_byte_call_needs_its_bytes_on_the_wire() {
        // 8236 bytes of TCP payload in 6 frames of at most 1460, each with
        // 40 bytes of IP and TCP and 38 of Ethernet, plus an 84-byte reply:
        // 8236 + 6 * 78 + 84 = 8788 bytes = 7.03 ms at 10 Mbit/s.
        let ms = rpc_call_wire_ms(8192, Proto::Tcp, 1500, ETHER10);
        assert!((ms - 8788.0 * 8.0 / 1e4).abs() < 1e-9, "{ms}");
        assert!(
            ms > 8192.0 * 8.0 / ETHER10 * 1e3,
            "above the argument alone"
        );
        // A null call over UDP: 40 bytes of RPC header and 8 of UDP in one
        // 68-byte IP packet (86 bytes framed, 106 with preamble and gap),
        // and an 84-byte minimum reply.
        let null = rpc_call_wire_ms(0, Proto::Udp, 1500, ETHER10);
        assert!((null - 190.0 * 8.0 / 1e4).abs() < 1e-9, "{null}");
    }

    #[test]
    fn udp_fragments_carry_the_udp_header_once() {
        // 8192 + 40 + 8 = 8240 bytes of IP payload in fragments of 1480.
        let ms = rpc_call_wire_ms(8192, Proto::Udp, 1500, ETHER10);
        let frames = 8240u64.div_ceil(1480);
        let expected = (8240 + frames * (20 + 38) + 84) as f64 * 8.0 / 1e4;
        assert!((ms - expected).abs() < 1e-9, "{ms} vs {expected}");
    }

    #[test]
    fn the_1989_table_is_physical_only_as_ms_per_call() {
        // The reference file's rows (the report layer reads it; test code may).
        let h = &crate::report::historical::figures().rpc_size_sweep;
        let (columns, rows) = (&h.columns, &h.rows);
        let as_ms_per_100 = rpc_below_bound(columns, rows, |v| v / 100.0, 1500, ETHER10);
        // Every remote figure, TCP and UDP, at every size.
        assert_eq!(as_ms_per_100.len(), 16, "{as_ms_per_100:?}");
        let as_ms_per_call = rpc_below_bound(columns, rows, |v| v, 1500, ETHER10);
        assert!(as_ms_per_call.is_empty(), "{as_ms_per_call:?}");
    }
}

/// Splits a cell's calls into the wire, the kernels' stack, waiting for a
/// CPU, the server's and the client's own work, and the rest (both ends
/// asleep), and names the largest with its fix. `None` for a cell that
/// made no calls. Calls run one at a time, so the parts add up along one
/// path; where both ends' CPU overlapped, `overlap_us` says by how much.
pub fn call_split(params: &RpcParams, result: &RpcResult) -> Option<CallSplit> {
    let client = &result.client;
    let reps = client.rep_seconds.len() as f64;
    let calls = f64::from(params.calls) * reps;
    if calls < 1.0 {
        return None;
    }
    let per_call = |seconds: f64| seconds / calls * 1e6;
    let call_us = per_call(client.rep_seconds.iter().sum());
    let mut missing = Vec::new();
    let (wire_us, propagation_us, wire_from) = wire_per_call(params, result, &mut missing);
    // Empty busy-poll receives are spinning, not the stack's work on a call.
    let spun = if client.syscalls > 0 {
        (client.empty_polls as f64 / client.syscalls as f64).min(1.0)
    } else {
        0.0
    };
    let stack_us = per_call(client.usage.sys_s * (1.0 - spun) + result.server.usage.sys_s);
    let client_us = per_call(client.usage.user_s + client.usage.sys_s * spun);
    let wakeup_us = match (client.run_delay_ns, result.server.run_delay_ns) {
        (Some(c), Some(s)) => Some(per_call((c + s) as f64 / 1e9)),
        _ => {
            missing.push("run delay (schedstat) of an end".into());
            None
        }
    };
    let sleeps = client.usage.voluntary_cs + result.server.usage.voluntary_cs;
    let switches = sleeps + client.usage.involuntary_cs + result.server.usage.involuntary_cs;
    let server_us = if result.server.work_ns == 0 && result.server.calls > 0 {
        missing.push("the server's work (a record from before it was timed)".into());
        None
    } else {
        Some(per_call(result.server.work_ns as f64 / 1e9))
    };
    let counted =
        wire_us + stack_us + wakeup_us.unwrap_or(0.0) + server_us.unwrap_or(0.0) + client_us;
    let waiting_us = (call_us - counted).max(0.0);
    let overlap_us = (counted - call_us).max(0.0);
    let mut split = CallSplit {
        call_us,
        wire_us,
        propagation_us,
        wire_from,
        stack_us,
        wakeup_us,
        switches_per_call: switches as f64 / calls,
        sleeps_per_call: sleeps as f64 / calls,
        server_us,
        client_us,
        waiting_us,
        overlap_us,
        system_calls_per_call: client.syscalls as f64 / calls,
        bound: CallPart::Waiting,
        fix: String::new(),
        missing,
    };
    split.bound = split
        .parts()
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(CallPart::Waiting, |(part, _)| part);
    split.fix = call_fix(&split, params, result);
    Some(split)
}

/// The wire's share of a call: propagation both ways, and serialization of
/// the request and a null reply (and the emulator's own delay) where the
/// link emulator carries them one after the other; where tbf shapes a veth
/// pair, each direction has its own bucket that lets a short burst through
/// at once, so only the busier direction's rate binds a steady run of
/// calls. None on one host; on a real path, the connection's `min_rtt`.
fn wire_per_call(
    params: &RpcParams,
    result: &RpcResult,
    missing: &mut Vec<String>,
) -> (f64, f64, String) {
    use crate::record::testbed::{Placement, Realisation};
    match (&params.placement, &result.link) {
        (Placement::Netns { .. }, Some(facts)) => {
            let link = &facts.profile;
            let propagation = 2.0 * link.delay_us as f64;
            let (request, reply) =
                rpc_call_wire_bytes(params.size as u64, params.proto, link.mtu.into());
            let emulated = facts.realised_by == Realisation::Emulator;
            let on_wire = if emulated {
                request + reply
            } else {
                request.max(reply)
            };
            let serialization = link
                .rate_bps
                .map_or(0.0, |rate| on_wire as f64 * 8.0 / rate as f64 * 1e6);
            let emulator = result
                .emulator
                .as_ref()
                .map_or(0.0, |e| 2.0 * e.overhead_us_p50);
            let from = match (link.rate_bps.is_some(), emulated) {
                (false, _) => "the link's propagation both ways (no rate set)",
                (true, true) => {
                    "the emulated link: propagation both ways, the request and the reply serialized in turn, the emulator's own delay"
                }
                (true, false) => {
                    "tbf on veth: propagation both ways, and the busier direction's bytes at the token rate (a burst passes at once)"
                }
            };
            (
                propagation + serialization + emulator,
                propagation,
                from.into(),
            )
        }
        (Placement::Remote { from, to }, _) if from != to => {
            match result.client.tcp_info.as_ref().and_then(|t| t.min_rtt_us) {
                Some(rtt) => (
                    f64::from(rtt),
                    f64::from(rtt),
                    "the connection's min_rtt (the path and both kernels' turnaround: a bound)"
                        .into(),
                ),
                None => {
                    missing
                        .push("the path's round trip (no link model; UDP has no min_rtt)".into());
                    (0.0, 0.0, "unknown".into())
                }
            }
        }
        _ => (0.0, 0.0, "none: both ends on one host".into()),
    }
}

fn call_fix(split: &CallSplit, params: &RpcParams, result: &RpcResult) -> String {
    let tcp = params.proto == Proto::Tcp;
    let writes = result.client.writes_per_call;
    let sleeps = split.switches_per_call >= 1.0 && params.client.busy_poll_us == 0;
    const WAKE_FIX: &str = "busy-poll (--busy-poll 50) or run both ends on one core (--pin 0,0)";
    match split.bound {
        CallPart::Wire if split.propagation_us * 2.0 >= split.wire_us => {
            "the path's round trip is the call: only fewer round trips help (batch calls, or keep several outstanding)".into()
        }
        CallPart::Wire => {
            "the link's rate is the call (its bytes serialized at the link's rate): a faster link, or fewer bytes per call".into()
        }
        CallPart::Stack if tcp && writes > 1 => format!(
            "{writes} writes per call each cross the kernel: send the call in one write (--strategy writev)"
        ),
        CallPart::Stack if sleeps => format!(
            "each call puts both ends to sleep and wakes them (see switches/call); waking a thread on another core (an IPI, a VM exit when virtualised) is kernel time on the waker's side: {WAKE_FIX}"
        ),
        CallPart::Stack => {
            "the kernels' own work per call: batch several calls per round trip".into()
        }
        CallPart::WakeUps => {
            "the ends waited for a CPU: give each end an idle core (--pin CLIENT,SERVER) or lift the competing load".into()
        }
        CallPart::Server => "the server's procedure is the call: make its work cheaper".into(),
        CallPart::Client if params.client.busy_poll_us > 0 => {
            "the client's busy polling spins through the wait: it buys latency with a core, as intended".into()
        }
        CallPart::Client => "the client's own work per call: build each request once and reuse it".into(),
        CallPart::Waiting => {
            let nagle = tcp && writes > 1 && !params.client.nodelay && !params.client.cork;
            if nagle && result.delayed_acks_per_call >= 0.5 {
                "Nagle holds the call's last write until the server's delayed ACK (see the delayed ACKs per call): set TCP_NODELAY (--nodelay) or send the call in one write (--strategy writev)".into()
            } else if !split.missing.is_empty() {
                "what could not be counted sits here (see \"not counted\"); the rest is both ends asleep".into()
            } else if sleeps {
                format!(
                    "both ends asleep between request and reply, and a wake-up reaches a sleeping core late (an IPI, an idle exit, a VM exit when virtualised): {WAKE_FIX}"
                )
            } else {
                "both ends asleep although the client busy-polls: its poll window is shorter than the reply's time; raise --busy-poll or poll on the server too".into()
            }
        }
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;
    use crate::endpoint::rpc::client::{ClientOptions, Strategy};
    use crate::endpoint::rpc::server::ServerOptions;
    use crate::record::testbed::{LinkFacts, LinkProfile, LinkVia, Placement, Realisation};

    fn cell(placement: Placement, strategy: Strategy, busy_poll_us: u32) -> RpcParams {
        RpcParams {
            size: 4096,
            proto: Proto::Tcp,
            strategy,
            client: ClientOptions {
                busy_poll_us,
                ..ClientOptions::default()
            },
            server: ServerOptions::default(),
            calls: 100,
            reps: 2,
            placement,
            purpose: Purpose::Measure,
            capture_timeline: false,
        }
    }

    /// 200 calls of `call_us` each, `sys_us` of kernel time per call on
    /// each end, two voluntary switches per call.
    fn measured(call_us: f64, sys_us: f64, writes: usize) -> RpcResult {
        let mut result = RpcResult::default();
        result.client.rep_seconds = vec![call_us * 100.0 / 1e6; 2];
        result.client.writes_per_call = writes;
        result.client.syscalls = 200 * (writes as u64 + 1);
        result.client.usage.sys_s = sys_us * 200.0 / 1e6;
        result.client.usage.voluntary_cs = 200;
        result.client.run_delay_ns = Some(200 * 1_000);
        result.server.usage.sys_s = sys_us * 200.0 / 1e6;
        result.server.usage.voluntary_cs = 200;
        result.server.run_delay_ns = Some(0);
        result.server.calls = 200;
        result.server.work_ns = 200 * 500;
        result
    }

    #[test]
    fn parts_are_per_call_and_the_rest_is_both_ends_asleep() {
        let params = cell(Placement::Loopback, Strategy::Writev, 0);
        let split = call_split(&params, &measured(100.0, 20.0, 1)).unwrap();
        assert!((split.call_us - 100.0).abs() < 1e-6, "{split:?}");
        assert!((split.stack_us - 40.0).abs() < 1e-6);
        assert!((split.wakeup_us.unwrap() - 1.0).abs() < 1e-6);
        assert!((split.server_us.unwrap() - 0.5).abs() < 1e-6);
        assert!((split.switches_per_call - 2.0).abs() < 1e-6);
        assert_eq!(split.wire_us, 0.0, "one host: no wire");
        assert!((split.waiting_us - 58.5).abs() < 1e-6);
        assert_eq!(split.bound, CallPart::Waiting);
        assert!(split.fix.contains("--busy-poll"), "{}", split.fix);
        assert!(split.missing.is_empty());
    }

    #[test]
    fn a_stall_behind_delayed_acks_with_two_writes_is_nagle() {
        let params = cell(Placement::Loopback, Strategy::Sun, 0);
        let mut result = measured(40_000.0, 20.0, 2);
        result.delayed_acks_per_call = 1.0;
        let split = call_split(&params, &result).unwrap();
        assert_eq!(split.bound, CallPart::Waiting);
        assert!(split.share() > 0.99);
        assert!(split.fix.contains("--nodelay"), "{}", split.fix);
        // Without the delayed ACKs it is not Nagle.
        result.delayed_acks_per_call = 0.0;
        let split = call_split(&params, &result).unwrap();
        assert!(!split.fix.contains("--nodelay"), "{}", split.fix);
    }

    #[test]
    fn kernel_time_dominates_a_fast_call_and_two_writes_are_the_fix() {
        let params = cell(Placement::Loopback, Strategy::Sun, 0);
        let split = call_split(&params, &measured(30.0, 16.0, 2)).unwrap();
        assert_eq!(split.bound, CallPart::Stack);
        assert!(split.overlap_us > 0.0, "{split:?}");
        assert!(split.share() <= 1.0);
        assert!(split.fix.contains("--strategy writev"), "{}", split.fix);
        let params = cell(Placement::Loopback, Strategy::Writev, 0);
        let split = call_split(&params, &measured(30.0, 16.0, 1)).unwrap();
        assert!(split.fix.contains("--pin 0,0"), "{}", split.fix);
    }

    fn over(link: LinkProfile, realised_by: Realisation) -> (Placement, LinkFacts) {
        let placement = Placement::Netns {
            link: link.clone(),
            via: LinkVia::Auto,
            capture: false,
            pcap: None,
            verbose: false,
        };
        let facts = LinkFacts {
            profile: link,
            realised_by,
            detail: String::new(),
            namespaces: Default::default(),
            interfaces: Default::default(),
            addresses: [std::net::Ipv4Addr::LOCALHOST; 2],
            note: None,
            second_path: None,
        };
        (placement, facts)
    }

    #[test]
    fn a_long_path_is_its_round_trip_and_a_slow_one_its_rate() {
        let (placement, facts) = over(LinkProfile::named("wan").unwrap(), Realisation::Emulator);
        let params = cell(placement, Strategy::Writev, 0);
        let mut result = measured(41_000.0, 20.0, 1);
        result.link = Some(facts);
        let split = call_split(&params, &result).unwrap();
        assert_eq!(split.bound, CallPart::Wire);
        assert_eq!(split.propagation_us, 40_000.0);
        assert!(split.fix.contains("round trip"), "{}", split.fix);

        let (placement, facts) = over(LinkProfile::named("ether10").unwrap(), Realisation::Veth);
        let params = cell(placement, Strategy::Writev, 0);
        let mut result = measured(3_600.0, 20.0, 1);
        result.link = Some(facts);
        let split = call_split(&params, &result).unwrap();
        assert_eq!(split.bound, CallPart::Wire);
        // 4096 bytes in three full-size frames at 10 Mbit/s.
        assert!(
            split.wire_us > 3_300.0 && split.wire_us < 3_600.0,
            "{split:?}"
        );
        assert!(split.fix.contains("link's rate"), "{}", split.fix);
    }

    #[test]
    fn what_could_not_be_read_is_named_not_zero() {
        let params = cell(Placement::Loopback, Strategy::Writev, 0);
        let mut result = measured(100.0, 20.0, 1);
        result.server.run_delay_ns = None;
        result.server.work_ns = 0;
        let split = call_split(&params, &result).unwrap();
        assert_eq!(split.missing.len(), 2, "{:?}", split.missing);
        assert_eq!((split.wakeup_us, split.server_us), (None, None));
        assert_eq!(split.bound, CallPart::Waiting);
        assert!(split.fix.contains("not counted"), "{}", split.fix);
        assert!(call_split(&params, &RpcResult::default()).is_none());
    }
}
