//! Finishing a run that was killed part-way (`--resume`): the records an
//! earlier run of the same plan wrote are read back, and each cell the
//! runner is given whose key one of them carries is not measured again;
//! its record is taken from the file instead.
//!
//! Invariants:
//! - a cell's key ([`CellKey`]) is a digest of its experiment's name and
//!   what identifies it (its parameters, and where it runs), stable across
//!   runs and builds: a record carries it as `"cell"`;
//! - only measured records are reused: a cell whose record holds an
//!   error, or records of a netlab that wrote no keys, are measured again;
//! - each stored record is reused at most once, in the order it was
//!   written: a plan that measures the same cell three times (repetitions,
//!   a search's probes) reuses up to three records of it, the first first;
//! - what a run decides once at its start (a sweep's id and copy cost, a
//!   design's seed) is taken from the last record of the earlier run
//!   ([`Resumed::earlier`]), so that the cells are the same cells: a
//!   file holding several runs resumes its last;
//! - a record is reused only for its own experiment's cells (a lab's
//!   file holds them all): the experiment is part of the key, and a record
//!   that does not read as the runner's type is left alone.

use crate::record::Record;
use crate::record::files::{self, FileError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// The records file of a run directory (`netlab lab`'s, a mesh's).
pub const RESULTS: &str = "results.jsonl";

/// A cell's identity across runs: 16 hex digits of the FNV-1a hash of its
/// experiment's name and its canonical JSON (object keys sorted), so that
/// a field's order in the source does not change it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CellKey(String);

impl CellKey {
    /// The key of a cell of `experiment` that `identity` identifies.
    pub fn of(experiment: &str, identity: &impl Serialize) -> CellKey {
        // A value that cannot be JSON (a map with non-string keys) still
        // gets a key: its error's text, the same every run.
        let text = serde_json::to_value(identity)
            .map(|v| v.to_string())
            .unwrap_or_else(|e| e.to_string());
        let named = format!("{experiment}\n{text}");
        CellKey(format!("{:016x}", fnv1a(named.as_bytes())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CellKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// FNV-1a, 64 bits: fixed by its definition, so a key written by one
/// build is the key another computes (std's hasher promises no such thing).
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

/// Why a run cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("--resume {0}: nothing to resume there (no such file or directory)")]
    Missing(String),
    #[error("--resume {dir}: a directory without {RESULTS}: not a run netlab wrote")]
    NotARun { dir: String },
    #[error("--resume: {0}")]
    File(#[from] FileError),
}

/// The records file `--resume PATH` names: PATH itself, or a run
/// directory's [`RESULTS`].
pub fn records_file(path: &Path) -> Result<PathBuf, ResumeError> {
    if path.is_dir() {
        let file = path.join(RESULTS);
        if !file.is_file() {
            return Err(ResumeError::NotARun {
                dir: path.display().to_string(),
            });
        }
        Ok(file)
    } else if path.exists() {
        Ok(path.to_path_buf())
    } else {
        Err(ResumeError::Missing(path.display().to_string()))
    }
}

/// The measured records of an earlier run, by cell key, waiting to be
/// reused.
#[derive(Debug, Default)]
pub struct Resumed {
    path: PathBuf,
    by_key: HashMap<String, VecDeque<serde_json::Value>>,
    /// Measured records with a key, found in the file.
    found: usize,
    /// Every record read, in the file's order (for [`Resumed::earlier`]).
    all: Vec<serde_json::Value>,
    /// Lines that could not be read (torn by the kill, say), with why.
    unreadable: Vec<String>,
}

impl Resumed {
    /// Reads the records file at `path` (see [`records_file`]).
    pub fn read(path: &Path) -> Result<Resumed, ResumeError> {
        let path = records_file(path)?;
        let mut resumed = Resumed {
            path: path.clone(),
            ..Resumed::default()
        };
        for (number, line) in files::record_lines(&path, "records")? {
            let value = line.and_then(|text| {
                serde_json::from_str::<serde_json::Value>(&text)
                    .map_err(|e| format!("line {number}: {e}"))
            });
            match value {
                Ok(value) => resumed.keep(value),
                Err(why) => resumed.unreadable.push(why),
            }
        }
        Ok(resumed)
    }

    /// Reads the records file at `path` as [`Resumed::read`] does, each
    /// line first made current by `upgrade` (an experiment whose older
    /// lines were not records gives them their envelope and key).
    pub fn read_upgrading(
        path: &Path,
        upgrade: &dyn Fn(serde_json::Value) -> serde_json::Value,
    ) -> Result<Resumed, ResumeError> {
        let mut resumed = Resumed::read(path)?;
        let all = std::mem::take(&mut resumed.all);
        resumed.by_key.clear();
        resumed.found = 0;
        all.into_iter().for_each(|r| resumed.keep(upgrade(r)));
        Ok(resumed)
    }

    /// Whether a measured record of `key` waits to be taken.
    pub fn has(&self, key: &CellKey) -> bool {
        self.by_key.get(key.as_str()).is_some_and(|r| !r.is_empty())
    }

    /// Records built in memory (tests of the runner).
    #[cfg(test)]
    pub fn of(records: impl IntoIterator<Item = serde_json::Value>) -> Resumed {
        let mut resumed = Resumed::default();
        records.into_iter().for_each(|r| resumed.keep(r));
        resumed
    }

    fn keep(&mut self, record: serde_json::Value) {
        let measured = record.get("error").is_none_or(serde_json::Value::is_null);
        self.all.push(record.clone());
        let Some(key) = record.get("cell").and_then(|k| k.as_str()) else {
            return;
        };
        if measured {
            self.found += 1;
            self.by_key
                .entry(key.to_string())
                .or_default()
                .push_back(record);
        }
    }

    /// The records file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many measured records with keys the file held.
    pub fn found(&self) -> usize {
        self.found
    }

    /// Lines of the file that could not be read, with why.
    pub fn unreadable(&self) -> &[String] {
        &self.unreadable
    }

    /// What the last record of `experiment` holding `pointer` (a JSON
    /// pointer, `/params/sweep`) holds there, as a `T`: the earlier run's
    /// choice, made again by this one.
    pub fn earlier<T: DeserializeOwned>(&self, experiment: &str, pointer: &str) -> Option<T> {
        self.all
            .iter()
            .rev()
            .filter(|r| r.get("experiment").and_then(|e| e.as_str()) == Some(experiment))
            .find_map(|r| r.pointer(pointer).filter(|v| !v.is_null()))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// The first stored record of `key` that reads as a `Record<D>`,
    /// taken (it is not given again).
    pub fn take<D: DeserializeOwned>(&mut self, key: &CellKey) -> Option<Record<D>> {
        let stored = self.by_key.get_mut(key.as_str())?;
        let (at, record) = stored.iter().enumerate().find_map(|(at, value)| {
            serde_json::from_value::<Record<D>>(value.clone())
                .ok()
                .map(|record| (at, record))
        })?;
        stored.remove(at);
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_is_fixed_by_the_cell_and_not_by_field_order() {
        let a = CellKey::of("rpc", &json!({"size": 4096, "transport": "tcp"}));
        let b = CellKey::of("rpc", &json!({"transport": "tcp", "size": 4096}));
        let c = CellKey::of("rpc", &json!({"size": 4000, "transport": "tcp"}));
        let d = CellKey::of("stream", &json!({"size": 4096, "transport": "tcp"}));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d, "the experiment is part of the key");
        assert_eq!(a.as_str().len(), 16);
        // FNV-1a's published test vector: the key is the same every build.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }

    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    #[serde(tag = "experiment", rename = "example")]
    struct Example {
        size: u32,
    }

    fn stored(
        experiment: &str,
        key: &CellKey,
        size: u32,
        error: Option<&str>,
    ) -> serde_json::Value {
        let mut record = serde_json::to_value(Record::new(
            "t".into(),
            "loopback",
            &crate::measure::host::HostFacts::default(),
            Example { size },
            error.map(String::from),
        ))
        .unwrap();
        record["experiment"] = json!(experiment);
        record["cell"] = json!(key.as_str());
        record
    }

    /// A record that is not an `Example` under the same key.
    fn foreign(key: &CellKey) -> serde_json::Value {
        json!({"schema": 1, "cell": key.as_str(), "experiment": "another", "rate": 9})
    }

    #[test]
    fn measured_records_are_taken_once_each_in_order_and_only_as_their_own_type() {
        let key = CellKey::of("example", &1);
        let other = CellKey::of("example", &2);
        let mut resumed = Resumed::of([
            foreign(&key),
            stored("example", &key, 1, None),
            stored("example", &key, 2, Some("refused")),
            stored("example", &key, 3, None),
            json!({"experiment": "example", "size": 4}),
        ]);
        assert_eq!(
            resumed.found(),
            3,
            "the failure and the keyless record are not reusable"
        );
        let first = resumed.take::<Example>(&key).unwrap();
        assert_eq!(
            first.data.size, 1,
            "a record of another type is passed over"
        );
        assert_eq!(resumed.take::<Example>(&key).unwrap().data.size, 3);
        assert!(
            resumed.take::<Example>(&key).is_none(),
            "each is reused once"
        );
        assert!(resumed.take::<Example>(&other).is_none());
    }

    #[test]
    fn a_path_is_a_records_file_or_a_run_directory_holding_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            records_file(&dir.path().join("gone")),
            Err(ResumeError::Missing(_))
        ));
        assert!(matches!(
            records_file(dir.path()),
            Err(ResumeError::NotARun { .. })
        ));
        std::fs::write(dir.path().join(RESULTS), "{}\nnot json\n").unwrap();
        assert_eq!(records_file(dir.path()).unwrap(), dir.path().join(RESULTS));
        let resumed = Resumed::read(dir.path()).unwrap();
        assert_eq!(resumed.found(), 0);
        assert_eq!(resumed.unreadable().len(), 1, "{:?}", resumed.unreadable());
    }
}
