//! The `uring` design: one process, one io_uring for every session. Each
//! session keeps a read outstanding on its socket and on its pty; writes
//! are submitted as bytes are produced. One `io_uring_enter` both submits
//! everything queued since the last one, for every session, and collects
//! every completion that is ready: with many users typing, one wake-up and
//! one system call serve many keystrokes, where the epoll design spends a
//! read and a write per keystroke and the fork design a process switch.
//!
//! Bytes still pass through user space (the protocol must see them); what
//! the design saves is system calls and wake-ups, in batches.
//!
//! Invariants: no operation runs inline in the ring's thread if it can
//! block it (pty writes go to io-wq workers: a full pty stalls its own
//! session only); a buffer handed to the kernel is not touched or freed until
//! its completion arrives, so a session is dropped only when it has no
//! operation in flight; ending a session shuts the socket down and kills the
//! command, which completes its outstanding reads. A side is read only when
//! the other side's backlog is written (flow control, as in the other designs).

use super::conn::{Conn, SessionConfig, Step};
use super::stop::StopSignal;
use crate::endpoint::guard::Door;
use io_uring::{IoUring, opcode, squeue, types};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

const BUF: usize = 16 * 1024;
const RING_ENTRIES: u32 = 1024;

/// Operation kinds, in the low byte of `user_data`; the slot is above.
const READ_CLIENT: u64 = 0;
const READ_PTY: u64 = 1;
const WRITE_CLIENT: u64 = 2;
const WRITE_PTY: u64 = 3;
const ACCEPT: u64 = u64::MAX;
const TICK: u64 = u64::MAX - 1;
/// The completion of an `AsyncCancel` (of a session's pty write, or of the
/// accept at the end): nothing to do.
const CANCEL: u64 = u64::MAX - 2;
/// The poll of the stop signal's descriptor: readable once a stop is
/// requested, so the wait ends then rather than at the next tick.
const STOP: u64 = u64::MAX - 3;

fn user_data(slot: usize, kind: u64) -> u64 {
    ((slot as u64) << 8) | kind
}

struct Slot {
    conn: Conn,
    client_buf: Box<[u8]>,
    pty_buf: Box<[u8]>,
    /// Bytes in flight to the client / the pty (frozen until completion).
    writing_client: Vec<u8>,
    writing_pty: Vec<u8>,
    client_write_inflight: bool,
    pty_write_inflight: bool,
    reading_client: bool,
    reading_pty: bool,
    inflight: u32,
    /// Set once the session must end; it is dropped when `inflight` is 0.
    ending: Option<String>,
    /// The command exited: write what is left to the client, then end.
    draining: Option<String>,
}

/// Counts over a server's life.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UringReport {
    pub sessions: u64,
    pub refused: u64,
    /// `io_uring_enter` calls and completions handled: completions per
    /// call is the batching the design exists for.
    pub enters: u64,
    pub completions: u64,
}

struct Loop {
    ring: IoUring,
    slots: Vec<Option<Slot>>,
    open: usize,
    report: UringReport,
}

impl Loop {
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: every buffer an entry points at lives in a Slot (or the
        // loop) until the entry's completion has been handled.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.ring.submit()?;
            self.report.enters += 1;
        }
        Ok(())
    }

    /// Starts whatever the slot's state calls for and has not started.
    fn kick(&mut self, index: usize) -> io::Result<()> {
        let mut entries = Vec::new();
        let mut drained: Option<String> = None;
        if let Some(slot) = self.slots[index].as_mut() {
            if slot.ending.is_some() {
                return Ok(());
            }
            let socket = types::Fd(slot.conn.socket.as_raw_fd());
            let master = types::Fd(slot.conn.pty.master.as_raw_fd());
            if !slot.client_write_inflight {
                // Move the backlog into the frozen buffer when it is free.
                if slot.writing_client.is_empty() {
                    std::mem::swap(&mut slot.writing_client, &mut slot.conn.to_client);
                }
                if !slot.writing_client.is_empty() {
                    let w = &slot.writing_client;
                    entries.push(
                        opcode::Write::new(socket, w.as_ptr(), w.len() as u32)
                            .build()
                            .user_data(user_data(index, WRITE_CLIENT)),
                    );
                    slot.client_write_inflight = true;
                    slot.inflight += 1;
                } else if slot.conn.client_backlog() {
                    // Only an urgent byte is left (rlogin's window request,
                    // once per session): sent directly, after the bytes
                    // produced before it.
                    let _ = slot.conn.flush_client();
                }
            }
            let client_busy = slot.client_write_inflight || slot.conn.client_backlog();
            if slot.draining.is_some() {
                if !client_busy {
                    drained = slot.draining.take();
                }
            } else {
                if !slot.pty_write_inflight {
                    if slot.writing_pty.is_empty() {
                        std::mem::swap(&mut slot.writing_pty, &mut slot.conn.to_pty);
                    }
                    if !slot.writing_pty.is_empty() {
                        let w = &slot.writing_pty;
                        // ASYNC: straight to an io-wq worker. The tty
                        // ignores IOCB_NOWAIT, so a write issued inline
                        // blocks in n_tty_write when the pty's input is
                        // full (its command not reading) and freezes the
                        // ring's one thread, every session and SIGTERM with
                        // it. A worker blocks for this session alone, which
                        // reads nothing more from its client meanwhile
                        // (one pty write in flight: back-pressure per session).
                        entries.push(
                            opcode::Write::new(master, w.as_ptr(), w.len() as u32)
                                .build()
                                .flags(squeue::Flags::ASYNC)
                                .user_data(user_data(index, WRITE_PTY)),
                        );
                        slot.pty_write_inflight = true;
                        slot.inflight += 1;
                    }
                }
                // Reads, each only while the other side has no backlog.
                if !slot.reading_client && !slot.pty_write_inflight && slot.conn.to_pty.is_empty() {
                    entries.push(
                        opcode::Read::new(socket, slot.client_buf.as_mut_ptr(), BUF as u32)
                            .build()
                            .user_data(user_data(index, READ_CLIENT)),
                    );
                    slot.reading_client = true;
                    slot.inflight += 1;
                }
                if !slot.reading_pty && !client_busy {
                    entries.push(
                        opcode::Read::new(master, slot.pty_buf.as_mut_ptr(), BUF as u32)
                            .build()
                            .user_data(user_data(index, READ_PTY)),
                    );
                    slot.reading_pty = true;
                    slot.inflight += 1;
                }
            }
        }
        for entry in entries {
            self.push(entry)?;
        }
        if let Some(why) = drained {
            self.end(index, why);
        }
        Ok(())
    }

    /// Marks a session to end: its reads are completed by shutting the
    /// socket down and killing the command; it is dropped when nothing is
    /// in flight.
    fn end(&mut self, index: usize, why: String) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if slot.ending.is_some() {
            return;
        }
        slot.ending = Some(why);
        let _ = slot.conn.socket.shutdown(Shutdown::Both);
        let _ = slot.conn.pty.child.kill();
        // A pty write blocked in an io-wq worker is not woken when the
        // command dies (the slave's hangup skips the master's writers), so
        // it is cancelled: the worker is signalled and the write returns.
        if slot.pty_write_inflight {
            let cancel = opcode::AsyncCancel::new(user_data(index, WRITE_PTY))
                .build()
                .user_data(CANCEL);
            let _ = self.push(cancel);
        }
        self.reap(index);
    }

    fn reap(&mut self, index: usize) {
        let done = self.slots[index]
            .as_ref()
            .is_some_and(|s| s.ending.is_some() && s.inflight == 0);
        if done {
            let mut slot = self.slots[index].take().expect("checked");
            slot.conn.report.ended = slot.ending.take().unwrap_or_default();
            slot.conn.log_end("uring");
            self.open -= 1;
        }
    }

    fn complete(&mut self, index: usize, kind: u64, result: i32) -> io::Result<()> {
        let Some(slot) = self.slots[index].as_mut() else {
            return Ok(());
        };
        slot.inflight -= 1;
        let ending = slot.ending.is_some();
        let mut end: Option<String> = None;
        match kind {
            READ_CLIENT => {
                slot.reading_client = false;
                if !ending {
                    let step = match result {
                        0 => Step::End("client closed".into()),
                        n if n > 0 => {
                            let (conn, buf) = (&mut slot.conn, &slot.client_buf);
                            match conn.client_bytes(&buf[..n as usize]) {
                                Ok(()) => Step::Progress,
                                Err(why) => Step::End(why),
                            }
                        }
                        e if e == -libc::EINTR || e == -libc::EAGAIN => Step::WouldBlock,
                        e => Step::End(format!("client: {}", io::Error::from_raw_os_error(-e))),
                    };
                    if let Step::End(why) = step {
                        end = Some(why);
                    }
                }
            }
            READ_PTY => {
                slot.reading_pty = false;
                if !ending {
                    match result {
                        n if n > 0 => {
                            super::tally::pty_transfer();
                            let n = n as usize;
                            let (conn, buf) = (&mut slot.conn, &slot.pty_buf);
                            conn.pty_bytes(&buf[..n]);
                        }
                        e if e == -libc::EINTR || e == -libc::EAGAIN => {}
                        // 0 or EIO: the command exited; what it printed goes out first.
                        _ => slot.draining = Some("command exited".into()),
                    }
                }
            }
            WRITE_CLIENT | WRITE_PTY => {
                let (buf, inflight) = if kind == WRITE_CLIENT {
                    (&mut slot.writing_client, &mut slot.client_write_inflight)
                } else {
                    (&mut slot.writing_pty, &mut slot.pty_write_inflight)
                };
                if result == -libc::EINTR || result == -libc::EAGAIN {
                    // Interrupted (a tty write in an io_uring worker can be,
                    // when task work is signalled): the buffer is unchanged
                    // and `kick` submits it again.
                } else if result < 0 {
                    if !ending {
                        let side = if kind == WRITE_CLIENT {
                            "client"
                        } else {
                            "pty"
                        };
                        end = Some(format!("{side}: {}", io::Error::from_raw_os_error(-result)));
                    }
                    buf.clear();
                } else {
                    if kind == WRITE_PTY && result > 0 {
                        super::tally::pty_transfer();
                    }
                    // A short write: keep the rest at the front and resend.
                    buf.drain(..result as usize);
                }
                *inflight = false;
            }
            _ => {}
        }
        if let Some(why) = end {
            self.end(index, why);
        }
        if self.slots[index]
            .as_ref()
            .is_some_and(|s| s.ending.is_some())
        {
            self.reap(index);
            return Ok(());
        }
        self.kick(index)
    }

    fn accepted(
        &mut self,
        socket: TcpStream,
        peer: SocketAddr,
        config: &SessionConfig,
        max_sessions: usize,
    ) {
        if self.open >= max_sessions {
            self.report.refused += 1;
            super::conn::refusal(
                "too many sessions",
                format_args!("(uring): {peer}: refused, {} sessions already", self.open),
            );
            return;
        }
        let conn = match Conn::open(socket, peer, config).and_then(|c| c.blocking().map(|()| c)) {
            Ok(conn) => conn,
            Err(e) => {
                super::conn::refusal(
                    "cannot start a session",
                    format_args!("(uring): {peer}: cannot start a session: {e}"),
                );
                return;
            }
        };
        let index = self
            .slots
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.slots.push(None);
                self.slots.len() - 1
            });
        self.slots[index] = Some(Slot {
            conn,
            client_buf: vec![0u8; BUF].into_boxed_slice(),
            pty_buf: vec![0u8; BUF].into_boxed_slice(),
            writing_client: Vec::new(),
            writing_pty: Vec::new(),
            client_write_inflight: false,
            pty_write_inflight: false,
            reading_client: false,
            reading_pty: false,
            inflight: 0,
            ending: None,
            draining: None,
        });
        self.open += 1;
        self.report.sessions += 1;
        if let Err(e) = self.kick(index) {
            self.end(index, format!("cannot submit: {e}"));
        }
    }
}

/// Serves sessions from `listener` until `stop` is requested; ends every
/// session (command killed and reaped) before returning.
pub fn serve(
    door: Door,
    config: &SessionConfig,
    max_sessions: usize,
    stop: &StopSignal,
) -> io::Result<UringReport> {
    let mut lp = Loop {
        ring: IoUring::new(RING_ENTRIES)?,
        slots: Vec::new(),
        open: 0,
        report: UringReport::default(),
    };
    let door_fd = types::Fd(door.fd().as_raw_fd());
    // A listener is accepted from in the ring; a gate's connections (a run
    // through an agent) are taken once its descriptor polls readable.
    let accept = || match &door {
        Door::Open(_) => opcode::Accept::new(door_fd, std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ACCEPT),
        Door::Gated(_) => opcode::PollAdd::new(door_fd, libc::POLLIN as u32)
            .build()
            .user_data(ACCEPT),
    };
    // A tick every second: idle sessions and `stop` are checked on it.
    let tick_time = types::Timespec::from(Duration::from_secs(1));
    let tick = || opcode::Timeout::new(&tick_time).build().user_data(TICK);
    lp.push(accept())?;
    lp.push(tick())?;
    let stop_fd = types::Fd(stop.fd().as_raw_fd());
    lp.push(
        opcode::PollAdd::new(stop_fd, libc::POLLIN as u32)
            .build()
            .user_data(STOP),
    )?;
    let mut completions: Vec<(u64, i32)> = Vec::with_capacity(RING_ENTRIES as usize);
    let mut accept_inflight = true;
    let mut tick_inflight = true;
    while !stop.requested() {
        match lp.ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        lp.report.enters += 1;
        completions.clear();
        completions.extend(lp.ring.completion().map(|c| (c.user_data(), c.result())));
        lp.report.completions += completions.len() as u64;
        for &(data, result) in &completions {
            match data {
                ACCEPT => {
                    accept_inflight = false;
                    if result >= 0 && matches!(door, Door::Gated(_)) {
                        while let Ok((socket, peer)) = door.accept() {
                            lp.accepted(socket, peer, config, max_sessions);
                        }
                    } else if result >= 0 {
                        // SAFETY: the kernel gave us this new descriptor.
                        let socket = unsafe { TcpStream::from_raw_fd(result) };
                        let peer = socket
                            .peer_addr()
                            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
                        lp.accepted(socket, peer, config, max_sessions);
                    } else if result != -libc::EINTR && result != -libc::EAGAIN {
                        super::conn::refusal(
                            "accept",
                            format_args!(
                                "(uring): accept: {}",
                                io::Error::from_raw_os_error(-result)
                            ),
                        );
                    }
                }
                TICK => {
                    tick_inflight = false;
                    for index in 0..lp.slots.len() {
                        if lp.slots[index]
                            .as_ref()
                            .is_some_and(|s| s.ending.is_none() && s.conn.idle_for(config.idle))
                        {
                            lp.end(index, format!("idle for {} s", config.idle.as_secs()));
                        }
                    }
                }
                CANCEL | STOP => {}
                _ => lp.complete((data >> 8) as usize, data & 0xff, result)?,
            }
        }
        if !accept_inflight {
            lp.push(accept())?;
            accept_inflight = true;
        }
        if !tick_inflight {
            lp.push(tick())?;
            tick_inflight = true;
        }
    }
    // End every session and wait for their operations to complete, so no
    // buffer is freed under the kernel.
    for index in 0..lp.slots.len() {
        lp.end(index, "server stopping".into());
    }
    let _ = lp.push(opcode::AsyncCancel::new(ACCEPT).build().user_data(CANCEL));
    // Bounded: each wait ends at a 200 ms timeout of its own, so the 5 s
    // deadline holds even if some operation never completes.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let short = types::Timespec::from(Duration::from_millis(200));
    while lp.slots.iter().any(Option::is_some) && std::time::Instant::now() < deadline {
        lp.push(opcode::Timeout::new(&short).build().user_data(TICK))?;
        lp.ring.submit_and_wait(1)?;
        completions.clear();
        completions.extend(lp.ring.completion().map(|c| (c.user_data(), c.result())));
        for &(data, result) in &completions {
            // The top four values are the loop's own operations.
            if data < STOP {
                lp.complete((data >> 8) as usize, data & 0xff, result)?;
            }
        }
    }
    if lp.slots.iter().any(Option::is_some) {
        // Operations still in flight: leak their buffers rather than free
        // memory the kernel may still write (the process is exiting anyway).
        std::mem::forget(lp.slots);
        return Ok(lp.report);
    }
    Ok(lp.report)
}
