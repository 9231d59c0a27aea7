//! Records as CSV, one file per experiment, for pandas or a spreadsheet: a
//! row per record, a column per field (nested fields joined with dots,
//! lists kept as JSON).

use super::html::Loaded;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct CsvError {
    path: String,
    #[source]
    source: csv::Error,
}

/// Rows of text as CSV (RFC 4180: a field with a comma, quote or line
/// break quoted, its quotes doubled): a figure's table, a mesh's matrix.
pub fn rows_csv(rows: &[Vec<String>]) -> String {
    let mut out = csv::WriterBuilder::new()
        .flexible(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    for row in rows {
        // Writing to memory cannot fail.
        let _ = out.write_record(row);
    }
    String::from_utf8(out.into_inner().unwrap_or_default()).unwrap_or_default()
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

/// One CSV per experiment of `experiments` present; returns the files written.
pub fn write_csv<D: Serialize>(
    loaded: &Loaded<D>,
    experiments: &[&str],
    dir: &Path,
) -> Result<Vec<PathBuf>, CsvError> {
    let mut written = Vec::new();
    for &experiment in experiments {
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
        let failed = |source| CsvError {
            path: path.display().to_string(),
            source,
        };
        let mut out = csv::Writer::from_path(&path).map_err(failed)?;
        out.write_record(&columns).map_err(failed)?;
        for row in &rows {
            out.write_record(
                columns
                    .iter()
                    .map(|c| row.get(*c).map_or("", |v| v.as_str())),
            )
            .map_err(failed)?;
        }
        out.flush().map_err(|e| failed(e.into()))?;
        written.push(path);
    }
    Ok(written)
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
