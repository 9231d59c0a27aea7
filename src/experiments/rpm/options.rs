//! `netlab rpm`: responsiveness under working conditions
//! (draft-ietf-ippm-responsiveness-06) on loopback, a netns link of any
//! profile and queue discipline, or between agents.

use super::cell::RpmMeasure;
use super::record::RpmParams;
use crate::endpoint::rpm::bounds::{DRAFT_MAX_CONNECTIONS, check_bounds};
use crate::endpoint::rpm::types::{Direction, LoadSockets};
use crate::options::Output;
use crate::options::run::RunOutcome;
use crate::units::{parse_duration, parse_size};
use anyhow::bail;
use clap::Args;

#[derive(Debug, Args)]
pub struct RpmArgs {
    /// Which way the load goes: down (serving end to measuring end), up,
    /// or both at once.
    #[arg(long, value_enum, default_value = "down")]
    pub direction: Direction,
    /// Load-generating connections at most, per direction (the draft's
    /// MNP, 16); more needs --max-connections.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub connections: usize,
    /// Raises the cap on --connections (at most 256).
    #[arg(long, value_name = "N", default_value_t = DRAFT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Probe pairs (one foreign, one self) a second, at most 100 (the
    /// draft's MPS); fewer where they would take over 5% of the goodput.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub probe_rate: u32,
    /// The longest the test may run under load (it ends sooner once
    /// goodput and responsiveness saturate); 2s to 60s.
    #[arg(long, value_name = "TIME", default_value = "20s", value_parser = parse_duration)]
    pub duration: std::time::Duration,
    /// Foreign probes on the idle path, before the load.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub idle_probes: u32,
    /// TCP_NOTSENT_LOWAT on the sending ends (16K): unsent bytes a socket
    /// may hold before it stops taking more.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub notsent_lowat: Option<u64>,
    /// SO_SNDBUF on the load connections.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF on the load connections.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub rcvbuf: Option<u64>,
    /// TCP congestion control on the sending ends (cubic, bbr, reno).
    #[arg(long, value_name = "NAME")]
    pub congestion: Option<String>,
    /// Also measure the path with irtt (Debian's `irtt`: UDP round trips
    /// every 10 ms), idle and under the load, beside netlab's probes in
    /// one table. Loopback and netns placements.
    #[arg(long)]
    pub irtt: bool,
    #[command(flatten)]
    pub place: crate::options::placement::PlacementArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

impl RpmArgs {
    pub fn json(&self) -> bool {
        self.run.json
    }

    /// The cell, each limit checked before anything starts.
    pub fn params(&self) -> anyhow::Result<RpmParams> {
        check_bounds(
            self.probe_rate,
            self.max_connections,
            self.duration.as_secs_f64(),
            self.idle_probes,
        )
        .map_err(anyhow::Error::msg)?;
        if self.connections == 0 {
            bail!("--connections 0: the load needs at least one connection");
        }
        if self.connections > self.max_connections {
            bail!(
                "--connections {}: more than {} load-generating connections (the draft's MNP is 16); raise the cap with --max-connections",
                self.connections,
                self.max_connections
            );
        }
        let size = |what: &str, v: Option<u64>| -> anyhow::Result<Option<u32>> {
            v.map(|b| {
                if b == 0 || b > u64::from(i32::MAX as u32) {
                    bail!("--{what} {b}: from 1 byte to 2 GiB");
                }
                Ok(b as u32)
            })
            .transpose()
        };
        if let Some(name) = &self.congestion
            && (name.is_empty()
                || name.len() > 15
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        {
            bail!("--congestion \"{name}\": a congestion control's name (cubic, bbr, reno)");
        }
        if self.irtt {
            if self.place.remote.from.is_some() || self.place.remote.to.is_some() {
                bail!(
                    "--irtt runs irtt's server and client in netlab's namespaces or on loopback: between agents, run `irtt server` on the --to host and `irtt client` beside netlab yourself"
                );
            }
            crate::measure::irtt::available()?;
        }
        let placement = self.place.placement("rpm")?;
        if let Some(name) = &self.congestion
            && !matches!(placement, crate::record::testbed::Placement::Remote { .. })
            && let Err(e) = crate::endpoint::rpm::sockets::congestion_available(name)
        {
            bail!(
                "--congestion: congestion control \"{name}\" is not available here: {e} (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
            );
        }
        Ok(RpmParams {
            placement,
            direction: self.direction,
            max_connections: self.connections,
            probe_rate: self.probe_rate,
            max_duration_s: self.duration.as_secs_f64(),
            idle_probes: self.idle_probes,
            sockets: LoadSockets {
                notsent_lowat: size("notsent-lowat", self.notsent_lowat)?,
                sndbuf: size("sndbuf", self.sndbuf)?,
                rcvbuf: size("rcvbuf", self.rcvbuf)?,
                congestion: self.congestion.clone(),
            },
            label: None,
            design: None,
            irtt: self.irtt,
        })
    }
}

pub fn run(args: RpmArgs, out: &mut Output) -> anyhow::Result<()> {
    let params = args.params()?;
    args.run.measure(out, |runner| {
        let records = runner.grid(&mut RpmMeasure, &[params])?;
        let doc = serde_json::json!({ "experiment": "rpm", "records": records });
        let text = super::report::table(&records);
        Ok(RunOutcome::grid(records, doc, text))
    })
}
