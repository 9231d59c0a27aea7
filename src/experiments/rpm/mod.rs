//! Responsiveness under working conditions (draft-ietf-ippm-responsiveness-06):
//! RPM from foreign and self probes while load-generating connections
//! saturate the path, the idle and working round trips, the bufferbloat
//! grade, and where the delay built up (the emulator's queue, the
//! sockets' queues).

pub mod analysis;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
pub mod split;
