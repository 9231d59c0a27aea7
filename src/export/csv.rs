//! CSV (RFC 4180: a field with a comma, quote or line break quoted, its
//! quotes doubled): a table of text ([`Table`]: a figure's data, a mesh's
//! matrix), and records, one file per experiment, for pandas or a
//! spreadsheet ([`Records`]: a row per record, a column per field, nested
//! fields joined with dots, lists kept as JSON).

use super::{Export, ExportError};
use crate::record::Record;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rows of text as CSV, each row as long as it is.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    pub rows: &'a [Vec<String>],
}

impl Export for Table<'_> {
    const FORMAT: &'static str = "CSV";
    const MEDIA_TYPE: &'static str = "text/csv; charset=utf-8";

    fn render(&self) -> Result<String, ExportError> {
        let mut out = csv::WriterBuilder::new()
            .flexible(true)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        for row in self.rows {
            out.write_record(row).map_err(rendering)?;
        }
        let bytes = out
            .into_inner()
            .map_err(|e| rendering(e.into_error().into()))?;
        String::from_utf8(bytes).map_err(|e| ExportError::Render {
            format: Self::FORMAT,
            reason: e.to_string(),
        })
    }
}

fn rendering(e: csv::Error) -> ExportError {
    ExportError::Render {
        format: "CSV",
        reason: e.to_string(),
    }
}

/// One experiment's records as CSV: a header of every field any of them
/// has (sorted), then a row each, a field a record lacks left empty.
pub struct Records {
    /// Each record flattened to `column -> value`.
    rows: Vec<BTreeMap<String, String>>,
}

impl Records {
    /// `experiment`'s records among `records`, or none when it has none.
    pub fn of<D: Serialize>(records: &[Record<D>], experiment: &str) -> Option<Records> {
        let rows: Vec<BTreeMap<String, String>> = records
            .iter()
            .map(|r| serde_json::to_value(r).expect("records serialise"))
            .filter(|v| v["experiment"] == experiment)
            .map(|v| {
                let mut row = BTreeMap::new();
                flatten("", &v, &mut row);
                row
            })
            .collect();
        (!rows.is_empty()).then_some(Records { rows })
    }
}

impl Export for Records {
    const FORMAT: &'static str = "CSV";
    const MEDIA_TYPE: &'static str = "text/csv; charset=utf-8";

    fn render(&self) -> Result<String, ExportError> {
        let rows = &self.rows;
        let mut columns: Vec<&String> = rows.iter().flat_map(|r| r.keys()).collect();
        columns.sort();
        columns.dedup();
        let mut table: Vec<Vec<String>> = vec![columns.iter().map(|c| c.to_string()).collect()];
        for row in rows {
            table.push(
                columns
                    .iter()
                    .map(|c| row.get(*c).cloned().unwrap_or_default())
                    .collect(),
            );
        }
        Table { rows: &table }.render()
    }
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

/// One CSV per experiment of `experiments` present, `EXPERIMENT.csv` in
/// `dir`, each written whole; returns the files written.
pub fn write_csv<D: Serialize>(
    records: &[Record<D>],
    experiments: &[&str],
    dir: &Path,
) -> Result<Vec<PathBuf>, ExportError> {
    let mut written = Vec::new();
    for &experiment in experiments {
        let Some(table) = Records::of(records, experiment) else {
            continue;
        };
        let path = dir.join(format!("{experiment}.csv"));
        table.write_to(&path)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_with_a_comma_quote_or_line_break_is_quoted() {
        let rows = vec![
            vec!["a".to_string(), "b,c".to_string()],
            vec![
                "say \"hi\"".to_string(),
                "two\nlines".to_string(),
                "x".to_string(),
            ],
        ];
        assert_eq!(
            Table { rows: &rows }.render().unwrap(),
            "a,\"b,c\"\n\"say \"\"hi\"\"\",\"two\nlines\",x\n"
        );
    }

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
