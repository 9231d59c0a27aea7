//! What a terminal-output cell waited on when neither end's CPU bound it,
//! from the serving tree's waits ([`crate::measure::waits`]): the session
//! socket's chrono splits the window into time held by the terminal's
//! receive window (the terminal's reads), by the server's send buffer
//! (the network), with data in flight awaiting ACKs (with small segments
//! and Nagle on, Nagle's wait for the ACK of the segment before; or the
//! client's delayed ACK), and time with nothing to send (the server side:
//! the relay's reads of the pty, or a baud rate's pacing, told apart by
//! where the tree's tasks slept).

use crate::experiments::output::record::OutputResult;
use crate::measure::waits::{TreeWaits, WaitSite};

/// Without the connection's MSS, segments under this many bytes are
/// taken as Nagle's business: each waits for the ACK of the one before.
pub const SMALL_SEGMENT: f64 = 1024.0;

/// Carrying this share of a link's rate is the link's limit.
const AT_LINK: f64 = 0.85;

/// A share of the window this large held by one thing names it.
const HELD: f64 = 0.3;

/// Bytes unsent in the socket in this share of the samples: the socket,
/// not the server, held them.
const MOSTLY: f64 = 0.6;

/// Bytes unsent in at most this share: the socket sent what it was given
/// and waited on the server. Between the two: undecided.
const SELDOM: f64 = 0.25;

/// The pacing timer's share of the tree's samples that says a paced
/// writer was sleeping between characters.
const PACED: f64 = 0.2;

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// Where the tree slept, its largest sites first, in words.
fn sites(waits: &TreeWaits) -> String {
    let mut by: Vec<(WaitSite, f64)> = waits
        .samples
        .keys()
        .map(|&site| (site, waits.share(site)))
        .filter(|&(_, share)| share >= 0.05)
        .collect();
    by.sort_by(|a, b| b.1.total_cmp(&a.1));
    let words: Vec<String> = by
        .iter()
        .map(|(site, share)| {
            let name = match site {
                WaitSite::Running => "running",
                WaitSite::PtyRead => "pty reads",
                WaitSite::PtyWrite => "pty writes",
                WaitSite::SocketSend => "socket sends",
                WaitSite::SocketReceive => "socket receives",
                WaitSite::Poll => "polls",
                WaitSite::Timer => "timers",
                WaitSite::Pipe => "pipes",
                WaitSite::Child => "waits for a child",
                WaitSite::Other => "elsewhere",
            };
            format!("{name} {}", pct(*share))
        })
        .collect();
    format!(
        "the server's tasks: {} of {} samples ({})",
        words.join(", "),
        waits.samples.values().sum::<u64>(),
        if waits.from_stacks {
            "kernel stacks"
        } else {
            "wchan"
        }
    )
}

/// What the cell waited on, with its evidence; "undecided" with what is
/// missing when the waits were not read.
pub fn waited_on(result: &OutputResult) -> String {
    let p = &result.params;
    let Some(waits) = result.waits.as_ref() else {
        return "undecided: the server's waits were not read (a record from before they were)"
            .into();
    };
    let window = waits.window_s.max(1e-9);
    let paced = p.baud.is_some() && waits.share(WaitSite::Timer) >= PACED;
    let Some(socket) = waits.socket else {
        if paced {
            return format!(
                "the pacing of a {}-baud line: the writer slept on its timer ({})",
                p.baud.unwrap_or(0),
                sites(waits)
            );
        }
        return format!(
            "undecided between the server and the network: {} ({})",
            waits
                .socket_unread
                .as_deref()
                .unwrap_or("the session socket was not read"),
            sites(waits)
        );
    };
    let rwnd = socket.rwnd_limited_s / window;
    let sndbuf = socket.sndbuf_limited_s / window;
    let busy = socket.busy_s / window;
    let queued = socket.queued_share;
    let chrono = format!(
        "the session socket over the window: held by the terminal's receive window {}, by its send buffer {}, data in flight {}; bytes written and not yet sent in {} of the samples",
        pct(rwnd),
        pct(sndbuf),
        pct(busy),
        pct(queued)
    );
    let rtt = result.tcp_info.as_ref().map_or(String::new(), |t| {
        format!(", RTT {:.2} ms", f64::from(t.rtt_us) / 1e3)
    });
    // Nagle holds any segment shorter than the MSS while one is unacked.
    let mss = result
        .tcp_info
        .as_ref()
        .map(|t| f64::from(t.snd_mss.max(t.rcv_mss)))
        .filter(|&m| m > 0.0)
        .unwrap_or(SMALL_SEGMENT);
    if let Some(rate) = result.link.as_ref().and_then(|l| l.profile.rate_bps) {
        // Payload over the link's rate, headers (52 B a segment) aside.
        let carried = result.kbytes_per_s * 1024.0 * 8.0 * (result.mean_segment_bytes + 52.0)
            / result.mean_segment_bytes.max(1.0);
        if carried >= AT_LINK * rate as f64 {
            return format!(
                "the link: {:.1} of its {:.1} Mbit/s carried ({chrono})",
                carried / 1e6,
                rate as f64 / 1e6
            );
        }
    }
    if rwnd >= HELD {
        format!(
            "the terminal's reads: its receive window closed on the server ({chrono}); a faster-reading terminal, or a larger receive buffer"
        )
    } else if sndbuf >= HELD {
        format!(
            "the network: the server's send buffer was full of unacknowledged data ({chrono}{rtt}); a larger send buffer, or a shorter path"
        )
    } else if queued >= MOSTLY && socket.cwnd_full_share >= MOSTLY {
        format!(
            "the round trip: what was written waited in the socket for its congestion window, full in {} of the samples ({chrono}{rtt})",
            pct(socket.cwnd_full_share)
        )
    } else if queued >= MOSTLY && !p.nodelay && result.mean_segment_bytes < 0.9 * mss {
        format!(
            "Nagle or a delayed ACK: {:.0}-byte segments held in the socket with its window open, each waiting on the ACK of the one before ({chrono}{rtt}); try --nodelay",
            result.mean_segment_bytes
        )
    } else if queued >= MOSTLY {
        format!(
            "the server's own socket: written bytes waited in it with its window open (congestion window full in {} of the samples), for the packets before them to leave the host (autocorking, TCP small queues) ({chrono}{rtt})",
            pct(socket.cwnd_full_share)
        )
    } else if queued <= SELDOM && paced {
        format!(
            "the pacing of a {}-baud line: the socket sent all it was given while the writer slept on its timer ({chrono}; {})",
            p.baud.unwrap_or(0),
            sites(waits)
        )
    } else if queued <= SELDOM {
        format!(
            "the pty's reads: the socket sent all it was given and waited on the server, which read it from the pty ({chrono}; {})",
            sites(waits)
        )
    } else {
        format!(
            "undecided: no one wait held most of the window ({chrono}; {})",
            sites(waits)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::login::host::{Dialect, Target};
    use crate::endpoint::login::server::Relay;
    use crate::experiments::output::record::OutputParams;
    use crate::measure::waits::SocketChrono;
    use crate::record::testbed::Placement;

    fn result(socket: Option<SocketChrono>, sites: &[(WaitSite, u64)]) -> OutputResult {
        OutputResult {
            params: OutputParams {
                relay: Target::of(Relay::ALL[0]),
                protocol: Dialect::Telnet,
                placement: Placement::Loopback,
                file_bytes: 1 << 20,
                baud: None,
                nodelay: false,
                stall: None,
            },
            bytes_received: 1 << 20,
            seconds: 1.0,
            kbytes_per_s: 1024.0,
            server_cpu_us_per_kb: 1.0,
            client_cpu_us_per_kb: 1.0,
            segments_per_kb: 4.0,
            mean_segment_bytes: 256.0,
            server_cpu_pct: 2.0,
            link: None,
            tcp_info: None,
            per_kb: None,
            waits: Some(TreeWaits {
                window_s: 1.0,
                samples: sites.iter().copied().collect(),
                from_stacks: true,
                socket,
                socket_unread: socket.is_none().then(|| "no socket".into()),
            }),
        }
    }

    fn chrono(queued: f64, rwnd: f64, sndbuf: f64) -> Option<SocketChrono> {
        Some(SocketChrono {
            busy_s: 0.9,
            rwnd_limited_s: rwnd,
            sndbuf_limited_s: sndbuf,
            queued_share: queued,
            cwnd_full_share: 0.0,
        })
    }

    #[test]
    fn each_wait_is_named_by_its_own_evidence() {
        let pty = [(WaitSite::PtyRead, 80), (WaitSite::Running, 20)];
        let said = |r: &OutputResult| waited_on(r);
        assert!(said(&result(chrono(0.1, 0.6, 0.0), &pty)).starts_with("the terminal's reads"));
        assert!(said(&result(chrono(0.1, 0.0, 0.5), &pty)).starts_with("the network"));
        let nagle = result(chrono(0.8, 0.0, 0.0), &pty);
        assert!(
            said(&nagle).starts_with("Nagle or a delayed ACK"),
            "{}",
            said(&nagle)
        );
        // With TCP_NODELAY the bytes held with the window open are the
        // host's own queueing; with the window full, the round trip.
        let mut no_nagle = nagle.clone();
        no_nagle.params.nodelay = true;
        assert!(said(&no_nagle).starts_with("the server's own socket"));
        no_nagle
            .waits
            .as_mut()
            .unwrap()
            .socket
            .as_mut()
            .unwrap()
            .cwnd_full_share = 0.9;
        assert!(said(&no_nagle).starts_with("the round trip"));
        let idle = result(chrono(0.1, 0.0, 0.0), &pty);
        assert!(
            said(&idle).starts_with("the pty's reads"),
            "{}",
            said(&idle)
        );
        assert!(said(&idle).contains("pty reads 80%"), "{}", said(&idle));
        // A paced writer asleep on its timer is the baud rate's pacing.
        let mut paced = result(
            chrono(0.1, 0.0, 0.0),
            &[(WaitSite::Timer, 50), (WaitSite::Poll, 50)],
        );
        paced.params.baud = Some(9600);
        assert!(
            said(&paced).starts_with("the pacing of a 9600-baud line"),
            "{}",
            said(&paced)
        );
        // Split evenly: undecided, not a guess.
        assert!(said(&result(chrono(0.45, 0.0, 0.0), &pty)).starts_with("undecided"));
        // Without the socket: undecided, and why.
        let unread = said(&result(None, &pty));
        assert!(
            unread.starts_with("undecided") && unread.contains("no socket"),
            "{unread}"
        );
        let mut old = idle.clone();
        old.waits = None;
        assert!(said(&old).starts_with("undecided"));
    }
}
