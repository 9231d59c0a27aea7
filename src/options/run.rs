//! What every experiment's command shares: where its records go, how it
//! prints, whether it stops at the first failed cell; and the steps around
//! its grid, the same for every experiment ([`RunOptions::measure`]: open
//! the records file, make the runner, print the JSON document or the text,
//! fail when no cell measured anything).

use crate::controller::runner::Runner;
use crate::measure::host::HostFacts;
use crate::options::Output;
use crate::record::{Record, RecordWriter};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct RunOptions {
    /// JSON Lines file the records are appended to.
    #[arg(long, default_value = "netlab-results.jsonl", value_name = "FILE")]
    pub out: PathBuf,
    /// Finish a run of this command that was stopped part-way: FILE (or a
    /// run directory's results.jsonl) holds its records; a cell it
    /// measured is not measured again (its record is reused), the others
    /// are measured and appended to FILE. Give the same arguments again.
    #[arg(long, value_name = "FILE|DIR", conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Stop at the first failed cell (it is recorded); by default a failed
    /// cell is recorded with its reason and the rest go on.
    #[arg(long)]
    pub fail_fast: bool,
    /// Sample every CPU while each cell runs (perf_event_open, cpu-clock,
    /// kernel call chains) and keep where the CPU went, by layer (TCP, IP,
    /// link, checksum, copy, ...), in each record. Needs root.
    #[arg(long)]
    pub profile: bool,
    /// Fail a cell when its bytes stop moving for this long (each wait of
    /// each end: a read, a write, a call's reply, a login session's echo),
    /// with the side that stopped and the kernel's TCP_INFO in its reason;
    /// the grid goes on. Raise it for links whose retransmission timer
    /// backs off past it (heavy loss on a long path).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::units::parse_duration)]
    pub stall_timeout: std::time::Duration,
}

impl RunOptions {
    /// `--stall-timeout` as endpoints carry it (refused above a day).
    pub fn stall(&self) -> anyhow::Result<crate::endpoint::stall::StallBound> {
        crate::endpoint::stall::StallBound::new(self.stall_timeout).map_err(anyhow::Error::msg)
    }

    /// As [`RunOptions::stall`], `None` for the default (which records
    /// then leave out).
    pub fn stall_option(&self) -> anyhow::Result<Option<crate::endpoint::stall::StallBound>> {
        let bound = self.stall()?;
        Ok((bound != crate::endpoint::stall::StallBound::default()).then_some(bound))
    }

    /// With `--resume`, the earlier run's choice at `pointer` in its last
    /// `experiment` record (see `Resumed::earlier`), for a plan made
    /// before its runner: a design's seed.
    pub fn earlier<T: serde::de::DeserializeOwned>(
        &self,
        experiment: &str,
        pointer: &str,
    ) -> anyhow::Result<Option<T>> {
        match &self.resume {
            Some(path) => {
                Ok(crate::controller::resume::Resumed::read(path)?.earlier(experiment, pointer))
            }
            None => Ok(None),
        }
    }

    /// Where the records go: `--out`, or the file `--resume` names.
    fn records_file(&self) -> anyhow::Result<PathBuf> {
        match &self.resume {
            Some(path) => Ok(crate::controller::resume::records_file(path)?),
            None => Ok(self.out.clone()),
        }
    }

    /// The records file, opened for appending.
    fn writer(&self, path: &std::path::Path) -> anyhow::Result<RecordWriter> {
        RecordWriter::append(path).with_context(|| format!("cannot open {}", path.display()))
    }

    /// A runner over `writer` with these options, on this host, reusing
    /// `--resume`'s records; with `--profile`, refused here when this host
    /// cannot profile.
    fn runner<'w>(&self, writer: &'w mut RecordWriter) -> anyhow::Result<Runner<'w>> {
        let profiling = self
            .profile
            .then(crate::controller::profile::Profiling::check)
            .transpose()?;
        let resumed = match &self.resume {
            Some(path) => Some(crate::controller::resume::Resumed::read(path)?),
            None => None,
        };
        Ok(Runner::new(HostFacts::gather(), Some(writer))
            .fail_fast(self.fail_fast)
            .progress(!self.json)
            .profiling(profiling)
            .resume(resumed))
    }

    /// A measured run from end to end, the same for every experiment:
    /// opens the records file, makes the runner, lets `measure` run its
    /// cells on it (the runner appends each record as it is made), then
    /// prints what it measured as [`RunOutcome::print`] says and fails as
    /// `finish` does when cells failed.
    pub fn measure<D: crate::record::profile::Profiled>(
        &self,
        out: &mut Output,
        measure: impl FnOnce(&mut Runner<'_>) -> anyhow::Result<RunOutcome<D>>,
    ) -> anyhow::Result<()> {
        let path = self.records_file()?;
        let mut writer = self.writer(&path)?;
        let mut runner = self.runner(&mut writer)?;
        let outcome = measure(&mut runner);
        let reused = runner.reused();
        drop(runner);
        if reused > 0 {
            eprintln!(
                "resumed: {reused} cell(s) measured before were not measured again (their records are in {})",
                path.display()
            );
        }
        let measured = outcome.map_err(|e| resume_hint(e, &path))?;
        let judged: &[Record<D>] = if measured.judged {
            &measured.records
        } else {
            &[]
        };
        match measured.print {
            Print::DocOrText { doc, text } => self.finish(out, &path, judged, doc, || text),
            Print::Lines(doc) => self.finish_lines(out, &path, judged, doc),
            Print::Foreign(text) => Ok(out.text(&text)?),
        }
    }

    /// Prints `doc` (with `records_file` added) under `--json`, or `text`.
    /// A run whose every cell failed prints neither: it is an error naming
    /// the first reason and the records file (so `--json` prints one
    /// document either way, the error's).
    fn finish<D: crate::record::profile::Profiled>(
        &self,
        out: &mut Output,
        file: &std::path::Path,
        records: &[Record<D>],
        mut doc: serde_json::Value,
        text: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        check_some_measured(records, file)?;
        let failed = some_failed(records, file);
        if self.json {
            doc["records_file"] = serde_json::json!(file);
            doc["failed_cells"] = serde_json::json!(failed.as_ref().map_or(0, |f| f.failed));
            out.json(&doc)?;
        } else {
            out.text(&text())?;
            out.text(&crate::report::profile::text(records))?;
            eprintln!("records appended to {}", file.display());
        }
        failed.map_or(Ok(()), |f| Err(f.into()))
    }

    /// As `finish` under `--json-stream`: the document as the
    /// last line of JSON Lines, `{"event":"end",...}`.
    fn finish_lines<D>(
        &self,
        out: &mut Output,
        file: &std::path::Path,
        records: &[Record<D>],
        mut doc: serde_json::Value,
    ) -> anyhow::Result<()> {
        check_some_measured(records, file)?;
        let failed = some_failed(records, file);
        doc["records_file"] = serde_json::json!(file);
        doc["event"] = serde_json::json!("end");
        doc["failed_cells"] = serde_json::json!(failed.as_ref().map_or(0, |f| f.failed));
        out.text(&format!("{doc}\n"))?;
        failed.map_or(Ok(()), |f| Err(f.into()))
    }

    /// As `finish` for a run that measured nothing and wrote
    /// no records (a model's predictions): no records file is named.
    pub fn finish_unrecorded(
        &self,
        out: &mut Output,
        doc: serde_json::Value,
        text: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        if self.json {
            out.json(&doc)?;
        } else {
            out.text(&text())?;
        }
        Ok(())
    }
}

/// A run the user stopped says how to finish it: the same command with
/// `--resume FILE`.
fn resume_hint(e: anyhow::Error, file: &std::path::Path) -> anyhow::Error {
    let stopped = e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<crate::controller::MeasureError>(),
            Some(crate::controller::MeasureError::Interrupted { .. })
        )
    });
    if stopped {
        e.context(format!(
            "the run stopped; the same command with --resume {} finishes it",
            file.display()
        ))
    } else {
        e
    }
}

/// What a measured run leaves to print ([`RunOptions::measure`]).
pub struct RunOutcome<D> {
    /// Its records, as the runner wrote them.
    pub records: Vec<Record<D>>,
    /// Whether its cells' failures are the run's (a run fails when every
    /// cell failed, and ends with [`SomeCellsFailed`] when some did); not
    /// for a search, whose probes may fail on the way to its answer.
    pub judged: bool,
    pub print: Print,
}

impl<D> RunOutcome<D> {
    /// A grid's records, printed as `doc` under `--json` or as `text`.
    pub fn grid(records: Vec<Record<D>>, doc: serde_json::Value, text: String) -> Self {
        RunOutcome {
            records,
            judged: true,
            print: Print::DocOrText { doc, text },
        }
    }
}

/// How a measured run prints.
pub enum Print {
    /// `doc` (with the records file and the failed cells' count added)
    /// under `--json`, else `text`, the profile's table and where the
    /// records went.
    DocOrText {
        doc: serde_json::Value,
        text: String,
    },
    /// As JSON Lines, `doc` as the last line, `{"event":"end",...}`.
    Lines(serde_json::Value),
    /// Another tool's document as an exporter rendered it
    /// ([`crate::export`]: iperf3's `-J`), printed as it is.
    Foreign(String),
}

/// A run some of whose cells failed: its output is printed (the cells
/// that measured), and then it ends with this, not with success, so a
/// script sees that part of what it asked for is missing (exit status 3).
#[derive(Debug, thiserror::Error)]
#[error(
    "{failed} of {total} cells failed (the first: {first}); the results printed are the other cells'; every record is in {file}"
)]
pub struct SomeCellsFailed {
    pub failed: usize,
    pub total: usize,
    pub first: String,
    pub file: String,
}

/// A run that ended short after printing what it measured (a test whose
/// peer went away mid-way): its output is out already, marked incomplete,
/// so only this is left to say, on standard error, with the exit status
/// of a partial run ([`SOME_CELLS_FAILED`]).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct PrintedIncomplete(pub anyhow::Error);

/// The exit status of a run in which some cells failed.
pub const SOME_CELLS_FAILED: u8 = 3;

fn some_failed<D>(records: &[Record<D>], file: &std::path::Path) -> Option<SomeCellsFailed> {
    let failed: Vec<&str> = records.iter().filter_map(|r| r.error.as_deref()).collect();
    (!failed.is_empty()).then(|| SomeCellsFailed {
        failed: failed.len(),
        total: records.len(),
        first: failed[0].to_string(),
        file: file.display().to_string(),
    })
}

/// A run whose every cell failed is an error naming the first reason and
/// the records file.
fn check_some_measured<D>(records: &[Record<D>], file: &std::path::Path) -> anyhow::Result<()> {
    if !records.is_empty() && records.iter().all(|r| r.error.is_some()) {
        let first = records
            .iter()
            .find_map(|r| r.error.as_deref())
            .unwrap_or("");
        anyhow::bail!(
            "every cell failed ({first}); see the records in {}",
            file.display()
        );
    }
    Ok(())
}
