//! The cost of each call: a sweep's cost model splits a saturated
//! sender's CPU into its per-call and per-byte parts.

use super::verdict::*;

/// Re-attributes a saturated sender's CPU by a cost model's split of one
/// record's time (`fixed_share`: the per-call part, 0..1): per call when
/// that part is the larger, per byte otherwise. A single run cannot split
/// its own cost, so [`judge`] goes by [`SMALL_RECORD`]; a sweep, which
/// fits the split over sizes, calls this.
pub fn attribute_cpu(verdict: &mut Verdict, fixed_share: f64, record: u64) {
    for limit in &mut verdict.limits {
        if !matches!(limit.factor, Factor::PerCall | Factor::SenderCpu) {
            continue;
        }
        limit
            .evidence
            .insert("model_fixed_share".into(), fixed_share);
        let per_record = limit.evidence.get("cpu_us_per_record").copied();
        if fixed_share >= 0.5 {
            limit.factor = Factor::PerCall;
            limit.fix = format!(
                "{record}-byte writes: the fitted fixed cost per call is {:.0}% of each record's time{}: larger records spread it",
                100.0 * fixed_share,
                per_record.map_or(String::new(), |us| format!(
                    " ({us:.2} µs of CPU per record)"
                ))
            );
        } else if limit.factor == Factor::PerCall {
            limit.factor = Factor::SenderCpu;
            limit.fix = format!(
                "{record}-byte writes: the fitted per-byte cost is {:.0}% of each record's time: the copy dominates; send without it (--strategy sendfile, splice or zerocopy)",
                100.0 * (1.0 - fixed_share)
            );
        }
    }
}
