//! Deterministic models of historical stacks: pure code, no sockets, no
//! clocks. A model's parameters are the historical constants, each cited
//! from its source; nothing is fitted to the figures it predicts.
//!
//! - [`bsd41`]: Berkeley's first TCP/IP (1981), a VAX-11/750 sending 4 MB
//!   to an 11/780, and Bill Joy's ladder of projected speedups.
//! - [`sunos35`]: the 1989 login host, a Sun-3/260 under SunOS 3.5, as
//!   a CPU model of N users typing through rlogind.
//! - [`vms44`]: the 1987 VMS 4.4 host typing files through TELNET (and
//!   LAT), as a CPU model.
//! - [`sunos4`]: Sun RPC over TCP on SunOS 4 (1989), the stack behind the
//!   "4096 and 8192 bytes are slow" table.

pub mod bsd41;
pub mod sunos35;
pub mod sunos4;
pub mod vms44;

use serde::Serialize;

/// One constant of a model: its value, where it comes from, and how far
/// its source lets it move (a sensitivity analysis moves it that far; 0
/// where none is given).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Constant {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
    pub source: &'static str,
    /// Cited from a source (true) or fitted to one of the source's rows.
    pub cited: bool,
    /// The relative uncertainty the source allows (0.1: ±10%).
    pub uncertainty: f64,
}
