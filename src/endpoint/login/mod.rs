//! Remote-login servers (telnet, rlogin) on pseudo-terminals: the pty layer
//! ([`pty`]), the protocols' server logic apart from I/O ([`session`] for
//! TELNET, [`protocol`] for both), one session's state as every relay holds
//! it ([`conn`]), and the relay designs that move bytes between socket and
//! pty ([`server`] picks one).

pub mod client;
pub mod conn;
pub mod protocol;
pub mod pty;
pub mod relay_epoll;
pub mod relay_fork;
pub mod relay_poll;
pub mod relay_uring;
pub mod server;
pub mod session;
pub mod typist;
