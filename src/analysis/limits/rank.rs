//! How a verdict's factors are merged and ordered.

use super::verdict::*;

/// Largest share first; factors under 1% of the run are left out unless
/// nothing else is left; queueing delay is never the primary factor: it
/// says how a bottleneck held the flow, not what the bottleneck was.
pub(super) fn rank(verdict: &mut Verdict) {
    let mut merged: Vec<Limit> = Vec::new();
    for limit in verdict.limits.drain(..) {
        match merged.iter_mut().find(|m| m.factor == limit.factor) {
            Some(same) => same.share = (same.share + limit.share).min(1.0),
            None => merged.push(limit),
        }
    }
    verdict.limits = merged;
    verdict.limits.sort_by(|a, b| b.share.total_cmp(&a.share));
    if verdict.limits.len() > 1 {
        let first = verdict.limits[0].clone();
        verdict.limits.retain(|l| l.share >= 0.01);
        if verdict.limits.is_empty() {
            verdict.limits.push(first);
        }
    }
    if verdict.limits.len() > 1 && verdict.limits[0].factor == Factor::QueueingDelay {
        verdict.limits.swap(0, 1);
    }
}
