//! A login server with the relay design as a switch: every design serves
//! the same protocols with the same session logic ([`super::conn`]) and
//! differs only in how bytes move and how many processes and wake-ups that
//! takes. `docs/EXPERIMENTS.md` counts the system calls per keystroke of each.

use super::conn::SessionConfig;
use std::io;
use std::net::TcpListener;

/// How a server moves bytes between sockets and ptys.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Relay {
    /// A process per session in poll, copying through user space (rlogind, telnetd).
    Fork,
    /// One process, one epoll set for all sessions, copying through user space.
    Epoll,
    /// As epoll, but output that needs no protocol processing moves by splice(2).
    Splice,
    /// One process, one io_uring for all sessions: submissions and completions in batches.
    Uring,
    /// As epoll, but each wake-up first waits [`BATCH_WINDOW`] so the events of
    /// many sessions are served in one round: interrupt moderation for a
    /// relay, trading echo latency (a window for the keystroke and one for
    /// its echo) for wake-ups.
    Batch,
}

/// How long the `batch` design lets events gather after a wake-up: well
/// inside the 100 ms at which an echo stops feeling instantaneous.
pub const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

impl Relay {
    pub const ALL: [Relay; 4] = [Relay::Fork, Relay::Epoll, Relay::Splice, Relay::Uring];

    pub fn name(self) -> &'static str {
        match self {
            Relay::Fork => "fork",
            Relay::Epoll => "epoll",
            Relay::Splice => "splice",
            Relay::Uring => "uring",
            Relay::Batch => "batch",
        }
    }
}

/// What a server did over its life.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ServeReport {
    pub sessions: u64,
    pub refused: u64,
    /// Bytes moved pty -> socket without entering user space (splice design).
    pub spliced_bytes: u64,
    /// io_uring_enter calls and completions (uring design).
    pub uring_enters: u64,
    pub uring_completions: u64,
}

/// Serves sessions on `listener` with `relay` until `stop()`; every session
/// still open is ended (command killed and reaped) before this returns.
pub fn serve(
    listener: TcpListener,
    relay: Relay,
    config: &SessionConfig,
    max_sessions: usize,
    stop: &dyn Fn() -> bool,
) -> io::Result<ServeReport> {
    match relay {
        Relay::Fork => {
            super::relay_fork::serve(listener, config, max_sessions, stop).map(|r| ServeReport {
                sessions: r.sessions,
                refused: r.refused,
                ..ServeReport::default()
            })
        }
        Relay::Epoll | Relay::Splice | Relay::Batch => super::relay_epoll::serve(
            listener,
            config,
            max_sessions,
            relay == Relay::Splice,
            (relay == Relay::Batch).then_some(BATCH_WINDOW),
            stop,
        )
        .map(|r| ServeReport {
            sessions: r.sessions,
            refused: r.refused,
            spliced_bytes: r.spliced_bytes,
            ..ServeReport::default()
        }),
        Relay::Uring => {
            super::relay_uring::serve(listener, config, max_sessions, stop).map(|r| ServeReport {
                sessions: r.sessions,
                refused: r.refused,
                uring_enters: r.enters,
                uring_completions: r.completions,
                ..ServeReport::default()
            })
        }
    }
}
