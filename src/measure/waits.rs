//! What a serving tree waited on over a window: the kernel's own account
//! of the session's TCP socket (its chrono: time with data in flight, time
//! held by the peer's receive window, by the send buffer; the rest of the
//! window the socket had nothing to send) and, sampled every
//! [`SAMPLE_EVERY`], where each of the tree's tasks slept (its kernel stack,
//! `/proc/PID/task/TID/stack`, or where that is not readable its `wchan`):
//! in a pty's read or write, a socket's send or receive, a poll over
//! several, a timer, a child.
//!
//! The socket is the server's own: found among the tree's descriptors by
//! its local port and duplicated with `pidfd_getfd(2)` (Linux 5.6; ptrace
//! rights over the tree, which its root has), so it works for netlab's
//! relays, telnetd and sshd alike.
//!
//! Invariant: the sampler's own CPU time is returned with the samples, so
//! a window that charges the tree for its CPU takes it out.

use super::rusage::thread_cpu_ns;
use super::tcpinfo::{TcpInfo, TcpState};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the tree's tasks are looked at.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// The tree's task list is walked again every this many samples (50 ms):
/// a session's processes are few and settled while it types, and the
/// walk is most of a sample's cost.
const WALK_EVERY: u32 = 25;

/// Where a task was when looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitSite {
    /// On a CPU or runnable.
    Running,
    /// Asleep in a pty's read (`n_tty_read`): the relay waiting for output.
    PtyRead,
    /// Asleep in a pty's write (`n_tty_write`): the writer waiting for the
    /// relay to read.
    PtyWrite,
    /// Asleep for room in a socket's send buffer.
    SocketSend,
    /// Asleep in a socket's receive.
    SocketReceive,
    /// Asleep in poll, select or epoll: on more than one descriptor.
    Poll,
    /// Asleep on a timer (nanosleep): pacing.
    Timer,
    /// A pipe's read or write.
    Pipe,
    /// Waiting for a child (a shell for its command).
    Child,
    /// Anything else (accept, a futex, ...).
    Other,
}

impl WaitSite {
    /// The site a kernel stack (or a wchan) names, by the innermost
    /// function it recognizes.
    pub fn of(stack: &str) -> WaitSite {
        const SITES: &[(&str, WaitSite)] = &[
            ("n_tty_read", WaitSite::PtyRead),
            ("n_tty_write", WaitSite::PtyWrite),
            ("sk_stream_wait_memory", WaitSite::SocketSend),
            ("sock_alloc_send_pskb", WaitSite::SocketSend),
            ("sk_wait_data", WaitSite::SocketReceive),
            ("tcp_recvmsg", WaitSite::SocketReceive),
            ("do_epoll_wait", WaitSite::Poll),
            ("do_select", WaitSite::Poll),
            ("do_sys_poll", WaitSite::Poll),
            ("poll_schedule_timeout", WaitSite::Poll),
            ("hrtimer_nanosleep", WaitSite::Timer),
            ("do_nanosleep", WaitSite::Timer),
            ("pipe_read", WaitSite::Pipe),
            ("pipe_write", WaitSite::Pipe),
            ("do_wait", WaitSite::Child),
            ("kernel_wait4", WaitSite::Child),
        ];
        // A stack lists the innermost frame first: the first line that
        // names a known site wins.
        for line in stack.lines() {
            if let Some((_, site)) = SITES.iter().find(|(name, _)| line.contains(name)) {
                return *site;
            }
        }
        WaitSite::Other
    }
}

/// The session socket's chrono over the window, s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketChrono {
    /// Data in flight or queued, the sender free to send.
    pub busy_s: f64,
    /// Held by the peer's receive window (the terminal not reading).
    pub rwnd_limited_s: f64,
    /// Held by its own send buffer (full of data not yet acknowledged).
    pub sndbuf_limited_s: f64,
    /// The share of the samples in which the socket held bytes written
    /// and not yet sent (`tcpi_notsent_bytes`): held back by its window,
    /// Nagle or pacing, rather than waiting for the application.
    #[serde(default)]
    pub queued_share: f64,
    /// The share of the samples in which the congestion window was full
    /// (segments unacknowledged ≥ `tcpi_snd_cwnd`).
    #[serde(default)]
    pub cwnd_full_share: f64,
}

/// What the serving tree waited on over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeWaits {
    pub window_s: f64,
    /// Task samples by site (every task of the tree each time, the
    /// sampler and the endpoint's control thread left out).
    pub samples: BTreeMap<WaitSite, u64>,
    /// Whether the sites came from kernel stacks (else from wchan).
    pub from_stacks: bool,
    /// The session socket's chrono, where it was found and read.
    pub socket: Option<SocketChrono>,
    /// Why the socket was not read, if it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_unread: Option<String>,
}

impl TreeWaits {
    /// The share of the task samples at `site`, of those not waiting
    /// for a child (a shell waiting for its command is not on the data
    /// path).
    pub fn share(&self, site: WaitSite) -> f64 {
        let total: u64 = self
            .samples
            .iter()
            .filter(|&(&s, _)| s != WaitSite::Child)
            .map(|(_, n)| n)
            .sum();
        self.samples.get(&site).copied().unwrap_or(0) as f64 / total.max(1) as f64
    }
}

/// netlab's own measuring threads (by their names), which are not the
/// server's waits.
const OWN_THREADS: &[&str] = &["window-sampler", "wait-sampler", "stall", "sampler"];

fn is_own_thread(pid: u32, tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .is_ok_and(|comm| OWN_THREADS.iter().any(|own| comm.trim().starts_with(own)))
}

/// Every task (thread) ID of `root`'s tree with its process ID.
fn tree_tasks(root: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            out.push((pid, tid));
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// Where task `tid` of `pid` is now: running, or asleep at a site; None
/// when it is gone. `stacks`: read its kernel stack (root only).
fn site_now(pid: u32, tid: u32, stacks: bool) -> Option<WaitSite> {
    let base = format!("/proc/{pid}/task/{tid}");
    let stat = std::fs::read_to_string(format!("{base}/stat")).ok()?;
    // The state follows the command's closing parenthesis.
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    if state == "R" {
        return Some(WaitSite::Running);
    }
    let place = if stacks {
        std::fs::read_to_string(format!("{base}/stack")).ok()?
    } else {
        std::fs::read_to_string(format!("{base}/wchan")).ok()?
    };
    Some(WaitSite::of(&place))
}

/// Every socket process `pid` holds, duplicated into this process with
/// `pidfd_getfd(2)` (Linux 5.6; needs ptrace rights over it); none where
/// it cannot be reached.
pub fn sockets_of(pid: u32) -> Vec<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Vec::new();
    }
    // SAFETY: the descriptor is ours.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|target| {
            // SAFETY: pidfd_getfd returns a new descriptor or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
            // SAFETY: pidfd_getfd returned a new descriptor of ours.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
        })
        .collect()
}

/// The tree's TCP socket bound to local port `port` and connected (the
/// session's), duplicated into this process.
pub fn session_socket(root: u32, port: u16) -> Result<OwnedFd, String> {
    let mut pids: Vec<u32> = tree_tasks(root).into_iter().map(|(pid, _)| pid).collect();
    pids.dedup();
    pids.into_iter()
        .flat_map(sockets_of)
        .find(|fd| {
            let socket = socket2::SockRef::from(fd);
            let local = socket.local_addr().ok().and_then(|a| a.as_socket());
            socket.peer_addr().is_ok()
                && local.is_some_and(|a| a.port() == port)
                && TcpInfo::read(fd.as_fd()).is_ok()
        })
        .ok_or_else(|| {
            format!(
                "no connected TCP socket on port {port} in the server's tree (pidfd_getfd needs Linux 5.6 and ptrace rights)"
            )
        })
}

fn chrono_s(fd: &OwnedFd) -> Option<[f64; 3]> {
    let us = TcpInfo::read(fd.as_fd()).ok()?.chrono_us()?;
    Some(us.map(|u| u as f64 / 1e6))
}

/// A watch in progress.
pub struct WaitWatch {
    start: Instant,
    socket: Result<(OwnedFd, [f64; 3]), String>,
    stop: Arc<AtomicBool>,
    /// Taken by [`WaitWatch::finish`]; a watch dropped unfinished stops
    /// its thread.
    sampler: Option<JoinHandle<Sampled>>,
}

impl Drop for WaitWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
    }
}

/// What the sampling thread saw.
#[derive(Default)]
struct Sampled {
    sites: BTreeMap<WaitSite, u64>,
    from_stacks: bool,
    /// Socket samples, and those with bytes not yet sent.
    socket_samples: u64,
    queued: u64,
    cwnd_full: u64,
    own_ns: u64,
}

impl WaitWatch {
    /// Starts watching `root`'s tree and its session socket on `port`,
    /// leaving out the tasks in `skip` (the caller's control thread).
    pub fn start(root: u32, port: u16, skip: Vec<u32>) -> std::io::Result<WaitWatch> {
        let socket = session_socket(root, port).and_then(|fd| {
            let before = chrono_s(&fd).ok_or("its TCP_INFO has no chrono (Linux 4.10)")?;
            Ok((fd, before))
        });
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let watched = socket.as_ref().ok().and_then(|(fd, _)| fd.try_clone().ok());
        let sampler = std::thread::Builder::new()
            .name("wait-sampler".into())
            .spawn(move || {
                let own0 = thread_cpu_ns();
                // SAFETY: gettid has no failure mode.
                let me = unsafe { libc::gettid() } as u32;
                let mut seen = Sampled {
                    from_stacks: std::fs::read_to_string(format!("/proc/self/task/{me}/stack"))
                        .is_ok(),
                    ..Sampled::default()
                };
                // Whether each task is left out, decided once.
                let mut left_out: HashMap<u32, bool> = HashMap::new();
                let mut tasks = Vec::new();
                let mut sample = 0u32;
                while !flag.load(Ordering::Relaxed) {
                    if sample.is_multiple_of(WALK_EVERY) {
                        tasks = tree_tasks(root);
                    }
                    sample = sample.wrapping_add(1);
                    for &(pid, tid) in &tasks {
                        let out = *left_out.entry(tid).or_insert_with(|| {
                            tid == me || skip.contains(&tid) || is_own_thread(pid, tid)
                        });
                        if out {
                            continue;
                        }
                        if let Some(site) = site_now(pid, tid, seen.from_stacks) {
                            *seen.sites.entry(site).or_insert(0) += 1;
                        }
                    }
                    if let Some(fd) = watched.as_ref()
                        && let Ok((state, info)) = TcpState::read_with_info(fd.as_fd())
                    {
                        seen.socket_samples += 1;
                        seen.queued += u64::from(state.notsent_bytes.is_some_and(|b| b > 0));
                        seen.cwnd_full += u64::from(state.unacked >= info.snd_cwnd.max(1));
                    }
                    std::thread::sleep(SAMPLE_EVERY);
                }
                seen.own_ns = thread_cpu_ns().saturating_sub(own0);
                seen
            })?;
        Ok(WaitWatch {
            start: Instant::now(),
            socket,
            stop,
            sampler: Some(sampler),
        })
    }

    /// Ends the watch: the waits, and the sampler's own CPU time (ns).
    pub fn finish(mut self) -> (TreeWaits, u64) {
        let window_s = self.start.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::Relaxed);
        let seen = self
            .sampler
            .take()
            .and_then(|s| s.join().ok())
            .unwrap_or_default();
        let socket = std::mem::replace(&mut self.socket, Err(String::new()));
        let (socket, socket_unread) = match socket {
            Ok((fd, before)) => match chrono_s(&fd) {
                Some(after) => (
                    Some(SocketChrono {
                        busy_s: (after[0] - before[0]).max(0.0),
                        rwnd_limited_s: (after[1] - before[1]).max(0.0),
                        sndbuf_limited_s: (after[2] - before[2]).max(0.0),
                        queued_share: seen.queued as f64 / seen.socket_samples.max(1) as f64,
                        cwnd_full_share: seen.cwnd_full as f64 / seen.socket_samples.max(1) as f64,
                    }),
                    None,
                ),
                None => (
                    None,
                    Some("the session socket closed before the window did".into()),
                ),
            },
            Err(why) => (None, Some(why)),
        };
        (
            TreeWaits {
                window_s,
                samples: seen.sites,
                from_stacks: seen.from_stacks,
                socket,
                socket_unread,
            },
            seen.own_ns,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_names_its_innermost_known_site() {
        let stack = "[<0>] wait_woken+0x60/0x90\n[<0>] n_tty_read+0x3b0/0x560\n[<0>] tty_read+0xd0/0x1f0\n[<0>] vfs_read+0x1/0x2\n";
        assert_eq!(WaitSite::of(stack), WaitSite::PtyRead);
        assert_eq!(
            WaitSite::of("[<0>] sk_stream_wait_memory+0x1\n[<0>] tcp_sendmsg_locked+0x2\n"),
            WaitSite::SocketSend
        );
        // A wchan is one function.
        assert_eq!(WaitSite::of("do_epoll_wait"), WaitSite::Poll);
        assert_eq!(WaitSite::of("hrtimer_nanosleep"), WaitSite::Timer);
        assert_eq!(WaitSite::of("futex_wait_queue"), WaitSite::Other);
    }

    #[test]
    fn a_sleeping_pty_reader_and_a_connected_socket_are_found_in_this_tree() {
        use std::io::Write;
        // A thread of this process asleep in a pty's read; a connected
        // socket on a known port.
        let pty = nix::pty::openpty(None, None).unwrap();
        let master = pty.master;
        let reader = std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            nix::unistd::read(&master, &mut byte).unwrap();
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_served, _) = listener.accept().unwrap();
        let watch = WaitWatch::start(std::process::id(), port, Vec::new()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let (waits, own_ns) = watch.finish();
        assert!(
            waits.samples.get(&WaitSite::PtyRead).copied().unwrap_or(0) > 0,
            "{waits:?}"
        );
        assert!(waits.socket.is_some(), "{waits:?}");
        assert!(own_ns > 0);
        let mut slave = std::fs::File::from(pty.slave);
        slave.write_all(b"x\n").unwrap();
        reader.join().unwrap();
        // No socket on an unused port.
        assert!(session_socket(std::process::id(), 1).is_err());
    }
}
