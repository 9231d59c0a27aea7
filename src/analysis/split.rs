//! How much of a transfer's per-byte cost is copying and checksumming.
//!
//! The stream sweep fits `time per record = fixed + per_byte × size`; the
//! cksum experiment measures what one copy and one checksum of a byte cost
//! on the same CPU. On loopback TCP copies every byte twice (into the
//! sender's socket buffer, out to the receiver) and checksums it zero times
//! (loopback packets are marked as already verified); over a real NIC with
//! checksum offload it is the same, without offload one checksum more.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostSplit {
    pub per_byte_ns: f64,
    pub copy_ns: f64,
    pub checksum_ns: f64,
    /// The rest: buffer management, page handling, cache misses, ...
    pub other_ns: f64,
}

/// Splits `per_byte_ns` given the cost of one copy and one checksum per
/// byte and how many of each the path does.
pub fn split(
    per_byte_ns: f64,
    copy_ns: f64,
    checksum_ns: f64,
    copies: u32,
    checksums: u32,
) -> CostSplit {
    let copy = copy_ns * f64::from(copies);
    let sum = checksum_ns * f64::from(checksums);
    CostSplit {
        per_byte_ns,
        copy_ns: copy,
        checksum_ns: sum,
        other_ns: per_byte_ns - copy - sum,
    }
}

impl CostSplit {
    pub fn describe(&self) -> String {
        let pct = |v: f64| {
            if self.per_byte_ns > 0.0 {
                100.0 * v / self.per_byte_ns
            } else {
                0.0
            }
        };
        format!(
            "per-byte cost {:.3} ns: copying {:.3} ns ({:.0}%), checksumming {:.3} ns ({:.0}%), the rest {:.3} ns ({:.0}%)",
            self.per_byte_ns,
            self.copy_ns,
            pct(self.copy_ns),
            self.checksum_ns,
            pct(self.checksum_ns),
            self.other_ns,
            pct(self.other_ns)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_describes() {
        let s = split(0.25, 0.05, 0.03, 2, 0);
        assert!((s.copy_ns - 0.10).abs() < 1e-12);
        assert_eq!(s.checksum_ns, 0.0);
        assert!((s.other_ns - 0.15).abs() < 1e-12);
        assert_eq!(
            s.describe(),
            "per-byte cost 0.250 ns: copying 0.100 ns (40%), checksumming 0.000 ns (0%), the rest 0.150 ns (60%)"
        );
    }
}
