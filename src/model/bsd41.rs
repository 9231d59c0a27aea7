//! Berkeley's first TCP/IP (`004_579c0fcfbba19879.txt`, Bill Joy, TCP-IP
//! Digest, November 1981): 4 MB between two user processes in 1 KB
//! records over a 3 Mbit/s Ethernet, from a VAX-11/750 to a VAX-11/780,
//! as a CPU model of each end; and Joy's ladder of projected speedups
//! between two 750s on a 10 Mbit/s cable, each step predicted by taking
//! away what Joy says it takes away.
//!
//! Each end's work per TCP segment is a sum of counts times costs, in
//! Joy's five categories (Ethernet, IP, TCP, checksum, system calls):
//! - the sender: one `write` (its system call and the copy in), the
//!   checksum over the segment and each fragment's IP header, TCP once,
//!   IP and the Ethernet driver once a frame, and the ACK that comes back
//!   (the 1981 TCP acknowledged every segment: Joy names fewer ACKs as a
//!   technique still to try) through the driver, IP, TCP and its checksum;
//! - the receiver: the same for the data coming in and the ACK going out,
//!   one `read` and the copy out, and with IP fragmentation reassembly,
//!   counted as one more IP input a fragment.
//!
//! The costs ([`Costs`]) come from two kinds of constant, each named with
//! its source ([`CONSTANTS`]):
//! - **cited**: the 750's average instruction time (Emer and Clark's
//!   11/780 cycles per instruction, Joy's 1.4 between the two VAXes), the
//!   checksum loop of the code Joy measured (`in_cksum.c` 1.5, 81/10/21,
//!   counted instruction by instruction), a system call's entry and exit
//!   (Leffler, Karels and McKusick's 4.1BSD `getpid` on a 750), the
//!   frames and the wires;
//! - **fitted**, where no source of the time gives a cost: the Ethernet
//!   driver's, IP's and TCP's cost a frame and the copy's cost a KB, each
//!   fitted to the 1981 row alone (its 28 s, and its Ethernet, IP, TCP and
//!   system-call shares), never to a projection. They are then tested on
//!   what they were not fitted to: the checksum's share and the transfer
//!   time (which the cited checksum decides), the receiver's idle time,
//!   and every step of the ladder.
//!
//! A throughput is a period per segment: the slowest of the sender's CPU,
//! the receiver's CPU (a 780 does the 750's work in 1/1.4 of the time) and
//! the wire. Pure: no clocks, no sockets.

pub use super::Constant;
use serde::Serialize;

/// The cited constants.
pub mod cited {
    /// Emer and Clark, "A Characterization of Processor Performance in
    /// the VAX-11/780" (ISCA 1984): the 780 averaged 10.6 cycles of
    /// 200 ns an instruction over their measured workloads.
    pub const VAX780_CYCLES_PER_INSTRUCTION: f64 = 10.6;
    pub const VAX780_CYCLE_NS: f64 = 200.0;
    /// Joy (004): "On 11/780's, these numbers typically scale up by 1.4".
    pub const VAX780_OVER_750: f64 = 1.4;
    /// The checksum Joy measured, `sys/vax/vax/in_cksum.c` 1.5 (81/10/21,
    /// CSRG): its inner loop takes 32 bytes in `clrl r0`, eight
    /// `adwc (r9)+,r8`, `adwc $0,r8` and the loop's subtract and branch.
    pub const CHECKSUM_INSTRUCTIONS_PER_32_BYTES: f64 = 12.0;
    /// The same routine's work for each mbuf of a chain (finding the data,
    /// the odd byte, clamping the length, three loops' set-up and exit,
    /// folding the sum, the next mbuf): about 30 instructions, estimated
    /// from its C.
    pub const CHECKSUM_INSTRUCTIONS_PER_MBUF: f64 = 30.0;
    /// 1981's mbufs (`sys/sys/mbuf.h`, 81/11/14): `PGSIZE` 1024, so a KB
    /// record rides in one page mbuf behind a header mbuf.
    pub const PAGE_MBUF_BYTES: f64 = 1024.0;
    /// Leffler, Karels and McKusick, "Measuring and Improving the
    /// Performance of Berkeley UNIX" (1985), Table 2, 4.1BSD column on a
    /// VAX-11/750: 100,000 `getpid` calls took 23.9 s of system time.
    pub const GETPID_SYSTEM_S: f64 = 23.9;
    pub const GETPID_CALLS: f64 = 100_000.0;
    /// Joy (004): 4 MB in 1024-byte records, 1068-byte Ethernet packets.
    pub const TRANSFER_BYTES: f64 = 4_194_304.0;
    pub const RECORD_BYTES: f64 = 1024.0;
    pub const PACKET_BYTES_3MB: f64 = 1068.0;
    /// Metcalfe and Boggs, "Ethernet: Distributed Packet Switching for
    /// Local Computer Networks" (CACM 1976): the experimental Ethernet
    /// ran at 2.94 Mbit/s (Joy's "3 Megabaud").
    pub const WIRE_3MB_BPS: f64 = 2.94e6;
    /// The 10 Mbit/s Ethernet (DEC, Intel, Xerox 1980): 14-byte header,
    /// 4-byte FCS, 8 bytes of preamble and a 9.6 µs gap (12 byte times).
    pub const WIRE_10MB_BPS: f64 = 10e6;
    pub const FRAMING_10MB_BYTES: f64 = 14.0 + 4.0 + 8.0 + 12.0;
    /// TCP's and IP's headers without options (RFC 793, RFC 791), and the
    /// pseudo-header TCP's checksum covers (RFC 793 3.1).
    pub const TCP_HEADER: f64 = 20.0;
    pub const IP_HEADER: f64 = 20.0;
    pub const PSEUDO_HEADER: f64 = 12.0;
    /// Joy (004): 4096-byte segments fragmented at IP, "the 4 interrupts
    /// for the fragments of the 4k packets".
    pub const BIG_SEGMENT_BYTES: f64 = 4096.0;
    pub const FRAGMENTS: f64 = 4.0;
}

/// The 1981 row the fitted constants are fitted to (004): 28 s with the
/// 750 saturated, its system time 20% Ethernet, 10% IP, 30% TCP, 25%
/// checksum, 15% system calls.
pub mod row1981 {
    pub const SECONDS: f64 = 28.0;
    pub const ETHERNET_SHARE: f64 = 0.20;
    pub const IP_SHARE: f64 = 0.10;
    pub const TCP_SHARE: f64 = 0.30;
    pub const CHECKSUM_SHARE: f64 = 0.25;
    pub const SYSCALL_SHARE: f64 = 0.15;
    pub const RECEIVER_IDLE: f64 = 0.30;
}

/// What each unit of work costs a VAX-11/750, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Costs {
    /// An average instruction.
    pub instruction_us: f64,
    /// A system call's entry and exit (cited: 4.1BSD getpid).
    pub syscall_us: f64,
    /// The checksum a byte and a mbuf (cited: the 1981 loop's counts).
    pub checksum_us_per_byte: f64,
    pub checksum_us_per_mbuf: f64,
    /// Fitted: the copy in or out a KB, and each layer a frame (the
    /// Ethernet driver and its interrupt, IP) or a segment (TCP).
    pub copy_us_per_kb: f64,
    pub ethernet_us: f64,
    pub ip_us: f64,
    pub tcp_us: f64,
}

/// The cited constants as the model uses them, moved where asked
/// ([`sensitivity`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inputs {
    pub cycles_per_instruction: f64,
    pub cycle_ns: f64,
    pub vax780_over_750: f64,
    pub checksum_instructions_per_32: f64,
    pub checksum_instructions_per_mbuf: f64,
    pub getpid_us: f64,
    pub fragments: f64,
    /// The 1981 row's time, which the fitted constants are fitted to.
    pub row_seconds: f64,
}

impl Default for Inputs {
    fn default() -> Inputs {
        use cited as c;
        Inputs {
            cycles_per_instruction: c::VAX780_CYCLES_PER_INSTRUCTION,
            cycle_ns: c::VAX780_CYCLE_NS,
            vax780_over_750: c::VAX780_OVER_750,
            checksum_instructions_per_32: c::CHECKSUM_INSTRUCTIONS_PER_32_BYTES,
            checksum_instructions_per_mbuf: c::CHECKSUM_INSTRUCTIONS_PER_MBUF,
            getpid_us: c::GETPID_SYSTEM_S / c::GETPID_CALLS * 1e6,
            fragments: c::FRAGMENTS,
            row_seconds: row1981::SECONDS,
        }
    }
}

/// Joy's five categories, µs of a 750.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Split {
    pub ethernet: f64,
    pub ip: f64,
    pub tcp: f64,
    pub checksum: f64,
    pub syscall: f64,
}

impl Split {
    pub fn total(&self) -> f64 {
        self.ethernet + self.ip + self.tcp + self.checksum + self.syscall
    }

    /// Each category's share of the total, percent, in Joy's order.
    pub fn shares_pct(&self) -> [f64; 5] {
        let t = self.total().max(f64::MIN_POSITIVE);
        [
            self.ethernet,
            self.ip,
            self.tcp,
            self.checksum,
            self.syscall,
        ]
        .map(|x| 100.0 * x / t)
    }
}

/// The names of [`Split`]'s categories in Joy's order.
pub const CATEGORIES: [&str; 5] = ["Ethernet", "IP", "TCP", "checksum", "system calls"];

/// How one transfer is done: what a segment carries and what each end
/// does for it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Transfer {
    /// User data a segment (and a `write` or `read`).
    pub segment_bytes: f64,
    /// Frames a segment takes on the wire (IP fragments).
    pub frames: f64,
    /// Whether each end copies the data between the user and the
    /// kernel (false: page remapping, Joy's steps 2 and 5).
    pub sender_copies: bool,
    pub receiver_copies: bool,
    /// Whether the hosts checksum (false: the interface does, step 3).
    pub host_checksum: bool,
    pub wire: Wire,
}

/// The medium.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Wire {
    /// Xerox's experimental Ethernet: Joy's 1068-byte packets.
    Experimental3Mb,
    /// The 10 Mbit/s Ethernet.
    Ethernet10Mb,
}

impl Transfer {
    /// The 1981 measurement: 1 KB records, one frame each, 3 Mbit/s.
    pub fn joy1981() -> Transfer {
        Transfer {
            segment_bytes: cited::RECORD_BYTES,
            frames: 1.0,
            sender_copies: true,
            receiver_copies: true,
            host_checksum: true,
            wire: Wire::Experimental3Mb,
        }
    }

    /// The wire's time for one segment, µs.
    pub fn wire_us(&self) -> f64 {
        match self.wire {
            Wire::Experimental3Mb => {
                cited::PACKET_BYTES_3MB * (self.segment_bytes / cited::RECORD_BYTES) * 8.0
                    / cited::WIRE_3MB_BPS
                    * 1e6
            }
            Wire::Ethernet10Mb => {
                let bytes = self.segment_bytes
                    + cited::TCP_HEADER
                    + self.frames * (cited::IP_HEADER + cited::FRAMING_10MB_BYTES);
                bytes * 8.0 / cited::WIRE_10MB_BPS * 1e6
            }
        }
    }
}

/// The checksum's cost over `bytes` in `mbufs` mbufs, µs.
fn checksum_us(costs: &Costs, bytes: f64, mbufs: f64) -> f64 {
    bytes * costs.checksum_us_per_byte + mbufs * costs.checksum_us_per_mbuf
}

/// What each end does for one segment, by Joy's categories, µs of a 750:
/// the sender's, then the receiver's.
pub fn work(costs: &Costs, t: &Transfer) -> (Split, Split) {
    use cited as c;
    let kb = t.segment_bytes / 1024.0;
    let data_mbufs = 1.0 + (t.segment_bytes / c::PAGE_MBUF_BYTES).ceil();
    let segment_sum = t.segment_bytes + c::TCP_HEADER + c::PSEUDO_HEADER;
    let ack_sum = c::TCP_HEADER + c::PSEUDO_HEADER;
    // The TCP checksum over the segment and the ACK, IP's over each
    // fragment's header and the ACK's.
    let checksum = if t.host_checksum {
        checksum_us(costs, segment_sum, data_mbufs)
            + t.frames * checksum_us(costs, c::IP_HEADER, 1.0)
            + checksum_us(costs, ack_sum, 1.0)
            + checksum_us(costs, c::IP_HEADER, 1.0)
    } else {
        0.0
    };
    let copy = |copies: bool| {
        if copies {
            kb * costs.copy_us_per_kb
        } else {
            0.0
        }
    };
    // Both ends: the data's frames and the ACK's through the driver and
    // IP, the segment and the ACK through TCP.
    let ethernet = (t.frames + 1.0) * costs.ethernet_us;
    let tcp = 2.0 * costs.tcp_us;
    let sender = Split {
        ethernet,
        ip: (t.frames + 1.0) * costs.ip_us,
        tcp,
        checksum,
        syscall: costs.syscall_us + copy(t.sender_copies),
    };
    let reassembly = if t.frames > 1.0 { t.frames } else { 0.0 };
    let receiver = Split {
        ethernet,
        ip: (t.frames + 1.0 + reassembly) * costs.ip_us,
        tcp,
        checksum,
        syscall: costs.syscall_us + copy(t.receiver_copies),
    };
    (sender, receiver)
}

/// Which of the three set a transfer's pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Sender,
    Receiver,
    Wire,
}

/// A transfer's predicted pace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub transfer: Transfer,
    pub sender: Split,
    pub receiver: Split,
    /// Each side's period a segment on its own machine, µs.
    pub sender_us: f64,
    pub receiver_us: f64,
    pub wire_us: f64,
    pub bound: Bound,
    /// User-to-user throughput, Mbit/s ("Megabaud").
    pub mbaud: f64,
    /// What the two hosts' CPUs alone would allow, the wire aside (Joy's
    /// projections are these: his 11.2 on 780s is more than a 10 Mbit/s
    /// cable carries).
    pub host_mbaud: f64,
    /// Each machine's busy share of the run.
    pub sender_busy: f64,
    pub receiver_busy: f64,
}

/// The pace of `t` between a sender and a receiver that run the 750's
/// work `sender_speed` and `receiver_speed` times as fast.
pub fn outcome(costs: &Costs, t: &Transfer, sender_speed: f64, receiver_speed: f64) -> Outcome {
    let (sender, receiver) = work(costs, t);
    let sender_us = sender.total() / sender_speed;
    let receiver_us = receiver.total() / receiver_speed;
    let wire_us = t.wire_us();
    let period = sender_us.max(receiver_us).max(wire_us);
    let bound = if period == sender_us {
        Bound::Sender
    } else if period == receiver_us {
        Bound::Receiver
    } else {
        Bound::Wire
    };
    Outcome {
        transfer: *t,
        sender,
        receiver,
        sender_us,
        receiver_us,
        wire_us,
        bound,
        mbaud: t.segment_bytes * 8.0 / period,
        host_mbaud: t.segment_bytes * 8.0 / sender_us.max(receiver_us),
        sender_busy: sender_us / period,
        receiver_busy: receiver_us / period,
    }
}

impl Costs {
    /// The costs from `inputs`: the cited ones as they stand, the fitted
    /// ones from the 1981 row (the sender saturated for `row_seconds`:
    /// its period a packet is the row's time over its packets, and each
    /// of Ethernet, IP and TCP takes its share of it, spread over the
    /// data frame and its ACK; the system calls' share less a call's
    /// entry and exit is the copy of a KB).
    pub fn from(inputs: &Inputs) -> Costs {
        use row1981 as r;
        let instruction_us =
            inputs.cycles_per_instruction * inputs.cycle_ns / 1e3 * inputs.vax780_over_750;
        let packets = cited::TRANSFER_BYTES / cited::RECORD_BYTES;
        let period_us = inputs.row_seconds / packets * 1e6;
        Costs {
            instruction_us,
            syscall_us: inputs.getpid_us,
            checksum_us_per_byte: inputs.checksum_instructions_per_32 / 32.0 * instruction_us,
            checksum_us_per_mbuf: inputs.checksum_instructions_per_mbuf * instruction_us,
            copy_us_per_kb: r::SYSCALL_SHARE * period_us - inputs.getpid_us,
            ethernet_us: r::ETHERNET_SHARE * period_us / 2.0,
            ip_us: r::IP_SHARE * period_us / 2.0,
            tcp_us: r::TCP_SHARE * period_us / 2.0,
        }
    }

    /// The model's costs.
    pub fn vax750() -> Costs {
        Costs::from(&Inputs::default())
    }

    /// One line per cost with its derivation.
    pub fn derivations(&self) -> Vec<String> {
        use cited as c;
        vec![
            format!(
                "average instruction {:.2} µs: Emer and Clark's 11/780, {} cycles of {} ns, x {} (Joy's 780 over 750)",
                self.instruction_us,
                c::VAX780_CYCLES_PER_INSTRUCTION,
                c::VAX780_CYCLE_NS,
                c::VAX780_OVER_750
            ),
            format!(
                "checksum {:.2} µs a byte and {:.0} µs a mbuf: in_cksum.c 1.5 (81/10/21), {} instructions a 32 bytes and about {} a mbuf",
                self.checksum_us_per_byte,
                self.checksum_us_per_mbuf,
                c::CHECKSUM_INSTRUCTIONS_PER_32_BYTES,
                c::CHECKSUM_INSTRUCTIONS_PER_MBUF
            ),
            format!(
                "system call {:.0} µs: 4.1BSD getpid on a 750, {} s of system time a 100,000 (Leffler, Karels, McKusick 1985, Table 2)",
                self.syscall_us,
                c::GETPID_SYSTEM_S
            ),
            format!(
                "copy {:.0} µs a KB [fitted]: the 1981 row's 15% for system calls, less a call's entry and exit",
                self.copy_us_per_kb
            ),
            format!(
                "Ethernet driver {:.0} µs, IP {:.0} µs a frame, TCP {:.0} µs a segment [fitted]: the 1981 row's 20%, 10% and 30% of the 750's {:.2} ms a packet, over the data and its ACK",
                self.ethernet_us,
                self.ip_us,
                self.tcp_us,
                row1981::SECONDS / (cited::TRANSFER_BYTES / cited::RECORD_BYTES) * 1e3
            ),
        ]
    }
}

/// Every constant, cited or fitted, with its source.
pub fn constants() -> Vec<Constant> {
    use cited as c;
    let cite = |name, value, unit, source, uncertainty| Constant {
        name,
        value,
        unit,
        source,
        cited: true,
        uncertainty,
    };
    vec![
        cite(
            "11/780 cycles an instruction",
            c::VAX780_CYCLES_PER_INSTRUCTION,
            "cycles",
            "Emer and Clark 1984 (ISCA), the average over their workloads",
            0.10,
        ),
        cite(
            "11/780 cycle",
            c::VAX780_CYCLE_NS,
            "ns",
            "Emer and Clark 1984; DEC's 5 MHz clock",
            0.0,
        ),
        cite(
            "11/780 over 11/750",
            c::VAX780_OVER_750,
            "x",
            "Joy 1981 (004); Leffler et al. 1985 assume 1/0.6 = 1.67",
            0.19,
        ),
        cite(
            "checksum instructions a 32 bytes",
            c::CHECKSUM_INSTRUCTIONS_PER_32_BYTES,
            "instructions",
            "in_cksum.c 1.5, 81/10/21 (CSRG), counted",
            0.0,
        ),
        cite(
            "checksum instructions a mbuf",
            c::CHECKSUM_INSTRUCTIONS_PER_MBUF,
            "instructions",
            "in_cksum.c 1.5, estimated from its C",
            0.33,
        ),
        cite(
            "page mbuf",
            c::PAGE_MBUF_BYTES,
            "bytes",
            "sys/sys/mbuf.h, 81/11/14 (CSRG): PGSIZE",
            0.0,
        ),
        cite(
            "getpid system time",
            c::GETPID_SYSTEM_S / c::GETPID_CALLS * 1e6,
            "µs",
            "Leffler, Karels, McKusick 1985, Table 2, 4.1BSD on a 750 (the mean of two runs)",
            0.05,
        ),
        cite(
            "experimental Ethernet",
            c::WIRE_3MB_BPS / 1e6,
            "Mbit/s",
            "Metcalfe and Boggs 1976",
            0.0,
        ),
        cite(
            "1981 packet",
            c::PACKET_BYTES_3MB,
            "bytes",
            "Joy 1981 (004)",
            0.0,
        ),
        cite(
            "fragments a 4 KB segment",
            c::FRAGMENTS,
            "frames",
            "Joy 1981 (004): \"the 4 interrupts for the fragments\" (1500-byte frames would take 3)",
            0.25,
        ),
        cite(
            "10 Mbit/s Ethernet framing",
            c::FRAMING_10MB_BYTES,
            "bytes",
            "DEC, Intel, Xerox 1980: header, FCS, preamble, gap",
            0.0,
        ),
    ]
    .into_iter()
    .chain(fitted_constants())
    .collect()
}

/// The fitted constants, each with the share of the 1981 row it is
/// fitted to.
fn fitted_constants() -> Vec<Constant> {
    let fitted = Costs::vax750();
    let fit = |name, value, unit, source| Constant {
        name,
        value,
        unit,
        source,
        cited: false,
        uncertainty: 0.0,
    };
    vec![
        fit(
            "copy a KB",
            fitted.copy_us_per_kb,
            "µs",
            "the 1981 row's system-call share less getpid",
        ),
        fit(
            "Ethernet driver a frame",
            fitted.ethernet_us,
            "µs",
            "the 1981 row's Ethernet share",
        ),
        fit("IP a frame", fitted.ip_us, "µs", "the 1981 row's IP share"),
        fit(
            "TCP a segment",
            fitted.tcp_us,
            "µs",
            "the 1981 row's TCP share",
        ),
    ]
}

/// The 1981 measurement as the model predicts it: a 750 sending to a 780.
pub fn predict_1981(costs: &Costs, inputs: &Inputs) -> Outcome {
    outcome(costs, &Transfer::joy1981(), 1.0, inputs.vax780_over_750)
}

/// The predicted transfer time of the 1981 row, s.
pub fn transfer_seconds(o: &Outcome) -> f64 {
    cited::TRANSFER_BYTES * 8.0 / (o.mbaud * 1e6)
}

/// One step of Joy's ladder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub name: &'static str,
    /// What the step takes away, in the model's terms.
    pub takes_away: &'static str,
    pub outcome: Outcome,
}

/// Joy's six projections, each step adding to the one before, between
/// two 750s on a 10 Mbit/s cable (the last between two 780s).
pub fn ladder(costs: &Costs, inputs: &Inputs) -> Vec<Step> {
    let mut t = Transfer {
        segment_bytes: cited::BIG_SEGMENT_BYTES,
        frames: inputs.fragments,
        sender_copies: true,
        receiver_copies: true,
        host_checksum: true,
        wire: Wire::Ethernet10Mb,
    };
    let mut steps = Vec::new();
    let mut push = |name, takes_away, t: &Transfer, speed: f64| {
        steps.push(Step {
            name,
            takes_away,
            outcome: outcome(costs, t, speed, speed),
        });
    };
    push(
        "4096-byte segments, IP fragmentation",
        "one write, one TCP segment and one ACK a 4 KB instead of four; four frames through IP and the driver, and reassembly at the receiver",
        &t,
        1.0,
    );
    t.receiver_copies = false;
    push(
        "plus page-aligned receive, one copy removed",
        "the receiver's copy out",
        &t,
        1.0,
    );
    t.host_checksum = false;
    push(
        "plus checksum in the interface",
        "both ends' checksums",
        &t,
        1.0,
    );
    t.frames = 1.0;
    push(
        "plus 4 KB packets on the medium",
        "three frames a segment through IP and the driver, and reassembly",
        &t,
        1.0,
    );
    t.sender_copies = false;
    push(
        "plus send that releases the pages (zero copy)",
        "the sender's copy in",
        &t,
        1.0,
    );
    push(
        "same on 11/780 (x1.4)",
        "nothing: both ends run 1.4 times as fast",
        &t,
        inputs.vax780_over_750,
    );
    steps
}

/// The model's figures that a source printed, in one place: what the
/// sensitivity analysis watches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Predictions {
    /// The 1981 row: seconds, the checksum's share of the sender's
    /// system time (percent), the receiver's idle time (percent).
    pub seconds: f64,
    pub checksum_pct: f64,
    pub receiver_idle_pct: f64,
    /// Joy's ladder, each step's hosts' rate (Mbit/s).
    pub ladder_mbaud: Vec<f64>,
}

/// The predictions from `inputs`.
pub fn predictions(inputs: &Inputs) -> Predictions {
    let costs = Costs::from(inputs);
    let row = predict_1981(&costs, inputs);
    Predictions {
        seconds: transfer_seconds(&row),
        checksum_pct: row.sender.shares_pct()[3],
        receiver_idle_pct: 100.0 * (1.0 - row.receiver_busy),
        ladder_mbaud: ladder(&costs, inputs)
            .iter()
            .map(|s| s.outcome.host_mbaud)
            .collect(),
    }
}

/// How the predictions move when one cited constant moves by its
/// uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    pub constant: &'static str,
    /// From and to.
    pub moved: (f64, f64),
    /// The predictions with the constant moved.
    pub predictions: Predictions,
}

/// Each cited constant the sources leave uncertain, moved by that much
/// (up; the fragments down to the 3 that 1500-byte frames would take),
/// the rest as they stand.
pub fn sensitivity() -> Vec<Sensitivity> {
    let base = Inputs::default();
    type Field = fn(&mut Inputs) -> &mut f64;
    let moves: [(&'static str, Field, f64); 6] = [
        (
            "11/780 cycles an instruction (+10%)",
            |i| &mut i.cycles_per_instruction,
            1.10,
        ),
        (
            "11/780 over 11/750 (1.4 -> 1.67, Leffler et al.'s 0.6)",
            |i| &mut i.vax780_over_750,
            1.0 / 0.6 / 1.4,
        ),
        (
            "checksum instructions a mbuf (30 -> 40)",
            |i| &mut i.checksum_instructions_per_mbuf,
            40.0 / 30.0,
        ),
        ("getpid system time (+5%)", |i| &mut i.getpid_us, 1.05),
        (
            "fragments a 4 KB segment (4 -> 3)",
            |i| &mut i.fragments,
            0.75,
        ),
        (
            "the 1981 row's 28 s (+0.5 s, its rounding)",
            |i| &mut i.row_seconds,
            28.5 / 28.0,
        ),
    ];
    moves
        .iter()
        .map(|(constant, field, factor)| {
            let mut inputs = base;
            let value = field(&mut inputs);
            let from = *value;
            *value *= factor;
            let to = *value;
            Sensitivity {
                constant,
                moved: (from, to),
                predictions: predictions(&inputs),
            }
        })
        .collect()
}

/// What one of today's transfers did for each KB of data, as netlab
/// measured it: the work the model prices on a 750.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TodayCounts {
    /// System calls on each end's data path, a KB.
    pub sender_syscalls_per_kb: f64,
    pub receiver_syscalls_per_kb: f64,
    /// TCP segments the sender's stack built a KB (a GSO super-segment is
    /// one: TCP and IP ran once for it).
    pub segments_per_kb: f64,
    /// ACKs the sender took in a KB (`tcpi_segs_in`).
    pub acks_per_kb: f64,
    /// Whether each end copied the data between user and kernel.
    pub sender_copies: bool,
    pub receiver_copies: bool,
    /// Whether a host computed the checksum (false: loopback, or an
    /// interface that offloads it).
    pub host_checksum: bool,
}

/// Wire frames a KB on a 10 Mbit/s Ethernet of 1500-byte frames (1460
/// bytes of data each): what a 1981 interface, which sent and took one
/// frame at a time, would hand its driver whatever today's stack batched.
pub const FRAMES_PER_KB_10MB: f64 = 1024.0 / 1460.0;

/// Today's counts on two 750s over a 10 Mbit/s Ethernet: each end's work
/// a KB (the driver a frame, IP and TCP a segment and an ACK, the
/// checksum a byte where a host computed it, a system call's entry and
/// exit, the copy where there was one), and the rate it allows.
pub fn today_on_750(costs: &Costs, counts: &TodayCounts) -> Outcome {
    let header_bytes = counts.segments_per_kb * (cited::TCP_HEADER + cited::PSEUDO_HEADER);
    let checksum = if counts.host_checksum {
        checksum_us(costs, 1024.0 + header_bytes, 1.0 + counts.segments_per_kb)
            + counts.acks_per_kb
                * (checksum_us(costs, cited::TCP_HEADER + cited::PSEUDO_HEADER, 1.0)
                    + checksum_us(costs, cited::IP_HEADER, 1.0))
    } else {
        0.0
    };
    let side = |syscalls: f64, copies: bool| Split {
        ethernet: (FRAMES_PER_KB_10MB + counts.acks_per_kb) * costs.ethernet_us,
        ip: (counts.segments_per_kb + counts.acks_per_kb) * costs.ip_us,
        tcp: (counts.segments_per_kb + counts.acks_per_kb) * costs.tcp_us,
        checksum,
        syscall: syscalls * costs.syscall_us + if copies { costs.copy_us_per_kb } else { 0.0 },
    };
    let sender = side(counts.sender_syscalls_per_kb, counts.sender_copies);
    let receiver = side(counts.receiver_syscalls_per_kb, counts.receiver_copies);
    let wire_us = (1024.0
        + FRAMES_PER_KB_10MB * (cited::TCP_HEADER + cited::IP_HEADER + cited::FRAMING_10MB_BYTES))
        * 8.0
        / cited::WIRE_10MB_BPS
        * 1e6;
    let host = sender.total().max(receiver.total());
    let period = host.max(wire_us);
    Outcome {
        transfer: Transfer {
            segment_bytes: 1024.0,
            frames: FRAMES_PER_KB_10MB,
            sender_copies: counts.sender_copies,
            receiver_copies: counts.receiver_copies,
            host_checksum: counts.host_checksum,
            wire: Wire::Ethernet10Mb,
        },
        sender,
        receiver,
        sender_us: sender.total(),
        receiver_us: receiver.total(),
        wire_us,
        bound: if period == wire_us {
            Bound::Wire
        } else if sender.total() >= receiver.total() {
            Bound::Sender
        } else {
            Bound::Receiver
        },
        mbaud: 1024.0 * 8.0 / period,
        host_mbaud: 1024.0 * 8.0 / host,
        sender_busy: sender.total() / period,
        receiver_busy: receiver.total() / period,
    }
}

/// One of today's savings, taken back out of today's counts: what it is
/// worth on a 750, and whether a 1981 machine could have had it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Saving {
    pub name: &'static str,
    /// The hosts' rate on two 750s without it, and with it (Mbit/s).
    pub without_mbaud: f64,
    pub with_mbaud: f64,
    /// What 1981 would have needed for it.
    pub in_1981: &'static str,
}

/// Today's savings one by one on today's counts: large segments (TCP
/// and IP once a KB-record frame instead of once a super-segment), the
/// checksum off the host, zero copy on each end, and ACK coalescing (an
/// ACK a frame instead of today's few), each taken away alone.
pub fn savings(costs: &Costs, counts: &TodayCounts) -> Vec<Saving> {
    let with = today_on_750(costs, counts).host_mbaud;
    let without = |change: &dyn Fn(&mut TodayCounts)| {
        let mut c = counts.clone();
        change(&mut c);
        today_on_750(costs, &c).host_mbaud
    };
    vec![
        Saving {
            name: "large segments (GSO/TSO)",
            without_mbaud: without(&|c| {
                c.segments_per_kb = c.segments_per_kb.max(FRAMES_PER_KB_10MB)
            }),
            with_mbaud: with,
            in_1981: "software alone: Joy's first step (4 KB segments through IP fragmentation); the driver still takes each frame",
        },
        Saving {
            name: "checksum off the host",
            without_mbaud: without(&|c| c.host_checksum = true),
            with_mbaud: with,
            in_1981: "an interface that checksums: Joy's third step, hardware 1981 did not have",
        },
        Saving {
            name: "zero copy (sendfile, page remapping)",
            without_mbaud: without(&|c| {
                c.sender_copies = true;
                c.receiver_copies = true;
            }),
            with_mbaud: with,
            in_1981: "page-aligned buffers and a send that gives up its pages: Joy's second and fifth steps, the virtual memory 4.2BSD was building",
        },
        Saving {
            name: "ACK coalescing (delayed ACKs, GRO)",
            without_mbaud: without(&|c| c.acks_per_kb = c.acks_per_kb.max(FRAMES_PER_KB_10MB)),
            with_mbaud: with,
            in_1981: "software alone: Joy names fewer ACKs as a technique still to try",
        },
    ]
}

/// What the report tells a reader to keep in mind.
pub const CAVEATS: &str = "the Ethernet driver's, IP's and TCP's costs and the copy's are fitted to the 1981 row (no source of the time gives them), so the row's Ethernet, IP, TCP and system-call shares are the model's inputs, not its predictions; the checksum is the 1981 loop's instruction count at the 750's average instruction time (its simple adwc instructions may run faster than the average); a system call is getpid's entry and exit (a write through the socket layer does more); reassembly is counted as one more IP input a fragment; each end of the ladder does the same work a layer as the 1981 sender, and a page remapping costs nothing.";

#[cfg(test)]
mod tests {
    use super::*;

    /// The fitted constants, refitted to the row they are fitted to, give
    /// back its shares (a check of the fit, not a prediction).
    #[test]
    fn the_fit_gives_back_the_row_it_was_fitted_to() {
        let costs = Costs::vax750();
        let o = predict_1981(&costs, &Inputs::default());
        let period = row1981::SECONDS / 4096.0 * 1e6;
        assert!((o.sender.ethernet - 0.20 * period).abs() < 1e-6);
        assert!((o.sender.syscall - 0.15 * period).abs() < 1e-6);
        assert_eq!(o.bound, Bound::Sender);
    }

    #[test]
    fn cited_constants_outnumber_fitted_ones() {
        let all = constants();
        let cited = all.iter().filter(|c| c.cited).count();
        assert!(cited > all.len() - cited, "{cited} of {}", all.len());
        assert!(all.iter().all(|c| !c.source.is_empty()));
    }

    /// Each fitted cost is tested on figures it was not fitted to: moving
    /// it moves some step of Joy's ladder (none of which it was fitted to).
    #[test]
    fn every_fitted_cost_moves_a_projection_it_was_not_fitted_to() {
        let inputs = Inputs::default();
        let base = Costs::vax750();
        let ladder_of = |c: &Costs| -> Vec<f64> {
            ladder(c, &inputs)
                .iter()
                .map(|s| s.outcome.host_mbaud)
                .collect()
        };
        let before = ladder_of(&base);
        type Field = fn(&mut Costs) -> &mut f64;
        let fitted: [(&str, Field); 4] = [
            ("copy", |c| &mut c.copy_us_per_kb),
            ("Ethernet", |c| &mut c.ethernet_us),
            ("IP", |c| &mut c.ip_us),
            ("TCP", |c| &mut c.tcp_us),
        ];
        for (name, field) in fitted {
            let mut moved = base;
            *field(&mut moved) *= 1.1;
            let after = ladder_of(&moved);
            let changed = before
                .iter()
                .zip(&after)
                .filter(|(b, a)| (*b - *a).abs() > 1e-6 * *b)
                .count();
            assert!(changed >= 2, "{name} moves {changed} steps");
        }
        assert_eq!(
            constants().iter().filter(|c| !c.cited).count(),
            fitted.len()
        );
    }

    #[test]
    fn removing_work_never_slows_a_step() {
        let costs = Costs::vax750();
        let steps = ladder(&costs, &Inputs::default());
        for pair in steps.windows(2) {
            assert!(
                pair[1].outcome.mbaud >= pair[0].outcome.mbaud,
                "{} after {}",
                pair[1].name,
                pair[0].name
            );
        }
    }

    #[test]
    fn a_wire_too_slow_for_the_hosts_bounds_the_transfer() {
        let mut costs = Costs::vax750();
        costs.ethernet_us = 0.0;
        costs.ip_us = 0.0;
        costs.tcp_us = 0.0;
        costs.copy_us_per_kb = 0.0;
        costs.checksum_us_per_byte = 0.0;
        costs.checksum_us_per_mbuf = 0.0;
        let o = outcome(&costs, &Transfer::joy1981(), 1.0, 1.0);
        assert_eq!(o.bound, Bound::Wire);
        // 1024 bytes of data in a 1068-byte packet at 2.94 Mbit/s.
        assert!((o.mbaud - 2.94 * 1024.0 / 1068.0).abs() < 1e-9);
    }
}
