//! The event loop: the client and server processes, their two TCP ends,
//! one CPU (local) or two (remote), the wire, and `tcp_fasttimo`.

use super::call::{MAX_ARG_BYTES, Placement, call_writes};
use super::consts::*;
use super::tcp::{Segment, Tcb};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The model reached a state it does not cover.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SimError {
    #[error(
        "the 1989 model made no progress for 10 s at {arg_bytes} bytes ({placement}): only retransmission or the persist timer, which it leaves out, would move it on"
    )]
    Stuck {
        arg_bytes: u64,
        placement: &'static str,
    },
    #[error("argument size {0} is beyond the model's {max} bytes", max = MAX_ARG_BYTES)]
    TooLarge(u64),
    #[error("range {0}..{1}: the model takes LO <= HI <= {max}", max = MAX_ARG_BYTES)]
    BadRange(u64, u64),
}

/// The two ends of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum End {
    Client,
    Server,
}

impl End {
    fn index(self) -> usize {
        self as usize
    }

    fn peer(self) -> End {
        match self {
            End::Client => End::Server,
            End::Server => End::Client,
        }
    }
}

/// One call: when the client began its first write and took in the whole
/// reply, and how many delayed ACKs the timer sent while the other end held
/// data back (a stall).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub start_ns: u64,
    pub end_ns: u64,
    pub timer_acks: u32,
}

/// What happened, for reading a call's story (and for tests that check it
/// against traces worked by hand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEvent {
    /// `end` sent a segment.
    Sent { end: End, seg: Segment },
    /// `sosend` copied `bytes` into `end`'s send buffer and called the
    /// protocol.
    Copied { end: End, bytes: u64 },
    /// `end` read `bytes`.
    Read { end: End, bytes: u64 },
    /// `tcp_fasttimo` made `end`'s delayed ACK due.
    TimerAck { end: End },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trace {
    pub at_ns: u64,
    pub event: TraceEvent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A process may run (when its CPU is free).
    Run(End),
    /// A segment's last bit reached `to`'s interface.
    Arrive(End, Segment),
    /// `to`'s CPU has taken the segment in: `tcp_input`.
    Input(End, Segment),
    Tick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Send,
    Receive,
}

#[derive(Debug, Clone, Copy)]
enum Client {
    Write { index: usize, resid: u64 },
    Read { got: u64 },
    Done,
}

#[derive(Debug, Clone, Copy)]
enum Server {
    Read { got: u64 },
    Write { resid: u64 },
}

struct Sim<'t> {
    placement: Placement,
    arg_bytes: u64,
    tcb: [Tcb; 2],
    now: u64,
    cpu_free: [u64; 2],
    wire_free: [u64; 2],
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    order: u64,
    loopback: VecDeque<(End, Segment)>,
    client: Client,
    server: Server,
    waiting: [Option<Wait>; 2],
    writes: Vec<u64>,
    record: u64,
    calls_wanted: u32,
    calls: Vec<Call>,
    current: Call,
    last_progress: u64,
    trace: Option<&'t mut Vec<Trace>>,
}

/// Run `calls` calls of `arg_bytes` at `placement`; the trace, if asked
/// for, gets every segment, copy, read and timer ACK.
pub fn simulate(
    arg_bytes: u64,
    placement: Placement,
    calls: u32,
    trace: Option<&mut Vec<Trace>>,
) -> Result<Vec<Call>, SimError> {
    let maxseg = placement.maxseg();
    let writes = call_writes(arg_bytes);
    let record = writes.iter().sum();
    let end = Tcb::new(TCP_SPACE, TCP_SPACE, TCP_SPACE, maxseg);
    let mut sim = Sim {
        placement,
        arg_bytes,
        tcb: [end.clone(), end],
        now: 0,
        cpu_free: [0; 2],
        wire_free: [0; 2],
        queue: BinaryHeap::new(),
        order: 0,
        loopback: VecDeque::new(),
        client: Client::Write {
            index: 0,
            resid: writes[0],
        },
        server: Server::Read { got: 0 },
        waiting: [None; 2],
        writes,
        record,
        calls_wanted: calls,
        calls: Vec::new(),
        current: Call {
            start_ns: 0,
            end_ns: 0,
            timer_acks: 0,
        },
        last_progress: 0,
        trace,
    };
    sim.start_call();
    sim.push(0, Event::Run(End::Server));
    sim.push(0, Event::Run(End::Client));
    sim.push(FASTTIMO_NS, Event::Tick);
    sim.run()?;
    Ok(sim.calls)
}

fn per_kb(bytes: u64, ns_per_kb: u64) -> u64 {
    bytes * ns_per_kb / 1024
}

impl Sim<'_> {
    fn push(&mut self, at: u64, event: Event) {
        self.order += 1;
        self.queue.push(Reverse((at, self.order, event)));
    }

    fn note(&mut self, event: TraceEvent) {
        let at_ns = self.now;
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.push(Trace { at_ns, event });
        }
    }

    fn host(&self, end: End) -> usize {
        match self.placement {
            Placement::Local => 0,
            Placement::Remote => end.index(),
        }
    }

    /// Queue `ns` of work on `end`'s CPU; returns when it is done.
    fn charge(&mut self, end: End, ns: u64) -> u64 {
        let host = self.host(end);
        self.cpu_free[host] = self.cpu_free[host].max(self.now) + ns;
        self.cpu_free[host]
    }

    /// The time a process on `end`'s host has reached.
    fn clock(&self, end: End) -> u64 {
        self.cpu_free[self.host(end)].max(self.now)
    }

    fn packet_cost(seg: &Segment) -> u64 {
        PACKET_FIXED_NS + per_kb(seg.len + TCPIP_HEADER, CHECKSUM_NS_PER_KB)
    }

    fn transmit(&mut self, from: End, segments: Vec<Segment>) {
        for seg in segments {
            self.note(TraceEvent::Sent { end: from, seg });
            self.last_progress = self.now;
            let departs = self.charge(from, Self::packet_cost(&seg));
            match self.placement {
                Placement::Local => {
                    self.charge(from.peer(), Self::packet_cost(&seg));
                    self.loopback.push_back((from.peer(), seg));
                }
                Placement::Remote => {
                    let frame = (seg.len + TCPIP_HEADER + ETHERNET_FRAME_OVERHEAD)
                        .max(ETHERNET_MIN_FRAME)
                        + ETHERNET_GAP_BYTES;
                    let start = departs.max(self.wire_free[from.index()]);
                    let end = start + frame * ETHERNET_NS_PER_BYTE;
                    self.wire_free[from.index()] = end;
                    self.push(end, Event::Arrive(from.peer(), seg));
                }
            }
        }
    }

    /// Loopback input runs as soon as the protocol call that queued it
    /// returns.
    fn softint(&mut self) {
        while let Some((to, seg)) = self.loopback.pop_front() {
            self.deliver(to, seg);
        }
    }

    fn deliver(&mut self, to: End, seg: Segment) {
        let effect = self.tcb[to.index()].input(seg);
        if effect.acked {
            self.wake(to, Wait::Send);
        }
        if effect.data {
            self.wake(to, Wait::Receive);
        }
        self.transmit(to, effect.sent);
    }

    fn wake(&mut self, end: End, what: Wait) {
        if self.waiting[end.index()] == Some(what) {
            self.waiting[end.index()] = None;
            let at = self.clock(end);
            self.push(at, Event::Run(end));
        }
    }

    fn run(&mut self) -> Result<(), SimError> {
        while let Some(Reverse((at, _, event))) = self.queue.pop() {
            self.now = at;
            match event {
                Event::Run(end) => {
                    let free = self.cpu_free[self.host(end)];
                    if free > self.now {
                        self.push(free, Event::Run(end));
                        continue;
                    }
                    match end {
                        End::Client => self.run_client(),
                        End::Server => self.run_server(),
                    }
                    if matches!(self.client, Client::Done) {
                        return Ok(());
                    }
                }
                Event::Arrive(to, seg) => {
                    let done = self.charge(to, Self::packet_cost(&seg));
                    self.push(done, Event::Input(to, seg));
                }
                Event::Input(to, seg) => self.deliver(to, seg),
                Event::Tick => {
                    for end in [End::Client, End::Server] {
                        let peer = &self.tcb[end.peer().index()];
                        let held = peer.snd.cc > peer.snd_nxt - peer.snd_una;
                        if let Some(sent) = self.tcb[end.index()].fasttimo() {
                            self.note(TraceEvent::TimerAck { end });
                            if held {
                                self.current.timer_acks += 1;
                            }
                            self.transmit(end, sent);
                        }
                    }
                    self.softint();
                    if self.now - self.last_progress > 10_000_000_000 {
                        return Err(SimError::Stuck {
                            arg_bytes: self.arg_bytes,
                            placement: self.placement.name(),
                        });
                    }
                    self.push(self.now + FASTTIMO_NS, Event::Tick);
                }
            }
        }
        Ok(())
    }

    /// `sosend` (SunOS 4.1.3 `sys/os/uipc_socket.c`) for a blocking TCP
    /// socket: returns false when the writer must sleep for room.
    ///
    /// It sleeps when the buffer is full, or when a cluster's worth or
    /// more remains to be written, the buffer has less than a cluster's
    /// room and holds at least a cluster. Otherwise it copies what fits
    /// (at most `SEND_CHUNK`): clusters for 512 bytes or more while a
    /// cluster's room remains (each counted as a whole cluster), else small
    /// mbufs cut to the room; then calls the protocol, and goes round
    /// again while bytes remain.
    fn sosend(&mut self, end: End, resid: &mut u64) -> bool {
        loop {
            let tcb = &mut self.tcb[end.index()];
            let space = tcb.snd.space();
            if space <= 0
                || (*resid >= MCLBYTES && space < MCLBYTES as i64 && tcb.snd.cc >= MCLBYTES)
            {
                return false;
            }
            let mut space = space.min(SEND_CHUNK as i64);
            let mut copied = 0;
            while space > 0 {
                let len;
                if *resid >= SEND_THRESH && space >= SEND_THRESH as i64 {
                    len = (*resid).min(MCLBYTES);
                    space -= MCLBYTES as i64;
                    tcb.snd.append_mbuf(len, true);
                } else {
                    len = (*resid).min(MLEN).min(space as u64);
                    space -= len as i64;
                    tcb.snd.append_mbuf(len, false);
                }
                *resid -= len;
                copied += len;
                if *resid == 0 {
                    break;
                }
            }
            self.charge(end, per_kb(copied, COPY_NS_PER_KB));
            self.note(TraceEvent::Copied { end, bytes: copied });
            let sent = self.tcb[end.index()].output();
            self.transmit(end, sent);
            self.softint();
            if *resid == 0 {
                return true;
            }
        }
    }

    /// `soreceive` then `PRU_RCVD`: `None` when there is nothing to read.
    fn soreceive(&mut self, end: End, most: u64) -> Option<u64> {
        let available = self.tcb[end.index()].rcv.cc;
        if available == 0 {
            return None;
        }
        let n = available.min(most);
        self.charge(end, per_kb(n, COPY_NS_PER_KB));
        self.note(TraceEvent::Read { end, bytes: n });
        let sent = self.tcb[end.index()].read(n);
        self.transmit(end, sent);
        self.softint();
        Some(n)
    }

    /// The client begins a call: its first write, its clock started.
    fn start_call(&mut self) {
        self.current = Call {
            start_ns: self.clock(End::Client),
            end_ns: 0,
            timer_acks: 0,
        };
        self.client = Client::Write {
            index: 0,
            resid: self.writes[0],
        };
    }

    /// The client: `clnttcp_call` writes the call's fragments, then reads
    /// until the whole reply is in; then the next call.
    fn run_client(&mut self) {
        loop {
            match self.client {
                Client::Write { index, mut resid } => {
                    let done = self.sosend(End::Client, &mut resid);
                    self.client = if !done {
                        Client::Write { index, resid }
                    } else if index + 1 < self.writes.len() {
                        Client::Write {
                            index: index + 1,
                            resid: self.writes[index + 1],
                        }
                    } else {
                        Client::Read { got: 0 }
                    };
                    if !done {
                        self.waiting[End::Client.index()] = Some(Wait::Send);
                        return;
                    }
                }
                Client::Read { got } => {
                    let Some(n) = self.soreceive(End::Client, XDRREC_BUFFER) else {
                        self.waiting[End::Client.index()] = Some(Wait::Receive);
                        return;
                    };
                    let got = got + n;
                    if got < REPLY + RECORD_MARK {
                        self.client = Client::Read { got };
                        continue;
                    }
                    self.current.end_ns = self.clock(End::Client);
                    self.calls.push(self.current);
                    self.last_progress = self.now;
                    if self.calls.len() as u32 >= self.calls_wanted {
                        self.client = Client::Done;
                    } else {
                        self.start_call();
                    }
                }
                Client::Done => return,
            }
        }
    }

    /// The server: `svc_tcp` reads through its 4000-byte `xdrrec` buffer
    /// until the record is complete, calls the null procedure, and writes
    /// the reply (`svc_sendreply` flushes the record).
    fn run_server(&mut self) {
        loop {
            match self.server {
                Server::Read { got } => {
                    let Some(n) = self.soreceive(End::Server, XDRREC_BUFFER) else {
                        self.waiting[End::Server.index()] = Some(Wait::Receive);
                        return;
                    };
                    let got = got + n;
                    self.server = if got < self.record {
                        Server::Read { got }
                    } else {
                        Server::Write {
                            resid: REPLY + RECORD_MARK,
                        }
                    };
                }
                Server::Write { mut resid } => {
                    if self.sosend(End::Server, &mut resid) {
                        self.server = Server::Read { got: 0 };
                    } else {
                        self.server = Server::Write { resid };
                        self.waiting[End::Server.index()] = Some(Wait::Send);
                        return;
                    }
                }
            }
        }
    }
}
