//! Figures derived from one bulk transfer's raw measurements, and the rule
//! that names the bottleneck.
//!
//! Units: MB/s is 10⁶ bytes per second and Mbit/s 10⁶ bits per second (as
//! network engineers and iperf3 count link rates); a KB in "µs CPU per KB"
//! is 1024 bytes, the unit of Van Jacobson's per-KB costs.

use crate::record::stats::Spread;
use crate::record::stream::EndpointReport;
pub use crate::record::stream::{Bottleneck, StreamFigures};
use crate::record::{Record, RecordData};

/// CPU utilisation (CPU seconds over wall seconds) above which a side counts
/// as saturated. Below 100% because a saturated process still blocks briefly
/// (for instance while the peer drains a full socket buffer).
pub const SATURATED: f64 = 0.85;

/// Names the bottleneck from each side's CPU utilisation (0..1 or a little
/// above, for processes whose softirq work is charged to them). The busier
/// side wins when both are saturated.
pub fn bottleneck(sender_util: f64, receiver_util: f64) -> Bottleneck {
    if sender_util.max(receiver_util) < SATURATED {
        Bottleneck::Neither
    } else if sender_util >= receiver_util {
        Bottleneck::Sender
    } else {
        Bottleneck::Receiver
    }
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 { num / den } else { 0.0 }
}

/// Derives the printed figures from both endpoints' reports.
pub fn figures(sender: &EndpointReport, receiver: &EndpointReport, record: u64) -> StreamFigures {
    let bytes = receiver.bytes as f64;
    let rate = ratio(bytes, receiver.wall_s);
    let kb = bytes / 1024.0;
    let sender_util = ratio(sender.usage.cpu_s(), sender.wall_s);
    let receiver_util = ratio(receiver.usage.cpu_s(), receiver.wall_s);
    let data_segments = sender
        .tcp_info
        .as_ref()
        .and_then(|t| t.data_segs_out)
        .map(u64::from);
    let records = (sender.bytes as f64 / record.max(1) as f64).ceil();
    StreamFigures {
        throughput_mb_s: rate / 1e6,
        throughput_mbit_s: rate * 8.0 / 1e6,
        sender_cpu_pct: 100.0 * sender_util,
        receiver_cpu_pct: 100.0 * receiver_util,
        sender_us_per_kb: ratio(sender.usage.cpu_s() * 1e6, kb),
        receiver_us_per_kb: ratio(receiver.usage.cpu_s() * 1e6, kb),
        bottleneck: bottleneck(sender_util, receiver_util),
        data_segments,
        mean_segment_bytes: data_segments.filter(|&n| n > 0).map(|n| bytes / n as f64),
        us_per_record: ratio(sender.wall_s * 1e6, records),
    }
}

/// min/median/max of the headline figures over the runs.
pub fn summary_json(records: &[Record]) -> serde_json::Value {
    let results: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Stream {
                result: Some(result),
                ..
            } => Some(result),
            _ => None,
        })
        .collect();
    let spread = |f: &dyn Fn(&crate::record::StreamResult) -> f64| {
        Spread::of(&results.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    serde_json::json!({
        "runs": results.len(),
        "throughput_mb_s": spread(&|r| r.figures.throughput_mb_s),
        "throughput_mbit_s": spread(&|r| r.figures.throughput_mbit_s),
        "sender_us_per_kb": spread(&|r| r.figures.sender_us_per_kb),
        "receiver_us_per_kb": spread(&|r| r.figures.receiver_us_per_kb),
        "sender_cpu_pct": spread(&|r| r.figures.sender_cpu_pct),
        "receiver_cpu_pct": spread(&|r| r.figures.receiver_cpu_pct),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{rusage::ProcessUsage, tcpinfo::TcpInfo};

    #[test]
    fn bottleneck_rule() {
        assert_eq!(bottleneck(0.99, 0.6), Bottleneck::Sender);
        assert_eq!(bottleneck(0.7, 0.95), Bottleneck::Receiver);
        assert_eq!(bottleneck(1.0, 1.02), Bottleneck::Receiver);
        assert_eq!(bottleneck(0.3, 0.2), Bottleneck::Neither);
    }

    #[test]
    fn figures_from_reports() {
        let sender = EndpointReport {
            bytes: 4 << 20,
            wall_s: 2.0,
            usage: ProcessUsage {
                user_s: 0.5,
                sys_s: 1.5,
                ..Default::default()
            },
            tcp_info: Some(TcpInfo {
                data_segs_out: Some(4096),
                ..Default::default()
            }),
            ..Default::default()
        };
        let receiver = EndpointReport {
            bytes: 4 << 20,
            wall_s: 2.0,
            usage: ProcessUsage {
                user_s: 0.2,
                sys_s: 0.4,
                ..Default::default()
            },
            ..Default::default()
        };
        let f = figures(&sender, &receiver, 1024);
        assert!((f.throughput_mb_s - 4194304.0 / 2.0 / 1e6).abs() < 1e-9);
        assert!((f.throughput_mbit_s - 8.0 * f.throughput_mb_s).abs() < 1e-9);
        assert!((f.sender_cpu_pct - 100.0).abs() < 1e-9);
        assert!((f.receiver_cpu_pct - 30.0).abs() < 1e-9);
        assert!((f.sender_us_per_kb - 2e6 / 4096.0).abs() < 1e-9);
        assert_eq!(f.bottleneck, Bottleneck::Sender);
        assert_eq!(f.mean_segment_bytes, Some(1024.0));
        assert!((f.us_per_record - 2e6 / 4096.0).abs() < 1e-9);
    }

    #[test]
    fn empty_reports_give_zeros_not_nan() {
        let f = figures(&EndpointReport::default(), &EndpointReport::default(), 0);
        let json = serde_json::to_string(&f).unwrap();
        assert!(!json.contains("null") || json.contains("\"data_segments\":null"));
        assert_eq!(f.throughput_mb_s, 0.0);
        assert_eq!(f.bottleneck, Bottleneck::Neither);
    }
}
