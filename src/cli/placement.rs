//! The placement and link options every experiment takes, and the agents
//! of a run between real hosts (`--from`, `--to`, `--key`).

use crate::endpoint::agent::key::Key;
use crate::endpoint::agent::policy::canonical;
use crate::experiment::remote;
use crate::testbed::link::{LinkOverrides, LinkProfile};
use crate::testbed::netns::has_net_admin;
use crate::testbed::{LinkVia, Placement};
use anyhow::bail;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlacementKind {
    /// Both endpoints on this host over 127.0.0.1.
    Loopback,
    /// Two network namespaces joined by an emulated link (needs root).
    Netns,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ViaKind {
    /// veth when no delay, jitter or loss is asked for; netem or the emulator otherwise.
    Auto,
    /// Always netlab's user-space wire emulator.
    Emulator,
}

/// The ends of a run between real hosts.
#[derive(Debug, Clone, Default, Args)]
pub struct RemoteArgs {
    /// The sending, calling or typing end: `local` or an agent's HOST[:PORT]
    /// (port 5310 by default). With --from or --to the placement is remote.
    #[arg(long, value_name = "AGENT")]
    pub from: Option<String>,
    /// The receiving or serving end (and where cksum runs): `local` or an
    /// agent's HOST[:PORT].
    #[arg(long, value_name = "AGENT")]
    pub to: Option<String>,
    /// The agents' pre-shared key (`netlab agent keygen`).
    #[arg(long, value_name = "FILE", env = "NETLAB_KEY_FILE")]
    pub key: Option<PathBuf>,
}

impl RemoteArgs {
    /// `(from, to)` when either is given (the other is `local`), with the
    /// agents reached and authenticated now: a wrong key, an unreachable or
    /// busy agent is one clear error before any cell runs.
    pub fn ends(&self, experiment: &str) -> anyhow::Result<Option<(String, String)>> {
        if self.from.is_none() && self.to.is_none() {
            return Ok(None);
        }
        let from = self.from.clone().unwrap_or_else(|| "local".into());
        let to = self.to.clone().unwrap_or_else(|| "local".into());
        let agents: Vec<&String> = [&from, &to]
            .into_iter()
            .filter(|name| name.as_str() != "local")
            .collect();
        if !agents.is_empty() {
            let Some(path) = &self.key else {
                bail!(
                    "{} needs the agents' key: --key FILE or NETLAB_KEY_FILE (netlab agent keygen makes one)",
                    agents[0]
                );
            };
            remote::configure(Key::load(path)?, canonical(experiment));
            for agent in agents {
                remote::link(agent)?;
            }
        }
        Ok(Some((from, to)))
    }
}

#[derive(Debug, Clone, Args)]
pub struct PlacementArgs {
    /// Where the endpoints run.
    #[arg(long, value_enum, default_value = "loopback")]
    pub placement: PlacementKind,
    /// Link profile for --placement netns: ether10, ether100, gige, wan.
    #[arg(long, value_name = "PROFILE")]
    pub link: Option<String>,
    /// Link rate (10mbit, 1gbit, ...); overrides the profile's.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// One-way delay each direction (10ms).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub delay: Option<String>,
    /// Uniform jitter around the delay (2ms).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub jitter: Option<String>,
    /// Packet loss each direction (1%, 0.5).
    #[arg(long, value_name = "PERCENT", allow_hyphen_values = true)]
    pub loss: Option<String>,
    /// Link MTU, 576 to 65535.
    #[arg(long, allow_hyphen_values = true)]
    pub mtu: Option<i64>,
    /// Bottleneck queue in bytes (16K).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub queue: Option<String>,
    /// How to build the link.
    #[arg(long, value_enum, default_value = "auto")]
    pub link_via: ViaKind,
    /// Record every frame on the link and report the wire view.
    #[arg(long)]
    pub capture: bool,
    /// Also write the captured frames' headers to this pcap file (implies --capture).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Print every ip/tc command the testbed runs.
    #[arg(short, long)]
    pub verbose: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

impl PlacementArgs {
    fn link_options_given(&self) -> bool {
        self.link.is_some()
            || self.rate.is_some()
            || self.delay.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.mtu.is_some()
            || self.queue.is_some()
            || self.capture
            || self.pcap.is_some()
            || self.link_via != ViaKind::Auto
    }

    /// The validated placement; errors name the bad option before anything
    /// is created. With `--from`/`--to`, the agents are reached now.
    pub fn placement(&self, experiment: &str) -> anyhow::Result<Placement> {
        if (self.remote.from.is_some() || self.remote.to.is_some())
            && (self.placement != PlacementKind::Loopback || self.link_options_given())
        {
            bail!("--from/--to run between real hosts: they take no --placement or link options");
        }
        if let Some((from, to)) = self.remote.ends(experiment)? {
            return Ok(Placement::Remote { from, to });
        }
        if self.placement == PlacementKind::Loopback {
            if self.link_options_given() {
                bail!(
                    "link options (--link, --rate, --delay, --jitter, --loss, --mtu, --queue, --link-via, --capture, --pcap) need --placement netns"
                );
            }
            return Ok(Placement::Loopback);
        }
        let profile = LinkProfile::with_overrides(&LinkOverrides {
            profile: self.link.clone(),
            rate: self.rate.clone(),
            delay: self.delay.clone(),
            jitter: self.jitter.clone(),
            loss: self.loss.clone(),
            mtu: self.mtu,
            queue: self.queue.clone(),
        })?;
        Ok(Placement::Netns {
            link: profile,
            via: match self.link_via {
                ViaKind::Auto => LinkVia::Auto,
                ViaKind::Emulator => LinkVia::Emulator,
            },
            capture: self.capture || self.pcap.is_some(),
            pcap: self.pcap.clone(),
            verbose: self.verbose,
        })
    }
}

/// The placements a list such as `loopback,netns` names (`local` and
/// `remote`, the 1989 table's words, too), netns ones over the `link`
/// profile; refused up front when a netns one cannot be made (no root) or a
/// name or profile is unknown. Between real hosts (`ends` from
/// [`RemoteArgs::ends`]), as in 1989: `local` is both ends on the `--to`
/// host, `remote` is `--from` to `--to`.
pub fn named(
    option: &str,
    names: &[String],
    link: &str,
    ends: Option<&(String, String)>,
) -> anyhow::Result<Vec<Placement>> {
    names
        .iter()
        .map(|name| match (name.as_str(), ends) {
            ("loopback" | "local", Some((_, to))) => Ok(Placement::Remote {
                from: to.clone(),
                to: to.clone(),
            }),
            ("netns" | "remote", Some((from, to))) => Ok(Placement::Remote {
                from: from.clone(),
                to: to.clone(),
            }),
            ("loopback" | "local", None) => Ok(Placement::Loopback),
            ("netns" | "remote", None) => {
                if !has_net_admin() {
                    bail!("{option} {name} needs CAP_NET_ADMIN (run as root)");
                }
                Ok(Placement::Netns {
                    link: LinkProfile::named(link)?,
                    via: LinkVia::Auto,
                    capture: false,
                    pcap: None,
                    verbose: false,
                })
            }
            (other, _) => {
                bail!("unknown placement \"{other}\" for {option}: expected loopback or netns")
            }
        })
        .collect()
}

/// The placements of an experiment that takes a list (`--placement`):
/// loopback by default, or with `--from`/`--to` the run from `--from` to
/// `--to` (`remote`) unless the list asks for `local` too.
pub fn listed(
    names: Option<&[String]>,
    link: &str,
    remote: &RemoteArgs,
    experiment: &str,
) -> anyhow::Result<Vec<Placement>> {
    let ends = remote.ends(experiment)?;
    let default = [if ends.is_some() { "remote" } else { "loopback" }.to_string()];
    named(
        "--placement",
        names.unwrap_or(&default),
        link,
        ends.as_ref(),
    )
}
