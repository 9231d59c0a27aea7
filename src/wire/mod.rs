//! Byte formats, each a parse/emit pair with no I/O of its own.
//!
//! - [`control`]: framing of the controller ↔ endpoint channel.

pub mod control;
