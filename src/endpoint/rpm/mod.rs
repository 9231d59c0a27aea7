//! The responsiveness test's ends (draft-ietf-ippm-responsiveness-06):
//! load-generating connections and foreign and self probes on the
//! measuring end ([`client`]), the serving end ([`server`]), their framing
//! ([`framing`]), socket settings and queues ([`sockets`]), the draft's
//! saturation rules ([`saturation`]), the bounds any request is held to
//! ([`bounds`]) and the role an endpoint plays for them ([`role`]). The
//! rpm experiment measures with it, and any experiment can start a
//! background load with it (`LoadStart`, `LoadStop`): login's cells do.

pub mod bounds;
pub mod client;
pub mod framing;
pub mod role;
pub mod saturation;
pub mod server;
pub mod sockets;
pub mod types;
