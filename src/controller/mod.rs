//! The controller: the engine every experiment runs on, naming none of
//! them. An experiment's cells go through the one [`runner`] (records
//! written as they finish, resume, interrupts); each cell starts its
//! endpoint processes with the [`launcher`] at a [`placement`] (this host,
//! its namespaces, or agents on other hosts through [`remote`]) and talks
//! to them through [`processes`]; [`lab`] holds what `netlab lab` needs of
//! each experiment, [`doctor`] what a host can run.

/// `return Err(CellError::Refused(format!(...)))`.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::controller::CellError::Refused(format!($($arg)*)).into())
    };
}
pub(crate) use refuse;

pub mod doctor;
pub mod helpers;
pub mod lab;
pub mod launcher;
pub mod metrics;
pub mod placement;
pub mod processes;
pub mod profile;
pub mod progress;
pub mod remote;
pub mod resume;
pub mod rounds;
pub mod runner;
pub mod sink;

pub mod errors;

pub use errors::{CellError, Interrupted, MeasureError};
pub use runner::measured;
