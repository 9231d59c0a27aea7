//! Turning a stalled cell and its reruns into a cause in plain words.
//!
//! Inputs are measurements only: the stalled cell's time per call, how many
//! `write(2)`s its request took, the delayed ACKs the server's kernel counted
//! per call, and the time per call when the same cell was rerun with one
//! thing changed (TCP_NODELAY on the client, TCP_QUICKACK on the server, the
//! request in one `writev`). A change "fixes" the stall when it makes the
//! call at least [`FIXED_FACTOR`] times faster.

use serde::{Deserialize, Serialize};

pub const FIXED_FACTOR: f64 = 3.0;

/// The same cell, rerun with one change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rerun {
    /// e.g. "TCP_NODELAY on the client".
    pub change: String,
    pub ms_per_call: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// One or two sentences naming the cause.
    pub cause: String,
    /// Time per call the stall adds, ms (stalled minus best fixed).
    pub stall_ms_per_call: f64,
    /// The changes that removed the stall, with before and after ms per call.
    pub fixes: Vec<(String, f64, f64)>,
    pub reruns: Vec<Rerun>,
}

/// Diagnoses a stalled cell.
pub fn diagnose(
    ms_per_call: f64,
    writes_per_call: usize,
    delayed_acks_per_call: f64,
    reruns: &[Rerun],
) -> Diagnosis {
    let fixes: Vec<(String, f64, f64)> = reruns
        .iter()
        .filter(|r| r.ms_per_call > 0.0 && ms_per_call / r.ms_per_call >= FIXED_FACTOR)
        .map(|r| (r.change.clone(), ms_per_call, r.ms_per_call))
        .collect();
    let best = fixes.iter().map(|f| f.2).fold(f64::INFINITY, f64::min);
    let stall = if best.is_finite() {
        ms_per_call - best
    } else {
        0.0
    };
    let fixed_by = |word: &str| fixes.iter().any(|f| f.0.contains(word));
    let evidence = if delayed_acks_per_call >= 0.5 {
        format!(
            " The server's kernel counted {delayed_acks_per_call:.2} delayed ACKs per call (TcpExt.DelayedACKs)."
        )
    } else {
        String::new()
    };
    let fix_list = fixes
        .iter()
        .map(|f| format!("{} ({:.2} -> {:.3} ms per call)", f.0, f.1, f.2))
        .collect::<Vec<_>>()
        .join("; ");
    let cause = if (fixed_by("NODELAY") || fixed_by("writev")) && writes_per_call >= 2 {
        format!(
            "The request leaves in {writes_per_call} writes; Nagle holds the last one until the first is acknowledged, and the server, holding an incomplete record, delays that ACK: about {stall:.0} ms per call.{evidence} Fixed by: {fix_list}."
        )
    } else if fixed_by("QUICKACK") {
        format!(
            "The server's delayed ACK holds the exchange: about {stall:.0} ms per call.{evidence} Fixed by: {fix_list}."
        )
    } else if !fixes.is_empty() {
        format!("About {stall:.0} ms per call is lost. Fixed by: {fix_list}.{evidence}")
    } else {
        format!(
            "No rerun removed the extra time ({ms_per_call:.2} ms per call); it is not Nagle against a delayed ACK.{evidence}"
        )
    };
    Diagnosis {
        cause,
        stall_ms_per_call: stall,
        fixes,
        reruns: reruns.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rerun(change: &str, ms: f64) -> Rerun {
        Rerun {
            change: change.into(),
            ms_per_call: ms,
        }
    }

    #[test]
    fn nagle_against_delayed_ack() {
        let d = diagnose(
            44.0,
            2,
            1.0,
            &[
                rerun("TCP_NODELAY on the client", 0.05),
                rerun("TCP_QUICKACK on the server", 0.06),
                rerun("one writev", 0.05),
            ],
        );
        assert!(d.cause.contains("Nagle"), "{}", d.cause);
        assert!(d.cause.contains("1.00 delayed ACKs per call"));
        assert!(d.cause.contains("about 44 ms per call"));
        assert_eq!(d.fixes.len(), 3);
        assert!((d.stall_ms_per_call - 43.95).abs() < 1e-9);
    }

    #[test]
    fn only_quickack_helps() {
        let d = diagnose(
            40.0,
            1,
            1.0,
            &[
                rerun("TCP_NODELAY on the client", 40.0),
                rerun("TCP_QUICKACK on the server", 0.1),
            ],
        );
        assert!(
            d.cause.starts_with("The server's delayed ACK"),
            "{}",
            d.cause
        );
    }

    #[test]
    fn nothing_helps() {
        let d = diagnose(10.0, 1, 0.0, &[rerun("TCP_NODELAY on the client", 9.0)]);
        assert!(d.cause.contains("not Nagle"), "{}", d.cause);
        assert!(d.fixes.is_empty());
        assert_eq!(d.stall_ms_per_call, 0.0);
    }
}
