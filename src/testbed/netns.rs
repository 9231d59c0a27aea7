//! Two hosts on one machine: a pair of network namespaces joined by a link.
//!
//! A [`Testbed`] creates, for one run, namespaces `netlab-<pid>-<seq>-a` and
//! `-b` and joins them either with a veth pair (unimpaired links, rate
//! shaped by tbf) or with a TUN device in each, relayed by netlab's wire
//! emulator (when delay, jitter or loss are asked for and the kernel has no
//! netem). Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for
//! benchmarking, and exist only inside the namespaces. Interfaces are created
//! directly inside their namespaces (`ip link add ... netns ...`), so nothing
//! ever appears in the root namespace.
//!
//! Teardown deletes both namespaces (which deletes everything in them). It
//! runs on drop, so success, errors, Ctrl-C (which the controller turns into
//! an error) and panics all clean up; a SIGKILLed controller leaves its
//! namespaces behind for `netlab testbed clean`, which removes only
//! namespaces named `netlab-<pid>-...` whose controller process is gone.

use super::link::format_rate;
use crate::record::testbed::LinkProfile;
use crate::record::testbed::{DelayDistribution, Framing, LossModel, QueueDiscipline, QueueLimit};
use crate::record::testbed::{LinkFacts, Realisation};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use thiserror::Error;

/// Prefix of every namespace netlab creates.
pub const NAMESPACE_PREFIX: &str = "netlab-";
/// Prefix of every interface netlab creates.
pub const INTERFACE_PREFIX: &str = "nlb";

/// Address of side A (the sender) and side B (the receiver).
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The second path's (`--mptcp`): the /30 after the first.
pub const ADDR_A2: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 5);
pub const ADDR_B2: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 6);
/// The subflows and accepted addresses each namespace's MPTCP path
/// manager allows: the second path's subflow, with room for one more.
const MPTCP_SUBFLOWS: &str = "2";
const PREFIX_LEN: u8 = 30;

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, Error)]
pub enum TestbedError {
    #[error(
        "the netns placement needs CAP_NET_ADMIN (run as root); this process lacks it, so nothing was created"
    )]
    NoCapability,
    #[error("required tool `{0}` is missing (Debian package iproute2)")]
    MissingTool(&'static str),
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("running `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--mptcp's second path: {0}")]
    SecondPath(String),
    #[error("{device}: the kernel does not grant {asked} together: ethtool -k shows \"{line}\"")]
    Offload {
        device: String,
        asked: String,
        line: String,
    },
}

/// ethtool's long name of each offload netlab switches (`ethtool -k`
/// prints these; `ethtool -K` takes the short ones).
pub const OFFLOADS: [(&str, &str); 5] = [
    ("tx", "tx-checksumming"),
    ("rx", "rx-checksumming"),
    ("tso", "tcp-segmentation-offload"),
    ("gso", "generic-segmentation-offload"),
    ("gro", "generic-receive-offload"),
];

/// Reads `device`'s features back after `ethtool -K`: each asked feature
/// as asked, and none of its sub-features left unlike the request
/// (`[requested on]`: TSO, say, needs checksum offload, and `ethtool` then
/// prints the summary line on while the segmentation itself stays off).
fn check_offloads(
    runner: &Runner,
    namespace: &str,
    device: &str,
    offloads: &[(String, bool)],
) -> Result<(), TestbedError> {
    let shown = runner.run("ip", &["netns", "exec", namespace, "ethtool", "-k", device])?;
    match offload_refusal(&shown, offloads) {
        None => Ok(()),
        Some(line) => Err(TestbedError::Offload {
            device: device.to_string(),
            asked: offloads
                .iter()
                .map(|(f, on)| format!("{f} {}", if *on { "on" } else { "off" }))
                .collect::<Vec<_>>()
                .join(", "),
            line,
        }),
    }
}

/// The `ethtool -k` line showing that one of `offloads` was not granted,
/// if any.
pub fn offload_refusal(shown: &str, offloads: &[(String, bool)]) -> Option<String> {
    offloads.iter().find_map(|(feature, on)| {
        let long = OFFLOADS
            .iter()
            .find(|(short, _)| short == feature)
            .map_or(feature.as_str(), |(_, long)| long);
        match offload_state(shown, long) {
            Some((state, _)) if state == *on => {}
            found => {
                return Some(found.map_or(format!("{long} not listed"), |(_, l)| l.to_string()));
            }
        }
        // The summary's own sub-features (indented under it) as asked.
        shown
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(&format!("{long}:")))
            .skip(1)
            .take_while(|l| l.starts_with(char::is_whitespace))
            .find(|l| l.contains("[requested"))
            .map(|l| l.trim().to_string())
    })
}

/// Whether the kernel grants `offloads` on a veth pair: built on a scratch
/// pair in namespaces of its own, read back, and removed.
pub fn probe_offloads(offloads: &[(String, bool)], verbose: bool) -> Result<(), TestbedError> {
    let profile = crate::record::testbed::LinkProfile {
        offloads: offloads.to_vec(),
        ..crate::record::testbed::LinkProfile::default()
    };
    Testbed::create(&profile, false, verbose).map(drop)
}

/// A feature's state in `ethtool -k` output: on or off, and its line.
pub fn offload_state<'a>(features: &'a str, long_name: &str) -> Option<(bool, &'a str)> {
    features.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(long_name)?.strip_prefix(':')?;
        Some((rest.trim_start().starts_with("on"), line.trim()))
    })
}

/// Whether this process holds CAP_NET_ADMIN (bit 12 of CapEff).
pub fn has_net_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 12) != 0)
}

/// Runs commands, logging each with `-v`.
#[derive(Debug, Clone, Copy)]
pub struct Runner {
    pub verbose: bool,
}

impl Runner {
    pub fn run(&self, program: &'static str, args: &[&str]) -> Result<String, TestbedError> {
        let command = format!("{program} {}", args.join(" "));
        if self.verbose {
            eprintln!("+ {command}");
        }
        let output = Command::new(program)
            .args(args)
            .output()
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    TestbedError::MissingTool(program)
                } else {
                    TestbedError::Spawn {
                        command: command.clone(),
                        source,
                    }
                }
            })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(TestbedError::Command {
                command,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            })
        }
    }
}

/// Two namespaces and the link between them; deleted on drop.
pub struct Testbed {
    runner: Runner,
    namespaces: Vec<String>,
    facts: LinkFacts,
}

/// What an Ethernet frame costs on the wire beyond the bytes a veth
/// counts (its 14-byte header included): FCS 4, preamble and SFD 8, the
/// 12-byte (9.6 µs at 10 Mbit/s) interframe gap.
const VETH_ETHERNET_OVERHEAD: u32 = 4 + 8 + 12;

/// The fastest rate netem accepts: with a rate set netem keeps packets in
/// order under jitter, so netlab sets this one when it keeps order without
/// a rate of its own.
const NETEM_ORDER_RATE: &str = "100gbit";

/// netem's `loss` words for `profile`: random with its correlation, or a
/// Gilbert-Elliott or four-state model's transition percentages.
fn netem_loss_args(profile: &LinkProfile) -> Vec<String> {
    let i = &profile.impair;
    let pct = |p: f64| format!("{p}%");
    let mut args = Vec::new();
    match i.loss_model {
        None => {
            args.extend(["loss".into(), "random".into(), pct(profile.loss_pct)]);
            if i.loss_correlation_pct > 0.0 {
                args.push(pct(i.loss_correlation_pct));
            }
        }
        Some(LossModel::GilbertElliott {
            p_pct,
            r_pct,
            bad_loss_pct,
            good_loss_pct,
        }) => args.extend(
            ["loss".into(), "gemodel".into()]
                .into_iter()
                .chain([p_pct, r_pct, bad_loss_pct, good_loss_pct].map(pct)),
        ),
        Some(LossModel::FourState(s)) => args.extend(
            ["loss".into(), "state".into()]
                .into_iter()
                .chain(s.in_order().map(pct)),
        ),
    }
    args
}

/// The arguments of `tc qdisc add ... netem` for `profile`, in tc-netem(8)'s
/// words; the same link netlab's emulator would build.
pub fn netem_args(profile: &LinkProfile) -> Vec<String> {
    let i = &profile.impair;
    let pct = |p: f64| format!("{p}%");
    let mut args = vec![
        "delay".to_string(),
        format!("{}us", profile.delay_us),
        format!("{}us", profile.jitter_us),
    ];
    if i.delay_correlation_pct > 0.0 {
        args.push(pct(i.delay_correlation_pct));
    }
    if i.distribution != DelayDistribution::Uniform {
        args.extend([
            "distribution".into(),
            format!("{:?}", i.distribution).to_lowercase(),
        ]);
    }
    args.extend(netem_loss_args(profile));
    for (word, p, corr) in [
        ("duplicate", i.duplicate_pct, i.duplicate_correlation_pct),
        ("corrupt", i.corrupt_pct, i.corrupt_correlation_pct),
        ("reorder", i.reorder_pct, i.reorder_correlation_pct),
    ] {
        if p > 0.0 {
            args.extend([word.to_string(), pct(p)]);
            if corr > 0.0 {
                args.push(pct(corr));
            }
        }
    }
    if i.reorder_pct > 0.0 {
        args.extend(["gap".into(), i.reorder_gap.max(1).to_string()]);
    }
    match profile.rate_bps {
        Some(rate) => {
            args.extend(["rate".into(), format!("{rate}bit")]);
            match i.framing {
                Some(Framing::Ethernet) => args.push(VETH_ETHERNET_OVERHEAD.to_string()),
                Some(Framing::Overhead {
                    packet,
                    cell_size,
                    cell_overhead,
                }) => args.extend([
                    packet.to_string(),
                    cell_size.to_string(),
                    cell_overhead.to_string(),
                ]),
                None => {}
            }
        }
        None if profile.jitter_us > 0 && !i.jitter_reorders => {
            args.extend(["rate".into(), NETEM_ORDER_RATE.into()]);
        }
        None => {}
    }
    if let Some(slot) = i.slot {
        args.extend([
            "slot".into(),
            format!("{}us", slot.min_us),
            format!("{}us", slot.max_us),
        ]);
        if slot.packets > 0 {
            args.extend(["packets".into(), slot.packets.to_string()]);
        }
        if slot.bytes > 0 {
            args.extend(["bytes".into(), slot.bytes.to_string()]);
        }
    }
    let limit_packets = profile
        .queue_bytes
        .map_or(10_000, |q| (q / u64::from(profile.mtu)).max(1));
    args.extend(["limit".into(), limit_packets.to_string()]);
    args
}

/// The kernel's codel or fq_codel with the discipline's parameters
/// (tc-codel(8), tc-fq_codel(8)); drop-tail as bfifo or pfifo.
pub fn kernel_discipline_args(discipline: &QueueDiscipline) -> Vec<String> {
    let ecn = |on: bool| if on { "ecn" } else { "noecn" }.to_string();
    match *discipline {
        QueueDiscipline::DropTail { limit } => match limit {
            QueueLimit::Packets(n) => vec!["pfifo".into(), "limit".into(), n.to_string()],
            QueueLimit::Bytes(b) => vec!["bfifo".into(), "limit".into(), b.to_string()],
        },
        QueueDiscipline::Codel {
            limit_packets,
            target_us,
            interval_us,
            ecn: on,
        } => vec![
            "codel".into(),
            "limit".into(),
            limit_packets.to_string(),
            "target".into(),
            format!("{target_us}us"),
            "interval".into(),
            format!("{interval_us}us"),
            ecn(on),
        ],
        QueueDiscipline::FqCodel(q) => vec![
            "fq_codel".into(),
            "limit".into(),
            q.limit_packets.to_string(),
            "flows".into(),
            q.flows.to_string(),
            "quantum".into(),
            q.quantum.to_string(),
            "target".into(),
            format!("{}us", q.target_us),
            "interval".into(),
            format!("{}us", q.interval_us),
            ecn(q.ecn),
        ],
    }
}

/// tbf's bucket: two frames, or 1 ms at the rate, whichever is larger (tbf
/// needs at least one MTU; a bucket much larger than a frame would let bursts
/// through at the host's speed).
fn tbf_burst(rate_bps: u64, mtu: u32) -> u64 {
    (2 * (u64::from(mtu) + 14)).max(rate_bps / 8 / 1000)
}

impl Testbed {
    /// Creates the namespaces and the link. On any error, what was created is
    /// removed before returning. `force_emulator` builds the link with the
    /// wire emulator even when a veth would do (to measure the emulator).
    pub fn create(
        profile: &LinkProfile,
        force_emulator: bool,
        verbose: bool,
    ) -> Result<Testbed, TestbedError> {
        if !has_net_admin() {
            return Err(TestbedError::NoCapability);
        }
        let runner = Runner { verbose };
        let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = [
            format!("{NAMESPACE_PREFIX}{pid}-{seq}-a"),
            format!("{NAMESPACE_PREFIX}{pid}-{seq}-b"),
        ];
        // Interface names are limited to 15 bytes.
        let ifs = [
            format!("{INTERFACE_PREFIX}{pid:x}{seq}a"),
            format!("{INTERFACE_PREFIX}{pid:x}{seq}b"),
        ];
        let mut testbed = Testbed {
            runner,
            namespaces: Vec::new(),
            facts: LinkFacts {
                profile: profile.clone(),
                realised_by: Realisation::Veth,
                detail: String::new(),
                namespaces: ns.clone(),
                interfaces: ifs.clone(),
                addresses: [ADDR_A, ADDR_B],
                note: None,
                second_path: None,
            },
        };
        for name in &ns {
            runner.run("ip", &["netns", "add", name])?;
            testbed.namespaces.push(name.clone());
            runner.run("ip", &["-n", name, "link", "set", "lo", "up"])?;
        }
        let (realised_by, note) = realisation(profile, force_emulator, runner, &ns[0]);
        testbed.facts.realised_by = realised_by;
        testbed.facts.note = note;
        let mut detail = vec![add_devices(runner, realised_by, &ns, &ifs)?];
        for ((n, i), addr) in ns.iter().zip(&ifs).zip([ADDR_A, ADDR_B]) {
            configure_side(runner, profile, n, i, addr)?;
            if realised_by == Realisation::Emulator {
                // The TUN device queues what its namespace sends until the
                // emulator reads it, in a ring of txqueuelen packets (500
                // by default), and drops the rest uncounted by either end
                // (the device's tx_dropped). 500 is 20 ms at 25,000 small
                // datagrams a second: one scheduling stall of the emulator
                // on a loaded host lost hundreds. 16384 rides out ~650 ms.
                runner.run(
                    "ip",
                    &["-n", n, "link", "set", i, "txqueuelen", TUN_QUEUE_PACKETS],
                )?;
            }
            if let Some(shaped) = shape_side(runner, profile, realised_by, n, i)?
                && detail.len() < 2
            {
                detail.push(shaped);
            }
        }
        testbed.facts.detail = detail.join(", ");
        Ok(testbed)
    }

    pub fn facts(&self) -> &LinkFacts {
        &self.facts
    }

    /// `--mptcp`: a second veth pair between the namespaces (198.18.0.4/30),
    /// configured and shaped as the first, and each namespace's in-kernel
    /// MPTCP path manager told of it: room for two subflows, and the
    /// namespace's second address as a `subflow` endpoint bound to its
    /// device, so whichever end connects opens its second subflow over
    /// the second link (ip-mptcp(8)). The emulator relays one pair of TUN
    /// devices, so a link it carries is refused.
    pub fn add_second_path(&mut self, profile: &LinkProfile) -> Result<(), TestbedError> {
        if self.facts.realised_by == Realisation::Emulator {
            return Err(TestbedError::SecondPath(format!(
                "the link is netlab's emulator ({}), which relays one path; a second path is a veth pair (no delay, jitter or loss beyond what netem or tbf give)",
                self.facts.note.as_deref().unwrap_or("asked for")
            )));
        }
        let runner = self.runner;
        let ns = self.facts.namespaces.clone();
        // The first path's names with their last letter moved on: a, b
        // become c, d (still within 15 bytes).
        let ifs = self.facts.interfaces.clone().map(|name| {
            let mut second = name[..name.len() - 1].to_string();
            second.push(if name.ends_with('a') { 'c' } else { 'd' });
            second
        });
        let detail = add_devices(runner, self.facts.realised_by, &ns, &ifs)?;
        let mut shaped = None;
        for ((n, i), addr) in ns.iter().zip(&ifs).zip([ADDR_A2, ADDR_B2]) {
            configure_side(runner, profile, n, i, addr)?;
            shaped = shape_side(runner, profile, self.facts.realised_by, n, i)?.or(shaped);
        }
        for ((n, i), addr) in ns.iter().zip(&ifs).zip([ADDR_A2, ADDR_B2]) {
            let addr = addr.to_string();
            runner.run(
                "ip",
                &[
                    "-n",
                    n,
                    "mptcp",
                    "limits",
                    "set",
                    "subflows",
                    MPTCP_SUBFLOWS,
                    "add_addr_accepted",
                    MPTCP_SUBFLOWS,
                ],
            )?;
            runner.run(
                "ip",
                &[
                    "-n", n, "mptcp", "endpoint", "add", &addr, "dev", i, "subflow",
                ],
            )?;
        }
        self.facts.second_path = Some(crate::record::testbed::SecondPath {
            interfaces: ifs,
            addresses: [ADDR_A2, ADDR_B2],
            detail: shaped.map_or(detail.clone(), |s| format!("{detail}, {s}")),
            path_manager: format!(
                "in-kernel path manager: subflows {MPTCP_SUBFLOWS}, add_addr_accepted {MPTCP_SUBFLOWS}; endpoint {ADDR_A2} (side A) and {ADDR_B2} (side B), flag subflow"
            ),
        });
        Ok(())
    }

    /// `/run/netns/NAME` of side 0 (A, sender) or 1 (B, receiver).
    pub fn netns_path(&self, side: usize) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.facts.namespaces[side])
    }

    pub fn interface(&self, side: usize) -> &str {
        &self.facts.interfaces[side]
    }

    /// Deletes the namespaces now (also done on drop).
    pub fn teardown(&mut self) {
        for name in self.namespaces.drain(..).rev() {
            if let Err(e) = self.runner.run("ip", &["netns", "del", &name]) {
                eprintln!("netlab: cleaning up namespace {name}: {e}");
            }
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Which of the queueing disciplines netlab uses this kernel has: each
/// tried on the loopback of a scratch namespace pair, removed at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdiscSupport {
    pub tbf: Result<(), String>,
    pub netem: Result<(), String>,
    pub codel: Result<(), String>,
    pub fq_codel: Result<(), String>,
}

/// [`QdiscSupport`], from a testbed of its own (needs CAP_NET_ADMIN).
pub fn probe_qdiscs() -> Result<QdiscSupport, TestbedError> {
    let bed = Testbed::create(
        &crate::record::testbed::LinkProfile::default(),
        false,
        false,
    )?;
    let namespace = bed.namespaces[0].clone();
    let runner = bed.runner;
    let try_qdisc = |args: &[&str]| -> Result<(), String> {
        let mut all = vec![
            "-n",
            namespace.as_str(),
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
        ];
        all.extend_from_slice(args);
        runner.run("tc", &all).map_err(|e| e.to_string())?;
        let _ = runner.run(
            "tc",
            &["-n", &namespace, "qdisc", "del", "dev", "lo", "root"],
        );
        Ok(())
    };
    let support = QdiscSupport {
        tbf: try_qdisc(&["tbf", "rate", "10mbit", "burst", "3028", "latency", "50ms"]),
        netem: try_qdisc(&["netem", "delay", "1ms"]),
        codel: try_qdisc(&["codel"]),
        fq_codel: try_qdisc(&["fq_codel"]),
    };
    drop(bed);
    Ok(support)
}

/// Whether the kernel has netem: try it on the namespace's loopback.
fn netem_available(runner: Runner, namespace: &str) -> bool {
    qdisc_available(runner, namespace, &["netem", "delay", "1ms"])
}

/// Whether the kernel has the qdisc `args` name (with its arguments):
/// try it on the namespace's loopback, and remove it.
fn qdisc_available(runner: Runner, namespace: &str, args: &[&str]) -> bool {
    let mut all = vec!["-n", namespace, "qdisc", "add", "dev", "lo", "root"];
    all.extend_from_slice(args);
    let probe = runner.run("tc", &all);
    if probe.is_ok() {
        let _ = runner.run(
            "tc",
            &["-n", namespace, "qdisc", "del", "dev", "lo", "root"],
        );
    }
    probe.is_ok()
}

/// What `netlab testbed clean` did.
#[derive(Debug, Default)]
pub struct CleanReport {
    pub removed: Vec<String>,
    pub kept_live: Vec<String>,
}

/// The PID a netlab namespace or interface name encodes, if it is one of ours.
pub fn owner_pid(namespace: &str) -> Option<u32> {
    let rest = namespace.strip_prefix(NAMESPACE_PREFIX)?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let _seq: u32 = parts.next()?.parse().ok()?;
    let role = parts.next()?;
    // a, b: a link's two ends; w, r, hN: a segment's namespace, its
    // router and its hosts (`testbed::segment`).
    let known = matches!(role, "a" | "b" | "w" | "r")
        || role
            .strip_prefix('h')
            .is_some_and(|n| n.parse::<u32>().is_ok());
    known.then_some(pid).filter(|_| parts.next().is_none())
}

/// Removes namespaces netlab created whose controller is gone (all of
/// netlab's when `all`), and any stray `nlb*` interface in this namespace.
pub fn clean(runner: Runner, all: bool) -> Result<CleanReport, TestbedError> {
    if !has_net_admin() {
        return Err(TestbedError::NoCapability);
    }
    let mut report = CleanReport::default();
    let list = runner.run("ip", &["netns", "list"])?;
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = owner_pid(name) else { continue };
        if !all && pid != std::process::id() && super::netlab_runs(pid) {
            report.kept_live.push(name.to_string());
            continue;
        }
        match runner.run("ip", &["netns", "del", name]) {
            Ok(_) => report.removed.push(name.to_string()),
            // Gone between the listing and now: another cleaner (or the
            // run's own teardown) removed it, which is what was wanted.
            Err(_) if !Path::new("/run/netns").join(name).exists() => {}
            Err(e) => return Err(e),
        }
    }
    let links = runner.run("ip", &["-o", "link", "show"])?;
    for line in links.lines() {
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        if name.starts_with(INTERFACE_PREFIX) && name.len() <= 15 {
            match runner.run("ip", &["link", "del", name]) {
                Ok(_) => report.removed.push(name.to_string()),
                Err(_) if !Path::new("/sys/class/net").join(name).exists() => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(report)
}

/// How a profile's link is built, and why when not the plain way: the
/// emulator when asked for or when the impairments are beyond netem (or
/// netem is missing), netem for impairments it has, a veth pair otherwise.
fn realisation(
    profile: &LinkProfile,
    force_emulator: bool,
    runner: Runner,
    probe_namespace: &str,
) -> (Realisation, Option<String>) {
    if force_emulator {
        return (
            Realisation::Emulator,
            Some("the emulator was asked for (--link-via emulator)".into()),
        );
    }
    if let Some(discipline) = profile.impair.queue_discipline {
        return discipline_realisation(profile, &discipline, runner, probe_namespace);
    }
    if let Some(why) = crate::testbed::impair::beyond_netem(&profile.impair) {
        return (
            Realisation::Emulator,
            Some(format!("{why}: netlab's emulator carries the link")),
        );
    }
    if !profile.needs_impairment() {
        return (Realisation::Veth, None);
    }
    if netem_available(runner, probe_namespace) {
        (Realisation::Netem, None)
    } else {
        (
            Realisation::Emulator,
            Some("netem is not in this kernel (CONFIG_NET_SCH_NETEM off): netlab's user-space emulator adds delay, jitter and loss".into()),
        )
    }
}

/// Where a link's queue discipline runs: the kernel's codel or fq_codel
/// under tbf on a veth pair, when this kernel has it and nothing else
/// needs netem; netlab's emulator otherwise (and always for drop-tail,
/// whose queue the emulator reads packet by packet). Says which and why.
fn discipline_realisation(
    profile: &LinkProfile,
    discipline: &QueueDiscipline,
    runner: Runner,
    probe_namespace: &str,
) -> (Realisation, Option<String>) {
    let name = discipline.name();
    let rfc = match discipline {
        QueueDiscipline::DropTail { .. } => {
            return (
                Realisation::Emulator,
                Some("the drop-tail queue is netlab's emulator's, read packet by packet".into()),
            );
        }
        QueueDiscipline::Codel { .. } => "CoDel (RFC 8289)",
        QueueDiscipline::FqCodel(_) => "FQ-CoDel (RFC 8290)",
    };
    let mut without = profile.clone();
    without.impair.queue_discipline = None;
    if without.needs_impairment() {
        return (
            Realisation::Emulator,
            Some(format!(
                "with delay, jitter or loss the link is the emulator's: its {rfc} carries the queue"
            )),
        );
    }
    if qdisc_available(runner, probe_namespace, &[name]) {
        (
            Realisation::Veth,
            Some(format!("the kernel's {name} under tbf carries the queue")),
        )
    } else {
        (
            Realisation::Emulator,
            Some(format!(
                "{name} is not in this kernel: netlab's emulator runs {rfc} (testbed::qdisc)"
            )),
        )
    }
}

/// The link's two devices: a veth pair across the namespaces, or a TUN
/// device in each for the emulator to relay between. Says which.
fn add_devices(
    runner: Runner,
    realised_by: Realisation,
    ns: &[String; 2],
    ifs: &[String; 2],
) -> Result<String, TestbedError> {
    match realised_by {
        Realisation::Veth | Realisation::Netem => {
            runner.run(
                "ip",
                &[
                    "link", "add", &ifs[0], "netns", &ns[0], "type", "veth", "peer", "name",
                    &ifs[1], "netns", &ns[1],
                ],
            )?;
            Ok("veth pair".to_string())
        }
        Realisation::Emulator => {
            for (n, i) in ns.iter().zip(ifs) {
                runner.run("ip", &["-n", n, "tuntap", "add", "dev", i, "mode", "tun"])?;
            }
            Ok("TUN device in each namespace, relayed by netlab's wire emulator".to_string())
        }
    }
}

/// Packets a TUN device holds for the emulator to read.
const TUN_QUEUE_PACKETS: &str = "16384";

/// One end's device: MTU, no IPv6 link-local chatter, offloads as the
/// profile asks (checked), wire-sized packets on a rated link, its address,
/// up.
fn configure_side(
    runner: Runner,
    profile: &LinkProfile,
    n: &str,
    i: &str,
    addr: Ipv4Addr,
) -> Result<(), TestbedError> {
    let mtu = profile.mtu.to_string();
    runner.run("ip", &["-n", n, "link", "set", i, "mtu", &mtu])?;
    // No IPv6 link-local address, so no router solicitations or DAD
    // frames on the link: only the experiment's traffic crosses it.
    runner.run("ip", &["-n", n, "link", "set", i, "addrgenmode", "none"])?;
    for (feature, on) in &profile.offloads {
        let wanted = if *on { "on" } else { "off" };
        runner.run(
            "ip",
            &["netns", "exec", n, "ethtool", "-K", i, feature, wanted],
        )?;
    }
    if !profile.offloads.is_empty() {
        check_offloads(&runner, n, i, &profile.offloads)?;
    }
    if profile.rate_bps.is_some() {
        // Wire-sized packets: TCP hands the device MSS-sized segments
        // rather than 64 KB TSO bursts, as on an old Ethernet.
        runner.run("ip", &["-n", n, "link", "set", i, "gso_max_segs", "1"])?;
    }
    runner.run(
        "ip",
        &[
            "-n",
            n,
            "addr",
            "add",
            &format!("{addr}/{PREFIX_LEN}"),
            "dev",
            i,
        ],
    )?;
    runner.run("ip", &["-n", n, "link", "set", i, "up"])?;
    Ok(())
}

/// What shapes one end's traffic: the emulator's model (nothing to add
/// here), netem, or tbf for a rate on a veth pair. Says how, if it did.
fn shape_side(
    runner: Runner,
    profile: &LinkProfile,
    realised_by: Realisation,
    n: &str,
    i: &str,
) -> Result<Option<String>, TestbedError> {
    match realised_by {
        // The emulator's model does the rate, per wire packet.
        Realisation::Emulator => Ok(profile
            .rate_bps
            .map(|_| "rate and framing in the emulator, gso_max_segs 1".into())),
        Realisation::Netem => {
            let mut args: Vec<String> = ["-n", n, "qdisc", "add", "dev", i, "root", "netem"]
                .map(String::from)
                .to_vec();
            args.extend(netem_args(profile));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            runner.run("tc", &args)?;
            Ok(Some("netem on both ends".into()))
        }
        Realisation::Veth => {
            let Some(rate) = profile.rate_bps else {
                return Ok(None);
            };
            let ethernet = profile.impair.framing == Some(Framing::Ethernet);
            let burst = tbf_burst(rate, profile.mtu);
            let limit = profile.queue_bytes.unwrap_or(burst * 8).max(burst);
            let (rate_arg, burst_arg, limit_arg, overhead_arg) = (
                format!("{rate}bit"),
                burst.to_string(),
                limit.to_string(),
                VETH_ETHERNET_OVERHEAD.to_string(),
            );
            let mut args = vec![
                "-n", n, "qdisc", "add", "dev", i, "root", "handle", "1:", "tbf", "rate",
                &rate_arg, "burst", &burst_arg, "limit", &limit_arg,
            ];
            if ethernet {
                args.extend(["overhead", overhead_arg.as_str()]);
            }
            runner.run("tc", &args)?;
            if let Some(discipline) = &profile.impair.queue_discipline {
                let mut child: Vec<String> = [
                    "-n", n, "qdisc", "add", "dev", i, "parent", "1:1", "handle", "10:",
                ]
                .map(String::from)
                .to_vec();
                child.extend(kernel_discipline_args(discipline));
                let child: Vec<&str> = child.iter().map(String::as_str).collect();
                runner.run("tc", &child)?;
                return Ok(Some(format!(
                    "tbf {} burst {burst} B on both ends, the kernel's {} under it, gso_max_segs 1",
                    format_rate(rate),
                    discipline.name()
                )));
            }
            Ok(Some(format!(
                "tbf {} burst {burst} B limit {limit} B{} on both ends, gso_max_segs 1",
                format_rate(rate),
                if ethernet {
                    format!(", overhead {VETH_ETHERNET_OVERHEAD} B (FCS, preamble, 9.6 µs gap)")
                } else {
                    String::new()
                }
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ethtool -k` of a veth end after `-K tx off` then `-K tso on`.
    const TX_OFF_TSO_ASKED: &str = "Features for nlb1a:
rx-checksumming: on
tx-checksumming: off
\ttx-checksum-ipv4: off [fixed]
\ttx-checksum-ip-generic: off
scatter-gather: on
tcp-segmentation-offload: on
\ttx-tcp-segmentation: off [requested on]
\ttx-tcp-ecn-segmentation: off [requested on]
generic-segmentation-offload: on
generic-receive-offload: on
";

    #[test]
    fn offloads_are_read_back_sub_features_included() {
        let asked = |list: &[(&str, bool)]| -> Vec<(String, bool)> {
            list.iter().map(|(f, on)| (f.to_string(), *on)).collect()
        };
        assert_eq!(
            offload_refusal(TX_OFF_TSO_ASKED, &asked(&[("tx", false), ("gro", true)])),
            None
        );
        // TSO's summary says on; its segmentation stayed off.
        assert_eq!(
            offload_refusal(TX_OFF_TSO_ASKED, &asked(&[("tx", false), ("tso", true)])).as_deref(),
            Some("tx-tcp-segmentation: off [requested on]")
        );
        assert_eq!(
            offload_refusal(TX_OFF_TSO_ASKED, &asked(&[("rx", false)])).as_deref(),
            Some("rx-checksumming: on")
        );
        assert_eq!(
            offload_state(TX_OFF_TSO_ASKED, "generic-receive-offload").map(|s| s.0),
            Some(true)
        );
    }

    #[test]
    fn only_our_names_are_recognised() {
        assert_eq!(owner_pid("netlab-1234-0-a"), Some(1234));
        assert_eq!(owner_pid("netlab-1234-17-b"), Some(1234));
        assert_eq!(owner_pid("netlab-1234-0-c"), None);
        // A segment's namespaces: its bridges', a router's, each host's.
        assert_eq!(owner_pid("netlab-1234-1000000-w"), Some(1234));
        assert_eq!(owner_pid("netlab-1234-1000000-r"), Some(1234));
        assert_eq!(owner_pid("netlab-1234-1000000-h7"), Some(1234));
        assert_eq!(owner_pid("netlab-1234-1000000-hx"), None);
        assert_eq!(owner_pid("netlab-x-0-a"), None);
        assert_eq!(owner_pid("netlab-1234-0-a-extra"), None);
        assert_eq!(owner_pid("docker-1234-0-a"), None);
        assert_eq!(owner_pid("netlab"), None);
    }

    #[test]
    fn the_kernel_is_given_the_discipline_in_tc_s_words() {
        let given = crate::testbed::link::LinkOverrides {
            rate: Some("50mbit".into()),
            queue: Some("2000p".into()),
            queue_discipline: Some("fq_codel".into()),
            ..Default::default()
        };
        let p = LinkProfile::with_overrides(&given).unwrap();
        assert_eq!(
            kernel_discipline_args(&p.impair.queue_discipline.unwrap()).join(" "),
            "fq_codel limit 2000 flows 1024 quantum 1514 target 5000us interval 100000us ecn"
        );
        let codel = QueueDiscipline::Codel {
            limit_packets: 1000,
            target_us: 5000,
            interval_us: 100_000,
            ecn: false,
        };
        assert_eq!(
            kernel_discipline_args(&codel).join(" "),
            "codel limit 1000 target 5000us interval 100000us noecn"
        );
    }

    #[test]
    fn tbf_bucket_holds_frames_and_a_millisecond() {
        assert_eq!(tbf_burst(10_000_000, 1500), 3028);
        assert_eq!(tbf_burst(1_000_000_000, 1500), 125_000);
    }

    #[test]
    fn netem_is_given_the_same_link_in_its_own_words() {
        let profile = crate::record::testbed::LinkProfile::with_overrides(
            &crate::testbed::link::LinkOverrides {
                profile: Some("ether10".into()),
                netem: Some(
                    "delay 10ms 2ms 25% distribution pareto loss gemodel 1% 20% duplicate 1% reorder 5% gap 3 slot 1ms 2ms packets 4"
                        .into(),
                ),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            netem_args(&profile).join(" "),
            "delay 10000us 2000us 25% distribution pareto loss gemodel 1% 20% 100% 0% \
             duplicate 1% reorder 5% gap 3 rate 10000000bit 24 slot 1000us 2000us packets 4 limit 10"
        );
        // Jitter without a rate: netem would reorder, so a rate keeps order.
        let jitter = crate::record::testbed::LinkProfile::with_overrides(
            &crate::testbed::link::LinkOverrides {
                delay: Some("10ms".into()),
                jitter: Some("5ms".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            netem_args(&jitter).join(" "),
            "delay 10000us 5000us loss random 0% rate 100gbit limit 10000"
        );
    }
}
