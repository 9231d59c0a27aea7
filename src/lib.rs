//! netlab: a TCP/IP performance laboratory.
//!
//! It runs the classic network performance experiments (Berkeley 1981, Van
//! Jacobson 1988, ...) on today's hosts with real implementations, and says
//! what limits them. The crate is layered; dependencies point down:
//!
//! | module | role |
//! |---|---|
//! | [`cli`] | one module per subcommand: options and `run` |
//! | [`experiment`] | each experiment's orchestration of endpoint processes |
//! | [`endpoint`] | the programs at each end (sender, receiver), run as child processes |
//! | [`measure`] | rusage, /proc/stat, TCP_INFO, kernel and interface counters, host facts |
//! | [`testbed`] | placements: loopback, namespaces, link profiles, the wire emulator, capture |
//! | [`wire`] | byte formats as parse/emit pairs, no I/O |
//! | [`checksum`] | the Internet checksum (RFC 1071) variants, fused copy, copy variants |
//! | [`analysis`] | pure functions: statistics, knee, cost model, bottleneck |
//! | [`report`] | tables, historical figures, progress display |
//! | [`record`] | the record every measurement becomes, and its JSON Lines file |
//! | [`units`] | sizes and durations as typed by users |

pub mod analysis;
pub mod checksum;
pub mod cli;
pub mod endpoint;
pub mod experiment;
pub mod measure;
pub mod record;
pub mod report;
pub mod testbed;
pub mod units;
pub mod wire;
