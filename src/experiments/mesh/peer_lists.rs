//! `netlab mesh peers`: the peer lists a fleet's agents would probe
//! (`peers.rs`), from an inventory and a probe budget, sending no
//! traffic: each agent's share of its rack, its zone and the other zones,
//! the cycles until every ordered pair has been probed, the most probes
//! one host is sent in a cycle, and a few agents' lists.

use crate::experiments::mesh::inventory;
use crate::fleet::HostLabels;
use crate::fleet::peers::{PeerPlan, peers_within};
use crate::options::Output;
use anyhow::bail;
use clap::Args;
use std::fmt::Write;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct PeersArgs {
    /// The agents: a list, a file (`HOST[:PORT] zone=Z rack=R` a line) or
    /// `dns:NAME`.
    #[arg(long)]
    pub agents: String,
    /// The probe cycle.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "PERIOD")]
    pub every: Duration,
    /// The probe budget: probe calls a second that reach each agent, as
    /// caller and as server.
    #[arg(long, default_value_t = 10.0, value_name = "CALLS_PER_S")]
    pub probe_rate: f64,
    /// Calls a probe makes (its round trips and loss are read from them).
    #[arg(long, default_value_t = crate::experiments::mesh::record::DEFAULT_PROBE_CALLS,
          value_parser = clap::value_parser!(u32).range(5..=10_000))]
    pub probe_calls: u32,
    /// Seed of the samples' order and the agents' start times.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Agents whose first cycle's list is printed.
    #[arg(long, default_value_t = 3)]
    pub show: usize,
    #[arg(long)]
    pub json: bool,
}

/// The most hosts a plan reads from a file: a plan resolves and reaches
/// nothing, so it takes fleets larger than a mesh runs
/// ([`inventory::MAX_AGENTS`]).
pub const MAX_PLANNED: usize = 20_000;

/// The hosts `spec` names: a file's names and labels as written (up to
/// [`MAX_PLANNED`], nothing resolved), else the agents a mesh would reach.
fn fleet(spec: &str) -> anyhow::Result<Vec<HostLabels>> {
    let path = std::path::Path::new(spec);
    if !spec.starts_with("dns:") && path.is_file() {
        let text = crate::record::files::read_text(
            path,
            crate::record::files::MAX_SMALL_FILE,
            "an inventory",
        )?;
        let entries = crate::fleet::hosts::entries_up_to(&text, MAX_PLANNED)
            .map_err(|why| anyhow::anyhow!("--agents {spec}: {why}"))?;
        return Ok(entries
            .into_iter()
            .map(|(_, (name, labels))| HostLabels::of(&name, &labels))
            .collect());
    }
    Ok(inventory::parse(spec)?
        .iter()
        .map(|a| HostLabels::of(&a.name, &a.labels))
        .collect())
}

pub fn print(args: &PeersArgs, out: &mut Output) -> anyhow::Result<()> {
    if !(args.probe_rate.is_finite() && args.probe_rate > 0.0) {
        bail!(
            "--probe-rate {}: give more than 0 calls a second",
            args.probe_rate
        );
    }
    let hosts = fleet(&args.agents)?;
    let peers = peers_within(args.probe_rate, args.every, args.probe_calls);
    let started = Instant::now();
    let plan = PeerPlan::new(&hosts, peers, args.seed).map_err(|e| {
        anyhow::anyhow!(
            "netlab mesh peers: {e} ({peers} peers a cycle from --probe-rate {} over --every {} at {} calls a probe)",
            args.probe_rate,
            humantime::format_duration(args.every),
            args.probe_calls
        )
    })?;
    let cycles = plan.coverage_cycles();
    let (fewest, most) = plan.probes_per_agent();
    let most_probed = plan.most_probed();
    let planned_s = started.elapsed().as_secs_f64();
    let zones: std::collections::BTreeSet<&str> = hosts.iter().map(|h| h.zone.as_str()).collect();
    let shown: Vec<(String, Vec<String>)> = (0..plan.hosts().len().min(args.show))
        .map(|i| {
            let names = plan
                .peers_of(i, 0)
                .into_iter()
                .map(|p| plan.hosts()[p as usize].name.clone())
                .collect();
            (plan.hosts()[i].name.clone(), names)
        })
        .collect();
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "mesh-peers",
            "hosts": hosts.len(),
            "zones": zones.len(),
            "peers_per_cycle": peers,
            "probes_per_agent": [fewest, most],
            "most_probed": most_probed,
            "coverage_cycles": cycles,
            "coverage_s": cycles as f64 * args.every.as_secs_f64(),
            "seed": args.seed,
            "planned_s": planned_s,
            "lists": shown.iter().map(|(a, p)| serde_json::json!({"agent": a, "cycle": 0, "peers": p})).collect::<Vec<_>>(),
        }))?;
        return Ok(());
    }
    let mut text = String::new();
    let _ = writeln!(
        text,
        "netlab mesh peers: {} hosts in {} zone(s); {peers} peers a cycle each ({} calls/s over {} at {} calls a probe, as caller and as server)",
        hosts.len(),
        zones.len(),
        args.probe_rate,
        humantime::format_duration(args.every),
        args.probe_calls
    );
    let _ = writeln!(
        text,
        "each agent probes {fewest}-{most} peers a cycle (every host of its rack, samples of its zone and of the others); the most one host is sent in a cycle: {most_probed}"
    );
    let _ = writeln!(
        text,
        "every ordered pair is probed at least once in any {cycles} consecutive cycles ({}); planned in {planned_s:.2} s",
        humantime::format_duration(Duration::from_secs(cycles * args.every.as_secs()))
    );
    for (agent, peers) in &shown {
        let _ = writeln!(text, "{agent}, cycle 1: {}", peers.join(" "));
    }
    out.text(&text)?;
    Ok(())
}
