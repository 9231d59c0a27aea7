//! The terminal-output experiment's figures: CPU and segment size per
//! server.

use crate::experiments::output::record::{OutputData, Record};
use crate::report::figures::{Figure, Series, Style, caption};

/// Server CPU per KB and mean segment size per server and protocol.
pub fn output_figures(records: &[Record]) -> Vec<Figure> {
    let cells: Vec<(
        &Record,
        String,
        &crate::experiments::output::record::OutputResult,
    )> = records
        .iter()
        .filter_map(|r| match &r.data {
            OutputData {
                params,
                result: Some(result),
            } => Some((
                r,
                format!(
                    "{} {}{}{}",
                    params.relay.name(),
                    params.protocol.name(),
                    if params.nodelay { " nodelay" } else { "" },
                    if params.placement.name() == "loopback" {
                        ""
                    } else {
                        " netns"
                    }
                ),
                result.as_ref(),
            )),
            _ => None,
        })
        .collect();
    if cells.is_empty() {
        return Vec::new();
    }
    let categories: Vec<String> = cells.iter().map(|c| c.1.clone()).collect();
    let used: Vec<&Record> = cells.iter().map(|c| c.0).collect();
    let index = |i: usize| i as f64;
    let cost = vec![
        Series {
            name: "server µs/KB".into(),
            style: Style::Points,
            points: cells
                .iter()
                .enumerate()
                .map(|(i, c)| (index(i), c.2.server_cpu_us_per_kb))
                .collect(),
        },
        Series {
            name: "client µs/KB".into(),
            style: Style::Points,
            points: cells
                .iter()
                .enumerate()
                .map(|(i, c)| (index(i), c.2.client_cpu_us_per_kb))
                .collect(),
        },
    ];
    let size = vec![Series {
        name: "mean TCP segment (bytes)".into(),
        style: Style::Points,
        points: cells
            .iter()
            .enumerate()
            .map(|(i, c)| (index(i), c.2.mean_segment_bytes.max(1.0)))
            .collect(),
    }];
    vec![
        Figure {
            id: "output-cpu".into(),
            title: "Terminal output: CPU per KB by server".into(),
            x_label: "server and protocol".into(),
            y_label: "CPU time per KB of terminal output (s)".into(),
            log_x: false,
            log_y: false,
            x_unit: crate::report::figures::Unit::Plain,
            y_unit: crate::report::figures::Unit::Seconds { scale: 1e-6 },
            categories: categories.clone(),
            series: cost,
            marks: Vec::new(),
            caption: caption(&used),
        },
        Figure {
            id: "output-segments".into(),
            title: "Terminal output: mean segment size by server (1987: ~100 B)".into(),
            x_label: "server and protocol".into(),
            y_label: "mean TCP segment payload (bytes, log)".into(),
            log_x: false,
            log_y: true,
            x_unit: crate::report::figures::Unit::Plain,
            y_unit: crate::report::figures::Unit::Bytes,
            categories,
            series: size,
            marks: Vec::new(),
            caption: caption(&used),
        },
    ]
}
