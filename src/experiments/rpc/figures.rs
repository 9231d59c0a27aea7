//! The rpc experiment's figures: time per call against argument size per
//! column, the cliffs marked with their diagnosis reruns' times.

use crate::experiments::rpc::analysis::{self as rpc, diagnosis_reruns};
use crate::experiments::rpc::record::{Record, RpcData};
use crate::report::figures::{Figure, Mark, Series, Style, caption};

/// Time per call vs argument size per column (TCP/UDP, local/remote),
/// cliffs marked with their diagnosis reruns' times where recorded.
pub fn rpc_time(records: &[Record]) -> Vec<Figure> {
    let measured = rpc::measured_records(records);
    if measured.is_empty() {
        return Vec::new();
    }
    let mut series: Vec<Series> = Vec::new();
    for r in &measured {
        if let RpcData {
            params,
            result: Some(result),
        } = &r.data
        {
            // Log axes cannot show 0 bytes: it is drawn at 1.
            let point = (
                (params.size as f64).max(1.0),
                result.ms_per_100_calls.median / 100.0,
            );
            match series.iter_mut().find(|s| s.name == params.column()) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name: params.column(),
                    style: Style::Measured,
                    points: vec![point],
                }),
            }
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    // The cliffs `netlab rpc` flags (by the median call), with the best
    // time a diagnosis rerun reached.
    let marks: Vec<(String, Mark)> = rpc::flag_cliffs(&measured)
        .into_iter()
        .map(|(column, cliff, params, result)| {
            let fixed = diagnosis_reruns(records, &column, params.size);
            let label = match fixed.iter().map(|r| r.ms_per_call).min_by(f64::total_cmp) {
                Some(ms) => format!(
                    "{column} {} B: {:.1} -> {ms:.2} ms/call fixed",
                    cliff.size, cliff.measured
                ),
                None => format!("{column} {} B: {:.1} ms/call", cliff.size, cliff.measured),
            };
            let mark = Mark {
                x: cliff.size.max(1.0),
                y: result.ms_per_100_calls.median / 100.0,
                label,
            };
            (column, mark)
        })
        .collect();
    let used: Vec<&Record> = measured.iter().collect();
    // One panel per protocol: today's local and remote columns beside
    // 1989's (the document's figures read as ms per call, the one reading
    // its own Ethernet allows), four lines a panel.
    let h = &crate::report::historical::figures().rpc_size_sweep;
    let then = |proto: &str, place: &str| -> Option<Series> {
        let column = format!("{}_{place}", proto.to_ascii_lowercase());
        let index = h.columns.iter().position(|c| *c == column)?;
        Some(Series {
            name: format!("1989 {proto} {place} (Sun-3/60)"),
            style: Style::Model,
            points: h
                .rows
                .iter()
                .filter_map(|row| Some((row.first()?.max(1.0), *row.get(index)?)))
                .collect(),
        })
    };
    ["TCP", "UDP"]
        .into_iter()
        .filter_map(|proto| {
            let now: Vec<Series> = series
                .iter()
                .filter(|s| s.name.starts_with(proto))
                .cloned()
                .collect();
            if now.is_empty() {
                return None;
            }
            let then_series: Vec<Series> = ["local", "remote"]
                .iter()
                .filter_map(|place| then(proto, place))
                .collect();
            Some(Figure {
                id: if proto == "TCP" {
                    "rpc-time".into()
                } else {
                    "rpc-time-udp".into()
                },
                title: format!(
                    "Sun RPC over {proto}: time per call vs argument size, 1989 and now"
                ),
                x_label: "argument size (bytes, log; 0 drawn at 1)".into(),
                y_label: "time per call (ms, log)".into(),
                log_x: true,
                log_y: true,
                categories: Vec::new(),
                series: now.into_iter().chain(then_series).collect(),
                marks: marks
                    .iter()
                    .filter(|(column, _)| column.starts_with(proto))
                    .map(|(_, m)| m.clone())
                    .collect(),
                caption: caption(&used),
            })
        })
        .collect()
}
