//! Remote-login servers (telnet, rlogin) on pseudo-terminals: the pty layer
//! ([`pty`]), the protocols' server logic apart from I/O ([`session`] for
//! TELNET, [`protocol`] for both), one session's state as every relay holds
//! it ([`conn`]), and the relay designs that move bytes between socket and
//! pty ([`server`] picks one; [`stop`] ends its loop at once). A login-load or terminal-output cell's two
//! ends are endpoint roles: the serving host ([`host`], with the real
//! servers of [`programs`]) and the typing end ([`clients`]).

pub mod client;
pub mod clients;
pub mod conn;
pub mod host;
pub mod programs;
pub mod protocol;
pub mod pty;
pub mod relay_epoll;
pub mod relay_fork;
pub mod relay_poll;
pub mod relay_uring;
pub mod server;
pub mod session;
pub mod stop;
pub mod tally;
pub mod typist;
