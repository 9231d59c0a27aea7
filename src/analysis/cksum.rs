//! The checksum and copy records, read: the results, and the per-byte
//! costs the per-byte cost split uses.

use crate::record::cksum::{CksumResult, Kind};
use crate::record::{Record, RecordData};

/// The results of the cksum records that measured something.
pub fn results(records: &[Record]) -> Vec<&CksumResult> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Cksum {
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
