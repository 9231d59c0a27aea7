//! Deterministic models of historical stacks: pure code, no sockets, no
//! clocks. A model's parameters are the historical constants, each cited
//! from its source; nothing is fitted to the figures it predicts.
//!
//! - [`sunos35`]: the 1989 login host, a Sun-3/260 under SunOS 3.5, as
//!   a CPU model of N users typing through rlogind.
//! - [`sunos4`]: Sun RPC over TCP on SunOS 4 (1989), the stack behind the
//!   "4096 and 8192 bytes are slow" table.

pub mod sunos35;
pub mod sunos4;
