//! Typing files to a 9600-baud terminal through a remote TELNET login,
//! VAX-11/750s under VMS 4.4 with CMU/TEK TCP/IP (`002_61bb30b7ada03247.txt`,
//! S. Ball, April 1987), as a CPU model of the remote host; and the same
//! output through LAT (and DECnet's SET HOST), which left it 85% idle.
//!
//! Each record of output (a line: the seed's 100-byte packets, "presumably
//! 1 per record", carry 46 characters behind 54 bytes of headers) costs
//! the remote host, under TELNET:
//! - in user mode: TYPE's record (RMS and its write), the TELNET server's
//!   work a character, the IP_ACP's work a packet and its ACK;
//! - in the kernel: five QIOs (TYPE's write to the pseudo-terminal, the
//!   server's read of it and write to the IP_ACP, the ACP's write to the
//!   Ethernet and its read that the ACK completes), five process wake-ups
//!   (TYPE, the server, the ACP twice, the server's write completing), the
//!   characters through the pseudo-terminal's queue (in and out), and the
//!   Ethernet driver for the data frame and the ACK.
//!
//! Under LAT the output never leaves the kernel: TYPE's write, one wake-up
//! a record, the terminal driver's queue, and a LAT message (and the
//! terminal server's reply) each circuit timer tick, carrying whatever
//! characters queued.
//!
//! Constants, each with its source ([`constants`]):
//! - **cited**: the terminal's 960 characters a second; the seed's
//!   100-byte packets; Ethernet's 60-byte least frame; LAT's 80 ms circuit
//!   timer and its headers; and, for the kernel's unit costs, proxies
//!   measured on the same VAX-11/750 under 4.1BSD (Leffler, Karels and
//!   McKusick 1985, Table 2: a system call, a context switch, a byte
//!   through a kernel queue) and the 1981 model's Ethernet driver a frame
//!   ([`super::bsd41`], itself fitted to Joy's 750);
//! - **fitted**: the user-mode costs, where no source gives them (TYPE's
//!   a record, the server's a character, the ACP's a packet), each to its
//!   own share of 002's CPU at the terminal's rate. The kernel's share,
//!   the CPU at the 1 KB/s ceiling, LAT's idle time and the Ethernet's
//!   traffic are then predictions.
//!
//! Pure: no clocks, no sockets.

use super::Constant;
use super::bsd41;
use serde::Serialize;

/// The cited constants.
pub mod cited {
    /// The seed's terminal: 9600 baud, ten bits a character on an
    /// asynchronous line (start, eight data, stop).
    pub const BAUD: f64 = 9600.0;
    pub const BITS_PER_CHAR: f64 = 10.0;
    /// The seed: "The Ethernet packet size averaged about 100 bytes,
    /// presumably 1 per record of terminal output"; behind an Ethernet
    /// (14), IP (20, RFC 791) and TCP (20, RFC 793) header.
    pub const PACKET_BYTES: f64 = 100.0;
    pub const HEADER_BYTES: f64 = 14.0 + 20.0 + 20.0;
    /// The least Ethernet frame, 64 bytes with its FCS, 60 as an interface
    /// counts it (IEEE 802.3): a bare ACK, a LAT acknowledgement.
    pub const LEAST_FRAME_BYTES: f64 = 60.0;
    /// LAT's circuit timer, 80 ms by default (DEC, LAT Network Concepts):
    /// a host sends a message on each virtual circuit at most this often.
    pub const LAT_CIRCUIT_TIMER_S: f64 = 0.080;
    /// A LAT message's Ethernet (14), message (8) and slot (4) headers.
    pub const LAT_HEADER_BYTES: f64 = 14.0 + 8.0 + 4.0;
    /// Leffler, Karels and McKusick (1985), Table 2, 4.1BSD on a 750: a
    /// system call's system time, a context switch (`csw` less two
    /// `signocsw`), and a byte through a kernel queue and back
    /// (`pipeself512` less `pipeself4`, over 508 more bytes each way),
    /// proxies for VMS's QIO, process switch and terminal queue on the
    /// same machine.
    pub const SYSCALL_US: f64 = 23.9 / 100_000.0 * 1e6;
    pub const CONTEXT_SWITCH_US: f64 = (45.0 - 2.0 * 16.5) / 20_000.0 * 1e6;
    pub const QUEUE_US_PER_BYTE: f64 = (47.5 - 21.5) / (10_000.0 * 508.0 * 2.0) * 1e6;
    /// QIOs, wake-ups and Ethernet frames a record under TELNET, and
    /// under LAT (see the module's list).
    pub const TELNET_QIOS: f64 = 5.0;
    pub const TELNET_WAKEUPS: f64 = 5.0;
    pub const TELNET_FRAMES: f64 = 2.0;
    pub const LAT_QIOS: f64 = 1.0;
    pub const LAT_WAKEUPS: f64 = 1.0;
}

/// The shares of the remote's CPU the fitted costs are fitted to (002):
/// the TELNET server 50%, the IP_ACP 15%, TYPE 15% (80% user in all).
pub mod shares1987 {
    pub const SERVER: f64 = 0.50;
    pub const IP_ACP: f64 = 0.15;
    pub const TYPE: f64 = 0.15;
}

/// Characters a second the terminal takes.
pub fn terminal_chars_per_s() -> f64 {
    cited::BAUD / cited::BITS_PER_CHAR
}

/// Characters a record (the seed's packet less its headers).
pub fn record_chars() -> f64 {
    cited::PACKET_BYTES - cited::HEADER_BYTES
}

/// The remote's unit costs, µs of a 750.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Costs {
    pub qio_us: f64,
    pub wakeup_us: f64,
    pub queue_us_per_char: f64,
    pub ethernet_frame_us: f64,
    /// Fitted: TYPE a record, the server a character, the ACP a packet.
    pub type_us_per_record: f64,
    pub server_us_per_char: f64,
    pub acp_us_per_packet: f64,
}

impl Costs {
    /// The cited costs, and the fitted ones from 002's shares at the
    /// terminal's rate.
    pub fn vax750() -> Costs {
        let chars = terminal_chars_per_s();
        let records = chars / record_chars();
        Costs {
            qio_us: cited::SYSCALL_US,
            wakeup_us: cited::CONTEXT_SWITCH_US,
            queue_us_per_char: cited::QUEUE_US_PER_BYTE,
            ethernet_frame_us: bsd41::Costs::vax750().ethernet_us,
            type_us_per_record: shares1987::TYPE / records * 1e6,
            server_us_per_char: shares1987::SERVER / chars * 1e6,
            acp_us_per_packet: shares1987::IP_ACP / records * 1e6,
        }
    }
}

/// Every constant, cited or fitted.
pub fn constants() -> Vec<Constant> {
    let c = Costs::vax750();
    let cite = |name, value, unit, source| Constant {
        name,
        value,
        unit,
        source,
        cited: true,
        uncertainty: 0.0,
    };
    let fit = |name, value, source| Constant {
        name,
        value,
        unit: "µs",
        source,
        cited: false,
        uncertainty: 0.0,
    };
    vec![
        cite(
            "terminal",
            terminal_chars_per_s(),
            "chars/s",
            "002: 9600 baud; 10 bits a character (start, 8, stop)",
        ),
        cite(
            "packet",
            cited::PACKET_BYTES,
            "bytes",
            "002: \"averaged about 100 bytes, presumably 1 per record\"",
        ),
        cite(
            "least frame",
            cited::LEAST_FRAME_BYTES,
            "bytes",
            "IEEE 802.3: 64 bytes with the FCS",
        ),
        cite(
            "LAT circuit timer",
            cited::LAT_CIRCUIT_TIMER_S * 1e3,
            "ms",
            "DEC, LAT Network Concepts: the default",
        ),
        cite(
            "LAT headers",
            cited::LAT_HEADER_BYTES,
            "bytes",
            "Ethernet 14, LAT message 8, slot 4",
        ),
        cite(
            "QIO (proxy)",
            c.qio_us,
            "µs",
            "4.1BSD system call on a 750, Leffler et al. 1985 Table 2",
        ),
        cite(
            "process wake-up (proxy)",
            c.wakeup_us,
            "µs",
            "4.1BSD context switch on a 750, Leffler et al. 1985 Table 2",
        ),
        cite(
            "terminal queue a character (proxy)",
            c.queue_us_per_char,
            "µs",
            "4.1BSD pipe a byte on a 750, Leffler et al. 1985 Table 2",
        ),
        cite(
            "Ethernet driver a frame",
            c.ethernet_frame_us,
            "µs",
            "the 1981 model's, fitted to Joy's 750 (model::bsd41)",
        ),
        fit(
            "TYPE a record",
            c.type_us_per_record,
            "002's TYPE at 15% of the CPU",
        ),
        fit(
            "TELNET server a character",
            c.server_us_per_char,
            "002's server at 50%",
        ),
        fit(
            "IP_ACP a packet and its ACK",
            c.acp_us_per_packet,
            "002's IP_ACP at 15%",
        ),
    ]
}

/// The remote host's CPU at a rate of output, shares of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Load {
    pub chars_per_s: f64,
    pub user: f64,
    pub kernel: f64,
    pub server: f64,
    pub ip_acp: f64,
    pub type_: f64,
    /// The Ethernet's added traffic, KB/s (10^3 bytes): the remote's
    /// frames and, for TELNET, the local host's LAT to the terminal.
    pub ethernet_kbytes_s: f64,
}

impl Load {
    pub fn busy(&self) -> f64 {
        self.user + self.kernel
    }
}

/// LAT's traffic at `chars_per_s`: a message each circuit tick with the
/// characters queued, and the terminal server's reply.
fn lat_bytes_per_s(chars_per_s: f64) -> f64 {
    let ticks = 1.0 / cited::LAT_CIRCUIT_TIMER_S;
    ticks * (chars_per_s / ticks + cited::LAT_HEADER_BYTES) + ticks * cited::LEAST_FRAME_BYTES
}

/// The remote under TELNET at `chars_per_s`.
pub fn telnet(costs: &Costs, chars_per_s: f64) -> Load {
    use cited as c;
    let records = chars_per_s / record_chars();
    let per_record_kernel = c::TELNET_QIOS * costs.qio_us
        + c::TELNET_WAKEUPS * costs.wakeup_us
        + 2.0 * record_chars() * costs.queue_us_per_char
        + c::TELNET_FRAMES * costs.ethernet_frame_us;
    let server = chars_per_s * costs.server_us_per_char / 1e6;
    let ip_acp = records * costs.acp_us_per_packet / 1e6;
    let type_ = records * costs.type_us_per_record / 1e6;
    Load {
        chars_per_s,
        user: server + ip_acp + type_,
        kernel: records * per_record_kernel / 1e6,
        server,
        ip_acp,
        type_,
        ethernet_kbytes_s: (records * (c::PACKET_BYTES + c::LEAST_FRAME_BYTES)
            + lat_bytes_per_s(chars_per_s))
            / 1e3,
    }
}

/// The remote under a direct LAT connection at `chars_per_s`: TYPE and
/// the kernel's terminal and LAT drivers, no other process.
pub fn lat(costs: &Costs, chars_per_s: f64) -> Load {
    use cited as c;
    let records = chars_per_s / record_chars();
    let ticks = 1.0 / c::LAT_CIRCUIT_TIMER_S;
    let kernel = records
        * (c::LAT_QIOS * costs.qio_us
            + c::LAT_WAKEUPS * costs.wakeup_us
            + record_chars() * costs.queue_us_per_char)
        + ticks * 2.0 * costs.ethernet_frame_us;
    let type_ = records * costs.type_us_per_record / 1e6;
    Load {
        chars_per_s,
        user: type_,
        kernel: kernel / 1e6,
        server: 0.0,
        ip_acp: 0.0,
        type_,
        ethernet_kbytes_s: lat_bytes_per_s(chars_per_s) / 1e3,
    }
}

/// The rate the remote sustains: the terminal's, or what a saturated CPU
/// allows below it.
pub fn sustained(load_at: impl Fn(f64) -> Load) -> Load {
    let at_terminal = load_at(terminal_chars_per_s());
    if at_terminal.busy() <= 1.0 {
        at_terminal
    } else {
        load_at(terminal_chars_per_s() / at_terminal.busy())
    }
}

/// What one of today's servers did for each KB of terminal data, as
/// netlab counted it over its measured window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TodayCounts {
    pub syscalls: f64,
    pub context_switches: f64,
    /// Segments out and in (data to the terminal, its ACKs back).
    pub packets: f64,
}

/// A system call's user-mode side (the stub and its caller's loop):
/// 4.1BSD's `getpid` on a 750, 4.5 s of user time a 100,000 (Leffler et
/// al. 1985, Table 2).
pub const SYSCALL_USER_US: f64 = 4.5 / 100_000.0 * 1e6;

/// Today's server on 1987's VAX-11/750 at `chars_per_s`: its system
/// calls at a QIO's kernel cost (and their user-mode stubs), its context
/// switches at a wake-up's, the characters through the pseudo-terminal's
/// queue in and out, each packet through the Ethernet driver, IP and TCP
/// at the 1981 model's costs (the protocol in the kernel, as today), and
/// TYPE's own record as in 1987. Today's relays do no work a character
/// in user mode beyond their system calls (they move bytes in bulk), so
/// none is charged.
pub fn today_on_750(costs: &Costs, counts: &TodayCounts, chars_per_s: f64) -> Load {
    let kb_per_s = chars_per_s / 1024.0;
    let protocol = bsd41::Costs::vax750();
    let per_kb_kernel = counts.syscalls * costs.qio_us
        + counts.context_switches * costs.wakeup_us
        + 2.0 * 1024.0 * costs.queue_us_per_char
        + counts.packets * (costs.ethernet_frame_us + protocol.ip_us + protocol.tcp_us);
    let records = chars_per_s / record_chars();
    let type_ = records * costs.type_us_per_record / 1e6;
    let server_user = kb_per_s * counts.syscalls * SYSCALL_USER_US / 1e6;
    Load {
        chars_per_s,
        user: type_ + server_user,
        kernel: kb_per_s * per_kb_kernel / 1e6,
        server: server_user,
        ip_acp: 0.0,
        type_,
        // Half the packets carry data behind their headers, half are
        // bare ACKs.
        ethernet_kbytes_s: (kb_per_s
            * counts.packets
            * 0.5
            * (cited::HEADER_BYTES + cited::LEAST_FRAME_BYTES)
            + chars_per_s)
            / 1e3,
    }
}

/// What the report tells a reader to keep in mind.
pub const CAVEATS: &str = "the kernel's unit costs are 4.1BSD's on the same VAX-11/750 standing in for VMS 4.4's (a QIO does more than a getpid: an I/O request packet, a driver's start and its completion, an AST), so the kernel's share is a floor; the user-mode costs are fitted to 002's own shares at the terminal's rate; a record is the seed's 46 characters; SET HOST is taken to run as LAT does (the terminal handled by kernel drivers, one process), which the seed's 85% idle for both supports.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_gives_back_the_user_shares_at_the_terminals_rate() {
        let load = telnet(&Costs::vax750(), terminal_chars_per_s());
        assert!((load.server - 0.50).abs() < 1e-9);
        assert!((load.user - 0.80).abs() < 1e-9);
    }

    #[test]
    fn lat_leaves_the_host_far_idler_than_telnet() {
        let costs = Costs::vax750();
        let t = sustained(|r| telnet(&costs, r));
        let l = sustained(|r| lat(&costs, r));
        assert!(l.busy() < 0.5 * t.busy(), "{l:?} {t:?}");
        assert_eq!(l.server, 0.0);
    }

    #[test]
    fn a_saturated_cpu_sets_the_rate_below_the_terminals() {
        let mut costs = Costs::vax750();
        costs.server_us_per_char *= 2.0;
        let t = sustained(|r| telnet(&costs, r));
        assert!((t.busy() - 1.0).abs() < 1e-9, "{t:?}");
        assert!(t.chars_per_s < terminal_chars_per_s());
    }

    #[test]
    fn cited_constants_outnumber_fitted_ones() {
        let all = constants();
        let cited = all.iter().filter(|c| c.cited).count();
        assert!(cited > all.len() - cited);
    }
}
