//! The `epoll` and `splice` designs: one process, one thread, one epoll set
//! holding every session's socket and pty master (level-triggered).
//!
//! `epoll`: bytes go through user space with `read`/`write`, like the fork
//! design but without a process per session: per keystroke a wake-up serves
//! every session that became ready, then a read and a write per side.
//!
//! `splice`: the kernel-assisted design. Where the protocol lets bytes pass
//! unseen ([`super::protocol`]: rlogin output, pty to client) they go
//! pty -> pipe -> socket with `splice(2)` and never enter this process; the
//! process still wakes per event, but copies nothing. Where the protocol
//! must see the bytes (every TELNET byte, rlogin input, the rlogin startup)
//! it falls back to the copying path. This is the honest Linux analogue of
//! the 1980s patches, which linked socket and pty inside the kernel and
//! returned to the daemon only on an escape: Linux has no such linkage, so
//! splice saves the copies, not the wake-ups. (Splicing from a tty still
//! copies inside the kernel, since the tty layer has no pages to lend.)
//!
//! Flow control: a side is read only while the other side's backlog (user
//! buffer or pipe) is empty, so one slow reader holds back its writer and
//! never grows a buffer without bound.

use super::conn::{Conn, SessionConfig, Step};
use super::stop::StopSignal;
use crate::endpoint::guard::Door;
use nix::fcntl::{OFlag, SpliceFFlags, splice};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

const LISTENER: u64 = u64::MAX;
const STOP: u64 = u64::MAX - 1;
const PIPE_CHUNK: usize = 64 * 1024;

/// A pipe that carries pty output to the socket without user space.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Bytes in the pipe not yet spliced on to the socket.
    held: usize,
}

struct Slot {
    conn: Conn,
    pipe: Option<Pipe>,
    /// The command has exited (this is why): only the client's backlog is
    /// still written, then the session closes.
    draining: Option<String>,
    pty_registered: bool,
    socket_interest: EpollFlags,
    pty_interest: EpollFlags,
}

impl Slot {
    fn pipe_held(&self) -> usize {
        self.pipe.as_ref().map_or(0, |p| p.held)
    }

    fn client_busy(&self) -> bool {
        self.conn.client_backlog() || self.pipe_held() > 0
    }

    fn wanted(&self) -> (EpollFlags, EpollFlags) {
        let conn = &self.conn;
        let client_busy = self.client_busy();
        if self.draining.is_some() {
            return (EpollFlags::EPOLLOUT, EpollFlags::empty());
        }
        let mut socket = EpollFlags::empty();
        let mut pty = EpollFlags::empty();
        if conn.to_pty.is_empty() {
            socket |= EpollFlags::EPOLLIN;
        } else {
            pty |= EpollFlags::EPOLLOUT;
        }
        if client_busy {
            socket |= EpollFlags::EPOLLOUT;
        } else {
            pty |= EpollFlags::EPOLLIN;
        }
        (socket, pty)
    }
}

/// Counts over a server's life.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoopReport {
    pub sessions: u64,
    pub refused: u64,
    /// Bytes that went pty -> socket by splice, never entering this process.
    pub spliced_bytes: u64,
}

fn token(slot: usize, pty: bool) -> u64 {
    ((slot as u64) << 1) | u64::from(pty)
}

/// Serves sessions from `listener` until `stop()` says so; ends every
/// session still open (their commands are killed and reaped) before returning.
pub fn serve(
    door: Door,
    config: &SessionConfig,
    max_sessions: usize,
    use_splice: bool,
    coalesce: Option<Duration>,
    stop: &StopSignal,
) -> io::Result<LoopReport> {
    let design = match (use_splice, coalesce) {
        (true, _) => "splice",
        (false, Some(_)) => "batch",
        (false, None) => "epoll",
    };
    let door = door.nonblocking()?;
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    epoll.add(door.fd(), EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))?;
    // A stop wakes the wait at once; the second's timeout is for idle checks.
    epoll.add(stop.fd(), EpollEvent::new(EpollFlags::EPOLLIN, STOP))?;
    let mut slots: Vec<Option<Slot>> = Vec::new();
    let mut open = 0usize;
    let mut report = LoopReport::default();
    let mut events = vec![EpollEvent::empty(); 256];
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_idle_check = Instant::now();
    while !stop.requested() {
        let mut n = match epoll.wait(&mut events, 1000u16) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if let Some(pause) = coalesce
            && n > 0
        {
            // Let more events gather, then take them all in one round
            // (level-triggered: what was ready is still ready).
            std::thread::sleep(pause);
            n = epoll.wait(&mut events, 0u16).unwrap_or(n);
        }
        for event in &events[..n] {
            if event.data() == STOP {
                continue;
            }
            if event.data() == LISTENER {
                accept_all(
                    &door,
                    &epoll,
                    config,
                    max_sessions,
                    &mut slots,
                    &mut open,
                    &mut report,
                    design,
                );
                continue;
            }
            let index = (event.data() >> 1) as usize;
            let is_pty = event.data() & 1 == 1;
            let Some(slot) = slots.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            let result = handle(
                slot,
                is_pty,
                event.events(),
                use_splice,
                &mut buf,
                &mut report,
            )
            .and_then(|()| update_interest(&epoll, index, slot).map_err(|e| e.to_string()));
            if let Err(why) = result {
                close(&epoll, &mut slots, index, why, design);
                open -= 1;
            }
        }
        if last_idle_check.elapsed() >= Duration::from_secs(1) {
            last_idle_check = Instant::now();
            for index in 0..slots.len() {
                if slots[index]
                    .as_ref()
                    .is_some_and(|s| s.conn.idle_for(config.idle))
                {
                    close(
                        &epoll,
                        &mut slots,
                        index,
                        format!("idle for {} s", config.idle.as_secs()),
                        design,
                    );
                    open -= 1;
                }
            }
        }
    }
    for index in 0..slots.len() {
        if slots[index].is_some() {
            close(&epoll, &mut slots, index, "server stopping".into(), design);
        }
    }
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn accept_all(
    door: &Door,
    epoll: &Epoll,
    config: &SessionConfig,
    max_sessions: usize,
    slots: &mut Vec<Option<Slot>>,
    open: &mut usize,
    report: &mut LoopReport,
    design: &str,
) {
    loop {
        let (socket, peer) = match door.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                super::conn::refusal("accept", format_args!("({design}): accept: {e}"));
                return;
            }
        };
        if *open >= max_sessions {
            report.refused += 1;
            super::conn::refusal(
                "too many sessions",
                format_args!("({design}): {peer}: refused, {open} sessions already"),
            );
            continue;
        }
        let conn = match Conn::open(socket, peer, config) {
            Ok(conn) => conn,
            Err(e) => {
                super::conn::refusal(
                    "cannot start a session",
                    format_args!("({design}): {peer}: cannot start a session: {e}"),
                );
                continue;
            }
        };
        let index = slots.iter().position(Option::is_none).unwrap_or_else(|| {
            slots.push(None);
            slots.len() - 1
        });
        let mut slot = Slot {
            conn,
            pipe: None,
            draining: None,
            pty_registered: true,
            socket_interest: EpollFlags::empty(),
            pty_interest: EpollFlags::empty(),
        };
        let (socket_interest, pty_interest) = slot.wanted();
        let added = epoll
            .add(
                &slot.conn.socket,
                EpollEvent::new(socket_interest, token(index, false)),
            )
            .and_then(|()| {
                epoll.add(
                    &slot.conn.pty.master,
                    EpollEvent::new(pty_interest, token(index, true)),
                )
            });
        if let Err(e) = added {
            super::conn::refusal(
                "cannot watch a session",
                format_args!("({design}): {peer}: cannot watch the session: {e}"),
            );
            let _ = epoll.delete(&slot.conn.socket);
            continue;
        }
        slot.socket_interest = socket_interest;
        slot.pty_interest = pty_interest;
        slots[index] = Some(slot);
        *open += 1;
        report.sessions += 1;
    }
}

fn close(epoll: &Epoll, slots: &mut [Option<Slot>], index: usize, why: String, design: &str) {
    if let Some(mut slot) = slots[index].take() {
        let _ = epoll.delete(&slot.conn.socket);
        if slot.pty_registered {
            let _ = epoll.delete(&slot.conn.pty.master);
        }
        slot.conn.report.ended = why;
        slot.conn.log_end(design);
        // Dropping the slot closes the socket, the pipe and the master, and
        // kills and reaps the command.
    }
}

fn update_interest(epoll: &Epoll, index: usize, slot: &mut Slot) -> io::Result<()> {
    let (socket, pty) = slot.wanted();
    if slot.draining.is_some() && slot.pty_registered {
        // A master whose slave has closed reports EPOLLHUP whatever the
        // interest; left in the set it would wake the loop without end.
        epoll.delete(&slot.conn.pty.master)?;
        slot.pty_registered = false;
    }
    if socket != slot.socket_interest {
        epoll.modify(
            &slot.conn.socket,
            &mut EpollEvent::new(socket, token(index, false)),
        )?;
        slot.socket_interest = socket;
    }
    if slot.pty_registered && pty != slot.pty_interest {
        epoll.modify(
            &slot.conn.pty.master,
            &mut EpollEvent::new(pty, token(index, true)),
        )?;
        slot.pty_interest = pty;
    }
    Ok(())
}

fn readable(flags: EpollFlags) -> bool {
    flags.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR)
}

/// Handles one ready descriptor of a session; `Err` ends the session.
fn handle(
    slot: &mut Slot,
    is_pty: bool,
    flags: EpollFlags,
    use_splice: bool,
    buf: &mut [u8],
    report: &mut LoopReport,
) -> Result<(), String> {
    if slot.draining.is_some() {
        if flags.contains(EpollFlags::EPOLLERR) {
            return Err(slot.draining.take().expect("checked"));
        }
        slot.conn
            .flush_client()
            .map_err(|e| format!("client: {e}"))?;
        splice_out(slot, report)?;
        return match slot.client_busy() {
            true => Ok(()),
            false => Err(slot.draining.take().expect("checked")),
        };
    }
    let may_read_client = slot.conn.to_pty.is_empty();
    let may_read_pty = !slot.client_busy();
    if !is_pty
        && readable(flags)
        && may_read_client
        && let Step::End(why) = slot.conn.read_client(buf)
    {
        return Err(why);
    }
    if is_pty && readable(flags) && may_read_pty {
        let step = if use_splice && slot.conn.session.pty_output_transparent() {
            splice_in(slot)
        } else {
            slot.conn.read_pty(buf)
        };
        if let Step::End(why) = step {
            // What the command printed last still goes out before the close.
            slot.draining = Some(why);
        }
    }
    if slot.draining.is_none() {
        slot.conn.flush_pty().map_err(|e| format!("pty: {e}"))?;
    }
    if slot
        .conn
        .flush_client()
        .map_err(|e| format!("client: {e}"))?
    {
        splice_out(slot, report)?;
    }
    match &slot.draining {
        Some(_) if !slot.client_busy() => Err(slot.draining.take().expect("checked")),
        _ => Ok(()),
    }
}

/// pty -> pipe: as much as the pty has, up to the pipe's size.
fn splice_in(slot: &mut Slot) -> Step {
    if slot.pipe.is_none() {
        match nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) {
            Ok((read, write)) => {
                slot.pipe = Some(Pipe {
                    read,
                    write,
                    held: 0,
                })
            }
            Err(e) => return Step::End(format!("cannot make a pipe: {e}")),
        }
    }
    let pipe = slot.pipe.as_mut().expect("made above");
    let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
    match splice(
        slot.conn.pty.master.as_fd(),
        None,
        pipe.write.as_fd(),
        None,
        PIPE_CHUNK,
        flags,
    ) {
        Ok(0) => Step::End("command exited".into()),
        Ok(n) => {
            super::tally::pty_transfer();
            pipe.held += n;
            slot.conn.report.bytes_to_client += n as u64;
            Step::Progress
        }
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Step::WouldBlock,
        Err(nix::errno::Errno::EIO) => Step::End("command exited".into()),
        Err(e) => Step::End(format!("pty: splice: {e}")),
    }
}

/// pipe -> socket: as much as the socket takes now.
fn splice_out(slot: &mut Slot, report: &mut LoopReport) -> Result<(), String> {
    let Some(pipe) = slot.pipe.as_mut() else {
        return Ok(());
    };
    let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
    while pipe.held > 0 {
        match splice(
            pipe.read.as_fd(),
            None,
            slot.conn.socket.as_fd(),
            None,
            pipe.held,
            flags,
        ) {
            Ok(n) => {
                pipe.held -= n;
                report.spliced_bytes += n as u64;
            }
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("client: splice: {e}")),
        }
    }
    Ok(())
}
