//! One run of the storm: the emulated Ethernet built (`testbed::segment`),
//! the 1990 hosts started on their TAPs in their endpoint process
//! (`wire.rs`), the Linux hosts in their namespaces, the probe sent, the
//! run left to end by its own bounds, every count collected and everything
//! removed.
//!
//! The plan's checks ([`check`]) run before anything is built: at least
//! three hosts, caps above zero, the Suns' broadcast address inside the
//! hosts' network.

use super::model::{HostConfig, Kind, rx_cost_ns};
use super::record::{BroadcastData, BroadcastResult, BroadcastSpec, Fix, LinuxCounts};
use super::wire::{ModelSpec, Probe, StormModel};
use crate::controller::Interrupted;
use crate::controller::helpers::{start_helper, stop_helper};
use crate::controller::launcher::Launcher;
use crate::controller::processes::ControlError;
use crate::controller::resume::CellKey;
use crate::controller::runner::{MeasureCell, Measured};
use crate::testbed::segment::{Segments, snmp_counter};
use std::net::Ipv4Addr;
use thiserror::Error;

/// The hosts' network: 10.90.0.0/24 (the router fix puts the Suns on
/// 10.90.1.0/24).
pub const NET: Ipv4Addr = Ipv4Addr::new(10, 90, 0, 0);
pub const SUN_NET: Ipv4Addr = Ipv4Addr::new(10, 90, 1, 0);
pub const PREFIX: u8 = 24;
/// Ethernet's rate.
pub const TEN_MBIT: u64 = 10_000_000;
/// routed's supply interval (4.3BSD routed/table.h: `SUPPLY_INTERVAL` 30).
pub const SUPPLY_INTERVAL_MS: u64 = 30_000;
/// An address no host has: the stray datagram's.
pub const STRAY: Ipv4Addr = Ipv4Addr::new(10, 90, 0, 77);
/// The heartbeat runs alone this long before the probe.
const PROBE_AT_MS: u64 = 300;

#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    #[error(
        "--hosts {0}: the storm needs at least 3 hosts (two exchanging the heartbeat, one to forward)"
    )]
    TooFewHosts(usize),
    #[error("--hosts {0}: the segment is a /24, so at most {MAX_HOSTS} hosts")]
    TooManyHosts(usize),
    #[error(
        "--hosts {hosts} cannot hold {suns} Suns, {linux} Linux hosts and the 2 VAXen of the heartbeat"
    )]
    Mix {
        hosts: usize,
        suns: usize,
        linux: usize,
    },
    #[error("{0} of 0: the run would stop before it starts (give a cap above 0)")]
    ZeroCap(&'static str),
    #[error("--sun-broadcast {0} is outside the hosts' network {NET}/{PREFIX}")]
    BroadcastOutside(Ipv4Addr),
    #[error(
        "--sun-broadcast {0} is a host's address in {NET}/{PREFIX}, not a broadcast (give {NET} or 10.90.0.255)"
    )]
    NotBroadcast(Ipv4Addr),
}

/// Whether `spec` can run.
/// The most hosts on the segment: its network is a /24 (10.90.0.0/24), and
/// each host is a TAP device and a thread of the 1990 model, or a namespace.
pub const MAX_HOSTS: usize = 254;

pub fn check(spec: &BroadcastSpec) -> Result<(), PlanError> {
    if spec.hosts < 3 {
        return Err(PlanError::TooFewHosts(spec.hosts));
    }
    if spec.hosts > MAX_HOSTS {
        return Err(PlanError::TooManyHosts(spec.hosts));
    }
    if spec.suns + spec.linux + 2 != spec.hosts || spec.suns == 0 {
        return Err(PlanError::Mix {
            hosts: spec.hosts,
            suns: spec.suns,
            linux: spec.linux,
        });
    }
    if spec.max_frames == 0 {
        return Err(PlanError::ZeroCap("--max-frames"));
    }
    if spec.max_ms == 0 {
        return Err(PlanError::ZeroCap("--max-seconds"));
    }
    let b = spec.sun_broadcast;
    if u32::from(b) >> 8 != u32::from(NET) >> 8 {
        return Err(PlanError::BroadcastOutside(b));
    }
    if !matches!(b.octets()[3], 0 | 255) {
        return Err(PlanError::NotBroadcast(b));
    }
    Ok(())
}

/// The storm as the lab runs it (and `netlab broadcast` by default): 8
/// hosts, routed's TTL, a cap of 100,000 frames and `max_ms`, a hello every
/// 100 ms against a 500 ms timeout (3000 ms under the longer-timeout fix).
pub fn default_spec(fix: Fix, max_ms: u64) -> BroadcastSpec {
    let (suns, linux) = default_mix(8);
    BroadcastSpec {
        hosts: 8,
        suns,
        linux,
        sun_broadcast: NET,
        ttl: 30,
        max_frames: 100_000,
        max_ms,
        hello_ms: 100,
        timeout_ms: 500,
        longer_timeout_ms: 3000,
        fix,
        rate_bps: TEN_MBIT,
    }
}

/// The default mix of `hosts`: two VAXen, a Linux host for every three
/// hosts beyond them, Suns for the rest.
pub fn default_mix(hosts: usize) -> (usize, usize) {
    let linux = hosts.saturating_sub(2) / 3;
    (hosts.saturating_sub(2 + linux), linux)
}

fn mac(i: usize) -> [u8; 6] {
    [0x02, 0, 0x5a, 0, 0, (i + 1) as u8]
}

fn host_addr(net: Ipv4Addr, i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(net) + i as u32 + 1)
}

/// The run's 1990 hosts: VAX A (the probe's sender, the heartbeat's one
/// end), VAX B, then the Suns; with the addresses and broadcast each is
/// given under `spec.fix`.
pub fn model_hosts(spec: &BroadcastSpec) -> Vec<HostConfig> {
    let mut hosts = Vec::new();
    for (i, name) in ["vax-a", "vax-b"].into_iter().enumerate() {
        let addr = host_addr(NET, i);
        hosts.push(HostConfig {
            name: name.into(),
            kind: Kind::Vax,
            mac: mac(i),
            addr,
            prefix: PREFIX,
            broadcast: Ipv4Addr::from(u32::from(NET) | 0xff),
            forwarding: false,
            refuse_link_broadcasts: false,
        });
    }
    for s in 0..spec.suns {
        let i = 2 + s;
        let behind_router = spec.fix == Fix::Router;
        let net = if behind_router { SUN_NET } else { NET };
        let broadcast = match spec.fix {
            Fix::OneBroadcast => Ipv4Addr::from(u32::from(NET) | 0xff),
            Fix::Router => SUN_NET,
            _ => spec.sun_broadcast,
        };
        hosts.push(HostConfig {
            name: format!("sun-{}", s + 1),
            kind: Kind::Sun,
            mac: mac(i),
            addr: host_addr(net, i),
            prefix: PREFIX,
            broadcast,
            forwarding: true,
            refuse_link_broadcasts: spec.fix == Fix::NoLinkBroadcastForwarding,
        });
    }
    hosts
}

fn linux_counts(
    segments: &Segments,
    netns: &str,
    port: &str,
    name: &str,
) -> Result<LinuxCounts, crate::testbed::netns::TestbedError> {
    let snmp = segments.proc_net(netns, "snmp")?;
    let netstat = segments.proc_net(netns, "netstat")?;
    Ok(LinuxCounts {
        name: name.to_string(),
        in_receives: snmp_counter(&snmp, "Ip", "InReceives").unwrap_or(0),
        in_bcast: snmp_counter(&netstat, "IpExt", "InBcastPkts").unwrap_or(0),
        forwarded: snmp_counter(&snmp, "Ip", "ForwDatagrams").unwrap_or(0),
        frames_sent: segments.port_counter(port, "rx_packets")?,
    })
}

/// Builds the network, runs the storm, takes every count.
pub fn run(spec: &BroadcastSpec, verbose: bool) -> Result<BroadcastResult, ControlError> {
    let router = spec.fix == Fix::Router;
    let mut segments = Segments::create(if router { 2 } else { 1 }, verbose)?;
    let configs = model_hosts(spec);
    let mut hosts = Vec::new();
    for config in configs {
        let bridge = usize::from(router && config.kind == Kind::Sun);
        let tap = segments.add_tap(bridge)?;
        hosts.push((config, tap));
    }
    let mut linux = Vec::new();
    for l in 0..spec.linux {
        let i = 2 + spec.suns + l;
        let role = format!("h{i}");
        let host = segments.add_linux(
            &role,
            &[(0, host_addr(NET, i), PREFIX, spec.sun_broadcast)],
            true,
        )?;
        linux.push((format!("linux-{}", l + 1), host));
    }
    let router_host = if router {
        Some(segments.add_linux(
            "r",
            &[
                (
                    0,
                    Ipv4Addr::new(10, 90, 0, 254),
                    PREFIX,
                    Ipv4Addr::new(10, 90, 0, 255),
                ),
                (
                    1,
                    Ipv4Addr::new(10, 90, 1, 254),
                    PREFIX,
                    Ipv4Addr::new(10, 90, 1, 255),
                ),
            ],
            true,
        )?)
    } else {
        None
    };
    let model_spec = ModelSpec {
        netns: segments.wire_path(),
        hosts,
        rate_bps: spec.rate_bps,
        rx_cost_ns: rx_cost_ns(),
        probe: Probe {
            from: 0,
            dst: Ipv4Addr::from(u32::from(NET) | 0xff),
            ttl: spec.ttl,
            at_ms: PROBE_AT_MS,
            stray: Some(STRAY),
            supply_ms: SUPPLY_INTERVAL_MS,
            suppliers: (2..2 + spec.suns).collect(),
        },
        heartbeat: [0, 1],
        hello_ms: spec.hello_ms,
        max_frames: spec.max_frames,
        max_ms: spec.max_ms,
        // Quiet for a timeout after the storm (within 0.2-2 s), so a
        // heartbeat silenced by it is seen to come back or not.
        quiet_ms: spec.timeout().clamp(200, 2000),
        bin_ms: 10,
    };
    let mut notes = Vec::new();
    let watch = match crate::measure::drops::DropWatch::start() {
        Ok(watch) => Some(watch),
        Err(e) => {
            notes.push(format!("the kernel's drops were not watched: {e}"));
            None
        }
    };
    let mut process = Launcher::helper(<StormModel as crate::endpoint::testbed::Helper>::ROLE)?;
    start_helper::<StormModel>(&mut process, model_spec)?;
    let model = stop_helper::<StormModel>(&mut process, spec.max_ms / 1000 + 30)?;
    process.finish();
    let kernel_drops = match watch.map(|w| w.finish()) {
        Some(Ok(drops)) => Some(drops),
        Some(Err(e)) => {
            notes.push(format!("the kernel's drops could not be read: {e}"));
            None
        }
        None => None,
    };
    let mut counts = Vec::new();
    for (name, host) in &linux {
        counts.push(linux_counts(&segments, &host.netns, &host.port, name)?);
    }
    let router = match &router_host {
        Some(r) => Some(linux_counts(&segments, &r.netns, &r.port, "router")?),
        None => None,
    };
    segments.teardown();
    if model.write_errors > 0 {
        notes.push(format!(
            "{} frames could not be written to their TAP",
            model.write_errors
        ));
    }
    Ok(BroadcastResult {
        model,
        linux: counts,
        router,
        notes,
        kernel_drops,
        stray: Some(STRAY),
    })
}

/// The storm as the runner measures it: one run a cell.
pub struct BroadcastMeasure {
    pub verbose: bool,
}

impl MeasureCell for BroadcastMeasure {
    type Cell = BroadcastSpec;
    type Data = BroadcastData;

    fn label(&self, spec: &BroadcastSpec) -> String {
        format!("broadcast, fix: {}", spec.fix.name())
    }

    fn key(&self, spec: &BroadcastSpec) -> CellKey {
        CellKey::of("broadcast", spec)
    }

    fn measure(&mut self, spec: &BroadcastSpec) -> Result<Measured<BroadcastData>, Interrupted> {
        let outcome = run(spec, self.verbose);
        crate::controller::measured("netns", outcome, |result| BroadcastData {
            params: spec.clone(),
            result,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn spec() -> BroadcastSpec {
        default_spec(Fix::None, 10_000)
    }

    #[test]
    fn bad_plans_are_refused_with_their_reason() {
        assert_eq!(check(&spec()), Ok(()));
        let too_few = BroadcastSpec {
            hosts: 2,
            suns: 0,
            linux: 0,
            ..spec()
        };
        assert_eq!(check(&too_few), Err(PlanError::TooFewHosts(2)));
        let too_many = BroadcastSpec {
            hosts: 100_000,
            suns: 100_000 - 2 - too_few.linux,
            ..too_few.clone()
        };
        assert_eq!(check(&too_many), Err(PlanError::TooManyHosts(100_000)));
        let cap = BroadcastSpec {
            max_frames: 0,
            ..spec()
        };
        assert_eq!(check(&cap), Err(PlanError::ZeroCap("--max-frames")));
        let outside = BroadcastSpec {
            sun_broadcast: Ipv4Addr::new(10, 91, 0, 0),
            ..spec()
        };
        assert!(
            check(&outside)
                .unwrap_err()
                .to_string()
                .contains("outside the hosts' network")
        );
        let host = BroadcastSpec {
            sun_broadcast: Ipv4Addr::new(10, 90, 0, 7),
            ..spec()
        };
        assert!(matches!(check(&host), Err(PlanError::NotBroadcast(_))));
    }

    #[test]
    fn eight_hosts_are_two_vaxen_four_suns_and_two_linux_hosts() {
        assert_eq!(default_mix(8), (4, 2));
        assert_eq!(default_mix(3), (1, 0));
        let hosts = model_hosts(&spec());
        assert_eq!(hosts.len(), 6);
        assert_eq!(hosts[2].broadcast, NET, "the Suns use the 0's broadcast");
        let fixed = model_hosts(&BroadcastSpec {
            fix: Fix::OneBroadcast,
            ..spec()
        });
        assert_eq!(fixed[2].broadcast, Ipv4Addr::new(10, 90, 0, 255));
        let routed = model_hosts(&BroadcastSpec {
            fix: Fix::Router,
            ..spec()
        });
        assert!(
            routed[2..]
                .iter()
                .all(|h| !h.on_net(Ipv4Addr::new(10, 90, 0, 1)))
        );
    }
}
