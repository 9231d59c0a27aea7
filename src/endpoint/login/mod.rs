//! Remote-login servers (telnet, rlogin) on pseudo-terminals: the pty layer
//! ([`pty`]) and the protocol side of a session apart from I/O ([`session`]).
//! The relay designs that move bytes between socket and pty build on these.

pub mod pty;
pub mod relay_poll;
pub mod session;
