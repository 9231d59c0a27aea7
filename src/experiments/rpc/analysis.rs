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
use crate::experiments::rpc::record::{Purpose, RpcParams, RpcResult};
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

/// The least time (ms) one call of `arg_bytes` can take over a link of
/// `bits_per_s` and `mtu`: its request and a null reply on the wire.
pub fn rpc_call_wire_ms(arg_bytes: u64, proto: Proto, mtu: u64, bits_per_s: f64) -> f64 {
    let record_mark = match proto {
        Proto::Tcp => 4,
        Proto::Udp => 0,
    };
    let request = wire_bytes(arg_bytes + RPC_CALL_HEADER + record_mark, proto, mtu);
    // The reply: a minimum frame at least.
    let reply = ETHERNET_MIN_FRAME + 8 + 12;
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
