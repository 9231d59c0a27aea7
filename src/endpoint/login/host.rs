//! The serving end of a login-load or terminal-output cell: one endpoint
//! process that starts the cell's server (netlab's own in one of its relay
//! designs, in this process; or telnetd or sshd as children,
//! [`super::programs`]), samples its host over the window the typing end
//! announces ([`crate::measure::window`]), and stops it all at `Stop`.
//!
//! The endpoint is the root of the server's process tree, so the tree's CPU
//! time is the server's (its sessions and their commands with it) wherever
//! the endpoint runs: on this host, in a namespace, or on an agent.
//!
//! What a session runs is chosen from [`SessionCommand`], never a
//! controller's shell text: an agent that allows login or output runs only
//! these commands.
//!
//! The server's diagnostics (for netlab's relays, this process's stderr,
//! redirected to a log for the server's life) come back at `Stop` as the
//! reasons sessions ended and the log's last lines.

use super::programs::{self, Program, SshAccess};
use super::protocol::Protocol;
use super::server::{LoginServeSpec, Relay, Running, ServeReport};
use super::typist::READY_MARKER;
use crate::endpoint::guard::bind_first;
use crate::endpoint::protocol::DataGuard;
/// The server a cell loads: one of netlab's relay designs, or a real one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// A process per session, as 1989's rlogind (the default).
    #[default]
    Fork,
    Epoll,
    Splice,
    Uring,
    /// epoll with a 20 ms coalescing window per wake-up (see `Relay::Batch`).
    Batch,
    /// inetutils telnetd (Debian inetutils-telnetd), started per connection
    /// by socat as inetd would, running the same command: TELNET only.
    Telnetd,
    /// OpenSSH's sshd (Debian openssh-server) on a throwaway host key with a
    /// key-only test user, driven by real `ssh` clients: SSH only.
    Sshd,
}

/// What the simulated users' clients speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// TELNET, character at a time with server echo (netlab's client).
    Telnet,
    /// TELNET with LINEMODE EDIT (RFC 1184): the client edits and echoes
    /// lines itself and sends each whole line (netlab's client).
    TelnetLinemode,
    /// rlogin (RFC 1282, netlab's client).
    #[default]
    Rlogin,
    /// SSH: OpenSSH's `ssh` client on a pty, against sshd.
    Ssh,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Fork => "fork",
            Target::Epoll => "epoll",
            Target::Splice => "splice",
            Target::Uring => "uring",
            Target::Batch => "batch",
            Target::Telnetd => "telnetd",
            Target::Sshd => "sshd",
        }
    }
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Telnet => "telnet",
            Dialect::TelnetLinemode => "telnet-linemode",
            Dialect::Rlogin => "rlogin",
            Dialect::Ssh => "ssh",
        }
    }

    pub fn linemode(self) -> bool {
        self == Dialect::TelnetLinemode
    }
}
use crate::measure::waits::WaitWatch;
use crate::measure::window::{HostWindow, Sampler, idle_busy_cpus};
use crate::testbed::cgroup::CpuBudget;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// A few kilobytes of plain English to type (netlab ships no corpus file by
/// default; `--corpus FILE` types another text).
pub const DEFAULT_CORPUS: &str = "\
The test faked users typing at an even five characters per second into cooked
mode with echo. Each keystroke crosses the network, wakes the server, enters
the terminal, comes back as an echo and crosses the network again. What the
host spends per keystroke is the price of the relay between socket and pty:
process switches, system calls and copies. A remote-login server that only
switches bytes between two kernel objects pays all of them for every byte.
";

/// What the command of a terminal-output session prints after the file, so
/// the client knows it has all.
pub const END_MARKER: &[u8] = b"NETLAB-END-OF-OUTPUT";

impl Target {
    /// Every server this host can run, each with the dialect it is
    /// measured in: netlab's designs over rlogin, then the real servers
    /// beside them (telnetd over TELNET, sshd over SSH, as root) where
    /// this machine has them.
    pub fn servers_here() -> Vec<(Target, Dialect)> {
        let mut servers: Vec<(Target, Dialect)> = Relay::ALL
            .into_iter()
            .map(|relay| (Target::of(relay), Dialect::Rlogin))
            .collect();
        if std::path::Path::new("/usr/sbin/telnetd").exists() {
            servers.push((Target::Telnetd, Dialect::Telnet));
        }
        // SAFETY: geteuid has no preconditions.
        if std::path::Path::new("/usr/sbin/sshd").exists() && unsafe { libc::geteuid() } == 0 {
            servers.push((Target::Sshd, Dialect::Ssh));
        }
        servers
    }

    /// netlab's design, or None for a real server.
    pub fn relay(self) -> Option<Relay> {
        match self {
            Target::Fork => Some(Relay::Fork),
            Target::Epoll => Some(Relay::Epoll),
            Target::Splice => Some(Relay::Splice),
            Target::Uring => Some(Relay::Uring),
            Target::Batch => Some(Relay::Batch),
            Target::Telnetd | Target::Sshd => None,
        }
    }

    pub fn of(relay: Relay) -> Target {
        match relay {
            Relay::Fork => Target::Fork,
            Relay::Epoll => Target::Epoll,
            Relay::Splice => Target::Splice,
            Relay::Uring => Target::Uring,
            Relay::Batch => Target::Batch,
        }
    }

    /// Whether this server speaks `dialect`, and if not, why.
    pub fn speaks(self, dialect: Dialect) -> Result<(), String> {
        match (self, dialect) {
            (Target::Sshd, Dialect::Ssh) => Ok(()),
            (Target::Sshd, other) => Err(format!(
                "sshd speaks SSH only, not {}; its cells use --protocol ssh",
                other.name()
            )),
            (_, Dialect::Ssh) => Err(format!(
                "{} does not speak SSH; OpenSSH does (--relay sshd)",
                self.name()
            )),
            (Target::Telnetd, Dialect::Rlogin) => {
                Err("telnetd speaks TELNET only; use --protocol telnet".into())
            }
            _ => Ok(()),
        }
    }

    /// The dialect a cell of this server speaks when `asked` is asked:
    /// sshd's cells speak SSH whatever else is asked.
    pub fn dialect_for(self, asked: Dialect) -> Dialect {
        if self == Target::Sshd {
            Dialect::Ssh
        } else {
            asked
        }
    }
}

impl Dialect {
    /// The protocol netlab's server speaks for this dialect (None for SSH).
    pub fn protocol(self) -> Option<Protocol> {
        match self {
            Dialect::Telnet | Dialect::TelnetLinemode => Some(Protocol::Telnet),
            Dialect::Rlogin => Some(Protocol::Rlogin),
            Dialect::Ssh => None,
        }
    }
}

/// What each session of a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionCommand {
    /// The 1989 load: announce, then read what is typed. Character at a
    /// time the terminal echoes and `cat` discards; in LINEMODE nothing
    /// echoes, so `cat` writes each line back.
    Discard { linemode: bool },
    /// The 1987 output test: announce, wait for a line (so logins and key
    /// exchanges are over before the counters start), then `bytes` of text
    /// (paced like a serial line of `baud`, if given), the end marker, and
    /// a wait so the session is still there when its tree is sampled.
    Output { bytes: u64, baud: Option<u32> },
}

impl SessionCommand {
    /// The shell line; an output session's text is written into `dir`.
    pub fn shell_line(self, dir: &Path) -> io::Result<String> {
        let ready = String::from_utf8_lossy(READY_MARKER);
        match self {
            SessionCommand::Discard { linemode: true } => {
                Ok(format!("printf '{ready}\\n'; exec cat"))
            }
            SessionCommand::Discard { linemode: false } => {
                Ok(format!("printf '{ready}\\n'; exec cat > /dev/null"))
            }
            SessionCommand::Output { bytes, baud } => {
                let file = dir.join("corpus.txt");
                write_corpus(&file, bytes)?;
                // sshd's test user reads it.
                std::fs::set_permissions(
                    &file,
                    std::os::unix::fs::PermissionsExt::from_mode(0o644),
                )?;
                let writer = match baud {
                    None => format!("cat '{}'", file.display()),
                    Some(baud) => format!(
                        "'{}' login pace --bytes-per-s {} '{}'",
                        std::env::current_exe()?.display(),
                        (baud / 10).max(1),
                        file.display()
                    ),
                };
                Ok(format!(
                    "stty -echo; printf '{ready}\\n'; read go; stty echo; {writer}; printf '{}\\n'; sleep 60",
                    String::from_utf8_lossy(END_MARKER)
                ))
            }
        }
    }
}

/// A text file of about `bytes` bytes: lines of English, as a user's files were.
pub fn write_corpus(path: &Path, bytes: u64) -> io::Result<()> {
    let paragraph = DEFAULT_CORPUS.as_bytes();
    let mut data = Vec::with_capacity(bytes as usize + paragraph.len());
    while (data.len() as u64) < bytes {
        data.extend_from_slice(paragraph);
    }
    data.truncate(bytes as usize);
    std::fs::write(path, data)
}

/// How the serving end starts (`Command::HostServe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostServeSpec {
    pub target: Target,
    pub dialect: Dialect,
    /// The address the server listens on (IPv4).
    pub address: IpAddr,
    pub session: SessionCommand,
    pub max_sessions: usize,
    /// TCP_NODELAY on netlab's sessions (telnetd cannot; sshd sets it on
    /// interactive sessions itself).
    pub nodelay: bool,
    /// The interface whose packets a window counts (None: TCP segments of
    /// this namespace).
    pub interface: Option<String>,
    /// Measure the host's idle CPU for a second before the server starts.
    pub measure_idle: bool,
    /// Through an agent: the data ports (set by the agent), the only
    /// client address served, and the run token netlab's own servers
    /// check; telnetd and sshd take no token (real clients speak their
    /// protocol from the first byte) and are held by address.
    pub guard: Option<DataGuard>,
    /// A CPU budget for the server (percent of one CPU), through a cgroup
    /// the serving end joins before it starts the server; its quota holds
    /// from [`Host::apply_budget`] on (once every session is logged in).
    #[serde(default)]
    pub cpu_budget_pct: Option<f64>,
}

/// The serving end's answer to `HostServe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostServing {
    pub port: u16,
    /// For sshd: what a client needs to log in.
    pub ssh: Option<SshAccess>,
    /// Busy CPUs of the idle host, if asked.
    pub idle_busy_cpus: Option<f64>,
    /// The CPU budget as applied ("10% of one CPU, cgroup PATH"), or why
    /// it could not be (the server then runs without one).
    #[serde(default)]
    pub cpu_budget: Option<String>,
}

/// What the serving end reports at `Stop`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// netlab's server's own account (None for telnetd and sshd).
    pub serve: Option<ServeReport>,
    /// Why sessions ended, each reason with how many.
    pub endings: Vec<String>,
    /// The server log's last lines.
    pub log_tail: String,
    /// How long the CPU budget held the server back (cgroup `cpu.stat`).
    #[serde(default)]
    pub throttled_s: Option<f64>,
}

/// This process's stderr pointed at a file until dropped.
struct StderrTo {
    saved: OwnedFd,
}

impl StderrTo {
    fn file(path: &Path) -> io::Result<StderrTo> {
        let log = std::fs::File::options().append(true).open(path)?;
        let saved = nix::unistd::dup(std::io::stderr())?;
        // SAFETY: both descriptors are open; dup2 replaces fd 2 atomically.
        if unsafe { libc::dup2(log.as_raw_fd(), 2) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(StderrTo { saved })
    }
}

impl Drop for StderrTo {
    fn drop(&mut self) {
        // SAFETY: restores the descriptor saved above.
        unsafe { libc::dup2(self.saved.as_raw_fd(), 2) };
    }
}

enum Server {
    Netlab(Running, StderrTo),
    Program(Program),
}

/// A serving end between `HostServe` and `Stop`.
pub struct Host {
    server: Option<Server>,
    /// Dropped after the server: the group empties, then goes.
    budget: Option<CpuBudget>,
    interface: Option<String>,
    sampler: Option<Sampler>,
    /// A terminal-output session's port, whose waits a window watches.
    watched_port: Option<u16>,
    watch: Option<WaitWatch>,
    /// Pty transfers counted when the window opened.
    tally_at_open: Option<u64>,
    log: tempfile::NamedTempFile,
    /// The output session's text (and anything else sessions read).
    _dir: tempfile::TempDir,
}

impl Host {
    /// Starts the server `spec` names.
    pub fn start(spec: HostServeSpec) -> io::Result<(Host, HostServing)> {
        spec.target.speaks(spec.dialect).map_err(io::Error::other)?;
        let IpAddr::V4(address) = spec.address else {
            return Err(io::Error::other(format!(
                "login servers listen on IPv4 only, not {}",
                spec.address
            )));
        };
        let idle_busy_cpus = if spec.measure_idle {
            Some(idle_busy_cpus().map_err(io::Error::other)?)
        } else {
            None
        };
        // The budget before the server: everything it starts inherits it.
        let (budget, cpu_budget) = match spec.cpu_budget_pct {
            None => (None, None),
            Some(percent) => {
                match CpuBudget::create_lifted(percent).and_then(|b| b.enter_thread().map(|()| b)) {
                    Ok(b) => {
                        let (quota, period) = b.quota_and_period();
                        let note = format!(
                            "{percent}% of one CPU, cgroup {} ({quota} µs every {period} µs), \
                             from the moment every session had logged in",
                            b.path().display()
                        );
                        (Some(b), Some(note))
                    }
                    Err(e) => (None, Some(format!("not applied: {e}"))),
                }
            }
        };
        let dir = crate::testbed::scratch::scratch_dir("session")?;
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        let command = spec.session.shell_line(dir.path())?;
        let log = tempfile::NamedTempFile::new()?;
        let guard = spec.guard.as_ref();
        let (server, port, ssh) = match (spec.target.relay(), spec.target) {
            (Some(relay), _) => {
                let protocol = spec.dialect.protocol().expect("checked by speaks");
                let listener =
                    bind_first(SocketAddr::from((address, 0)), guard, TcpListener::bind)?;
                let stderr = StderrTo::file(log.path())?;
                let running = Running::on(
                    listener,
                    LoginServeSpec {
                        bind: SocketAddr::from((address, 0)),
                        relay,
                        protocol: protocol.name().to_string(),
                        linemode: spec.dialect.linemode(),
                        nodelay: spec.nodelay,
                        max_sessions: spec.max_sessions,
                        idle_timeout_s: 3600,
                        command: ["sh", "-c", &command].map(String::from).to_vec(),
                        guard: spec.guard.clone(),
                    },
                )?;
                let port = running.port();
                (Server::Netlab(running, stderr), port, None)
            }
            (None, Target::Telnetd) => {
                let program = programs::telnetd(
                    spec.dialect.linemode(),
                    &command,
                    address,
                    guard,
                    log.path(),
                )?;
                let port = program.port;
                (Server::Program(program), port, None)
            }
            (None, _) => {
                let (program, mut access) =
                    programs::sshd(spec.max_sessions, address, guard, log.path())?;
                access.command = command;
                let port = program.port;
                (Server::Program(program), port, Some(access))
            }
        };
        // The server's threads and processes are in the budget; this
        // thread (control, and the sampler it will start) goes back out.
        if let Some(b) = &budget {
            b.leave_thread().map_err(io::Error::other)?;
        }
        Ok((
            Host {
                server: Some(server),
                budget,
                interface: spec.interface,
                sampler: None,
                watched_port: matches!(spec.session, SessionCommand::Output { .. }).then_some(port),
                watch: None,
                tally_at_open: None,
                log,
                _dir: dir,
            },
            HostServing {
                port,
                ssh,
                idle_busy_cpus,
                cpu_budget,
            },
        ))
    }

    /// Puts the CPU budget's quota on the server (a no-op without one):
    /// called once every session has logged in, so that logging in is
    /// not what the budget measures.
    pub fn apply_budget(&mut self) -> io::Result<()> {
        match &self.budget {
            Some(budget) => budget.apply().map_err(io::Error::other),
            None => Ok(()),
        }
    }

    /// Opens the measured window.
    pub fn open_window(&mut self) -> io::Result<()> {
        if self.sampler.is_some() {
            return Err(io::Error::other("the window is open already"));
        }
        self.sampler = Some(
            Sampler::start(std::process::id(), self.interface.clone()).map_err(io::Error::other)?,
        );
        // Only netlab's own relays count transfers (telnetd and sshd do not).
        self.tally_at_open = match self.server {
            Some(Server::Netlab(..)) => super::tally::total(),
            _ => None,
        };
        if let Some(port) = self.watched_port {
            // SAFETY: gettid has no failure mode.
            let control = unsafe { libc::gettid() } as u32;
            self.watch = Some(WaitWatch::start(std::process::id(), port, vec![control])?);
        }
        Ok(())
    }

    /// Closes the window: what the host did over it.
    pub fn close_window(&mut self) -> io::Result<HostWindow> {
        let sampler = self
            .sampler
            .take()
            .ok_or_else(|| io::Error::other("no window is open"))?;
        let watched = self.watch.take().map(WaitWatch::finish);
        let mut window = sampler.finish().map_err(io::Error::other)?;
        window.pty_transfers = self
            .tally_at_open
            .take()
            .zip(super::tally::total())
            .map(|(open, close)| close.saturating_sub(open));
        if let Some((waits, own_ns)) = watched {
            window.tree_ns = window.tree_ns.saturating_sub(own_ns);
            window.waits = Some(waits);
        }
        Ok(window)
    }

    /// Stops the server (every session with it) and reports.
    pub fn stop(mut self) -> io::Result<HostReport> {
        // The window is over: the teardown runs unthrottled, so it ends
        // well inside the controller's patience, whatever the budget.
        let throttled_s = self
            .budget
            .as_ref()
            .and_then(|b| b.throttled())
            .map(|t| t.as_secs_f64());
        if let Some(budget) = &self.budget {
            let _ = budget.lift();
        }
        let serve = match self.server.take() {
            Some(Server::Netlab(running, stderr)) => {
                let report = running.stop();
                drop(stderr);
                Some(report?)
            }
            Some(Server::Program(mut program)) => {
                program.stop();
                None
            }
            None => None,
        };
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        drop(self.budget.take());
        Ok(HostReport {
            serve,
            endings: session_endings(&text),
            log_tail: tail(&text, 5),
            throttled_s,
        })
    }
}

impl Drop for Host {
    /// A serving end that loses its controller (end of input, or an agent
    /// ending the run) still stops every session, sshd and test user.
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            let _ = budget.lift();
        }
        match self.server.take() {
            Some(Server::Netlab(running, _stderr)) => {
                let _ = running.stop();
            }
            Some(Server::Program(program)) => drop(program),
            None => {}
        }
    }
}

/// Why sessions ended, from a server's log: each distinct reason with how
/// many sessions it ended.
pub fn session_endings(log: &str) -> Vec<String> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for line in log.lines() {
        if let Some((_, why)) = line.split_once("session ended: ") {
            let why = why.split(" (").next().unwrap_or(why).to_string();
            *counts.entry(why).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(why, n)| format!("{n} x {why}"))
        .collect()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_run_only_their_own_commands() {
        let dir = tempfile::tempdir().unwrap();
        let discard = SessionCommand::Discard { linemode: false }
            .shell_line(dir.path())
            .unwrap();
        assert!(discard.ends_with("exec cat > /dev/null"), "{discard}");
        let line = SessionCommand::Discard { linemode: true }
            .shell_line(dir.path())
            .unwrap();
        assert!(line.ends_with("exec cat"), "{line}");
        let output = SessionCommand::Output {
            bytes: 1000,
            baud: None,
        }
        .shell_line(dir.path())
        .unwrap();
        assert!(output.contains("NETLAB-END-OF-OUTPUT"), "{output}");
        assert_eq!(
            std::fs::metadata(dir.path().join("corpus.txt"))
                .unwrap()
                .len(),
            1000
        );
    }

    #[test]
    fn servers_speak_their_own_dialects_only() {
        assert!(Target::Epoll.speaks(Dialect::Rlogin).is_ok());
        assert!(Target::Epoll.speaks(Dialect::TelnetLinemode).is_ok());
        assert!(Target::Telnetd.speaks(Dialect::Telnet).is_ok());
        assert!(Target::Telnetd.speaks(Dialect::Rlogin).is_err());
        assert!(Target::Sshd.speaks(Dialect::Ssh).is_ok());
        assert!(Target::Sshd.speaks(Dialect::Telnet).is_err());
        assert!(Target::Fork.speaks(Dialect::Ssh).is_err());
    }

    /// What the server says to an rlogin startup sent from `from`, the
    /// run token first if given: its NUL, or nothing (closed).
    fn first_byte(port: u16, from: &str, token: Option<&[u8]>) -> Option<u8> {
        use std::io::{Read, Write};
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&SocketAddr::new(from.parse().unwrap(), 0).into())
            .unwrap();
        socket
            .connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())
            .unwrap();
        let mut stream: std::net::TcpStream = socket.into();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        if let Some(token) = token {
            let token: crate::endpoint::protocol::Token = token.try_into().unwrap();
            // A refused token gets no consent: nothing more is sent.
            if crate::endpoint::guard::present(&mut stream, Some(&token)).is_err() {
                return None;
            }
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
        }
        stream.write_all(b"\0typist\0typist\0vt100/9600\0").unwrap();
        let mut byte = [0u8; 1];
        match stream.read(&mut byte) {
            Ok(1) => Some(byte[0]),
            _ => None,
        }
    }

    /// An rlogin server on 127.0.0.1 guarded for the peer 127.0.0.2 and
    /// `token`, on a port of `ports` if given.
    fn guarded_rlogin(
        target: Target,
        token: crate::endpoint::protocol::Token,
        ports: Option<(u16, u16)>,
    ) -> HostServeSpec {
        HostServeSpec {
            target,
            dialect: Dialect::Rlogin,
            address: "127.0.0.1".parse().unwrap(),
            session: SessionCommand::Discard { linemode: false },
            max_sessions: 4,
            nodelay: false,
            interface: None,
            measure_idle: false,
            guard: Some(DataGuard {
                peer: "127.0.0.2".parse().unwrap(),
                token,
                ports,
            }),
            cpu_budget_pct: None,
        }
    }

    #[test]
    fn through_an_agent_only_the_named_peer_with_the_token_logs_in() {
        let token = [7u8; crate::endpoint::protocol::TOKEN_LEN];
        let (host, serving) =
            Host::start(guarded_rlogin(Target::Epoll, token, Some((5391, 5399)))).unwrap();
        assert!((5391..=5399).contains(&serving.port), "{}", serving.port);
        assert_eq!(
            first_byte(serving.port, "127.0.0.1", Some(&token)),
            None,
            "a stranger"
        );
        assert_eq!(
            first_byte(serving.port, "127.0.0.2", None),
            None,
            "no token"
        );
        assert_eq!(
            first_byte(serving.port, "127.0.0.2", Some(&[8u8; 16])),
            None,
            "a wrong token"
        );
        assert_eq!(
            first_byte(serving.port, "127.0.0.2", Some(&token)),
            Some(0),
            "the peer"
        );
        let report = host.stop().unwrap();
        // Refused connections never became sessions. (Their log lines go to
        // the test harness here, not to the server's log.)
        assert_eq!(report.serve.unwrap().sessions, 1);
    }

    #[test]
    fn a_silent_stranger_at_the_peers_address_holds_no_relay_back() {
        use std::io::Read;
        let token = [7u8; crate::endpoint::protocol::TOKEN_LEN];
        // (The fork design re-executes netlab, which a unit test is not;
        // it takes connections from the same door.)
        for target in [Target::Epoll, Target::Uring] {
            let (host, serving) = Host::start(guarded_rlogin(target, token, None)).unwrap();
            // From the run's peer's own address, and then silent: the gate
            // gives it its token time on a thread of its own.
            let socket =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            socket
                .bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
                .unwrap();
            socket
                .connect(&SocketAddr::from(([127, 0, 0, 1], serving.port)).into())
                .unwrap();
            let mut stranger: std::net::TcpStream = socket.into();
            assert_eq!(
                first_byte(serving.port, "127.0.0.2", Some(&token)),
                Some(0),
                "{target:?}: the peer logs in"
            );
            // ... while the stranger still waits: the relay was not held for it.
            stranger.set_nonblocking(true).unwrap();
            let mut byte = [0u8; 1];
            assert_eq!(
                stranger.read(&mut byte).unwrap_err().kind(),
                std::io::ErrorKind::WouldBlock,
                "{target:?}: the stranger's connection was still being waited on"
            );
            let report = host.stop().unwrap();
            assert_eq!(report.serve.unwrap().sessions, 1, "{target:?}");
        }
    }

    #[test]
    fn endings_are_counted_by_reason() {
        let log = "x: session ended: client closed (1 bytes in, 2 out)\n\
                   y: session ended: client closed (3 bytes in, 4 out)\n\
                   z: session ended: idle (0 bytes in, 0 out)\n";
        assert_eq!(
            session_endings(log),
            ["2 x client closed", "1 x idle"].map(String::from)
        );
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
    }
}
