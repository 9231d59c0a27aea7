//! The checksum and copy records, read: the results, and the per-byte
//! costs the per-byte cost split uses.

use crate::experiments::cksum::record::CksumData;
use crate::experiments::cksum::record::Record;
use crate::experiments::cksum::record::{CksumResult, Kind, Row};

/// The results of the cksum records that measured something.
/// The kernels that bound each kind, measured at the same size and
/// temperature: for checksums the fastest kernel that reads every byte
/// (the read sweep, and every checksum, since each reads every byte: at
/// 64 MiB the AVX2 checksum's memory-level parallelism outruns the plain
/// OR sweep); for copies and fused copies the best of memcpy, `rep movsb`
/// and the non-temporal copy; for sealing and opening in place, which
/// read and write every byte as a copy does, the same copies.
pub fn bounds(kind: Kind, variant: &str, variant_kind: Kind) -> bool {
    match kind {
        Kind::Checksum | Kind::ReadLimit => {
            matches!(variant_kind, Kind::ReadLimit | Kind::Checksum)
        }
        Kind::Fused | Kind::Copy | Kind::Seal | Kind::Open => COPY_LIMITS.contains(&variant),
    }
}

/// The copies that bound copies and fused copies.
pub const COPY_LIMITS: [&str; 3] = ["memcpy", "copy-rep-movsb", "copy-nontemporal"];

/// A cell whose median is faster than its limit's (the fastest bounding
/// kernel at the same size and temperature): either the limit's noise or
/// an error, and the reader is told which by the two ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct AboveLimit {
    pub variant: String,
    pub cold: bool,
    pub limit: String,
    /// The limit's median time over the cell's: above 1.
    pub fraction: f64,
    /// The cell's and the limit's batches, ns per KB.
    pub cell: crate::record::stats::Spread,
    pub bound: crate::record::stats::Spread,
}

impl AboveLimit {
    /// Every batch of the cell faster than every batch of the limit: the
    /// ranges do not overlap, so noise cannot explain it (an error in the
    /// cell or in what the limit measures).
    pub fn beyond_noise(&self) -> bool {
        self.cell.max < self.bound.min
    }
}

/// The cells of `result` whose median beats their limit's (an empty list:
/// every cell at or below its limit).
pub fn above_limits(result: &CksumResult) -> Vec<AboveLimit> {
    let limit_of = |row: &Row| -> Option<&Row> {
        result
            .rows
            .iter()
            .filter(|r| r.cold == row.cold && bounds(row.kind, &r.variant, r.kind))
            .min_by(|a, b| a.ns_per_kb.median.total_cmp(&b.ns_per_kb.median))
    };
    result
        .rows
        .iter()
        .filter_map(|row| {
            let limit = limit_of(row)?;
            (limit.variant != row.variant && row.ns_per_kb.median < limit.ns_per_kb.median).then(
                || AboveLimit {
                    variant: row.variant.clone(),
                    cold: row.cold,
                    limit: limit.variant.clone(),
                    fraction: limit.ns_per_kb.median / row.ns_per_kb.median,
                    cell: row.ns_per_kb,
                    bound: limit.ns_per_kb,
                },
            )
        })
        .collect()
}

pub fn results(records: &[Record]) -> Vec<&CksumResult> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            CksumData {
                result: Some(result),
                ..
            } => Some(result.as_ref()),
            _ => None,
        })
        .collect()
}

/// The hot cost per byte (ns) of the fastest copy and the fastest checksum
/// at the size nearest `size`.
pub fn per_byte_costs(records: &[Record], size: usize) -> Option<(f64, f64)> {
    let results = results(records);
    let result = results.iter().min_by_key(|r| r.size.abs_diff(size))?;
    let best = |kind: Kind| {
        result
            .rows
            .iter()
            .filter(|r| !r.cold && r.kind == kind)
            .map(|r| r.ns_per_kb.median / 1024.0)
            .min_by(f64::total_cmp)
    };
    Some((best(Kind::Copy)?, best(Kind::Checksum)?))
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use crate::record::stats::Spread;

    fn row(variant: &str, kind: Kind, (min, median, max): (f64, f64, f64)) -> Row {
        Row {
            variant: variant.into(),
            kind,
            cold: false,
            ns_per_kb: Spread {
                min,
                median,
                max,
                n: 5,
                interval: None,
            },
            gb_s: 0.0,
            fraction_of_limit: 0.0,
        }
    }

    #[test]
    fn a_cell_above_its_limit_is_flagged_within_or_beyond_the_noise() {
        let result = CksumResult {
            size: 65536,
            openssl: None,
            simd_path: "avx2".into(),
            rows: vec![
                row("read-limit", Kind::ReadLimit, (10.0, 11.0, 12.0)),
                row("fast-sum", Kind::Checksum, (10.5, 10.8, 11.5)),
                row("magic-sum", Kind::Checksum, (5.0, 6.0, 7.0)),
                row("memcpy", Kind::Copy, (30.0, 31.0, 32.0)),
                row("copy-rep-movsb", Kind::Copy, (20.0, 21.0, 22.0)),
                // Faster than memcpy, not than rep movsb: within its limit.
                row("fused", Kind::Fused, (22.0, 25.0, 27.0)),
            ],
        };
        // A checksum reads every byte: the fastest one is its own kind's
        // limit, and none is above it.
        assert!(above_limits(&result).is_empty());
        let mut faster = result.clone();
        faster
            .rows
            .push(row("copy-magic", Kind::Copy, (5.0, 6.0, 7.0)));
        // A median past the limit's, the ranges overlapping: noise.
        faster
            .rows
            .push(row("fused-near", Kind::Fused, (19.5, 20.5, 21.5)));
        let above = above_limits(&faster);
        assert_eq!(above.len(), 2, "{above:?}");
        assert_eq!(
            (above[0].variant.as_str(), above[0].limit.as_str()),
            ("copy-magic", "copy-rep-movsb")
        );
        assert!(above[0].beyond_noise());
        assert_eq!(above[1].variant, "fused-near");
        assert!(!above[1].beyond_noise());
        assert!((above[1].fraction - 21.0 / 20.5).abs() < 1e-9);
        assert_eq!((above[1].bound.min, above[1].bound.max), (20.0, 22.0));
    }
}
