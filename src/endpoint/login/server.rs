//! A login server with the relay design as a switch: every design serves
//! the same protocols with the same session logic ([`super::conn`]) and
//! differs only in how bytes move and how many processes and wake-ups that
//! takes. `docs/EXPERIMENTS.md` counts the system calls per keystroke of each.

use super::conn::SessionConfig;
use super::protocol::Protocol;
use super::stop::StopSignal;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

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
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServeReport {
    pub sessions: u64,
    pub refused: u64,
    /// Bytes moved pty -> socket without entering user space (splice design).
    pub spliced_bytes: u64,
    /// io_uring_enter calls and completions (uring design).
    pub uring_enters: u64,
    pub uring_completions: u64,
}

/// Serves sessions on `listener` with `relay` until `stop` is requested;
/// every session still open is ended (command killed and reaped) before
/// this returns.
pub fn serve(
    listener: TcpListener,
    relay: Relay,
    config: &SessionConfig,
    max_sessions: usize,
    stop: &StopSignal,
) -> io::Result<ServeReport> {
    // Through an agent a gate takes the connections and checks each one's
    // token on its own thread: a stranger at the peer's address cannot
    // hold the relay's loop (endpoint::guard).
    let listener = crate::endpoint::guard::Door::new(listener, config.guard.clone())?;
    // Without its page a server still serves; its windows count no
    // pty transfers and say so.
    if let Err(e) = super::tally::share() {
        super::conn::login_line(format_args!("pty transfers not counted: {e}"));
    }
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

/// A login server an endpoint runs for the controller until `Stop`
/// (`Command::LoginServe`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoginServeSpec {
    pub bind: SocketAddr,
    pub relay: Relay,
    /// `telnet` or `rlogin`.
    pub protocol: String,
    pub linemode: bool,
    pub nodelay: bool,
    pub max_sessions: usize,
    pub idle_timeout_s: u64,
    /// The command each session runs on its pty.
    pub command: Vec<String>,
    /// Through an agent: the only client address served, and the token
    /// its connections begin with.
    #[serde(default)]
    pub guard: Option<crate::endpoint::protocol::DataGuard>,
}

/// A server serving on a thread of its own.
pub struct Running {
    relay: Relay,
    port: u16,
    stop: Arc<StopSignal>,
    thread: JoinHandle<io::Result<ServeReport>>,
}

impl Running {
    /// Binds `spec.bind` and serves on a new thread.
    pub fn start(spec: LoginServeSpec) -> io::Result<Running> {
        let listener = TcpListener::bind(spec.bind)?;
        Running::on(listener, spec)
    }

    /// Serves on `listener` (already bound; `spec.bind` is not used) on a
    /// new thread.
    pub fn on(listener: TcpListener, spec: LoginServeSpec) -> io::Result<Running> {
        let protocol = Protocol::parse(&spec.protocol).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown protocol {:?} (telnet or rlogin)", spec.protocol),
            )
        })?;
        if spec.linemode && protocol != Protocol::Telnet {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "LINEMODE is a TELNET option; rlogin has no LINEMODE",
            ));
        }
        let port = listener.local_addr()?.port();
        let config = SessionConfig {
            protocol,
            linemode: spec.linemode,
            command: spec.command,
            idle: std::time::Duration::from_secs(spec.idle_timeout_s),
            nodelay: spec.nodelay,
            guard: spec.guard,
        };
        let stop = Arc::new(StopSignal::new()?);
        let signal = stop.clone();
        let (relay, max_sessions) = (spec.relay, spec.max_sessions);
        let thread = std::thread::Builder::new()
            .name(format!("login-{}", relay.name()))
            .spawn(move || serve(listener, relay, &config, max_sessions, &signal))?;
        Ok(Running {
            relay,
            port,
            stop,
            thread,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops serving; every open session is ended before this returns.
    pub fn stop(self) -> io::Result<ServeReport> {
        self.stop.request();
        let report = self
            .thread
            .join()
            .map_err(|_| io::Error::other("the login server's thread panicked"))??;
        eprintln!(
            "netlab login serve ({}): stopped after {} sessions ({} refused, {} bytes spliced, {} io_uring completions in {} enters)",
            self.relay.name(),
            report.sessions,
            report.refused,
            report.spliced_bytes,
            report.uring_completions,
            report.uring_enters
        );
        Ok(report)
    }
}

/// Writes `data` to `out` at `bytes_per_s`, in chunks every 10 ms, as a
/// serial line of that speed would carry it (`netlab output --baud`: the
/// command a session runs).
pub fn pace(bytes_per_s: u64, data: &[u8], out: &mut impl io::Write) -> io::Result<()> {
    let bytes_per_s = bytes_per_s.max(1);
    let chunk = (bytes_per_s / 100).max(1) as usize;
    let start = std::time::Instant::now();
    for (i, piece) in data.chunks(chunk).enumerate() {
        let due =
            start + std::time::Duration::from_secs_f64((i * chunk) as f64 / bytes_per_s as f64);
        if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        out.write_all(piece)?;
        out.flush()?;
    }
    Ok(())
}
