//! The checksum and copy table: ns per KB hot and cold for every variant,
//! against the machine's limits and Van Jacobson's 1988 figures, and his
//! per-packet budget at today's costs.

use crate::experiments::cksum::analysis::{above_limits, results};
use crate::experiments::cksum::record::CksumData;
use crate::experiments::cksum::record::Record;
use crate::experiments::cksum::record::{CksumResult, Kind};
use crate::report::historical;
use crate::report::html::{Parts, ReportSection};
use crate::report::table::{hosts_text, markdown, num};

/// Van Jacobson's µs/KB for a variant, if he gave one.
fn then_us_per_kb(variant: &str) -> Option<f64> {
    let h = &historical::figures().bsd_speedups;
    match variant {
        "naive16" => h.checksum_us_per_kb.first().copied(),
        "wide" | "simd" => h.checksum_us_per_kb.last().copied(),
        "copy-16" => h.copy_us_per_kb.first().copied(),
        "copy-64-unrolled" | "memcpy" => h.copy_us_per_kb.last().copied(),
        "fused-naive16" | "fused-wide" | "fused-simd" => Some(h.copy_and_checksum_fused_us_per_kb),
        _ => None,
    }
}

/// The tables, the historical comparison and the per-packet budget.
/// `netlab cksum --json`: the host's caches (what the cold runs must
/// exceed) and the records.
pub fn doc(caches: &impl serde::Serialize, records: &[Record]) -> serde_json::Value {
    serde_json::json!({ "experiment": "cksum", "caches": caches, "records": records })
}

pub fn table(records: &[Record]) -> String {
    let mut out = String::new();
    let results = results(records);
    if let Some(first) = records.first() {
        out.push_str(&hosts_text(
            first,
            if first.agents.is_empty() {
                "local"
            } else {
                "on the agent below"
            },
        ));
        out.push('\n');
    }
    out.push_str(&format!(
        "caches: {}; SIMD path: {}\n",
        // The machine that measured, not the one printing the report.
        records
            .first()
            .and_then(|r| r.host.caches.as_deref())
            .unwrap_or("not recorded"),
        results.first().map_or("?", |r| r.simd_path.as_str())
    ));
    for result in &results {
        out.push_str(&format!("\n{} bytes:\n", result.size));
        let mut rows = Vec::new();
        for hot in result.rows.iter().filter(|r| !r.cold) {
            let cold = result
                .rows
                .iter()
                .find(|r| r.cold && r.variant == hot.variant);
            let then = then_us_per_kb(&hot.variant);
            rows.push(vec![
                hot.variant.clone(),
                format!(
                    "{} ({}–{})",
                    num(hot.ns_per_kb.median),
                    num(hot.ns_per_kb.min),
                    num(hot.ns_per_kb.max)
                ),
                num(hot.gb_s),
                format!("{:.0}%", 100.0 * hot.fraction_of_limit),
                cold.map_or("-".into(), |c| num(c.ns_per_kb.median)),
                cold.map_or("-".into(), |c| num(c.gb_s)),
                cold.map_or("-".into(), |c| {
                    format!("{:.0}%", 100.0 * c.fraction_of_limit)
                }),
                then.map_or(String::new(), |t| format!("{t}")),
                then.map_or(String::new(), |t| {
                    format!("{}x", num(t * 1000.0 / hot.ns_per_kb.median))
                }),
            ]);
        }
        out.push_str(&markdown(
            &[
                "variant",
                "hot ns/KB (min–max)",
                "hot GB/s",
                "of limit",
                "cold ns/KB",
                "cold GB/s",
                "of limit",
                "1988 µs/KB",
                "faster",
            ],
            &rows,
        ));
    }
    out.push_str("of limit: checksums against the fastest kernel that reads every byte (the read sweep, an OR over every byte, or a checksum), copies and fused copies against the fastest of memcpy, rep movsb and the non-temporal copy, same size and temperature; cold cells walk a shuffled pool larger than the caches, so each meets uncached lines. Over 100% within the batches' spread is noise.\n");
    out.push_str(&above_limits_text(&results));
    out.push_str(&budget(&results));
    out.push_str(&encryption(&results));
    out.push_str(&openssl_text(&results));
    for record in records.iter().filter(|r| r.error.is_some()) {
        out.push_str(&format!(
            "failed: {}\n",
            record.error.as_deref().unwrap_or("")
        ));
    }
    out
}

/// Each cell faster than its own limit, with both ranges, and whether
/// the batches say it is the limit's noise or an error.
fn above_limits_text(results: &[&CksumResult]) -> String {
    let mut out = String::new();
    for result in results {
        for a in above_limits(result) {
            let range = |s: &crate::record::stats::Spread| {
                format!(
                    "{} ns/KB ({}–{} over {} batches)",
                    num(s.median),
                    num(s.min),
                    num(s.max),
                    s.n
                )
            };
            out.push_str(&format!(
                "above its limit: {} ({} B, {}) at {:.0}% of {}: {} against the limit's {}: {}\n",
                a.variant,
                result.size,
                if a.cold { "cold" } else { "hot" },
                100.0 * a.fraction,
                a.limit,
                range(&a.cell),
                range(&a.bound),
                if a.beyond_noise() {
                    "beyond the noise (every batch faster than every batch of the limit): an error in the cell or in what the limit measures"
                } else {
                    "within the noise (the ranges overlap): the limit's own spread, not a faster pass"
                }
            ));
        }
    }
    out
}

/// The result at the size nearest Van Jacobson's packet, and that packet's
/// bytes of data.
fn nearest_packet<'a>(results: &[&'a CksumResult]) -> Option<(&'a CksumResult, f64)> {
    let packet = historical::figures().bsd_speedups.packet_data_bytes as f64;
    let result = results
        .iter()
        .min_by_key(|r| (r.size as f64 - packet).abs() as u64)?;
    Some((result, packet))
}

/// Van Jacobson's per-packet budget for a 1408-byte packet at today's hot costs.
pub fn budget(results: &[&CksumResult]) -> String {
    let h = &historical::figures().bsd_speedups;
    let Some((result, packet)) = nearest_packet(results) else {
        return String::new();
    };
    let best = |kind: Kind| {
        result
            .rows
            .iter()
            .filter(|r| !r.cold && r.kind == kind)
            .min_by(|a, b| a.ns_per_kb.median.total_cmp(&b.ns_per_kb.median))
            .map(|r| (r.variant.clone(), r.ns_per_kb.median))
    };
    let us = |ns_kb: f64| ns_kb * packet / 1024.0 / 1000.0;
    let (Some(copy), Some(sum), Some(fused)) =
        (best(Kind::Copy), best(Kind::Checksum), best(Kind::Fused))
    else {
        return String::new();
    };
    let then = |k: &str| h.per_packet_us.get(k).copied().unwrap_or(0.0);
    format!(
        "per-packet budget, {packet} B of data (costs at {} B, hot): copy {:.3} µs ({}), checksum {:.3} µs ({}), copy+checksum fused {:.3} µs ({}) vs {:.3} µs done apart{}.\n\
         1988 (Sun-3/60): copy {} µs, checksum {} µs, LANCE DMA {} µs, all per-byte work {} µs of a {} µs budget at 10 Mbit/s.\n",
        result.size,
        us(copy.1),
        copy.0,
        us(sum.1),
        sum.0,
        us(fused.1),
        fused.0,
        us(copy.1) + us(sum.1),
        hot_ns_per_kb(result, "naive16").map_or(String::new(), |n| format!(
            "; the 1980s routine (naive16) alone would take {:.3} µs",
            us(n)
        )),
        then("copy"),
        then("checksum"),
        then("lance_dma"),
        then("variable_total"),
        then("budget_at_10mbit"),
    )
}

/// The hot median ns per KB of `variant` in `result`.
fn hot_ns_per_kb(result: &CksumResult, variant: &str) -> Option<f64> {
    result
        .rows
        .iter()
        .find(|r| !r.cold && r.variant == variant)
        .map(|r| r.ns_per_kb.median)
}

/// Today's per-byte line beside 1988's: sealing and opening a packet's
/// data with each AEAD, against the copy and the checksum measured in the
/// same run and Van Jacobson's per-byte work.
pub fn encryption(results: &[&CksumResult]) -> String {
    let h = &historical::figures().bsd_speedups;
    let Some((result, packet)) = nearest_packet(results) else {
        return String::new();
    };
    let seals: Vec<&crate::experiments::cksum::record::Row> = result
        .rows
        .iter()
        .filter(|r| !r.cold && r.kind == Kind::Seal)
        .collect();
    if seals.is_empty() {
        return String::new();
    }
    let us = |ns_kb: f64| ns_kb * packet / 1024.0 / 1000.0;
    let best = |kind: Kind| {
        result
            .rows
            .iter()
            .filter(|r| !r.cold && r.kind == kind)
            .map(|r| r.ns_per_kb.median)
            .min_by(f64::total_cmp)
    };
    let (copy, sum) = (best(Kind::Copy), best(Kind::Checksum));
    let mut out = format!(
        "encryption, {packet} B of data (costs at {} B, hot):",
        result.size
    );
    for seal in &seals {
        let cipher = seal.variant.trim_start_matches("seal-");
        let open = hot_ns_per_kb(result, &format!("open-{cipher}"));
        out.push_str(&format!(
            " {cipher} seals in {:.3} µs{}{};",
            us(seal.ns_per_kb.median),
            open.map_or(String::new(), |o| format!(" and opens in {:.3} µs", us(o))),
            match (copy, sum) {
                (Some(c), Some(s)) => format!(
                    " ({}x the copy, {}x the checksum)",
                    num(seal.ns_per_kb.median / c),
                    num(seal.ns_per_kb.median / s)
                ),
                _ => String::new(),
            }
        ));
    }
    let then = |k: &str| h.per_packet_us.get(k).copied().unwrap_or(0.0);
    out.pop();
    out.push_str(&format!(
        ".\n1988 had no such cost: its per-byte work was the copy ({} µs) and the checksum ({} µs) of a Sun-3/60. Today the cipher is the per-byte cost to cut: a TLS or QUIC stream pays it on both ends, beside the copy, and the checksum that NICs now offload.\n",
        then("copy"),
        then("checksum"),
    ));
    out
}

/// netlab's AEAD timings against `openssl speed -evp -aead` on the same
/// host, hot, with the ratio and whether it is within 10%.
pub fn openssl_text(results: &[&CksumResult]) -> String {
    let mut out = String::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut problems = String::new();
    for result in results {
        let Some(baseline) = &result.openssl else {
            continue;
        };
        if out.is_empty() {
            out.push_str(&format!(
                "\nbeside {} ({}; one run of 1 s a cipher, direction and size, hot buffers):\n",
                if baseline.version.is_empty() {
                    "openssl"
                } else {
                    &baseline.version
                },
                if baseline.command.is_empty() {
                    "openssl speed -mr -elapsed -aead -evp CIPHER [-decrypt]"
                } else {
                    &baseline.command
                },
            ));
        }
        for b in &baseline.rows {
            let variant = format!(
                "{}-{}",
                if b.kind == Kind::Open { "open" } else { "seal" },
                b.cipher
            );
            let Some(ours) = result
                .rows
                .iter()
                .find(|r| !r.cold && r.variant == variant)
                .map(|r| r.ns_per_kb)
            else {
                continue;
            };
            let ratio = ours.median / b.ns_per_kb;
            if let Some(why) =
                super::baseline::explain(&b.cipher, ratio, result.size, &baseline.cpu)
                && !reasons.contains(&why)
            {
                reasons.push(why);
            }
            rows.push(vec![
                result.size.to_string(),
                variant,
                format!("{} ({}–{})", num(ours.median), num(ours.min), num(ours.max)),
                num(b.ns_per_kb),
                format!("{:.2}", ratio),
                if (ratio - 1.0).abs() <= 0.10 {
                    "within 10%".into()
                } else if ratio > 1.0 {
                    format!("netlab {:.0}% slower", 100.0 * (ratio - 1.0))
                } else {
                    format!("netlab {:.0}% faster", 100.0 * (1.0 / ratio - 1.0))
                },
            ]);
        }
        if let Some(problem) = &baseline.problem {
            problems.push_str(&format!("openssl at {} B: {problem}\n", result.size));
        }
    }
    if !rows.is_empty() {
        out.push_str(&markdown(
            &[
                "bytes",
                "variant",
                "netlab ns/KB (min–max)",
                "openssl ns/KB (one run)",
                "netlab/openssl",
                "",
            ],
            &rows,
        ));
    }
    out.push_str(&problems);
    for why in &reasons {
        out.push_str(&format!("why they differ: {why}.\n"));
    }
    if !out.is_empty() {
        out.push_str("netlab times ring (BoringSSL's assembly) on a buffer already in place; openssl -aead times OpenSSL's EVP sequence for a TLS record (a new IV, 13 bytes of additional data, the update and the tag) into a second buffer. At small sizes that per-call setup dominates both; at large ones each is its cipher's assembly on this CPU.\n");
    }
    out
}

/// The cksum section of the report page.
pub struct CksumSection;

impl ReportSection for CksumSection {
    type Data = CksumData;
    const EXPERIMENT: &'static str = "cksum";

    fn parts(records: &[Record]) -> Parts {
        let text = crate::experiments::cksum::report::table(records);
        let results = crate::experiments::cksum::analysis::results(records);
        let mut reading = String::new();
        if let Some(largest) = results.iter().max_by_key(|r| r.size) {
            let best_sum = fastest_checksum(largest, false);
            let memcpy = largest
                .rows
                .iter()
                .find(|r| !r.cold && r.variant == "memcpy");
            if let (Some(sum), Some(copy)) = (best_sum, memcpy) {
                reading = format!(
                    "At {} bytes (hot) the fastest checksum ({}) runs at {:.1} GB/s, {:.0}% of the read limit{}, and memcpy at {:.1} GB/s: a checksum now costs less than a copy, where in 1988 each was a pass over the bytes at about the same cost. The per-packet budget below puts both beside the rest of a packet's cost.",
                    largest.size,
                    sum.variant,
                    sum.gb_s,
                    100.0 * sum.fraction_of_limit,
                    if sum.fraction_of_limit > 1.0 + READ_NOISE {
                        " (the record's read sweep was the slower pass)"
                    } else {
                        ""
                    },
                    copy.gb_s
                );
            }
        }
        if let Some(largest) = results.iter().max_by_key(|r| r.size) {
            let seal = largest
                .rows
                .iter()
                .filter(|r| !r.cold && r.kind == Kind::Seal)
                .max_by(|a, b| a.gb_s.total_cmp(&b.gb_s));
            let sum = fastest_checksum(largest, false);
            if let (Some(seal), Some(sum)) = (seal, sum) {
                reading.push_str(&format!(
                    " The fastest cipher ({}) seals at {:.1} GB/s: {:.0}x the checksum's cost per byte, so on an encrypted stream the cipher, not the checksum or the copy, is the per-byte cost that bounds a core.",
                    seal.variant.trim_start_matches("seal-"),
                    seal.gb_s,
                    sum.gb_s / seal.gb_s
                ));
            }
        }
        (
            "cksum: the Internet checksum and copy costs per KB (1988), and encryption's today"
                .into(),
            text,
            reading,
            crate::experiments::cksum::figures::cksum_speed(records)
                .into_iter()
                .collect(),
        )
    }

    fn cell(data: &CksumData) -> String {
        format!("cksum {} B", data.params.size)
    }

    /// Each variant's time per KB over its batches, hot and cold.
    fn estimates(records: &[Record]) -> Vec<crate::report::caveats::Estimated> {
        let mut out = Vec::new();
        for r in records {
            let Some(result) = r.data.result.as_ref() else {
                continue;
            };
            for row in &result.rows {
                out.push(crate::report::caveats::Estimated {
                    cell: format!(
                        "{} B {} {} ({})",
                        result.size,
                        row.variant,
                        if row.cold { "cold" } else { "hot" },
                        r.placement
                    ),
                    figure: "ns per KB".into(),
                    spread: row.ns_per_kb,
                });
            }
        }
        out
    }

    /// The fastest checksum at the largest size, beside Van Jacobson's
    /// 1988 cost per KB, and whether reading the bytes bounds it.
    fn headline(records: &[Record]) -> Option<crate::report::html::Headline> {
        let results = crate::experiments::cksum::analysis::results(records);
        let largest = results.iter().max_by_key(|r| r.size)?;
        let hot = fastest_checksum(largest, false)?;
        let best_us_per_kb = crate::report::historical::figures()
            .bsd_speedups
            .checksum_us_per_kb
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        Some(crate::report::html::Headline {
            now: format!(
                "{:.1} GB/s ({} {:.1}-{:.1} over {} batches), the {} checksum over {} (hot)",
                hot.gb_s,
                if hot.ns_per_kb.interval.is_some() {
                    "95%"
                } else {
                    "range"
                },
                1024.0 / hot.ns_per_kb.bounds()[1],
                1024.0 / hot.ns_per_kb.bounds()[0],
                hot.ns_per_kb.n,
                hot.variant,
                crate::report::table::bytes(largest.size as u64)
            ),
            then: best_us_per_kb.is_finite().then(|| {
                format!(
                    "1988: {best_us_per_kb:.0} µs per KB ({:.1} MB/s), Sun-3/60 (Van Jacobson)",
                    1024.0 / best_us_per_kb
                )
            }),
            limit: if hot.fraction_of_limit >= READ_BOUND {
                format!(
                    "reading the bytes ({:.0}% of the read limit)",
                    100.0 * hot.fraction_of_limit
                )
            } else {
                format!(
                    "its own arithmetic ({:.0}% of the read limit)",
                    100.0 * hot.fraction_of_limit
                )
            },
        })
    }

    /// At the largest size measured: the fastest checksum hot and cold,
    /// against the read limit (one pass reading every byte). At the limit
    /// the reading of the bytes bounds it; below, its own arithmetic.
    fn limited(records: &[Record]) -> Option<String> {
        let results = crate::experiments::cksum::analysis::results(records);
        let largest = results.iter().max_by_key(|r| r.size)?;
        let hot = fastest_checksum(largest, false)?;
        let said = |row: &crate::experiments::cksum::record::Row, temperature: &str| {
            format!(
                "{temperature}, {} at {:.1} GB/s, {:.0}% of the read limit",
                row.variant,
                row.gb_s,
                100.0 * row.fraction_of_limit
            )
        };
        let mut line = format!(
            "at {} bytes the fastest checksum: {}",
            largest.size,
            said(hot, "hot")
        );
        if let Some(cold) = fastest_checksum(largest, true) {
            line.push_str(&format!("; {}", said(cold, "cold")));
        }
        if hot.fraction_of_limit > 1.0 + READ_NOISE {
            // Records from before the limit was the fastest bounding
            // kernel: their read sweep was the slower pass.
            line.push_str(
                " (its record's read sweep was slower than this checksum, so that limit understates what memory allows)",
            );
        }
        let at_limit = hot.fraction_of_limit >= READ_BOUND;
        line.push_str(if at_limit {
            ": reading the bytes bounds it (nothing left to gain in the sum itself); fold it into the copy, one pass instead of two"
        } else {
            ": below the read limit, its own arithmetic bounds it; a wider or vectorised sum would gain"
        });
        Some(line)
    }
}

/// The fastest checksum of one result at one temperature.
fn fastest_checksum(
    result: &crate::experiments::cksum::record::CksumResult,
    cold: bool,
) -> Option<&crate::experiments::cksum::record::Row> {
    result
        .rows
        .iter()
        .filter(|r| r.kind == crate::experiments::cksum::record::Kind::Checksum && r.cold == cold)
        .max_by(|a, b| a.gb_s.total_cmp(&b.gb_s))
}

/// A checksum at this fraction of the read limit or more is bound by
/// reading the bytes (the rest is the noise between batches).
const READ_BOUND: f64 = 0.8;

/// Above the limit by more than this is not noise.
const READ_NOISE: f64 = 0.05;
