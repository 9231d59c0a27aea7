//! The lab's plan: every landed experiment in its quick (or full) profile,
//! built from each experiment's own plan type. What the lab runs depends on
//! this host (root for the netns placement, telnetd and sshd where they are
//! installed); what it leaves out is listed with the reason.

use super::cksum::CksumPlan;
use super::login::{Dialect, LoginParams, LoginPlan, Target};
use super::output::{OutputParams, OutputPlan};
use super::rpc::{RpcPlan, remote_1989};
use super::stream::StreamConfig;
use super::sweep::SweepConfig;
use crate::endpoint::login::server::Relay;
use crate::testbed::{Placement, netns::has_net_admin};

/// Everything a lab run measures, in the order it runs.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// 1981: Bill Joy's 4 MB in 1 KB records, on loopback.
    pub joy: StreamConfig,
    pub joy_repeat: u32,
    /// The same over an emulated 10 Mbit/s Ethernet (as root).
    pub joy_ether10: Option<StreamConfig>,
    pub ether10_repeat: u32,
    /// 1989: Sun RPC time per call vs argument size.
    pub rpc: RpcPlan,
    /// 1988: throughput vs record size.
    pub sweep: SweepConfig,
    /// 1988: checksum and copy costs per KB.
    pub cksum: CksumPlan,
    /// 1989: users typing through each relay design and real server.
    pub login: LoginPlan,
    pub login_cells: Vec<LoginParams>,
    /// 1987: text typed to a terminal through each design and real server.
    pub output: OutputPlan,
    pub output_cells: Vec<OutputParams>,
    /// What this host could not run, and why.
    pub skipped: Vec<String>,
}

/// The profile's counts; everything else is each experiment's own plan.
struct Counts {
    joy_repeat: u32,
    ether10_repeat: u32,
}

impl LabPlan {
    /// About two minutes on a 2-core machine.
    pub fn quick() -> LabPlan {
        Self::build(
            Counts {
                joy_repeat: 5,
                ether10_repeat: 2,
            },
            RpcPlan::quick(),
            SweepConfig::quick(),
            CksumPlan::quick(),
            LoginPlan::quick(),
            OutputPlan::quick(),
        )
    }

    /// The source documents' repetition counts and longer runs.
    pub fn full() -> LabPlan {
        Self::build(
            Counts {
                joy_repeat: 20,
                ether10_repeat: 5,
            },
            RpcPlan::full(),
            SweepConfig::full(),
            CksumPlan::full(),
            LoginPlan::full(),
            OutputPlan::full(),
        )
    }

    fn build(
        counts: Counts,
        rpc: RpcPlan,
        sweep: SweepConfig,
        cksum: CksumPlan,
        login: LoginPlan,
        output: OutputPlan,
    ) -> LabPlan {
        let root = has_net_admin();
        let mut skipped = Vec::new();
        let joy = StreamConfig::joy_1981();
        let ether10 = root.then(remote_1989);
        if ether10.is_none() {
            skipped.push(
                "stream, login and output over netns ether10 (the netns placement needs CAP_NET_ADMIN; run as root)".to_string(),
            );
        }
        skipped.extend(rpc.skipped.iter().cloned());
        // netlab's designs over rlogin; the real servers beside them
        // (telnetd over TELNET, sshd over SSH) where this machine has them.
        let mut servers: Vec<(Target, Dialect)> = Relay::ALL
            .into_iter()
            .map(|relay| (Target::of(relay), Dialect::Rlogin))
            .collect();
        if std::path::Path::new("/usr/sbin/telnetd").exists() {
            servers.push((Target::Telnetd, Dialect::Telnet));
        } else {
            skipped.push("inetutils telnetd (not installed)".into());
        }
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if std::path::Path::new("/usr/sbin/sshd").exists() && euid == 0 {
            servers.push((Target::Sshd, Dialect::Ssh));
        } else {
            skipped.push("OpenSSH sshd (needs /usr/sbin/sshd and root)".into());
        }
        let mut login_cells = Vec::new();
        for &users in &login.users {
            for &(relay, protocol) in &servers {
                login_cells.push(login.cell(relay, protocol, &Placement::Loopback, users));
            }
        }
        // Over a 10 Mbit/s Ethernet too, one design at the first count: the
        // packets in and out are then the interface's, as in 1989's vmstat.
        if let Some(netns) = &ether10 {
            login_cells.push(login.cell(Target::Epoll, Dialect::Rlogin, netns, login.users[0]));
        }
        let mut output_cells = output.cells();
        let real: Vec<Target> = servers
            .iter()
            .filter(|(t, _)| t.relay().is_none())
            .map(|(t, _)| *t)
            .collect();
        output_cells.extend(
            OutputPlan {
                relays: real,
                protocols: vec![Dialect::Telnet],
                ..output.clone()
            }
            .cells(),
        );
        if let Some(netns) = &ether10 {
            output_cells.extend(
                OutputPlan {
                    relays: vec![Target::Epoll],
                    protocols: vec![Dialect::Rlogin],
                    placements: vec![netns.clone()],
                    ..output.clone()
                }
                .cells(),
            );
        }
        LabPlan {
            joy_ether10: ether10.map(|placement| StreamConfig {
                placement: match placement {
                    Placement::Netns {
                        link,
                        via,
                        pcap,
                        verbose,
                        ..
                    } => Placement::Netns {
                        link,
                        via,
                        capture: true,
                        pcap,
                        verbose,
                    },
                    other => other,
                },
                ..joy.clone()
            }),
            joy,
            joy_repeat: counts.joy_repeat,
            ether10_repeat: counts.ether10_repeat,
            rpc,
            sweep,
            cksum,
            login,
            login_cells,
            output,
            output_cells,
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::protocol::Amount;

    #[test]
    fn the_quick_profile_keeps_the_lab_short_and_the_full_one_the_sources_counts() {
        let quick = LabPlan::quick();
        assert_eq!(quick.joy.record, 1024);
        assert_eq!(quick.joy.amount, Amount::Bytes(4 << 20));
        assert_eq!((quick.rpc.calls, quick.rpc.reps), (20, 3));
        assert_eq!(quick.sweep.records.first(), Some(&64));
        assert_eq!(quick.sweep.records.last(), Some(&(1 << 20)));
        assert_eq!(quick.login.users, [16, 48]);
        assert_eq!(quick.output.size, 1 << 20);
        let full = LabPlan::full();
        assert_eq!((full.rpc.calls, full.rpc.reps), (100, 20));
        assert_eq!(full.sweep.records.first(), Some(&16));
        assert_eq!(full.sweep.records.last(), Some(&(4 << 20)));
        assert_eq!(full.login.users, [16, 32, 48]);
    }

    #[test]
    fn doubling_ends_at_the_top() {
        assert_eq!(
            crate::experiment::sweep::doubling(64, 512),
            [64, 128, 256, 512]
        );
    }
}
