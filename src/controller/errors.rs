//! How a cell or a grid of them ends other than with a result: the user
//! interrupted it, a grid stopped early, a cell could not be measured.

use super::processes::ControlError;
use thiserror::Error;

/// The user interrupted a cell (Ctrl-C or SIGTERM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Why a grid of cells stopped before its end. A failed cell is not one of
/// these: it is a record with its error, and the grid goes on (unless
/// `--fail-fast`).
#[derive(Debug, Error)]
pub enum MeasureError {
    #[error("interrupted; {saved} finished record(s) kept")]
    Interrupted { saved: usize },
    #[error("stopped at the first failed cell (--fail-fast; {saved} record(s) kept): {error}")]
    FailFast { error: String, saved: usize },
    #[error("cannot save the record to {path}: {source}")]
    Save {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Why a login-load or terminal-output cell (or the server it loads) could
/// not be measured; recorded as the cell's error.
#[derive(Debug, Error)]
pub enum CellError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    ProcStat(#[from] crate::measure::procstat::ProcStatError),
    /// An I/O error, with what was being done.
    #[error("{what}: {source}")]
    While {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The cell cannot run as asked (a server that does not speak the
    /// dialect, a program missing, root needed), or a server misbehaved.
    #[error("{0}")]
    Refused(String),
    /// An error with what the server's log said about it.
    #[error("{error}; {detail}")]
    Detail {
        error: Box<CellError>,
        detail: String,
    },
}

impl CellError {
    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> CellError {
        CellError::While {
            what: what.into(),
            source,
        }
    }

    /// This error with `detail` after it.
    pub fn with(self, detail: impl Into<String>) -> CellError {
        CellError::Detail {
            error: Box::new(self),
            detail: detail.into(),
        }
    }
}
