//! The controller's handle on one endpoint process.
//!
//! The controller re-executes its own binary as `netlab endpoint`, talks to it
//! over the child's stdin/stdout with [`crate::wire::control`] frames, and
//! never touches the data path itself. A reader thread per endpoint turns the
//! child's stdout into a channel, so the controller can wait with a timeout,
//! notice Ctrl-C, and tell an endpoint that died (end of stream, then its exit
//! status) from one that is merely slow.
//!
//! Children are started with `PR_SET_PDEATHSIG = SIGKILL`, so they cannot
//! outlive a controller that is killed, and with SIGINT ignored, so a Ctrl-C
//! at the terminal reaches only the controller, which then stops them itself,
//! by PID. Dropping an [`EndpointProcess`] kills and reaps its child if it is
//! still running: every exit path of the controller cleans up.

use crate::endpoint::protocol::{Command, Reply};
use crate::endpoint::role::{self, Protocol, Request};
use crate::wire::control::{FrameReader, write_frame};
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Routes SIGINT and SIGTERM to [`crate::measure::stop`]'s flag, which
/// every long wait looks at, so a run stops within a poll or two, cleans
/// up its endpoints and keeps its finished records. A second signal while
/// the first is being honoured exits at once (130), for a cleanup that
/// itself hangs.
pub fn install_interrupt_handler() -> io::Result<()> {
    let flag = crate::measure::stop::flag();
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag as the earlier signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 130, flag.clone())?;
        signal_hook::flag::register(signal, flag.clone())?;
    }
    Ok(())
}

/// The flag itself, for loops that run in threads of their own.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    crate::measure::stop::flag()
}

/// Whether the user asked the controller to stop.
pub fn interrupted() -> bool {
    crate::measure::stop::requested()
}

/// Returns once the user asks to stop (Ctrl-C or SIGTERM): a server run
/// from the command line serves until then.
pub fn wait_for_interrupt() {
    while !interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[derive(Debug, Error)]
pub enum ControlError {
    #[error("cannot start the {role} endpoint: {source}")]
    Spawn {
        role: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{role} endpoint (pid {pid}) died during the run: {status}")]
    Died {
        role: &'static str,
        pid: u32,
        status: String,
    },
    #[error("{role} endpoint: {message}")]
    Failed { role: &'static str, message: String },
    #[error("interrupted")]
    Interrupted,
    #[error("{role} endpoint did not answer within {seconds:.0} s while {what}")]
    Timeout {
        role: &'static str,
        seconds: f64,
        what: &'static str,
    },
    #[error("{role} endpoint sent an unexpected message while {what}: {reply}")]
    Unexpected {
        role: &'static str,
        what: &'static str,
        reply: String,
    },
    #[error(transparent)]
    Testbed(#[from] crate::testbed::netns::TestbedError),
    /// An agent could not be reached, refused the run, or was lost.
    #[error("agent {agent}: {message}")]
    Agent { agent: String, message: String },
    #[error("control channel to the {role} endpoint: {source}")]
    Channel {
        role: &'static str,
        #[source]
        source: io::Error,
    },
}

/// How long a controller waits for a reply, and what it is waiting for.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub timeout: Option<Duration>,
    pub what: &'static str,
}

impl Wait {
    /// Up to `seconds`, while `what`.
    pub fn up_to(seconds: u64, what: &'static str) -> Wait {
        Wait {
            timeout: Some(Duration::from_secs(seconds)),
            what,
        }
    }

    /// As long as the endpoint works (it is watched for death and Ctrl-C).
    pub fn until_done(what: &'static str) -> Wait {
        Wait {
            timeout: None,
            what,
        }
    }
}

/// What a controller does with a role's event while it waits for the
/// reply; it may answer the endpoint (say `Proceed`).
pub type OnEvent<'a, P> =
    dyn FnMut(<P as Protocol>::Event, &mut EndpointProcess) -> Result<(), ControlError> + 'a;

/// A request sent to an endpoint and not yet answered: the handle that
/// [`EndpointProcess::answer`] waits on, typed with the answer.
pub struct Sent<R> {
    /// The request, briefly, for an answer out of turn.
    asked: String,
    request: PhantomData<fn() -> R>,
}

/// At most this many characters of a request or reply in an error (a
/// typing load's request carries its whole corpus).
const BRIEF: usize = 160;

/// `value`'s debug form, cut to [`BRIEF`] characters. The formatting
/// stops there: a request is briefed each time it is sent, and a typing
/// load's corpus is not written out to be thrown away.
fn brief(value: &impl std::fmt::Debug) -> String {
    /// Takes characters until it has [`BRIEF`], then refuses the rest.
    struct Upto(String, usize);
    impl std::fmt::Write for Upto {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            for c in text.chars() {
                if self.1 == BRIEF {
                    return Err(std::fmt::Error);
                }
                self.0.push(c);
                self.1 += 1;
            }
            Ok(())
        }
    }
    let mut out = Upto(String::new(), 0);
    if std::fmt::Write::write_fmt(&mut out, format_args!("{value:?}")).is_err() {
        out.0.push_str("...");
    }
    out.0
}

/// How often a waiting controller looks at Ctrl-C and ticks its progress display.
const TICK: Duration = Duration::from_millis(100);

/// A running endpoint process: a child of this one over a pipe, or a child
/// of a remote agent over its channel ([`super::remote`]).
pub struct EndpointProcess {
    role: &'static str,
    channel: Channel,
    replies: mpsc::Receiver<io::Result<Reply>>,
    /// Keep waiting through Ctrl-C (for stopping helpers after an interrupt).
    through_interrupt: bool,
}

/// How the controller reaches an endpoint on another host: the agent's
/// link (`super::remote::AgentLink`), seen here only as what an endpoint
/// needs of it, so that this file does not name the link's.
pub trait AgentCourier: Send + Sync {
    /// The agent's name, as the run names it.
    fn name(&self) -> &str;
    /// Sends `command` to endpoint `id` on the agent.
    fn command(&self, id: u32, command: &Command) -> Result<(), ControlError>;
    /// How endpoint `id` ended, as the agent said.
    fn fate(&self, id: u32) -> String;
    /// Stops routing endpoint `id`'s replies (it is finished with).
    fn forget(&self, id: u32);
}

enum Channel {
    Pipe {
        child: Child,
        stdin: Option<ChildStdin>,
    },
    Agent {
        link: Arc<dyn AgentCourier>,
        id: u32,
        pid: u32,
    },
}

/// Starts `netlab endpoint` as a child of this process: inside the network
/// namespace at `netns` (a `/run/netns/NAME` path; `None` for this
/// process's own), killed when the thread that started it ends, deaf to
/// the terminal's Ctrl-C, its stderr to `log` (or this process's). The
/// local launcher and the agent both start endpoints here.
pub fn start_child(netns: Option<&Path>, log: Option<std::fs::File>) -> io::Result<Child> {
    let namespace = netns.map(std::fs::File::open).transpose()?;
    let namespace_fd = namespace.as_ref().map(|f| f.as_raw_fd());
    let exe = std::env::current_exe()?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("endpoint")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log.map_or_else(Stdio::inherit, Stdio::from));
    // SAFETY: between fork and exec only async-signal-safe calls are made.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = namespace_fd
                && libc::setns(fd, libc::CLONE_NEWNET) != 0
            {
                return Err(io::Error::last_os_error());
            }
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    command.spawn()
}

impl EndpointProcess {
    /// Starts `netlab endpoint` for `role` ([`start_child`]) and waits for it
    /// to say it is ready. Experiments start endpoints through
    /// [`super::launcher`].
    pub(super) fn spawn_in(
        role: &'static str,
        netns: Option<&Path>,
        log: Option<std::fs::File>,
    ) -> Result<EndpointProcess, ControlError> {
        let spawn_err = |source| ControlError::Spawn { role, source };
        let mut child = start_child(netns, log).map_err(spawn_err)?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{role}-control"))
            .spawn(move || {
                let mut reader = FrameReader::new(stdout);
                loop {
                    let message = match reader.next_message::<Reply>() {
                        Ok(Some(reply)) => Ok(reply),
                        Ok(None) => return,
                        Err(e) => Err(e),
                    };
                    let stop = message.is_err();
                    if tx.send(message).is_err() || stop {
                        return;
                    }
                }
            })
            .map_err(spawn_err)?;
        EndpointProcess {
            role,
            channel: Channel::Pipe { child, stdin },
            replies,
            through_interrupt: false,
        }
        .ready()
    }

    /// An endpoint that agent `link` started as `id`, its replies arriving
    /// on `replies`; waits for it to say it is ready.
    pub(super) fn on_agent(
        role: &'static str,
        link: Arc<dyn AgentCourier>,
        id: u32,
        replies: mpsc::Receiver<io::Result<Reply>>,
    ) -> Result<EndpointProcess, ControlError> {
        EndpointProcess {
            role,
            channel: Channel::Agent { link, id, pid: 0 },
            replies,
            through_interrupt: false,
        }
        .ready()
    }

    fn ready(mut self) -> Result<EndpointProcess, ControlError> {
        match self.recv(Some(Duration::from_secs(10)), "starting", &mut |_| {})? {
            Reply::Ready { pid, .. } => {
                if let Channel::Agent { pid: remote, .. } = &mut self.channel {
                    *remote = pid;
                }
                Ok(self)
            }
            other => Err(self.unexpected("starting", &other)),
        }
    }

    /// The agent this endpoint runs on (`None`: this host).
    pub fn agent(&self) -> Option<&str> {
        match &self.channel {
            Channel::Pipe { .. } => None,
            Channel::Agent { link, .. } => Some(link.name()),
        }
    }

    /// Its process id (on its own host).
    pub fn pid(&self) -> u32 {
        match &self.channel {
            Channel::Pipe { child, .. } => child.id(),
            Channel::Agent { pid, .. } => *pid,
        }
    }

    /// Sends one command.
    fn send_command(&mut self, command: &Command) -> Result<(), ControlError> {
        let sent = match &mut self.channel {
            Channel::Pipe { stdin, .. } => {
                let stdin = stdin.as_mut().ok_or_else(|| ControlError::Channel {
                    role: self.role,
                    source: io::Error::other("already closed"),
                })?;
                write_frame(stdin, command).is_ok()
            }
            Channel::Agent { link, id, .. } => link.command(*id, command).is_ok(),
        };
        // A broken pipe or channel means the endpoint is gone: say how.
        if sent { Ok(()) } else { Err(self.death()) }
    }

    /// Waits for the next reply other than `Progress`, whose byte counts go to
    /// `progress` (which is also called with `None` every 100 ms, to tick). `Failed` becomes an error; so do death, Ctrl-C and timeout.
    pub fn recv(
        &mut self,
        timeout: Option<Duration>,
        what: &'static str,
        progress: &mut dyn FnMut(Option<u64>),
    ) -> Result<Reply, ControlError> {
        let start = Instant::now();
        loop {
            if interrupted() && !self.through_interrupt {
                return Err(ControlError::Interrupted);
            }
            if let Some(limit) = timeout
                && start.elapsed() >= limit
            {
                return Err(ControlError::Timeout {
                    role: self.role,
                    seconds: limit.as_secs_f64(),
                    what,
                });
            }
            let wait = timeout.map_or(TICK, |limit| {
                limit.saturating_sub(start.elapsed()).min(TICK)
            });
            match self.replies.recv_timeout(wait) {
                Ok(Ok(Reply::Progress { bytes })) => progress(Some(bytes)),
                Ok(Ok(Reply::Failed { message })) => {
                    return Err(ControlError::Failed {
                        role: self.role,
                        message,
                    });
                }
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(source)) => {
                    return Err(ControlError::Channel {
                        role: self.role,
                        source,
                    });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => progress(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(self.death()),
            }
        }
    }

    /// Lets a local endpoint that something stopped (SIGSTOP: a stalled
    /// cell's frozen server) run again, so it can be asked to stop and
    /// clean up rather than waited on to the end of the stop's timeout.
    /// netlab never stops its endpoints itself; only its own child, by PID.
    pub fn thaw(&self) {
        if let Channel::Pipe { child, .. } = &self.channel {
            let pid = child.id();
            let state = task_state(&format!("/proc/{pid}"));
            if matches!(state, Some('T')) {
                // SAFETY: signalling our own child by its PID.
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            }
        }
    }

    /// What a local endpoint's threads are doing, as the kernel says
    /// (`/proc/PID/task/*/stat` and `wchan`): "stopped (SIGSTOP)", "blocked
    /// writing: its send buffer is full", ...; `None` on an agent's host or
    /// when no thread is waiting in a way worth naming. For a stalled
    /// cell's reason, when the other end cannot speak for itself. A thread
    /// between two calls (woken, or waiting for a CPU on a busy host) is
    /// in none, so the threads are read a few times, 40 ms apart, before
    /// the answer is none.
    pub fn waiting_in(&self) -> Option<String> {
        let Channel::Pipe { child, .. } = &self.channel else {
            return None;
        };
        let pid = child.id();
        for _ in 0..4 {
            if let Some(doing) = threads_waiting_in(pid) {
                return Some(doing);
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        threads_waiting_in(pid)
    }

    /// Makes [`EndpointProcess::recv`] keep waiting after Ctrl-C, so helpers
    /// (the emulator, the capture) can still be stopped cleanly and report.
    pub fn wait_through_interrupt(&mut self) {
        self.through_interrupt = true;
    }

    /// Sends `request` to its role in this endpoint and waits for the
    /// answer it gets: the one exchange every experiment uses. `wait`
    /// bounds the wait (`until_done`: as long as the role works, watched
    /// for death and Ctrl-C) and names what is awaited in errors.
    pub fn call<R: Request>(&mut self, request: R, wait: Wait) -> Result<R::Reply, ControlError> {
        self.call_hearing(request, wait, &mut |_| {}, &mut |_, _| Ok(()))
    }

    /// [`EndpointProcess::call`] that hears the role on the way: byte
    /// counts go to `progress` (and `None` every 100 ms, to tick), the
    /// role's events to `on_event`, which may answer this endpoint.
    pub fn call_hearing<R: Request>(
        &mut self,
        request: R,
        wait: Wait,
        progress: &mut dyn FnMut(Option<u64>),
        on_event: &mut OnEvent<R::Role>,
    ) -> Result<R::Reply, ControlError> {
        let sent = self.send(request)?;
        self.answer(&sent, wait, progress, on_event)
    }

    /// Lets a role that awaits the controller (at an event) go on.
    pub fn proceed(&mut self) -> Result<(), ControlError> {
        self.send_command(&Command::Proceed)
    }

    /// Sends `request` without waiting; [`EndpointProcess::answer`] waits.
    pub fn send<R: Request>(&mut self, request: R) -> Result<Sent<R>, ControlError> {
        let command = role::command(&request).map_err(|e| ControlError::Channel {
            role: self.role,
            source: io::Error::other(e),
        })?;
        self.send_command(&command)?;
        Ok(Sent {
            asked: brief(&request),
            request: PhantomData,
        })
    }

    /// Waits for the answer to a request sent already. A timeout leaves it
    /// awaited: the same `sent` may be waited for again.
    pub fn answer<R: Request>(
        &mut self,
        sent: &Sent<R>,
        wait: Wait,
        progress: &mut dyn FnMut(Option<u64>),
        on_event: &mut OnEvent<R::Role>,
    ) -> Result<R::Reply, ControlError> {
        let start = Instant::now();
        loop {
            let left = wait.timeout.map(|t| t.saturating_sub(start.elapsed()));
            match self.recv(left, wait.what, progress)? {
                Reply::Role(value) => {
                    // The role's handler returns `R::Reply` by its type; a
                    // reply that is not one is a role out of step.
                    return serde_json::from_value(value).map_err(|e| ControlError::Unexpected {
                        role: self.role,
                        what: wait.what,
                        reply: format!("a reply to {} that does not parse ({e})", sent.asked),
                    });
                }
                Reply::Event(value) => {
                    let event =
                        serde_json::from_value(value).map_err(|e| self.garbled(wait.what, e))?;
                    on_event(event, self)?;
                }
                other => return Err(self.unexpected(wait.what, &other)),
            }
        }
    }

    fn garbled(&self, what: &'static str, e: serde_json::Error) -> ControlError {
        ControlError::Unexpected {
            role: self.role,
            what,
            reply: format!("a reply that does not parse ({e})"),
        }
    }

    /// An error for a message that does not fit the exchange (a `Ready`
    /// or `Progress` where a reply belongs).
    fn unexpected(&self, what: &'static str, reply: &Reply) -> ControlError {
        ControlError::Unexpected {
            role: self.role,
            what,
            reply: brief(reply),
        }
    }

    /// Describes how the endpoint ended (waiting briefly for it to finish dying).
    fn death(&mut self) -> ControlError {
        let pid = self.pid();
        let status = match &mut self.channel {
            Channel::Pipe { child, .. } => match exit_within(child, EXIT_GRACE) {
                Ok(Some(status)) => describe_exit(status),
                Ok(None) => "closed its control channel but is still running".to_string(),
                Err(e) => format!("status unknown ({e})"),
            },
            Channel::Agent { link, id, .. } => link.fate(*id),
        };
        ControlError::Died {
            role: self.role,
            pid,
            status,
        }
    }

    /// Asks the endpoint to leave and reaps it (killing it if it lingers).
    pub fn finish(&mut self) {
        let _ = self.send_command(&Command::Exit);
        let deadline = Instant::now() + EXIT_GRACE;
        match &mut self.channel {
            Channel::Pipe { child, stdin } => {
                *stdin = None;
                // Drop kills it if it is still running.
                let _ = exit_within(child, EXIT_GRACE);
            }
            Channel::Agent { .. } => {
                // The agent reaps it and says so (the reply channel closes);
                // it kills an endpoint that lingers after `Exit` itself.
                while Instant::now() < deadline {
                    match self.replies.recv_timeout(TICK) {
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        _ => continue,
                    }
                }
            }
        }
    }
}

impl Drop for EndpointProcess {
    fn drop(&mut self) {
        match &mut self.channel {
            Channel::Pipe { child, .. } => {
                if let Ok(None) = child.try_wait() {
                    // Only our own child, by PID, via the Child handle.
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            Channel::Agent { link, id, .. } => link.forget(*id),
        }
    }
}

/// How long an endpoint has to leave after `Exit` or after closing its
/// control channel before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Waits up to `grace` for `child` to exit (looking every 5 ms): its
/// status, or `None` if it still runs.
pub fn exit_within(
    child: &mut Child,
    grace: Duration,
) -> io::Result<Option<std::process::ExitStatus>> {
    let deadline = Instant::now() + grace;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The state letter of the process or thread at `dir` (`/proc/PID` or
/// `/proc/PID/task/TID`), from its `stat` (after the command's `) `).
fn task_state(dir: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// What process `pid`'s threads are waiting in, read once (see
/// [`EndpointProcess::waiting_in`]).
fn threads_waiting_in(pid: u32) -> Option<String> {
    let mut seen: Vec<&'static str> = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let state = task_state(&task.path().display().to_string());
        if matches!(state, Some('T' | 't')) {
            return Some("stopped (SIGSTOP)".into());
        }
        let syscall = std::fs::read_to_string(task.path().join("syscall")).unwrap_or_default();
        if let Some(words) = blocked_in(&syscall)
            && !seen.contains(&words)
        {
            seen.push(words);
        }
    }
    (!seen.is_empty()).then(|| seen.join(", "))
}

/// The system call a thread sleeps in, from `/proc/PID/task/TID/syscall`
/// ("NR ARG0 ..."), for the calls a data path can stall in. A read of
/// descriptor 0 is the endpoint's control channel, not its data path.
/// x86-64 numbers (arch/x86/entry/syscalls/syscall_64.tbl).
fn blocked_in(syscall: &str) -> Option<&'static str> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let mut fields = syscall.split_whitespace();
    let nr: u32 = fields.next()?.parse().ok()?;
    let fd = fields
        .next()
        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    Some(match (nr, fd) {
        (0, Some(0)) => return None,
        (0 | 17 | 19 | 45 | 47, _) => "blocked in read",
        (1 | 18 | 20 | 44 | 46, _) => "blocked in write",
        (40, _) => "blocked in sendfile",
        (275, _) => "blocked in splice",
        (7 | 23 | 270 | 271, _) => "waiting in poll",
        (232 | 281 | 441, _) => "waiting in epoll_wait",
        (43 | 288, _) => "waiting in accept",
        (426, _) => "waiting in io_uring_enter",
        _ => return None,
    })
}

/// How a process ended, in words.
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    if let Some(signal) = status.signal() {
        let name = match signal {
            libc::SIGABRT => " (SIGABRT)",
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGTERM => " (SIGTERM)",
            libc::SIGPIPE => " (SIGPIPE)",
            _ => "",
        };
        format!("killed by signal {signal}{name}")
    } else {
        format!("exited with status {}", status.code().unwrap_or(-1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use std::sync::Mutex;

    /// A role for the exchange alone: two requests, each with its own
    /// reply type.
    struct ToyRole;
    impl Protocol for ToyRole {
        const ROLE: &'static str = "toy";
        type Event = ();
    }
    #[derive(Debug, Serialize, Deserialize)]
    struct Ping;
    impl Request for Ping {
        type Role = ToyRole;
        type Reply = ();
        const NAME: &'static str = "Ping";
    }
    #[derive(Debug, Serialize, Deserialize)]
    struct Sum(u32);
    impl Request for Sum {
        type Role = ToyRole;
        type Reply = u64;
        const NAME: &'static str = "Sum";
    }

    /// An agent's link that keeps what it is sent.
    #[derive(Default)]
    struct Courier {
        sent: Mutex<Vec<String>>,
    }
    impl AgentCourier for Courier {
        fn name(&self) -> &str {
            "toy-agent"
        }
        fn command(&self, _: u32, command: &Command) -> Result<(), ControlError> {
            self.sent.lock().unwrap().push(format!("{command:?}"));
            Ok(())
        }
        fn fate(&self, _: u32) -> String {
            "gone".into()
        }
        fn forget(&self, _: u32) {}
    }

    #[test]
    fn a_call_gets_its_own_reply_and_one_of_another_type_names_the_request() {
        let courier = Arc::new(Courier::default());
        let (tx, replies) = mpsc::channel();
        let mut process = EndpointProcess {
            role: "toy",
            channel: Channel::Agent {
                link: courier.clone(),
                id: 1,
                pid: 7,
            },
            replies,
            through_interrupt: false,
        };
        tx.send(Ok(Reply::Role(serde_json::json!(5)))).unwrap();
        let total: u64 = process.call(Sum(2), Wait::up_to(1, "adding")).unwrap();
        assert_eq!(total, 5);
        let sent = courier.sent.lock().unwrap()[0].clone();
        assert!(
            sent.contains(r#"request: "Sum""#) && sent.contains("params: Number(2)"),
            "{sent}"
        );
        // Answered with another request's reply: the error names the
        // request it should have answered.
        tx.send(Ok(Reply::Role(serde_json::json!(null)))).unwrap();
        let error = process.call(Sum(3), Wait::up_to(1, "adding")).unwrap_err();
        assert!(
            matches!(error, ControlError::Unexpected { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("toy endpoint sent an unexpected message while adding: a reply to Sum(3) that does not parse"),
            "{error}"
        );
        // A unit request and its reply.
        tx.send(Ok(Reply::Role(serde_json::json!(null)))).unwrap();
        process.call(Ping, Wait::up_to(1, "pinging")).unwrap();
        // A reply that is no reply of the request's is said as garbled.
        tx.send(Ok(Reply::Role(serde_json::json!({"Other": 1}))))
            .unwrap();
        let error = process.call(Ping, Wait::up_to(1, "pinging")).unwrap_err();
        assert!(error.to_string().contains("does not parse"), "{error}");
        // Long requests and replies are cut in the error.
        assert!(brief(&"x".repeat(1000)).len() < 200);
    }

    #[test]
    fn a_sleeping_thread_s_system_call_is_named_but_the_control_channel_is_not() {
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        assert_eq!(
            blocked_in("1 0x5 0x7f 0x10000 0x0 0x0 0x0 0x7ffd 0x7f"),
            Some("blocked in write")
        );
        assert_eq!(
            blocked_in("0 0x0 0x7f 0x2000 0x0 0x0 0x0 0x7ffd 0x7f"),
            None
        );
        assert_eq!(
            blocked_in("0 0x6 0x7f 0x2000 0x0 0x0 0x0 0x7ffd 0x7f"),
            Some("blocked in read")
        );
        assert_eq!(blocked_in("running"), None);
        assert_eq!(blocked_in("230 0x0 0x0"), None);
    }
}
