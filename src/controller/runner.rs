//! The one grid runner every experiment uses.
//!
//! An experiment says how to measure one cell ([`MeasureCell`]); the runner
//! walks a grid of cells through it with one failure policy, one
//! interruption path, and one way out for what happens: its events go to
//! its [`Sink`]s (the records file, the progress display, any added with
//! [`Runner::sink`]; see [`super::sink`]):
//!
//! - a failed cell becomes a record with its `error` set, saved like any
//!   other, and the grid goes on; with `fail_fast` the runner stops after
//!   saving it ([`MeasureError::FailFast`]);
//! - an interruption (Ctrl-C, SIGTERM) ends the grid between cells; the
//!   cell in progress is not recorded, every finished one is on disk
//!   already ([`MeasureError::Interrupted`]);
//! - each record is appended and flushed the moment its cell ends, with
//!   its cell's key;
//! - given the records of an earlier run of the plan ([`Runner::resume`],
//!   `--resume`), a cell with a measured record there is not measured
//!   again: its record is given back as it was (see [`super::resume`]).
//!
//! Searches (the cliff bisection, the limit search, the diagnosis reruns)
//! call [`Runner::cell`] one cell at a time and decide the next from the
//! record, so they run against a mock [`MeasureCell`] in tests exactly as
//! against endpoint processes.

pub mod together;

use super::errors::{CellError, Interrupted, MeasureError};
use super::processes::ControlError;
use super::resume::{CellKey, Resumed};
use super::sink::{Display, RunEvent, Sink, SinkError};
use crate::measure::host::HostFacts;
use crate::record::{Record, RecordWriter, now_rfc3339};
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What measuring one cell gave: the experiment's part of the record and,
/// when the cell failed, why (its result is then absent from `data`).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured<D> {
    /// The placement's name as records carry it (`loopback`, `netns`, `local`).
    pub placement: String,
    /// The experiment's own part of the record.
    pub data: D,
    pub error: Option<String>,
}

/// Measures one cell of an experiment. The real implementations run
/// endpoint processes; tests use mocks that return made-up results.
pub trait MeasureCell {
    type Cell;
    /// The experiment's record data.
    type Data: Serialize + serde::de::DeserializeOwned + Clone;

    /// A few words naming the cell, for the progress display.
    fn label(&self, cell: &Self::Cell) -> String;

    /// What identifies the cell across runs: everything its measurement
    /// depends on (its parameters, where it runs), so that a resumed run
    /// reuses a record only for the same cell.
    fn key(&self, cell: &Self::Cell) -> CellKey;

    /// Measures `cell`. A cell that failed is still `Ok`, with its reason in
    /// [`Measured::error`]; `Err` means the user interrupted it.
    fn measure(&mut self, cell: &Self::Cell) -> Result<Measured<Self::Data>, Interrupted>;
}

/// The runner's sinks, in order, shared with its [`Tap`]s (one thread:
/// the runner's; a tap is used only while the runner waits on a cell).
#[derive(Default, Clone)]
struct Sinks<'w>(Rc<RefCell<Vec<Box<dyn Sink + 'w>>>>);

/// A cell's way to its runner's sinks while it is measured: each sample
/// (an interval of `--interval`, as its JSON line) reaches them as
/// [`RunEvent::Sample`] the moment it is told, before the cell's record.
#[derive(Clone)]
pub struct Tap<'w> {
    sinks: Sinks<'w>,
}

impl Tap<'_> {
    /// Tells every sink of `line`. A sink's error loses only the sample
    /// (the record keeps what the cell measured), so it is dropped.
    pub fn sample(&self, line: &str) {
        // Borrowed only if the runner is not telling an event: a cell is
        // measured between events, never inside one.
        if let Ok(mut sinks) = self.sinks.0.try_borrow_mut() {
            for sink in sinks.iter_mut() {
                let _ = sink.event(&RunEvent::Sample { line });
            }
        }
    }
}

/// Walks cells through a [`MeasureCell`], keeping a record of each.
pub struct Runner<'w> {
    host: HostFacts,
    /// The records file first, then any added; each told every event.
    /// Shared with the [`Tap`]s cells are given, which tell them samples
    /// while the runner waits on the cell.
    sinks: Sinks<'w>,
    /// The person watching, told each event after the sinks.
    display: Display,
    fail_fast: bool,
    stop: Arc<AtomicBool>,
    saved: usize,
    /// `--profile`: each cell measured under a CPU profile.
    profiling: Option<super::profile::Profiling>,
    /// `--resume`: an earlier run's records, reused for their cells.
    resumed: Option<Resumed>,
    /// Cells whose record was reused, not measured.
    reused: usize,
    /// Keys a round (or a cell decided without measuring) kept in this
    /// run: such a cell is not measured again in it ([`Runner::round`]).
    kept: std::collections::HashSet<CellKey>,
}

impl<'w> Runner<'w> {
    /// A runner that appends records to `writer` (none: keep them in memory
    /// only) and stops on the process's interrupt flag.
    pub fn new(host: HostFacts, writer: Option<&'w mut RecordWriter>) -> Runner<'w> {
        let sinks: Sinks<'w> = Sinks::default();
        if let Some(writer) = writer {
            sinks.0.borrow_mut().push(Box::new(writer));
        }
        Runner {
            host,
            sinks,
            display: Display::new(true),
            fail_fast: false,
            stop: super::processes::interrupt_flag(),
            saved: 0,
            profiling: None,
            resumed: None,
            reused: 0,
            kept: std::collections::HashSet::new(),
        }
    }

    /// Reuse `resumed`'s records for the cells they measured (`--resume`).
    pub fn resume(mut self, resumed: Option<Resumed>) -> Self {
        self.resumed = resumed;
        self
    }

    /// A resumed run's earlier choice (see [`Resumed::earlier`]); `None`
    /// in a run that is not resumed.
    pub fn earlier<T: serde::de::DeserializeOwned>(
        &self,
        experiment: &str,
        pointer: &str,
    ) -> Option<T> {
        self.resumed.as_ref()?.earlier(experiment, pointer)
    }

    /// How many cells were given their earlier record instead of measured.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// Profile every cell's CPU by layer (`--profile`), kept in its record.
    pub fn profiling(mut self, profiling: Option<super::profile::Profiling>) -> Self {
        self.profiling = profiling;
        self
    }

    /// Profiles the cells from now on with `profiling` (or none), giving
    /// back what it had: a plan may profile some sections only.
    pub fn swap_profiling(
        &mut self,
        profiling: Option<super::profile::Profiling>,
    ) -> Option<super::profile::Profiling> {
        std::mem::replace(&mut self.profiling, profiling)
    }

    pub fn is_profiling(&self) -> bool {
        self.profiling.is_some()
    }

    /// Stop at the first failed cell (after recording it).
    pub fn fail_fast(mut self, on: bool) -> Self {
        self.fail_fast = on;
        self
    }

    /// Show a progress bar on a terminal (the default); scripted runs and
    /// `--json` turn it off.
    pub fn progress(mut self, on: bool) -> Self {
        self.display.set_enabled(on);
        self
    }

    /// Tell `sink` every event of the run too, after the records file.
    pub fn sink(mut self, sink: impl Sink + 'w) -> Self {
        self.add_sink(sink);
        self
    }

    /// As [`Runner::sink`], on a runner already made (an experiment's
    /// own: `--json-stream`'s lines).
    pub fn add_sink(&mut self, sink: impl Sink + 'w) {
        self.sinks.0.borrow_mut().push(Box::new(sink));
    }

    /// A handle a cell keeps to tell this runner's sinks what it sees
    /// while it is measured ([`RunEvent::Sample`]).
    pub fn tap(&self) -> Tap<'w> {
        Tap {
            sinks: self.sinks.clone(),
        }
    }

    /// Tells every sink, then the display, of `event`; the first sink's
    /// error ends the telling (the records file is first).
    fn tell(&mut self, event: RunEvent<'_>) -> Result<(), SinkError> {
        for sink in self.sinks.0.borrow_mut().iter_mut() {
            sink.event(&event)?;
        }
        self.display.event(&event)
    }

    /// As [`Runner::tell`] for events whose loss costs nothing measured
    /// (all but a kept record): a sink's error on one is dropped, and only
    /// a kept record's stops the run.
    fn tell_only(&mut self, event: RunEvent<'_>) {
        let _ = self.tell(event);
    }

    /// Watch `flag` instead of the process's interrupt flag (tests).
    pub fn stop_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.stop = flag;
        self
    }

    pub fn host(&self) -> &HostFacts {
        &self.host
    }

    /// Measures every cell in order; see the module's policy.
    pub fn grid<M: MeasureCell>(
        &mut self,
        measure: &mut M,
        cells: &[M::Cell],
    ) -> Result<Vec<Record<M::Data>>, MeasureError> {
        self.tell_only(RunEvent::Began { cells: cells.len() });
        let mut records = Vec::with_capacity(cells.len());
        for cell in cells {
            self.tell_only(RunEvent::Measuring {
                label: &measure.label(cell),
            });
            match self.measure_and_save(measure, cell) {
                Ok(record) => records.push(record),
                Err(e) => {
                    self.tell_only(RunEvent::Ended);
                    return Err(e);
                }
            }
        }
        self.tell_only(RunEvent::Ended);
        Ok(records)
    }

    /// Says a line to the person watching (a search's step or plan), on
    /// stderr, above the spinner when one shows.
    pub fn say(&mut self, line: &str) {
        self.tell_only(RunEvent::Said(line));
    }

    /// Measures one cell and saves its record (failed or not): a search's
    /// step, shown on a spinner.
    pub fn cell<M: MeasureCell>(
        &mut self,
        measure: &mut M,
        cell: &M::Cell,
    ) -> Result<Record<M::Data>, MeasureError> {
        self.tell_only(RunEvent::Measuring {
            label: &measure.label(cell),
        });
        self.measure_and_save(measure, cell)
    }

    fn measure_and_save<M: MeasureCell>(
        &mut self,
        measure: &mut M,
        cell: &M::Cell,
    ) -> Result<Record<M::Data>, MeasureError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(self.interrupted());
        }
        let key = measure.key(cell);
        if let Some(record) = self.resumed.as_mut().and_then(|r| r.take(&key)) {
            self.reused += 1;
            self.tell_only(RunEvent::Reused);
            return Ok(record);
        }
        let started = now_rfc3339();
        // A profile that cannot start is said in the record, not fatal:
        // the measurement itself goes on.
        let profiler = self.profiling.as_ref().map(|p| p.start());
        let measured = match measure.measure(cell) {
            Ok(measured) => measured,
            Err(Interrupted) => return Err(self.interrupted()),
        };
        let profile = match (profiler, &self.profiling) {
            (Some(Ok(profiler)), Some(profiling)) => match profiler.stop() {
                Ok(profile) => Some(Ok(profiling.report(&profile))),
                Err(e) => Some(Err(e.to_string())),
            },
            (Some(Err(e)), _) => Some(Err(e.to_string())),
            _ => None,
        };
        // A cell that ended because of the interrupt is not a measurement.
        if self.stop.load(Ordering::Relaxed) {
            return Err(self.interrupted());
        }
        self.keep(key, started, measured, profile)
    }

    /// Makes the record of a measured cell (with its key, its profile
    /// when one ran) and saves it; a failed cell ends the run under
    /// `fail_fast`, after it is saved.
    fn keep<D: Serialize>(
        &mut self,
        key: CellKey,
        started: String,
        measured: Measured<D>,
        profile: Option<Result<crate::record::profile::ProfileReport, String>>,
    ) -> Result<Record<D>, MeasureError> {
        let mut record = Record::new(
            started,
            &measured.placement,
            &self.host,
            measured.data,
            measured.error,
        );
        record.cell = Some(key.to_string());
        self.kept.insert(key);
        if record.placement == "remote" {
            record.agents = super::remote::facts();
        }
        match profile {
            Some(Ok(report)) => record.profile = Some(Box::new(report)),
            Some(Err(e)) => {
                record.profile = Some(Box::new(crate::record::profile::ProfileReport {
                    method: format!("not profiled: {e}"),
                    ..Default::default()
                }))
            }
            None => {}
        }
        let line = serde_json::to_string(&record).map_err(|e| MeasureError::Save {
            path: "the record".into(),
            source: std::io::Error::other(e),
        })?;
        self.tell(RunEvent::Kept { line: &line })
            .map_err(|e| MeasureError::Save {
                path: e.to,
                source: e.source,
            })?;
        self.saved += 1;
        if self.fail_fast
            && let Some(error) = &record.error
        {
            return Err(MeasureError::FailFast {
                error: error.clone(),
                saved: self.saved,
            });
        }
        Ok(record)
    }

    fn interrupted(&self) -> MeasureError {
        MeasureError::Interrupted { saved: self.saved }
    }
}

/// Turns a run's outcome into what the runner records: the result, or the
/// error that ended it (an interruption ends the grid instead). `data`
/// builds the experiment's part from the result, absent when the run failed.
pub fn measured<T, D, E: Into<CellError>>(
    placement: &str,
    outcome: Result<T, E>,
    data: impl FnOnce(Option<Box<T>>) -> D,
) -> Result<Measured<D>, Interrupted> {
    let (result, error) = match outcome.map_err(Into::into) {
        Ok(result) => (Some(Box::new(result)), None),
        Err(CellError::Control(ControlError::Interrupted)) => return Err(Interrupted),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(Measured {
        placement: placement.into(),
        data: data(result),
        error,
    })
}

#[cfg(test)]
pub(crate) mod mock {
    //! A [`MeasureCell`] that answers from a function, for tests of the
    //! runner and of the searches built on it.

    use super::*;

    /// Measures a cell by calling `answer`; counts the cells it measured.
    pub struct Mock<C, D, F: FnMut(&C) -> Result<Measured<D>, Interrupted>> {
        pub answer: F,
        pub measured: Vec<C>,
        data: std::marker::PhantomData<D>,
    }

    impl<C: Clone, D, F: FnMut(&C) -> Result<Measured<D>, Interrupted>> Mock<C, D, F> {
        pub fn new(answer: F) -> Self {
            Mock {
                answer,
                measured: Vec::new(),
                data: std::marker::PhantomData,
            }
        }
    }

    impl<C, D, F> MeasureCell for Mock<C, D, F>
    where
        C: Clone + std::fmt::Debug,
        D: Serialize + serde::de::DeserializeOwned + Clone,
        F: FnMut(&C) -> Result<Measured<D>, Interrupted>,
    {
        type Cell = C;
        type Data = D;

        fn label(&self, cell: &C) -> String {
            format!("{cell:?}")
        }

        fn key(&self, cell: &C) -> CellKey {
            CellKey::of("mock", &format!("{cell:?}"))
        }

        fn measure(&mut self, cell: &C) -> Result<Measured<D>, Interrupted> {
            self.measured.push(cell.clone());
            (self.answer)(cell)
        }
    }

    /// A runner that keeps records in memory, shows nothing and has its own
    /// stop flag.
    pub fn runner() -> Runner<'static> {
        Runner::new(HostFacts::default(), None)
            .progress(false)
            .stop_flag(Arc::new(AtomicBool::new(false)))
    }

    /// As [`runner`], keeping records in `writer`'s file.
    pub fn runner_into(writer: &mut RecordWriter) -> Runner<'_> {
        Runner::new(HostFacts::default(), Some(writer))
            .progress(false)
            .stop_flag(Arc::new(AtomicBool::new(false)))
    }
}

#[cfg(test)]
mod tests {
    use super::mock::{Mock, runner, runner_into};
    use super::*;

    /// A made-up experiment's data.
    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    #[serde(tag = "experiment", rename = "example")]
    struct Sized {
        size: usize,
        result: Option<u32>,
    }

    fn example_cell(size: usize, error: Option<&str>) -> Measured<Sized> {
        Measured {
            placement: "local".into(),
            data: Sized {
                size,
                result: error.is_none().then_some(7),
            },
            error: error.map(String::from),
        }
    }

    #[test]
    fn a_failed_cell_is_recorded_and_the_grid_goes_on() {
        let mut mock = Mock::new(|&size: &usize| {
            Ok(example_cell(size, (size == 2).then_some("no such thing")))
        });
        let records = runner().grid(&mut mock, &[1, 2, 3]).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[1].error.as_deref(), Some("no such thing"));
        assert!(records[0].error.is_none() && records[2].error.is_none());
        assert_eq!(mock.measured, [1, 2, 3]);
    }

    /// A sink that writes down what it is told.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Sink for Log {
        fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError> {
            self.0.push(match event {
                RunEvent::Kept { line } => format!("kept {line}"),
                other => format!("{other:?}"),
            });
            Ok(())
        }
    }

    #[test]
    fn an_added_sink_is_told_every_event_in_order_with_the_lines_on_disk() {
        let mut mock = Mock::new(|&size: &usize| {
            Ok(example_cell(size, (size == 2).then_some("no such thing")))
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut log = Log::default();
        let mut runner = runner_into(&mut writer).sink(&mut log);
        runner.grid(&mut mock, &[1, 2]).unwrap();
        runner.say("a search's step");
        runner.cell(&mut mock, &3).unwrap();
        drop(runner);
        let lines: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| format!("kept {l}"))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            log.0,
            [
                "Began { cells: 2 }",
                "Measuring { label: \"1\" }",
                &lines[0],
                "Measuring { label: \"2\" }",
                &lines[1],
                "Ended",
                "Said(\"a search's step\")",
                "Measuring { label: \"3\" }",
                &lines[2],
            ]
        );
    }

    #[test]
    fn a_cells_samples_reach_the_sinks_while_it_is_measured_and_not_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut log = Log::default();
        let mut runner = runner_into(&mut writer).sink(&mut log);
        let tap = runner.tap();
        let mut mock = Mock::new(|&size: &usize| {
            for i in 0..size {
                tap.sample(&format!("{{\"interval\":{i}}}"));
            }
            Ok(example_cell(size, None))
        });
        runner.grid(&mut mock, &[2]).unwrap();
        // The tap shares the sinks (and so the log) with the runner.
        drop(mock);
        drop(tap);
        drop(runner);
        let kept = std::fs::read_to_string(&path).unwrap();
        assert_eq!(kept.lines().count(), 1, "{kept}");
        assert_eq!(
            log.0[1..4],
            [
                "Measuring { label: \"2\" }",
                "Sample { line: \"{\\\"interval\\\":0}\" }",
                "Sample { line: \"{\\\"interval\\\":1}\" }",
            ]
        );
        assert_eq!(log.0[4], format!("kept {}", kept.trim_end()));
    }

    #[test]
    fn fail_fast_stops_after_recording_the_failure() {
        let mut mock =
            Mock::new(|&size: &usize| Ok(example_cell(size, (size == 2).then_some("broken"))));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut runner = runner_into(&mut writer).fail_fast(true);
        match runner.grid(&mut mock, &[1, 2, 3]) {
            Err(MeasureError::FailFast { error, saved }) => {
                assert_eq!(error, "broken");
                assert_eq!(saved, 2);
            }
            other => panic!("expected fail-fast, got {other:?}"),
        }
        assert_eq!(mock.measured, [1, 2]);
        let on_disk = crate::record::read_records::<Sized>(&path).unwrap();
        assert_eq!(on_disk.len(), 2, "the failure is on disk too");
    }

    #[test]
    fn an_interruption_keeps_what_finished_and_drops_the_cell_in_progress() {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let mut mock = Mock::new(move |&size: &usize| {
            if size == 3 {
                // The user presses Ctrl-C while cell 3 runs.
                flag.store(true, Ordering::Relaxed);
            }
            Ok(example_cell(size, None))
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut runner = Runner::new(HostFacts::default(), Some(&mut writer))
            .progress(false)
            .stop_flag(stop);
        match runner.grid(&mut mock, &[1, 2, 3, 4]) {
            Err(MeasureError::Interrupted { saved }) => assert_eq!(saved, 2),
            other => panic!("expected an interruption, got {other:?}"),
        }
        assert_eq!(mock.measured, [1, 2, 3], "cell 4 never started");
        assert_eq!(
            crate::record::read_records::<Sized>(&path).unwrap().len(),
            2
        );
    }

    #[test]
    fn a_killed_grid_resumed_measures_only_what_it_had_not_and_keeps_one_record_a_cell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // The first run: cell 2 fails, the user stops it during cell 4.
        let mut first = Mock::new(move |&size: &usize| {
            if size == 4 {
                flag.store(true, Ordering::Relaxed);
            }
            Ok(example_cell(size, (size == 2).then_some("refused")))
        });
        let cells = [1, 2, 3, 3, 4, 5];
        {
            let mut writer = RecordWriter::append(&path).unwrap();
            let mut runner = Runner::new(HostFacts::default(), Some(&mut writer))
                .progress(false)
                .stop_flag(stop);
            assert!(matches!(
                runner.grid(&mut first, &cells),
                Err(MeasureError::Interrupted { saved: 4 })
            ));
        }
        // The second, resumed from the file: the failed cell and those
        // never finished are measured; the rest come back as they were.
        let mut second = Mock::new(|&size: &usize| Ok(example_cell(size, None)));
        let resumed = crate::controller::resume::Resumed::read(&path).unwrap();
        assert_eq!(resumed.found(), 3);
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut runner = runner_into(&mut writer).resume(Some(resumed));
        let records = runner.grid(&mut second, &cells).unwrap();
        assert_eq!(runner.reused(), 3);
        assert_eq!(second.measured, [2, 4, 5]);
        let sizes: Vec<usize> = records.iter().map(|r| r.data.size).collect();
        assert_eq!(
            sizes, cells,
            "the run's records are the whole plan's, in order"
        );
        assert!(
            records
                .iter()
                .all(|r| r.error.is_none() && r.cell.is_some())
        );
        let on_disk = crate::record::read_records::<Sized>(&path).unwrap();
        assert_eq!(
            on_disk.len(),
            7,
            "4 from the first run and 3 from the second"
        );
        let measured_again = on_disk[4..]
            .iter()
            .map(|r| r.as_ref().unwrap().data.size)
            .collect::<Vec<_>>();
        assert_eq!(measured_again, [2, 4, 5]);
    }

    #[test]
    fn a_cell_that_reports_interruption_ends_the_grid() {
        let mut mock = Mock::new(|&size: &usize| {
            if size == 2 {
                Err(Interrupted)
            } else {
                Ok(example_cell(size, None))
            }
        });
        match runner().grid(&mut mock, &[1, 2, 3]) {
            Err(MeasureError::Interrupted { saved }) => assert_eq!(saved, 1),
            other => panic!("expected an interruption, got {other:?}"),
        }
    }
}
