//! Cells measured at once: a round of the rounds schedule
//! ([`crate::controller::rounds`]) runs its pairs side by side, each on its
//! own thread, and the runner keeps their records as it keeps a grid's.
//!
//! Invariants (beside the runner's own, which hold here too):
//! - a lane's cells run one after another on the lane's thread; lanes run
//!   at once; every record is saved on the runner's thread the moment its
//!   cell ends, so a killed run loses only the cells in flight;
//! - a cell may give several records (a test both ways at once gives one
//!   a direction), each under its own key;
//! - a cell whose every key has a measured record waiting in the resumed
//!   run is not measured: those records are given back; a cell whose every
//!   key was kept already in this run (measured, failed or decided) is
//!   not measured again in it;
//! - once the user stops the run, a save fails or (with `fail_fast`) a
//!   cell fails, no lane starts another cell; the cells in flight end, and
//!   those that ended because of the stop are not recorded.

use super::{Measured, Runner};
use crate::controller::errors::{Interrupted, MeasureError};
use crate::controller::resume::CellKey;
use crate::record::{Record, now_rfc3339};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// Measures cells that run at once, each lane on its own thread.
pub trait MeasureTogether: Sync {
    type Cell: Sync;
    /// The experiment's record data.
    type Data: Serialize + serde::de::DeserializeOwned + Clone + Send;

    /// The keys of the records `cell` gives, in the order
    /// [`MeasureTogether::measure`] gives them (see
    /// [`super::MeasureCell::key`]).
    fn keys(&self, cell: &Self::Cell) -> Vec<CellKey>;

    /// Measures `cell`: one [`Measured`] a key, failed or not. `Err`
    /// means the user interrupted it.
    fn measure(&self, cell: &Self::Cell) -> Result<Vec<Measured<Self::Data>>, Interrupted>;
}

/// One lane's records from a round.
#[derive(Debug)]
pub struct Lane<D> {
    /// Given back from the resumed run, in the cells' order.
    pub reused: Vec<Record<D>>,
    /// Measured (or failed) in this round, as they ended.
    pub measured: Vec<Record<D>>,
}

/// What the runner does with one cell of a round.
enum Step<D> {
    /// Its records, from the resumed run.
    Reuse(Vec<Record<D>>),
    /// Nothing: this run kept it already.
    Skip,
    /// Measure it; its keys.
    Measure(Vec<CellKey>),
}

/// A lane's cell as it ended, sent to the runner's thread.
struct Ended<D> {
    lane: usize,
    keys: Vec<CellKey>,
    started: String,
    outcome: Result<Vec<Measured<D>>, Interrupted>,
}

impl Runner<'_> {
    /// Whether `key` needs no measuring in this run: kept in it already,
    /// or with a measured record waiting in the resumed run.
    pub fn done(&self, key: &CellKey) -> bool {
        self.kept.contains(key) || self.resumed.as_ref().is_some_and(|r| r.has(key))
    }

    /// Records a cell decided without measuring it (a test whose host
    /// took no part, with why in `measured.error`), unless this run kept
    /// its key already or the resumed run measured it: `None` then.
    pub fn decided<D: Serialize>(
        &mut self,
        key: CellKey,
        measured: Measured<D>,
    ) -> Result<Option<Record<D>>, MeasureError> {
        if self.done(&key) {
            return Ok(None);
        }
        self.keep(key, now_rfc3339(), measured, None).map(Some)
    }

    /// Measures one round: each lane's cells in order on the lane's own
    /// thread, the lanes at once (see the module's invariants). Gives each
    /// lane's records, those reused apart from those measured.
    pub fn round<M: MeasureTogether>(
        &mut self,
        measure: &M,
        lanes: &[Vec<M::Cell>],
    ) -> Result<Vec<Lane<M::Data>>, MeasureError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(self.interrupted());
        }
        // Each lane's reused records, and the keys of each cell to measure.
        let mut kept: Vec<Lane<M::Data>> = Vec::with_capacity(lanes.len());
        let mut plans: Vec<Vec<Option<Vec<CellKey>>>> = Vec::with_capacity(lanes.len());
        for lane in lanes {
            let mut reused = Vec::new();
            let mut keys = Vec::with_capacity(lane.len());
            for cell in lane {
                keys.push(match self.plan(measure.keys(cell)) {
                    Step::Reuse(records) => {
                        reused.extend(records);
                        None
                    }
                    Step::Skip => None,
                    Step::Measure(keys) => Some(keys),
                });
            }
            kept.push(Lane {
                reused,
                measured: Vec::new(),
            });
            plans.push(keys);
        }
        let stop = self.stop.clone();
        let halt = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel::<Ended<M::Data>>();
        let mut failure: Option<MeasureError> = None;
        std::thread::scope(|scope| {
            for (lane, (cells, steps)) in lanes.iter().zip(&plans).enumerate() {
                let (tx, stop, halt) = (tx.clone(), &stop, &halt);
                scope.spawn(move || {
                    for (cell, step) in cells.iter().zip(steps) {
                        let Some(keys) = step else { continue };
                        if stop.load(Ordering::Relaxed) || halt.load(Ordering::Relaxed) {
                            break;
                        }
                        let started = now_rfc3339();
                        // A cell that ended because of the stop is not a
                        // measurement.
                        let outcome = measure.measure(cell).and_then(|m| {
                            if stop.load(Ordering::Relaxed) {
                                Err(Interrupted)
                            } else {
                                Ok(m)
                            }
                        });
                        let ended = Ended {
                            lane,
                            keys: keys.clone(),
                            started,
                            outcome,
                        };
                        if tx.send(ended).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for ended in rx {
                match self.keep_ended(ended, &mut kept) {
                    Ok(()) => {}
                    Err(e) => {
                        halt.store(true, Ordering::Relaxed);
                        failure.get_or_insert(e);
                    }
                }
            }
        });
        if let Some(failure) = failure {
            return Err(failure);
        }
        if self.stop.load(Ordering::Relaxed) {
            return Err(self.interrupted());
        }
        Ok(kept)
    }

    /// What to do with a cell of `keys`: reuse its records (every key has
    /// one waiting), skip it (every key kept in this run), or measure it.
    fn plan<D: serde::de::DeserializeOwned>(&mut self, keys: Vec<CellKey>) -> Step<D> {
        if !keys.is_empty() && keys.iter().all(|k| self.kept.contains(k)) {
            return Step::Skip;
        }
        let waiting = self
            .resumed
            .as_ref()
            .is_some_and(|r| keys.iter().all(|k| r.has(k)));
        if waiting && let Some(resumed) = self.resumed.as_mut() {
            let records: Vec<Record<D>> = keys.iter().filter_map(|k| resumed.take(k)).collect();
            if records.len() == keys.len() {
                self.reused += 1;
                self.tell_only(crate::controller::sink::RunEvent::Reused);
                self.kept.extend(keys);
                return Step::Reuse(records);
            }
        }
        Step::Measure(keys)
    }

    /// Saves a lane's ended cell into `kept` (nothing when the user's
    /// stop ended it).
    fn keep_ended<D: Serialize>(
        &mut self,
        ended: Ended<D>,
        kept: &mut [Lane<D>],
    ) -> Result<(), MeasureError> {
        // Stopped by the user: not a measurement (a resumed run measures it).
        let Ok(measured) = ended.outcome else {
            return Ok(());
        };
        debug_assert_eq!(measured.len(), ended.keys.len(), "a record a key");
        for (key, measured) in ended.keys.into_iter().zip(measured) {
            let record = self.keep(key, ended.started.clone(), measured, None)?;
            kept[ended.lane].measured.push(record);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::resume::Resumed;
    use crate::measure::host::HostFacts;
    use crate::record::RecordWriter;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    #[serde(tag = "experiment", rename = "example")]
    struct Way {
        from: u32,
        to: u32,
    }

    /// Pairs measured both ways at once: a cell `(a, b)` gives a record
    /// for a -> b and one for b -> a; `answer` decides each cell.
    struct BothWays<F> {
        answer: F,
        measured: Mutex<Vec<(u32, u32)>>,
    }

    impl<F: Fn(u32, u32) -> Result<Option<String>, Interrupted> + Sync> MeasureTogether
        for BothWays<F>
    {
        type Cell = (u32, u32);
        type Data = Way;

        fn keys(&self, &(a, b): &(u32, u32)) -> Vec<CellKey> {
            vec![
                CellKey::of("example", &(a, b)),
                CellKey::of("example", &(b, a)),
            ]
        }

        fn measure(&self, &(a, b): &(u32, u32)) -> Result<Vec<Measured<Way>>, Interrupted> {
            let error = (self.answer)(a, b)?;
            self.measured.lock().unwrap().push((a, b));
            Ok([(a, b), (b, a)]
                .into_iter()
                .map(|(from, to)| Measured {
                    placement: "agents".into(),
                    data: Way { from, to },
                    error: error.clone(),
                })
                .collect())
        }
    }

    fn both_ways<F>(answer: F) -> BothWays<F> {
        BothWays {
            answer,
            measured: Mutex::new(Vec::new()),
        }
    }

    fn runner_on(writer: &mut RecordWriter, stop: Arc<AtomicBool>) -> Runner<'_> {
        Runner::new(HostFacts::default(), Some(writer))
            .progress(false)
            .stop_flag(stop)
    }

    #[test]
    fn the_lanes_of_a_round_run_at_once_and_each_cell_keeps_a_record_a_key() {
        // Each of the two lanes' first cells waits for the other's: run one
        // after another, they would both time out and fail.
        let (to_b, from_a) = mpsc::channel::<()>();
        let (to_a, from_b) = mpsc::channel::<()>();
        let lane_0 = Mutex::new((to_b, from_b));
        let lane_1 = Mutex::new((to_a, from_a));
        let measure = both_ways(|a, _| {
            // Only the first cell of each lane meets the other.
            if a > 1 {
                return Ok(None);
            }
            let meet = if a == 0 { &lane_0 } else { &lane_1 }.lock().unwrap();
            let (tell, hear) = (&meet.0, &meet.1);
            tell.send(()).unwrap();
            let heard = hear.recv_timeout(Duration::from_secs(10));
            Ok(heard.err().map(|e| format!("alone: {e}")))
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut runner = runner_on(&mut writer, Arc::new(AtomicBool::new(false)));
        let lanes = [vec![(0, 2), (4, 5)], vec![(1, 3)]];
        let records = runner.round(&measure, &lanes).unwrap();
        assert_eq!(records[0].measured.len(), 4);
        assert_eq!(records[1].measured.len(), 2);
        assert!(
            records
                .iter()
                .flat_map(|l| &l.measured)
                .all(|r| r.error.is_none()),
            "{records:?}"
        );
        assert_eq!(records[1].measured[1].data, Way { from: 3, to: 1 });
        assert!(runner.done(&CellKey::of("example", &(5, 4))));
        // Kept in this run: a round that names it again measures nothing.
        let again = runner.round(&measure, &[vec![(4, 5)]]).unwrap();
        assert!(again[0].measured.is_empty() && again[0].reused.is_empty());
        assert_eq!(measure.measured.lock().unwrap().len(), 3);
        drop(runner);
        let on_disk = crate::record::read_records::<Way>(&path).unwrap();
        assert_eq!(on_disk.len(), 6);
        assert!(on_disk.iter().all(|r| r.as_ref().unwrap().cell.is_some()));
    }

    #[test]
    fn a_stopped_round_keeps_what_ended_and_a_resumed_one_measures_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // Lane 0 fails (0, 1), then stops the run during (2, 3) once lane
        // 1 has ended (4, 5) and started (6, 7), which ends after the stop
        // and is not kept; lane 0's (8, 9) never starts.
        let lane_1_on = Arc::new(AtomicBool::new(false));
        let first = {
            let lane_1_on = lane_1_on.clone();
            both_ways(move |a, _| {
                let flag = &flag;
                match a {
                    0 => return Ok(Some("refused".to_string())),
                    2 => {
                        while !lane_1_on.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        flag.store(true, Ordering::Relaxed);
                    }
                    6 => {
                        lane_1_on.store(true, Ordering::Relaxed);
                        while !flag.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    _ => {}
                }
                Ok(None)
            })
        };
        let lanes = [vec![(0, 1), (2, 3), (8, 9)], vec![(4, 5), (6, 7)]];
        {
            let mut writer = RecordWriter::append(&path).unwrap();
            let mut runner = runner_on(&mut writer, stop);
            assert!(matches!(
                runner.round(&first, &lanes),
                Err(MeasureError::Interrupted { .. })
            ));
        }
        let ran = first.measured.lock().unwrap().clone();
        assert!(!ran.contains(&(8, 9)), "{ran:?}");
        let on_disk = crate::record::read_records::<Way>(&path).unwrap();
        assert_eq!(on_disk.len(), 4, "(0, 1) failed and (4, 5) both ways");
        // Resumed: the failure, the stopped cells and the one never
        // started are measured; (4, 5) comes back from the file.
        let second = both_ways(|_, _| Ok(None));
        let mut writer = RecordWriter::append(&path).unwrap();
        let mut runner = runner_on(&mut writer, Arc::new(AtomicBool::new(false)))
            .resume(Some(Resumed::read(&path).unwrap()));
        assert!(runner.done(&CellKey::of("example", &(5, 4))));
        assert!(!runner.done(&CellKey::of("example", &(0, 1))));
        let records = runner.round(&second, &lanes).unwrap();
        assert_eq!(runner.reused(), 1);
        let mut measured = second.measured.lock().unwrap().clone();
        measured.sort_unstable();
        assert_eq!(measured, [(0, 1), (2, 3), (6, 7), (8, 9)]);
        let count = |pick: fn(&Lane<Way>) -> &Vec<Record<Way>>| {
            records.iter().map(|l| pick(l).len()).sum::<usize>()
        };
        assert_eq!((count(|l| &l.reused), count(|l| &l.measured)), (2, 8));
        assert_eq!(records[1].reused[0].data, Way { from: 4, to: 5 });
        // A test decided without measuring: not when it was measured.
        let lost = |from, to| Measured {
            placement: "agents".into(),
            data: Way { from, to },
            error: Some("agent 9 takes no part".into()),
        };
        assert!(
            runner
                .decided(CellKey::of("example", &(1, 0)), lost(1, 0))
                .unwrap()
                .is_none()
        );
        assert!(
            runner
                .decided(CellKey::of("example", &(8, 10)), lost(8, 10))
                .unwrap()
                .is_some()
        );
    }
}
