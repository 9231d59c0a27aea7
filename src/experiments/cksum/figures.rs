//! The cksum experiment's figures: each variant's GB/s against size, beside
//! the machine's limits.

use crate::experiments::cksum::record::{CksumData, Record};
use crate::report::figures::{Figure, PER_PANEL, Series, Style, by_series, caption};

/// GB/s of every checksum and copy variant vs buffer size (hot buffers),
/// with the read limit and memcpy as the limits they are judged against.
pub fn cksum_speed(records: &[Record]) -> Vec<Figure> {
    let mut points: Vec<(String, f64, f64)> = Vec::new();
    let mut used = Vec::new();
    for record in records {
        let CksumData {
            result: Some(result),
            ..
        } = &record.data
        else {
            continue;
        };
        used.push(record);
        for row in result.rows.iter().filter(|r| !r.cold) {
            points.push((row.variant.clone(), result.size as f64, row.gb_s));
        }
    }
    if points.is_empty() {
        return Vec::new();
    }
    let (mut limits, mut variants): (Vec<Series>, Vec<Series>) = by_series(points)
        .into_iter()
        .partition(|s| s.name.contains("read") || s.name == "memcpy");
    for s in &mut limits {
        s.style = Style::Model;
        s.name = format!("{} (limit)", s.name);
    }
    // Small multiples: one panel per kind (checksum alone, copy and
    // checksum fused, copy alone, encryption), at most four variants each, every one
    // beside the machine's limits: no panel holds more than six lines.
    let kind = |name: &str| {
        if name.starts_with("seal") || name.starts_with("open") {
            "encryption (AEAD sealing and opening in place)"
        } else if name.starts_with("fused") {
            "copy and checksum fused"
        } else if name.starts_with("copy") {
            "copy"
        } else {
            "checksum"
        }
    };
    // A kind's variants side by side, whatever their names' order, the
    // kinds in the order of the table.
    let rank = |name: &str| match kind(name) {
        "checksum" => 0,
        "copy and checksum fused" => 1,
        "copy" => 2,
        _ => 3,
    };
    variants.sort_by_key(|s| rank(&s.name));
    let mut panels: Vec<(&str, Vec<Series>)> = Vec::new();
    for s in variants {
        let k = kind(&s.name);
        match panels.last_mut() {
            Some((last, group)) if *last == k && group.len() < PER_PANEL => group.push(s),
            _ => panels.push((k, vec![s])),
        }
    }
    panels
        .into_iter()
        .enumerate()
        .map(|(i, (k, group))| Figure {
            id: if i == 0 {
                "cksum-speed".into()
            } else {
                format!("cksum-speed-{}", i + 1)
            },
            title: format!("Speed vs buffer size (hot): {k}"),
            x_label: "buffer size (bytes, log)".into(),
            y_label: "speed (bytes per second; 1 GB/s = 10^9)".into(),
            log_x: true,
            // The ciphers run at a tenth of the copy limit and less: on a
            // log axis each one's line stays readable beside it.
            log_y: k.starts_with("encryption"),
            x_unit: crate::report::figures::Unit::Bytes,
            y_unit: crate::report::figures::Unit::Si {
                scale: 1e9,
                symbol: "B/s".into(),
            },
            categories: Vec::new(),
            // An in-place cipher's limit is the copy's, not the read's.
            series: group
                .into_iter()
                .chain(
                    limits
                        .iter()
                        .filter(|l| !k.starts_with("encryption") || l.name.starts_with("memcpy"))
                        .cloned(),
                )
                .collect(),
            marks: Vec::new(),
            caption: caption(&used),
        })
        .collect()
}
