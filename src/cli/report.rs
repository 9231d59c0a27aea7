//! `netlab report RESULTS.jsonl [-o DIR] [--csv]`: the report of a records
//! file (see [`crate::report::html`]), and with `--csv` one CSV file per
//! experiment for pandas or a spreadsheet: a row per record, a column per
//! field (nested fields joined with dots, lists kept as JSON).

use super::Output;
use crate::report::html::{self, EXPERIMENTS, Loaded};
use anyhow::{Context, bail};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A records file (JSON Lines) written by any netlab experiment or the lab.
    pub records: PathBuf,
    /// Where report.html and the figures go (default: beside the records).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Also write one CSV per experiment (EXPERIMENT.csv) into the directory.
    #[arg(long)]
    pub csv: bool,
}

/// Flattens a JSON value into `prefix.key` columns.
fn flatten(prefix: &str, value: &serde_json::Value, into: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, into);
            }
        }
        serde_json::Value::Null => {
            into.insert(prefix.to_string(), String::new());
        }
        serde_json::Value::String(s) => {
            into.insert(prefix.to_string(), s.clone());
        }
        other => {
            into.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// One CSV per experiment present; returns the files written.
pub fn write_csv(loaded: &Loaded, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for experiment in EXPERIMENTS {
        let rows: Vec<BTreeMap<String, String>> = loaded
            .records
            .iter()
            .map(|r| serde_json::to_value(r).expect("records serialise"))
            .filter(|v| v["experiment"] == experiment)
            .map(|v| {
                let mut row = BTreeMap::new();
                flatten("", &v, &mut row);
                row
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut columns: Vec<&String> = rows.iter().flat_map(|r| r.keys()).collect();
        columns.sort();
        columns.dedup();
        let path = dir.join(format!("{experiment}.csv"));
        let mut out = csv::Writer::from_path(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        out.write_record(&columns)?;
        for row in &rows {
            out.write_record(
                columns
                    .iter()
                    .map(|c| row.get(*c).map_or("", |v| v.as_str())),
            )?;
        }
        out.flush()?;
        written.push(path);
    }
    Ok(written)
}

pub fn run(args: ReportArgs, out: &mut Output) -> anyhow::Result<()> {
    let loaded = html::load(&args.records)
        .with_context(|| format!("cannot read {}", args.records.display()))?;
    let dir = match &args.out_dir {
        Some(dir) => dir.clone(),
        None => args
            .records
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let link = records_link(&args.records, &dir);
    let written = html::write(&loaded, &link, &dir)
        .with_context(|| format!("cannot write the report into {}", dir.display()))?;
    for skipped in &written.skipped {
        eprintln!("skipped {skipped}");
    }
    for e in &written.figure_errors {
        eprintln!("figure not drawn: {e}");
    }
    if args.csv {
        for path in write_csv(&loaded, &dir)? {
            out.text(&format!("csv: {}\n", path.display()))?;
        }
    }
    out.text(&format!(
        "report: {} ({} figures)\n",
        written.html.display(),
        written.figures.len()
    ))?;
    for (i, n) in written.notable.iter().enumerate() {
        out.text(&format!("{}. {n}\n", i + 1))?;
    }
    if loaded.records.is_empty() {
        bail!(
            "{} holds no record this netlab can report ({} line(s) skipped); the report says so",
            args.records.display(),
            loaded.skipped.len()
        );
    }
    Ok(())
}

/// How the report links to the records: relative when beside it.
pub fn records_link(records: &Path, dir: &Path) -> String {
    let records_dir = records.parent().unwrap_or(Path::new(""));
    let same = std::fs::canonicalize(if records_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        records_dir
    })
    .ok()
        == std::fs::canonicalize(dir).ok();
    match (same, records.file_name()) {
        (true, Some(name)) => name.to_string_lossy().into_owned(),
        _ => std::fs::canonicalize(records)
            .unwrap_or_else(|_| records.to_path_buf())
            .display()
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_fields_become_dotted_columns() {
        let v = serde_json::json!({"a": {"b": 1, "c": [1, 2]}, "d": null, "e": "x"});
        let mut row = BTreeMap::new();
        flatten("", &v, &mut row);
        assert_eq!(row["a.b"], "1");
        assert_eq!(row["a.c"], "[1,2]");
        assert_eq!(row["d"], "");
        assert_eq!(row["e"], "x");
    }
}
