//! Cliffs: sizes whose time is far above what the other sizes predict.
//!
//! Method: fit the cost model `time = fixed + per_byte × size`
//! ([`super::costmodel::fit`], weighted for relative error, so a few huge
//! times barely move it), flag every size whose measured time exceeds the
//! model's prediction by [`DEFAULT_FACTOR`] or more, refit on the unflagged
//! sizes, and repeat until the set of flagged sizes stops changing. The
//! relative weighting is what makes this work when the cliff is a step (all
//! sizes above a threshold stall): the stalled points are thousands of times
//! slower and so carry almost no weight in the fit.
//!
//! Why 3×: run-to-run noise of a cell is tens of percent, while the stalls
//! this looks for (Nagle against a delayed ACK) multiply a call's time by 10
//! to 1000; the 1989 document's cliffs were "5 - 10 times slower than
//! expected". 3× is far above the noise and below every real stall.

use super::costmodel::{self, CostModel};
use serde::{Deserialize, Serialize};

pub const DEFAULT_FACTOR: f64 = 3.0;

/// Least time, ms, a stall must add to a call to count. The stalls looked
/// for are timer driven (a 40 ms delayed ACK, a 200 ms retransmission
/// timeout); smaller excursions are scheduling noise on a busy machine.
pub const MIN_STALL_MS: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cliff {
    pub size: f64,
    pub measured: f64,
    pub predicted: f64,
    /// measured / predicted.
    pub ratio: f64,
}

/// Flags the cliffs among `(size, time)` points. Also returns the model of
/// the unflagged points, when there were enough to fit one.
pub fn find_cliffs(points: &[(f64, f64)], factor: f64) -> (Vec<Cliff>, Option<CostModel>) {
    let mut flagged: Vec<bool> = vec![false; points.len()];
    let mut model = None;
    for _ in 0..8 {
        let kept: Vec<(f64, f64)> = points
            .iter()
            .zip(&flagged)
            .filter(|(_, f)| !**f)
            .map(|(p, _)| *p)
            .collect();
        model = costmodel::fit(&kept).or_else(|| {
            // One size left (or all the same size): a flat model at its time.
            kept.first().map(|&(_, t)| CostModel {
                fixed: t,
                per_byte: 0.0,
                r_squared: 1.0,
                max_relative_residual: 0.0,
                points: 1,
            })
        });
        let Some(m) = model else { break };
        let next: Vec<bool> = points
            .iter()
            .map(|&(s, t)| {
                let predicted = m.time(s).max(f64::MIN_POSITIVE);
                t / predicted >= factor
            })
            .collect();
        if next == flagged {
            break;
        }
        flagged = next;
    }
    let cliffs = match model {
        Some(m) => points
            .iter()
            .zip(&flagged)
            .filter(|(_, f)| **f)
            .map(|(&(size, measured), _)| {
                let predicted = m.time(size).max(f64::MIN_POSITIVE);
                Cliff {
                    size,
                    measured,
                    predicted,
                    ratio: measured / predicted,
                }
            })
            .collect(),
        None => Vec::new(),
    };
    (cliffs, model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_1989_tcp_column_flags_4096_and_8192() {
        // TCP local, time for 100 calls (001).
        let points = [
            (0.0, 6.9),
            (512.0, 8.2),
            (1024.0, 10.6),
            (2048.0, 14.9),
            (4000.0, 23.6),
            (4096.0, 174.5),
            (8000.0, 40.2),
            (8192.0, 182.8),
        ];
        let (cliffs, model) = find_cliffs(&points, DEFAULT_FACTOR);
        let sizes: Vec<f64> = cliffs.iter().map(|c| c.size).collect();
        assert_eq!(sizes, vec![4096.0, 8192.0]);
        assert!(cliffs.iter().all(|c| c.ratio > 4.0));
        let m = model.unwrap();
        assert!((m.fixed - 7.0).abs() < 1.0, "{m:?}");
        // And the UDP column has none.
        let udp = [
            (0.0, 5.6),
            (512.0, 6.7),
            (1024.0, 7.9),
            (2048.0, 10.7),
            (4000.0, 15.6),
            (4096.0, 16.1),
            (8000.0, 26.2),
            (8192.0, 26.8),
        ];
        assert!(find_cliffs(&udp, DEFAULT_FACTOR).0.is_empty());
    }

    #[test]
    fn a_step_where_half_the_sizes_stall_is_found() {
        // Linux loopback with the sun strategy: everything above ~3952 bytes stalls ~44 ms.
        let points = [
            (0.0, 3.0),
            (512.0, 3.2),
            (1024.0, 3.3),
            (2048.0, 3.6),
            (4000.0, 4400.0),
            (4096.0, 4410.0),
            (8000.0, 4420.0),
            (8192.0, 4430.0),
        ];
        let (cliffs, _) = find_cliffs(&points, DEFAULT_FACTOR);
        assert_eq!(cliffs.len(), 4);
        assert_eq!(cliffs[0].size, 4000.0);
    }

    #[test]
    fn smooth_and_tiny_inputs_have_no_cliffs() {
        let smooth: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 1000.0, 5.0 + i as f64))
            .collect();
        assert!(find_cliffs(&smooth, DEFAULT_FACTOR).0.is_empty());
        assert!(find_cliffs(&[], DEFAULT_FACTOR).0.is_empty());
        assert!(find_cliffs(&[(1.0, 1.0)], DEFAULT_FACTOR).0.is_empty());
    }
}
