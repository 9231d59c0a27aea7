//! One module per experiment: its configuration, its orchestration of
//! endpoint processes, and the records it produces.

pub mod bed;
pub mod cksum;
pub mod endpoints;
pub mod login;
pub mod output;
pub mod rpc;
pub mod servers;
pub mod stream;
pub mod sweep;

use crate::measure::host::HostFacts;
use crate::record::{Record, RecordData, RecordWriter, now_rfc3339};
use endpoints::ControlError;
use stream::MeasureError;

/// Runs one measurement and turns its outcome into a record, written to
/// `writer` if given, whether it succeeded or failed: a failed run is a
/// record with its `error` set, so the caller decides whether to go on. An
/// interrupted run is not recorded. `data` builds the experiment's part
/// from the result (absent when the run failed).
pub fn record_run<T>(
    placement: &str,
    host: &HostFacts,
    writer: Option<&mut RecordWriter>,
    run: impl FnOnce() -> Result<T, ControlError>,
    data: impl FnOnce(Option<Box<T>>) -> RecordData,
) -> Result<Record, MeasureError> {
    let started = now_rfc3339();
    let (result, error) = match run() {
        Ok(result) => (Some(Box::new(result)), None),
        Err(ControlError::Interrupted) => return Err(MeasureError::Interrupted),
        Err(e) => (None, Some(e.to_string())),
    };
    let record = Record::new(started, placement, host, data(result), error);
    if let Some(writer) = writer {
        writer.write(&record).map_err(|source| MeasureError::Save {
            path: writer.path().display().to_string(),
            source,
        })?;
    }
    Ok(record)
}
