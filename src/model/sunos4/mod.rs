//! Sun RPC over TCP on SunOS 4 (1989): why 4096 and 8192 bytes stalled
//! while 4000 and 8000 did not (`001_a2ff8248013a620f.txt`).
//!
//! A deterministic discrete-event simulation of one RPC client calling a
//! null procedure with an `opaque<>` argument of N bytes, over the kernel
//! rules that decide when bytes move: `sosend` filling the 4096-byte send
//! buffer, Nagle's rule in `tcp_output`, the receiver's window updates and
//! its 200 ms delayed ACK, and Sun's `xdrrec` writing a record in
//! 4000-byte fragments. The rules are read from SunOS 4.1.3's sources, the
//! nearest published relative of the SunOS 4.0.1 the table was measured on
//! (Van Jacobson, 1988, `003_aac813b9b3bf47d2.txt`: SunOS 4.0 is Sun's
//! upgrade to 4.3BSD's network code); each constant below names its file.
//!
//! The mechanism it finds: a call's last `write` that does not fit the
//! send buffer behind the 4000-byte fragment still in flight is split by
//! `sosend` (what fits, then the rest after the window-update ACK); the
//! rest is less than a segment with data unacknowledged, so Nagle holds
//! it, and the server, which needs it to finish the record, owes only a
//! delayed ACK: the call waits for `tcp_fasttimo`. A last write of a
//! cluster (1024 bytes) or more is not split: `sosend` sleeps until the
//! buffer has a cluster's room and sends it whole to an idle connection.
//!
//! Time: each host's CPU is one queue of work. Per packet a fixed cost and
//! the checksum, per byte copied between user and kernel the copy: Van
//! Jacobson's Sun-3 figures (1988). The wire is 10 Mbit/s Ethernet with
//! its preamble, inter-frame gap and minimum frame. On one host (local)
//! the running process keeps the CPU until it sleeps, and loopback
//! packets are taken in right after the protocol call that sent them (the
//! software interrupt runs when `splx` lowers the priority).
//! What the model leaves out is said where its figures are shown: the RPC
//! library's own CPU (XDR, `select`, the scheduler), retransmission,
//! persist and slow start (no loss; see [`tcp`]).

mod call;
pub mod consts;
mod sim;
pub mod tcp;

pub use call::{MAX_ARG_BYTES, Placement, call_writes};
pub use sim::{Call, End, SimError, Trace, TraceEvent, simulate};

/// The model's figures for one argument size.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Prediction {
    pub arg_bytes: u64,
    pub placement: Placement,
    /// Mean time per call over the measured calls.
    pub ms_per_call: f64,
    /// Calls (of the measured ones) that waited for the delayed-ACK timer.
    pub stalled_calls: u32,
    pub measured_calls: u32,
    /// The `write`s of each call.
    pub writes: Vec<u64>,
}

impl Prediction {
    pub fn stalls(&self) -> bool {
        self.stalled_calls > 0
    }
}

/// Calls simulated before measuring: the first call starts against idle
/// timers; from the second on, each call finds the state the previous one
/// left.
const WARMUP_CALLS: u32 = 2;
/// Calls measured.
pub const MEASURED_CALLS: u32 = 6;

/// The model's time per call and stalls for `arg_bytes` at `placement`.
pub fn predict(arg_bytes: u64, placement: Placement) -> Result<Prediction, SimError> {
    let calls = simulate(arg_bytes, placement, WARMUP_CALLS + MEASURED_CALLS, None)?;
    let measured = &calls[WARMUP_CALLS as usize..];
    let total_ns: u64 = measured.iter().map(|c| c.end_ns - c.start_ns).sum();
    Ok(Prediction {
        arg_bytes,
        placement,
        ms_per_call: total_ns as f64 / measured.len() as f64 / 1e6,
        stalled_calls: measured.iter().filter(|c| c.timer_acks > 0).count() as u32,
        measured_calls: measured.len() as u32,
        writes: call_writes(arg_bytes),
    })
}

/// The 1989 table's two columns.
pub const PLACEMENTS: [Placement; 2] = [Placement::Local, Placement::Remote];

/// Both columns' predictions for each of `sizes` (each at most
/// [`MAX_ARG_BYTES`]).
pub fn predict_table(sizes: &[u64]) -> Result<Vec<Prediction>, SimError> {
    if let Some(&big) = sizes.iter().find(|&&s| s > MAX_ARG_BYTES) {
        return Err(SimError::TooLarge(big));
    }
    sizes
        .iter()
        .flat_map(|&size| PLACEMENTS.map(|p| predict(size, p)))
        .collect()
}

/// One column's slow argument sizes, as inclusive ranges.
pub type SlowRanges = (Placement, Vec<(u64, u64)>);

/// Both columns' slow ranges in `lo..=hi` (at most [`MAX_ARG_BYTES`]).
pub fn slow_ranges_table(lo: u64, hi: u64) -> Result<Vec<SlowRanges>, SimError> {
    if hi > MAX_ARG_BYTES || lo > hi {
        return Err(SimError::BadRange(lo, hi));
    }
    PLACEMENTS
        .into_iter()
        .map(|p| Ok((p, slow_ranges(lo, hi, p)?)))
        .collect()
}

/// The argument sizes in `lo..=hi` whose calls stall, as inclusive ranges.
pub fn slow_ranges(lo: u64, hi: u64, placement: Placement) -> Result<Vec<(u64, u64)>, SimError> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut size = lo;
    while size <= hi {
        // Sizes that pad to the same multiple of 4 make the same writes.
        let padded_end = (size.div_ceil(4) * 4).min(hi).max(size);
        if predict(size, placement)?.stalls() {
            match ranges.last_mut() {
                Some(last) if last.1 + 1 == size => last.1 = padded_end,
                _ => ranges.push((size, padded_end)),
            }
        }
        size = padded_end + 1;
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests;
