//! The 1989 login host (`000_2144c0e834c30e0c.txt`): a Sun-3/260 under
//! SunOS 3.5 serving N users who each type 5 characters a second into
//! `cat > /dev/null` through rlogind, as a CPU model.
//!
//! Two inputs, kept apart so that either can be swapped:
//! - **What the code does per keystroke** ([`PerKeystroke`]): system
//!   calls, context switches, packets in and out, pty transfers. For 1989's
//!   two designs the model takes them from the table's own 16-user rows
//!   (80 keystrokes a second) and says how each was derived; for today's
//!   relays the login experiment measures them.
//! - **What each costs on that machine** ([`Costs`]): published figures,
//!   each cited below, scaled to the Sun-3/260 by its rating. Nothing is
//!   fitted to the table the model predicts.
//!
//! The model: each keystroke asks the CPU for `D = Σ count × cost`; N users
//! offer `λ = 5N` keystrokes a second; the CPU is busy `ρ = λD`. Below
//! saturation the vmstat row is `λ × counts`, `us`/`sy` split by where each
//! cost is spent, and the run queue is the M/M/1 mean `ρ/(1-ρ)` for a
//! design whose work is done by processes (rlogind) and none for one whose
//! work is done at interrupt level (the kernel-assisted linkage). At and
//! past `ρ = 1` the CPU serves `1/D` keystrokes a second and the run queue
//! grows without bound: the melting point is `N* = 1/(5D)` users.
//!
//! What it leaves out is said with every prediction ([`CAVEATS`]): the
//! batching an overloaded relay falls into (1989's 48-user row made fewer
//! system calls than its 16-user row), the work a real `select` or tty
//! read does beyond `getpid`'s, the Sun-3 MMU's eight hardware contexts,
//! and the disk (vmstat's `b`).

use serde::Serialize;

/// Characters a second each 1989 user typed.
pub const CHARS_PER_USER_S: f64 = 5.0;
/// 000's rows were taken at 16 users: 80 keystrokes a second.
pub const TABLE_USERS: f64 = 16.0;

/// The ratings the costs are scaled by, in VAX MIPS.
pub mod rating {
    /// Sun-3/260 (68020 at 25 MHz, 64 KB cache): "4 MIPS", The Sun
    /// Hardware Reference (J. Birdsall, 1995), 3/260 and 3/280 entries.
    pub const SUN3_260_MIPS: f64 = 4.0;
    /// A VAX-11/780 is the unit of VAX MIPS.
    pub const VAX_780_MIPS: f64 = 1.0;
    /// "We assume that a VAX-11/750 runs at 60% of the speed of a
    /// VAX-11/780": Leffler, Karels, McKusick, *Measuring and Improving
    /// the Performance of Berkeley UNIX* (1985), section 3.2.1's footnote.
    pub const VAX_750_MIPS: f64 = 0.6 * VAX_780_MIPS;
    /// How many times faster than the VAX-11/750 the Sun-3/260 is rated.
    pub const SUN3_OVER_750: f64 = SUN3_260_MIPS / VAX_750_MIPS;
    /// Van Jacobson measured on a Sun-3/60 (20 MHz 68020, seed 003); the
    /// Sun-3/260 runs the same CPU at 25 MHz.
    pub const SUN3_260_OVER_60: f64 = 25.0 / 20.0;
}

/// 4.2BSD's micro-operation benchmarks on a VAX-11/750, Table 2 of
/// Leffler, Karels and McKusick (1985), `share/doc/papers/sysperf/3.t`,
/// the 4.2 column (SunOS 3.5 is 4.2BSD's descendant), seconds.
pub mod bsd42_vax750 {
    /// `syscall`: 100,000 `getpid` calls, elapsed.
    pub const SYSCALL_ELAPSED_S: f64 = 29.0;
    /// Of it, system time and user time (the loop and the libc stub).
    pub const SYSCALL_SYSTEM_S: f64 = 23.7;
    pub const SYSCALL_USER_S: f64 = 5.3;
    pub const SYSCALL_CALLS: f64 = 100_000.0;
    /// `csw`: two processes exchanging 10,000 signals, 20,000 context
    /// switches; the appendix's overhead is `csw - 2 * signocsw`.
    pub const CSW_ELAPSED_S: f64 = 60.0;
    pub const SIGNOCSW_ELAPSED_S: f64 = 23.0;
    pub const CSW_SWITCHES: f64 = 20_000.0;
    /// `pipeself4`: 10,000 4-byte messages written to and read back from
    /// one's own pipe (a 4.2BSD pipe is a socket pair: the socket layer's
    /// queueing, as a pty's and a socket's).
    pub const PIPESELF4_ELAPSED_S: f64 = 29.0;
    pub const PIPESELF4_MESSAGES: f64 = 10_000.0;
}

/// Van Jacobson's Sun-3/60 per-packet figures (seed 003,
/// `bsd_speedups.per_packet_us` and `fixed_cost_split_pct`).
pub mod vj1988 {
    /// "800us per packet fixed costs".
    pub const FIXED_US: f64 = 800.0;
    /// "30% of this is TCP, IP, ARP and ethernet protocol processing
    /// (this was 45% before the 'header prediction' tcp mods)".
    pub const PROTOCOL_SHARE: f64 = 0.30;
    pub const PROTOCOL_SHARE_BEFORE_PREDICTION: f64 = 0.45;
    /// "15% is stalls (idle time ...)": not CPU work.
    pub const STALL_SHARE: f64 = 0.15;
}

/// What one operation costs the Sun-3/260's CPU, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Costs {
    /// A system call's entry and exit, in the kernel.
    pub syscall_system_us: f64,
    /// Its user-mode side (the stub and the caller's loop).
    pub syscall_user_us: f64,
    pub context_switch_us: f64,
    /// A packet's fixed CPU cost (device, interrupt, protocol, task
    /// handling), charged to each packet in and out; a keystroke's byte
    /// adds no measurable per-byte cost.
    pub packet_us: f64,
    /// One pty transfer (a write into or a read out of the pty), beyond
    /// its system call.
    pub pty_transfer_us: f64,
}

impl Costs {
    /// The Sun-3/260 under SunOS 3.5, every figure derived from its source.
    pub fn sun3_260() -> Costs {
        use bsd42_vax750 as b;
        let per_750 = |seconds: f64, count: f64| seconds / count * 1e6 / rating::SUN3_OVER_750;
        let syscall_us = per_750(b::SYSCALL_ELAPSED_S, b::SYSCALL_CALLS);
        let user_share = b::SYSCALL_USER_S / (b::SYSCALL_USER_S + b::SYSCALL_SYSTEM_S);
        let pipe_message_us = per_750(b::PIPESELF4_ELAPSED_S, b::PIPESELF4_MESSAGES);
        Costs {
            syscall_system_us: syscall_us * (1.0 - user_share),
            syscall_user_us: syscall_us * user_share,
            context_switch_us: per_750(
                b::CSW_ELAPSED_S - 2.0 * b::SIGNOCSW_ELAPSED_S,
                b::CSW_SWITCHES,
            ),
            packet_us: sunos35_packet_us(),
            // A message is a write and a read, each a system call: what is
            // left is two transfers through the queue.
            pty_transfer_us: (pipe_message_us - 2.0 * syscall_us) / 2.0,
        }
    }

    /// One line per cost with its derivation, for reports.
    pub fn derivations(&self) -> Vec<String> {
        use bsd42_vax750 as b;
        vec![
            format!(
                "system call {:.1} µs (+{:.1} µs user): 4.2BSD getpid on a VAX-11/750, {} s per 100,000 (Leffler et al. 1985, Table 2), / {:.2} (Sun-3/260 4 MIPS, 750 0.6)",
                self.syscall_system_us,
                self.syscall_user_us,
                b::SYSCALL_ELAPSED_S,
                rating::SUN3_OVER_750
            ),
            format!(
                "context switch {:.1} µs: 4.2BSD csw - 2 x signocsw = {} - 2 x {} s per 20,000 switches on the 750, / {:.2}",
                self.context_switch_us,
                b::CSW_ELAPSED_S,
                b::SIGNOCSW_ELAPSED_S,
                rating::SUN3_OVER_750
            ),
            format!(
                "packet {:.1} µs: Van Jacobson's 800 µs fixed cost on a Sun-3/60 (1988) before header prediction (protocol 45%, not 30%), less its 15% stalls, x 20/25 MHz",
                self.packet_us
            ),
            format!(
                "pty transfer {:.1} µs: half of a 4.2BSD pipeself4 message ({} s per 10,000 on the 750) less its two system calls, / {:.2}",
                self.pty_transfer_us,
                b::PIPESELF4_ELAPSED_S,
                rating::SUN3_OVER_750
            ),
        ]
    }
}

/// A packet's fixed CPU cost on a Sun-3/260 under SunOS 3.5, µs: Van
/// Jacobson's Sun-3/60 figure with the protocol's share as it was before
/// his header prediction (which SunOS 3.5 lacked), less the stalls (idle
/// time, not work), scaled by the clock. The non-protocol part (device,
/// interrupt, task handling, stalls: 70% of 800 µs) was then 55% of the
/// whole.
pub fn sunos35_packet_us() -> f64 {
    use vj1988 as v;
    let not_protocol = v::FIXED_US * (1.0 - v::PROTOCOL_SHARE);
    let before_prediction = not_protocol / (1.0 - v::PROTOCOL_SHARE_BEFORE_PREDICTION);
    let stalls = v::FIXED_US * v::STALL_SHARE;
    (before_prediction - stalls) / rating::SUN3_260_OVER_60
}

/// What a design's code does per keystroke.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerKeystroke {
    pub syscalls: f64,
    pub context_switches: f64,
    pub packets_in: f64,
    pub packets_out: f64,
    pub pty_transfers: f64,
    /// Whether the work runs in processes (that queue for the CPU and show
    /// in vmstat's `r`) or at interrupt level.
    pub in_processes: bool,
    /// Where each count came from.
    pub derivation: Vec<String>,
}

/// 000's 16-user rows (`login_relay_load` in the historical figures).
pub mod table16 {
    /// Normal rlogind: faults sys, cs, net pkts in, out.
    pub const RLOGIND: [f64; 4] = [1126.0, 192.0, 145.0, 152.0];
    /// Kernel-assisted rlogind.
    pub const KERNEL: [f64; 4] = [30.0, 8.0, 145.0, 145.0];
}

/// The two 1989 designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Design1989 {
    /// rlogind, a process per session relaying through user space.
    Rlogind,
    /// The kernel-assisted linkage of socket and pty (Rick Ace's patches).
    Kernel,
}

impl Design1989 {
    pub const ALL: [Design1989; 2] = [Design1989::Rlogind, Design1989::Kernel];

    pub fn name(self) -> &'static str {
        match self {
            Design1989::Rlogind => "rlogind",
            Design1989::Kernel => "kernel",
        }
    }

    /// The historical figures' name for the design (`user`, `kernel`).
    pub fn table_name(self) -> &'static str {
        match self {
            Design1989::Rlogind => "user",
            Design1989::Kernel => "kernel",
        }
    }

    /// Per-keystroke counts from the table's 16-user row.
    pub fn per_keystroke(self) -> PerKeystroke {
        let [sys, cs, pin, pout] = match self {
            Design1989::Rlogind => table16::RLOGIND,
            Design1989::Kernel => table16::KERNEL,
        };
        let keystrokes = TABLE_USERS * CHARS_PER_USER_S;
        let each = |what: &str, per_s: f64| {
            format!(
                "{what} {:.3}: {per_s} a second over {keystrokes} keystrokes a second (000, 16 users)",
                per_s / keystrokes
            )
        };
        let pty = match self {
            Design1989::Rlogind => {
                "pty transfers 2: rlogind writes the keystroke into the pty and reads its echo out (cooked mode with echo; cat reads whole lines)"
            }
            Design1989::Kernel => {
                "pty transfers 2: the linkage puts the keystroke into the pty and takes its echo out, in the kernel"
            }
        };
        PerKeystroke {
            syscalls: sys / keystrokes,
            context_switches: cs / keystrokes,
            packets_in: pin / keystrokes,
            packets_out: pout / keystrokes,
            pty_transfers: 2.0,
            in_processes: self == Design1989::Rlogind,
            derivation: vec![
                each("system calls", sys),
                each("context switches", cs),
                each("packets in", pin),
                each("packets out", pout),
                pty.to_string(),
            ],
        }
    }
}

/// One predicted vmstat row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VmstatRow {
    pub users: u32,
    /// Mean runnable processes; `None` once the CPU is saturated (the
    /// queue grows without bound).
    pub procs_r: Option<f64>,
    /// Blocked processes: the model has no disk, so 0.
    pub procs_b: f64,
    pub syscalls_per_s: f64,
    pub cs_per_s: f64,
    pub cpu_us: f64,
    pub cpu_sy: f64,
    pub cpu_id: f64,
    pub pkts_in_per_s: f64,
    pub pkts_out_per_s: f64,
    /// Demand over capacity: 1 is saturation.
    pub utilisation: f64,
    /// Keystrokes a second offered and served.
    pub offered_per_s: f64,
    pub served_per_s: f64,
}

/// A design's CPU per keystroke, µs, in the kernel and in user mode.
pub fn demand_us(counts: &PerKeystroke, costs: &Costs) -> (f64, f64) {
    let system = counts.syscalls * costs.syscall_system_us
        + counts.context_switches * costs.context_switch_us
        + (counts.packets_in + counts.packets_out) * costs.packet_us
        + counts.pty_transfers * costs.pty_transfer_us;
    let user = counts.syscalls * costs.syscall_user_us;
    (system, user)
}

/// The users typing `rate` characters a second at which the CPU
/// saturates (fractional).
pub fn melting_users(counts: &PerKeystroke, costs: &Costs, rate: f64) -> f64 {
    let (system, user) = demand_us(counts, costs);
    1e6 / ((system + user) * rate)
}

/// The vmstat row the model predicts for `users` typists, each typing
/// `rate` characters a second.
pub fn predict_row(counts: &PerKeystroke, costs: &Costs, users: u32, rate: f64) -> VmstatRow {
    let (system, user) = demand_us(counts, costs);
    let offered = f64::from(users) * rate;
    let utilisation = offered * (system + user) / 1e6;
    let served = if utilisation < 1.0 {
        offered
    } else {
        1e6 / (system + user)
    };
    let busy = utilisation.min(1.0);
    let procs_r = match (counts.in_processes, utilisation < 1.0) {
        (false, _) => Some(0.0),
        (true, true) => Some(utilisation / (1.0 - utilisation)),
        (true, false) => None,
    };
    let pct = |share: f64| 100.0 * share;
    VmstatRow {
        users,
        procs_r,
        procs_b: 0.0,
        syscalls_per_s: served * counts.syscalls,
        cs_per_s: served * counts.context_switches,
        cpu_us: pct(busy * user / (system + user)),
        cpu_sy: pct(busy * system / (system + user)),
        cpu_id: pct(1.0 - busy),
        pkts_in_per_s: served * counts.packets_in,
        pkts_out_per_s: served * counts.packets_out,
        utilisation,
        offered_per_s: offered,
        served_per_s: served,
    }
}

/// What the model predicts for one design.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub design: String,
    pub per_keystroke: PerKeystroke,
    /// CPU per keystroke, µs: kernel and user.
    pub system_us_per_keystroke: f64,
    pub user_us_per_keystroke: f64,
    pub rows: Vec<VmstatRow>,
    /// Users at which the CPU saturates and the run queue grows.
    pub melting_users: f64,
}

/// The model's prediction for `counts` at each of `users`, typing `rate`
/// characters a second.
pub fn predict(
    design: &str,
    counts: PerKeystroke,
    costs: &Costs,
    users: &[u32],
    rate: f64,
) -> Prediction {
    let (system, user) = demand_us(&counts, costs);
    Prediction {
        design: design.to_string(),
        rows: users
            .iter()
            .map(|&n| predict_row(&counts, costs, n, rate))
            .collect(),
        melting_users: melting_users(&counts, costs, rate),
        system_us_per_keystroke: system,
        user_us_per_keystroke: user,
        per_keystroke: counts,
    }
}

/// The user counts 000 reports on (its rows at 16 and 48, its words at 32).
pub const TABLE_USER_COUNTS: [u32; 3] = [16, 32, 48];

/// Both 1989 designs at `users`, typing `rate` characters a second.
pub fn predict_1989(users: &[u32], rate: f64) -> Vec<Prediction> {
    let costs = Costs::sun3_260();
    Design1989::ALL
        .into_iter()
        .map(|d| predict(d.name(), d.per_keystroke(), &costs, users, rate))
        .collect()
}

/// What the model leaves out, said wherever it is shown.
pub const CAVEATS: &str = "costs are 4.2BSD's VAX-11/750 micro-benchmarks scaled by MIPS rating and Van Jacobson's Sun-3/60 packet; a getpid is the cheapest system call (a select over the session's descriptors or a tty read does more), the Sun-3 MMU's eight hardware contexts make switches among more processes dearer, and an overloaded relay batches keystrokes (000's 48-user row made fewer system calls than its 16-user row): all three make the real rlogind dearer at 16 users than the model, and the model's rows past saturation are the CPU's capacity, not 1989's batching. No disk: b is 0.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_from_their_sources() {
        let c = Costs::sun3_260();
        // getpid: 290 µs on the 750, 6.67 times slower than the 3/260.
        assert!((c.syscall_system_us + c.syscall_user_us - 43.5).abs() < 0.05);
        assert!((c.syscall_user_us - 290.0 * 5.3 / 29.0 / (4.0 / 0.6)).abs() < 0.01);
        // (60 - 46) s over 20,000 switches = 700 µs on the 750.
        assert!((c.context_switch_us - 105.0).abs() < 0.01);
        // 2.9 ms a message, less two 290 µs calls, halved: 1.16 ms.
        assert!((c.pty_transfer_us - 174.0).abs() < 0.01);
        // 560 / 0.55 = 1018.2, less 120 µs of stalls, x 0.8.
        assert!((c.packet_us - (560.0 / 0.55 - 120.0) * 0.8).abs() < 0.01);
    }

    #[test]
    fn counts_come_from_the_16_user_rows() {
        let r = Design1989::Rlogind.per_keystroke();
        assert!((r.syscalls - 1126.0 / 80.0).abs() < 1e-9);
        assert!((r.context_switches - 2.4).abs() < 1e-9);
        assert!((r.packets_in - 145.0 / 80.0).abs() < 1e-9);
        assert!((r.packets_out - 1.9).abs() < 1e-9);
        let k = Design1989::Kernel.per_keystroke();
        assert!((k.syscalls - 0.375).abs() < 1e-9);
        assert!(!k.in_processes && r.in_processes);
        assert_eq!(r.derivation.len(), 5);
    }

    #[test]
    fn a_row_is_rate_times_counts_below_saturation() {
        let costs = Costs::sun3_260();
        let counts = Design1989::Rlogind.per_keystroke();
        let (system, user) = demand_us(&counts, &costs);
        let row = predict_row(&counts, &costs, 16, CHARS_PER_USER_S);
        assert_eq!(row.offered_per_s, 80.0);
        assert!((row.syscalls_per_s - 1126.0).abs() < 1e-6);
        assert!((row.pkts_out_per_s - 152.0).abs() < 1e-6);
        let rho = 80.0 * (system + user) / 1e6;
        assert!((row.utilisation - rho).abs() < 1e-12);
        assert!((row.cpu_us + row.cpu_sy + row.cpu_id - 100.0).abs() < 1e-9);
        assert!((row.cpu_id - 100.0 * (1.0 - rho)).abs() < 1e-9);
        assert!((row.procs_r.unwrap() - rho / (1.0 - rho)).abs() < 1e-12);
    }

    #[test]
    fn past_the_melting_point_the_cpu_serves_its_capacity_and_the_queue_grows() {
        let costs = Costs::sun3_260();
        let counts = Design1989::Rlogind.per_keystroke();
        let n = melting_users(&counts, &costs, CHARS_PER_USER_S);
        let (system, user) = demand_us(&counts, &costs);
        assert!((n * CHARS_PER_USER_S * (system + user) - 1e6).abs() < 1e-6);
        let past = predict_row(&counts, &costs, n.ceil() as u32 + 10, CHARS_PER_USER_S);
        assert_eq!(past.procs_r, None);
        assert_eq!(past.cpu_id, 0.0);
        assert!((past.served_per_s - 1e6 / (system + user)).abs() < 1e-9);
        let kernel = Design1989::Kernel.per_keystroke();
        assert_eq!(
            predict_row(&kernel, &costs, 500, CHARS_PER_USER_S).procs_r,
            Some(0.0)
        );
    }

    #[test]
    fn the_kernel_linkage_lasts_longer_than_rlogind() {
        let predictions = predict_1989(&TABLE_USER_COUNTS, CHARS_PER_USER_S);
        let [rlogind, kernel] = [&predictions[0], &predictions[1]];
        assert!(kernel.melting_users > rlogind.melting_users);
        assert_eq!(rlogind.rows.len(), TABLE_USER_COUNTS.len());
    }
}
