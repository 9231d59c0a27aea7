//! The thresholds the verdict's families read their evidence against, each
//! with why it sits where it does, and how a buffer size is written.

/// A side whose CPU was busy at least this fraction of the run is
/// saturated (one transfer thread on one core).
pub const SATURATED: f64 = 0.85;

/// A side that waited for a CPU at least this share of the run (the
/// scheduler's run delay) lost a fifth of its time to other work.
pub const CONTENDED: f64 = 0.2;

/// A side on a CPU budget whose cgroup throttled it at least this share of
/// the run was held back by its budget: the kernel says so directly,
/// whatever the other side's load (a busy host slows the other side too).
pub const THROTTLED: f64 = 0.1;

/// A link whose payload rate is within this fraction of its rate, or
/// whose wire was busy at least this fraction of the run, is full.
pub const LINK_FULL: f64 = 0.85;

/// Queueing delay is named when it is at least this share of the
/// smoothed RTT (and at least [`QUEUE_MIN_MS`]).
pub const QUEUE_SHARE: f64 = 0.2;
pub const QUEUE_MIN_MS: f64 = 1.0;

/// Records this small or smaller cost about as much per call as per
/// byte: a system call and a wake-up are of the order of a microsecond on
/// current x86, a copy a few tenths of a nanosecond per byte (see
/// `netlab cksum`), so below about 16 KB the per-call cost is at least a
/// third of the whole and shrinking it is the first fix.
pub const SMALL_RECORD: u64 = 16 * 1024;

/// The share of a socket's reported buffer that holds data: the kernel
/// doubles what was asked for its bookkeeping (socket(7)) and advertises
/// about half the receive buffer as window (`tcp_adv_win_scale`, or the
/// measured `scaling_ratio` since 6.7, up to about 0.9).
pub const WINDOW_OF_BUFFER: f64 = 0.5;

/// A flow within this fraction of a window's rate is at that window.
pub const AT_WINDOW: f64 = 0.8;

/// A congestion window whose rate (cwnd × MSS / smoothed RTT) exceeds
/// the delivered rate by more than this did not bind.
pub const WINDOW_SLACK: f64 = 1.5;

/// Mathis et al.'s constant for periodic loss with delayed ACKs off, √(3/2).
pub const MATHIS_C: f64 = 1.224_744_871;

/// Bytes as people read a buffer size: 152 KB, 5.7 MB.
pub(super) fn mb(bytes: f64) -> String {
    let bytes = bytes.max(0.0);
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MB", bytes / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KB", (bytes / 1024.0).ceil())
    }
}
