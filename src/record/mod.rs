//! The record: one measurement, self-describing, one line of a JSON Lines file.
//!
//! Every experiment writes [`Record`]s; reports are built from them alone. A
//! record carries what was run (experiment and parameters), where (placement
//! and host facts), when, with which netlab, and what was measured, or why
//! the measurement failed. [`SCHEMA`] is bumped whenever a field changes
//! meaning, so a reader can refuse or adapt to records of another version.
//!
//! This is the envelope, the same for every experiment: `Record<D>` holds
//! an experiment's own data `D` (its parameters and result, defined in its
//! folder, serialized with its name as the `experiment` field), flattened
//! into the line. The registry (`crate::experiments::RecordData`) is the one
//! type that reads any record back.
//!
//! [`RecordWriter`] appends and flushes each record as it completes, so an
//! interrupted sweep keeps everything it finished.

pub mod files;
pub mod profile;
pub mod stats;
pub mod testbed;

use crate::measure::host::HostFacts;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the record layout.
pub const SCHEMA: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record<D> {
    pub schema: u32,
    pub netlab_version: String,
    /// RFC 3339 UTC times of the start and end of this measurement.
    pub started: String,
    pub ended: String,
    /// `loopback` (both ends on this host over 127.0.0.1), `netns`, `remote`.
    pub placement: String,
    /// The controller's host (and, on loopback and netns, both ends').
    pub host: HostFacts,
    /// On a remote placement, each agent the run went through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<testbed::AgentFacts>,
    /// The experiment's part, tagged by its name (`"experiment": "rpc"`).
    #[serde(flatten)]
    pub data: D,
    /// Why the measurement failed; its result is then absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the CPU went over the cell, by layer (`--profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Box<profile::ProfileReport>>,
    /// The cell's key (`crate::controller::resume::CellKey`): a run
    /// killed part-way is finished (`--resume`) without measuring a cell
    /// that has a record again. Absent in records written before
    /// records carried keys: their cells are measured again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
}

impl<D> Record<D> {
    /// A record of this netlab version, ending now.
    pub fn new(
        started: String,
        placement: &str,
        host: &HostFacts,
        data: D,
        error: Option<String>,
    ) -> Record<D> {
        Record {
            schema: SCHEMA,
            netlab_version: env!("CARGO_PKG_VERSION").to_string(),
            started,
            ended: now_rfc3339(),
            placement: placement.into(),
            host: host.clone(),
            agents: Vec::new(),
            data,
            error,
            profile: None,
            cell: None,
        }
    }

    /// The same record holding `f(data)`.
    pub fn map<E>(self, f: impl FnOnce(D) -> E) -> Record<E> {
        Record {
            schema: self.schema,
            netlab_version: self.netlab_version,
            started: self.started,
            ended: self.ended,
            placement: self.placement,
            host: self.host,
            agents: self.agents,
            data: f(self.data),
            error: self.error,
            profile: self.profile,
            cell: self.cell,
        }
    }

    /// A copy holding `data` (a view of this record's as another type).
    pub fn with<E>(&self, data: E) -> Record<E> {
        Record {
            schema: self.schema,
            netlab_version: self.netlab_version.clone(),
            started: self.started.clone(),
            ended: self.ended.clone(),
            placement: self.placement.clone(),
            host: self.host.clone(),
            agents: self.agents.clone(),
            data,
            error: self.error.clone(),
            profile: self.profile.clone(),
            cell: self.cell.clone(),
        }
    }
}

/// Current time as RFC 3339 UTC with microseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// `Ok` when the directory `path` would be created in exists (or is the
/// current one); otherwise that directory, for the error.
pub fn existing_parent(path: &Path) -> Result<(), String> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => Err(dir.display().to_string()),
        _ => Ok(()),
    }
}

/// Appends records to a JSON Lines file, one flushed line each: every
/// experiment's records, and a mesh run's results.
pub struct RecordWriter {
    path: PathBuf,
    file: std::fs::File,
    /// Each line on the disk (`fsync`) before `write` returns.
    durable: bool,
}

impl RecordWriter {
    /// Opens `path` for appending, creating it (and its directory) if needed.
    /// The directory must exist: a mistyped `--out` is refused rather than
    /// made into a new directory the user never sees. A last line torn by
    /// a killed run or a full disk is ended first, so the next record
    /// starts a line of its own (the torn one is skipped on reading).
    pub fn append(path: &Path) -> std::io::Result<RecordWriter> {
        existing_parent(path).map_err(|dir| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the directory {dir} does not exist (netlab does not create it)"),
            )
        })?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if last_byte(path).is_some_and(|b| b != b'\n') {
            file.write_all(b"\n")?;
        }
        Ok(RecordWriter {
            path: path.to_path_buf(),
            file,
            durable: false,
        })
    }

    /// Every line synced to the disk before [`RecordWriter::write_line`]
    /// returns (a mesh run: a line is a test that is never run again).
    pub fn durable(mut self) -> RecordWriter {
        self.durable = true;
        self
    }

    /// Writes any value as one JSON line, flushed (and synced when
    /// [`RecordWriter::durable`]).
    pub fn write_line<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let line = serde_json::to_string(value).map_err(std::io::Error::other)?;
        self.write_str(&line)
    }

    /// Writes a line made already (a serialized record, without its line
    /// break), as [`RecordWriter::write_line`] does. A line with a break in
    /// it is refused: it would be two records' lines, neither one whole.
    pub fn write_str(&mut self, line: &str) -> std::io::Result<()> {
        if line.contains('\n') {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a record's line has a line break in it",
            ));
        }
        let mut line = line.as_bytes().to_vec();
        line.push(b'\n');
        // One write per record: a crash never leaves half a line behind a whole one.
        self.file.write_all(&line)?;
        self.file.flush()?;
        if self.durable {
            self.file.sync_data()?;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The last byte of a file, if it has one.
fn last_byte(path: &Path) -> Option<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(SeekFrom::End(-1)).ok()?;
    let mut byte = [0u8];
    file.read_exact(&mut byte).ok()?;
    Some(byte[0])
}

/// The records of a JSON Lines file that read as `D`'s, and why each
/// other line did not ([`read_records`], split).
pub type ReadRecords<D> = (Vec<Record<D>>, Vec<String>);

/// [`read_records`], split into the records and the reasons the other
/// lines were not read (a line of another experiment's records is one).
pub fn read_records_split<D: serde::de::DeserializeOwned>(
    path: &Path,
) -> std::io::Result<ReadRecords<D>> {
    let mut records = Vec::new();
    let mut unreadable = Vec::new();
    for line in read_records::<D>(path)? {
        match line {
            Ok(record) => records.push(record),
            Err(why) => unreadable.push(why),
        }
    }
    Ok((records, unreadable))
}

/// How many lines of a file did not read as records of this kind, and
/// the first reason; `None` when every line read.
pub fn unreadable_clause(unreadable: &[String]) -> Option<String> {
    let first = unreadable.first()?;
    Some(format!(
        "{} line{} did not read as this experiment's records (the first: {first})",
        unreadable.len(),
        if unreadable.len() == 1 { "" } else { "s" }
    ))
}

/// `--counts-from PATH` for a model: what `usable` makes of the records
/// there. Nothing usable is an error naming `nothing` and the lines that
/// did not read; when some is, the lines skipped are a warning on
/// standard error.
pub fn counts_from<D: serde::de::DeserializeOwned, T>(
    path: &Path,
    usable: impl FnOnce(&[Record<D>]) -> Vec<T>,
    nothing: &str,
) -> Result<Vec<T>, String> {
    let flag = format!("--counts-from {}", path.display());
    let (records, unreadable) =
        read_records_split::<D>(path).map_err(|e| format!("{flag}: {e}"))?;
    let found = usable(&records);
    let skipped = unreadable_clause(&unreadable);
    if found.is_empty() {
        let skipped = skipped.map(|c| format!("; {c}")).unwrap_or_default();
        return Err(format!("{flag}: {nothing}{skipped}"));
    }
    if let Some(skipped) = skipped {
        eprintln!("warning: {flag}: {skipped}");
    }
    Ok(found)
}

/// Reads every record of a JSON Lines file; lines that do not parse (or
/// are not UTF-8, or are too long) are returned as errors with their line
/// number, so a reader can skip them. A file that is not a regular file, or
/// is larger than [`files::MAX_RECORDS_FILE`], is refused whole.
pub fn read_records<D: serde::de::DeserializeOwned>(
    path: &Path,
) -> std::io::Result<Vec<Result<Record<D>, String>>> {
    let lines = files::record_lines(path, "records").map_err(std::io::Error::other)?;
    let records = lines
        .map(|(n, line)| {
            line.and_then(|l| serde_json::from_str(&l).map_err(|e| format!("line {n}: {e}")))
        })
        .collect();
    // A stop cuts the reading short (standard input may be endless): what
    // was read is not the file, so none of it is used.
    crate::measure::stop::check()?;
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines that are not records of the kind asked are counted and the
    /// first named; a file whose every line reads has no clause.
    #[test]
    fn unreadable_lines_are_split_out_and_counted() {
        #[derive(serde::Deserialize, Debug)]
        struct Nothing {}
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "{bad\n\n[1]\n").unwrap();
        let (records, unreadable) = read_records_split::<Nothing>(&path).unwrap();
        assert!(records.is_empty());
        assert_eq!(unreadable.len(), 2, "{unreadable:?}");
        let clause = unreadable_clause(&unreadable).unwrap();
        assert!(
            clause.starts_with(
                "2 lines did not read as this experiment's records (the first: line 1: "
            ),
            "{clause}"
        );
        assert!(
            unreadable_clause(&unreadable[..1])
                .unwrap()
                .starts_with("1 line did not")
        );
        assert_eq!(unreadable_clause(&[]), None);
    }
}
