//! One end of a 4.3BSD/SunOS 4 TCP connection: the socket buffers and the
//! parts of `tcp_output` and `tcp_input` that decide when a segment leaves.
//!
//! Established state only, no loss: no retransmission, persist or
//! congestion window (SunOS 4.1.3's `snd_cwnd` only grows on a loss-free
//! connection and exceeds the 4096-byte window after the first call).
//! Sequence numbers are byte offsets from the connection's start.

use super::consts::{MCLBYTES, MLEN, MSIZE};

/// A segment on the wire: `len` data bytes from `seq`, acknowledging `ack`,
/// advertising `win`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Segment {
    pub seq: u64,
    pub len: u64,
    pub ack: u64,
    pub win: u64,
}

/// One mbuf of a socket buffer: `len` bytes, in a cluster or in the mbuf.
#[derive(Debug, Clone, Copy)]
struct Mbuf {
    len: u64,
    cluster: bool,
}

/// A socket buffer (`struct sockbuf`): bytes and mbuf memory, with
/// 4.3BSD's two limits (`sbreserve`: `sb_mbmax = 2 * sb_hiwat`).
#[derive(Debug, Clone)]
pub struct SockBuf {
    pub hiwat: u64,
    mbmax: u64,
    pub cc: u64,
    mbufs: std::collections::VecDeque<Mbuf>,
}

impl SockBuf {
    pub fn new(hiwat: u64) -> SockBuf {
        SockBuf {
            hiwat,
            mbmax: 2 * hiwat,
            cc: 0,
            mbufs: Default::default(),
        }
    }

    fn mbcnt(&self) -> u64 {
        self.mbufs
            .iter()
            .map(|m| MSIZE + if m.cluster { MCLBYTES } else { 0 })
            .sum()
    }

    /// `sbspace`: the lesser of the byte and the mbuf-memory room.
    pub fn space(&self) -> i64 {
        (self.hiwat as i64 - self.cc as i64).min(self.mbmax as i64 - self.mbcnt() as i64)
    }

    pub fn append_mbuf(&mut self, len: u64, cluster: bool) {
        self.cc += len;
        self.mbufs.push_back(Mbuf { len, cluster });
    }

    /// A received segment as the driver hands it up: clusters for more
    /// than one mbuf's worth, else one small mbuf.
    pub fn append_received(&mut self, mut len: u64) {
        if len <= MLEN {
            self.append_mbuf(len, false);
            return;
        }
        while len > 0 {
            let here = len.min(MCLBYTES);
            self.append_mbuf(here, true);
            len -= here;
        }
    }

    /// `sbdrop`: remove `n` bytes from the front.
    pub fn drop_front(&mut self, mut n: u64) {
        self.cc -= n;
        while n > 0 {
            let Some(front) = self.mbufs.front_mut() else {
                break;
            };
            if front.len <= n {
                n -= front.len;
                self.mbufs.pop_front();
            } else {
                front.len -= n;
                n = 0;
            }
        }
    }
}

/// A TCP control block (`struct tcpcb`) with its socket's two buffers.
#[derive(Debug, Clone)]
pub struct Tcb {
    pub snd: SockBuf,
    pub rcv: SockBuf,
    pub snd_una: u64,
    pub snd_nxt: u64,
    pub snd_max: u64,
    pub snd_wnd: u64,
    pub max_sndwnd: u64,
    pub rcv_nxt: u64,
    pub rcv_adv: u64,
    pub maxseg: u64,
    pub delack: bool,
    pub acknow: bool,
    /// The segment (seq, ack) that last updated the send window.
    snd_wl1: u64,
    snd_wl2: u64,
}

/// What an arriving segment did, for the caller to wake processes.
#[derive(Debug, Default)]
pub struct InputEffect {
    /// Data was acknowledged: a writer sleeping on the send buffer wakes.
    pub acked: bool,
    /// Data arrived: a reader sleeping on the receive buffer wakes.
    pub data: bool,
    /// Segments `tcp_output` sent in reply.
    pub sent: Vec<Segment>,
}

impl Tcb {
    /// An established connection whose peer advertised a full buffer.
    pub fn new(sendspace: u64, recvspace: u64, peer_recvspace: u64, maxseg: u64) -> Tcb {
        Tcb {
            snd: SockBuf::new(sendspace),
            rcv: SockBuf::new(recvspace),
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            snd_wnd: peer_recvspace,
            max_sndwnd: peer_recvspace,
            rcv_nxt: 0,
            rcv_adv: recvspace,
            maxseg,
            delack: false,
            acknow: false,
            snd_wl1: 0,
            snd_wl2: 0,
        }
    }

    /// `tcp_output` (SunOS 4.1.3 `netinet/tcp_output.c`): send while a rule
    /// says so.
    ///
    /// Data goes if it fills a segment; or the connection was idle (nothing
    /// unacknowledged) on entry and this empties the buffer (Nagle,
    /// RFC 896); or it is at least half the largest window the peer
    /// offered. An ACK goes if one is owed now (`TF_ACKNOW`), or as a window
    /// update when reading opened the window by two segments (buffer empty)
    /// or by 35% of the buffer.
    pub fn output(&mut self) -> Vec<Segment> {
        let idle = self.snd_max == self.snd_una;
        let mut sent = Vec::new();
        loop {
            let off = self.snd_nxt - self.snd_una;
            let usable = self.snd.cc.min(self.snd_wnd);
            let mut len = usable.saturating_sub(off);
            let mut sendalot = false;
            if len > self.maxseg {
                len = self.maxseg;
                sendalot = true;
            }
            let mut send = self.acknow;
            if len > 0 && !send {
                send = len == self.maxseg
                    || (idle && len + off >= self.snd.cc)
                    || len >= self.max_sndwnd / 2
                    || self.snd_nxt < self.snd_max;
            }
            let room = self.rcv.space().max(0) as u64;
            if !send && room > 0 {
                let adv = room as i64 - (self.rcv_adv - self.rcv_nxt) as i64;
                send = (self.rcv.cc == 0 && adv >= 2 * self.maxseg as i64)
                    || 100 * adv / self.rcv.hiwat as i64 >= 35;
            }
            if !send {
                return sent;
            }
            // Receiver silly-window avoidance; never shrink the window.
            let mut win = room;
            if win < self.rcv.hiwat / 4 && win < self.maxseg {
                win = 0;
            }
            win = win.max(self.rcv_adv - self.rcv_nxt);
            sent.push(Segment {
                seq: self.snd_nxt,
                len,
                ack: self.rcv_nxt,
                win,
            });
            self.snd_nxt += len;
            self.snd_max = self.snd_max.max(self.snd_nxt);
            if win > 0 && self.rcv_nxt + win > self.rcv_adv {
                self.rcv_adv = self.rcv_nxt + win;
            }
            self.acknow = false;
            self.delack = false;
            if !sendalot {
                return sent;
            }
        }
    }

    /// `tcp_input` for an in-order segment on an established connection
    /// (SunOS 4.1.3 `netinet/tcp_input.c`): take the ACK, update the send
    /// window, queue the data and owe a delayed ACK for it (`TF_DELACK`),
    /// then call `tcp_output` if the ACK or the window asks for it.
    pub fn input(&mut self, seg: Segment) -> InputEffect {
        let mut effect = InputEffect::default();
        let mut needoutput = false;
        if seg.ack > self.snd_una {
            let acked = seg.ack - self.snd_una;
            self.snd.drop_front(acked.min(self.snd.cc));
            self.snd_wnd = self.snd_wnd.saturating_sub(acked);
            self.snd_una = seg.ack;
            self.snd_nxt = self.snd_nxt.max(self.snd_una);
            if seg.ack == self.snd_max {
                needoutput = true;
            }
            effect.acked = true;
        }
        // Step 6: a newer segment, or a newer ACK, or a wider window from
        // the same one, updates the send window and asks for output.
        if self.snd_wl1 < seg.seq
            || (self.snd_wl1 == seg.seq
                && (self.snd_wl2 < seg.ack || (self.snd_wl2 == seg.ack && seg.win > self.snd_wnd)))
        {
            self.snd_wnd = seg.win;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            self.max_sndwnd = self.max_sndwnd.max(seg.win);
            needoutput = true;
        }
        if seg.len > 0 {
            debug_assert_eq!(seg.seq, self.rcv_nxt, "the model has no loss or reordering");
            self.rcv_nxt += seg.len;
            self.rcv.append_received(seg.len);
            self.delack = true;
            effect.data = true;
        }
        if needoutput || self.acknow {
            effect.sent = self.output();
        }
        effect
    }

    /// `PRU_RCVD` after a read of `n` bytes: free them, then `tcp_output`
    /// (which may send a window update).
    pub fn read(&mut self, n: u64) -> Vec<Segment> {
        self.rcv.drop_front(n);
        self.output()
    }

    /// `tcp_fasttimo`, every 200 ms: a delayed ACK becomes due now.
    pub fn fasttimo(&mut self) -> Option<Vec<Segment>> {
        if !self.delack {
            return None;
        }
        self.delack = false;
        self.acknow = true;
        Some(self.output())
    }
}
