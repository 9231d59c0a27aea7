//! `netlab broadcast`: the 1990 broadcast storm on an emulated Ethernet of
//! 1990 hosts (netlab's model, on TAP devices) and today's Linux hosts
//! (namespaces), with each of the document's fixes as a factor.

use super::cell::{BroadcastMeasure, NET, TEN_MBIT, check, default_mix};
use super::record::{BroadcastData, BroadcastSpec, Fix};
use crate::options::Output;
use crate::options::run::RunOutcome;
use crate::record::Record;
use clap::Args;
use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BroadcastArgs {
    /// Hosts on the Ethernet: two VAXen (the heartbeat), Suns and Linux hosts.
    #[arg(long, default_value_t = 8)]
    pub hosts: usize,
    /// Suns among them (default: all but the VAXen and the Linux hosts).
    #[arg(long)]
    pub suns: Option<usize>,
    /// Linux hosts among them (default: one for every three beyond the VAXen).
    #[arg(long)]
    pub linux: Option<usize>,
    /// The broadcast address the Suns and the Linux hosts are given (the
    /// VAXen use 10.90.0.255); the hosts' network is 10.90.0.0/24.
    #[arg(long, default_value_t = NET)]
    pub sun_broadcast: Ipv4Addr,
    /// TTL of the probe (routed's UDP: 4.3BSD's UDP_TTL, 30).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u8).range(1..))]
    pub ttl: u8,
    /// The run stops itself after this many frames from the 1990 hosts.
    #[arg(long, default_value_t = 100_000)]
    pub max_frames: u64,
    /// The run stops itself after this long.
    #[arg(long, default_value = "10s", value_parser = crate::units::parse_duration)]
    pub max_time: Duration,
    /// Heartbeat interval, ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub hello_ms: u64,
    /// Heartbeat timeout (a scaled RECNXINTERVAL), ms.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub timeout_ms: u64,
    /// The timeout under the longer-timeout fix, ms.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub longer_timeout_ms: u64,
    /// The fixes to run, each a run of its own.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,one-broadcast,router,no-link-broadcast-forwarding,longer-timeout"
    )]
    pub fixes: Vec<Fix>,
    /// Log each command that builds the network.
    #[arg(short, long)]
    pub verbose: bool,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

impl BroadcastArgs {
    pub fn json(&self) -> bool {
        self.run.json
    }

    /// One spec a fix, checked.
    pub fn specs(&self) -> anyhow::Result<Vec<BroadcastSpec>> {
        let linux = self.linux.unwrap_or(default_mix(self.hosts).1);
        let mut specs = Vec::new();
        let mut seen = Vec::new();
        for &fix in &self.fixes {
            if seen.contains(&fix) {
                continue;
            }
            seen.push(fix);
            let spec = BroadcastSpec {
                hosts: self.hosts,
                suns: self
                    .suns
                    .unwrap_or_else(|| self.hosts.saturating_sub(2 + linux)),
                linux,
                sun_broadcast: self.sun_broadcast,
                ttl: self.ttl,
                max_frames: self.max_frames,
                max_ms: self.max_time.as_millis() as u64,
                hello_ms: self.hello_ms,
                timeout_ms: self.timeout_ms,
                longer_timeout_ms: self.longer_timeout_ms,
                fix,
                rate_bps: TEN_MBIT,
            };
            check(&spec)?;
            specs.push(spec);
        }
        Ok(specs)
    }
}

pub fn run(args: BroadcastArgs, out: &mut Output) -> anyhow::Result<()> {
    let specs = args.specs()?;
    if !crate::testbed::netns::has_net_admin() {
        anyhow::bail!(
            "netlab broadcast builds network namespaces, a bridge and TAP devices: it needs root (CAP_NET_ADMIN)"
        );
    }
    args.run.measure(out, |runner| {
        let records = runner.grid(
            &mut BroadcastMeasure {
                verbose: args.verbose,
            },
            &specs,
        )?;
        Ok(measured(&args, records))
    })
}

/// The records with each run's reading beside it, and the table.
fn measured(
    args: &BroadcastArgs,
    records: Vec<Record<BroadcastData>>,
) -> RunOutcome<BroadcastData> {
    // Each run's reading (what the text table shows) beside its record.
    let readings: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            let reading = r.data.result.as_ref().map(|result| result.reading(&r.data.params));
            serde_json::json!({ "fix": r.data.params.fix.name(), "reading": reading, "error": r.error })
        })
        .collect();
    let doc = serde_json::json!({
        "experiment": "broadcast",
        "records": records,
        "readings": readings,
    });
    let text = format!(
        "netlab broadcast: one RIP supply to the all-1's broadcast on a 10 Mbit/s Ethernet of {} hosts\n{}",
        args.hosts,
        super::report::table(&records)
    );
    RunOutcome::grid(records, doc, text)
}
