//! The placement and link options every experiment takes, and the agents
//! of a run between real hosts (`--from`, `--to`, `--key`).

use crate::controller::placement::{self, Ends};
use crate::record::testbed::LinkProfile;
use crate::record::testbed::LinkVia;
use crate::record::testbed::Placement;
use crate::testbed::link::LinkOverrides;
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
    /// veth when no impairment is asked for; netem or the emulator otherwise.
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
    /// `(from, to)` when either is given, the agents reached now
    /// ([`placement::reach`]).
    pub fn ends(&self, experiment: &str) -> anyhow::Result<Option<Ends>> {
        let (from, to) = (self.from.as_deref(), self.to.as_deref());
        Ok(placement::reach(from, to, self.key.as_deref(), experiment)?)
    }
}

/// The placements of an experiment that runs a list of them (login, output).
#[derive(Debug, Clone, Args)]
pub struct ListedArgs {
    /// Placements (a list): loopback, netns (server and users in two
    /// namespaces over --link; needs root). Default loopback; with
    /// --from/--to, `remote` (users at --from, server at --to) and `local`
    /// (both at --to), remote by default.
    #[arg(long, value_delimiter = ',')]
    pub placement: Option<Vec<String>>,
    /// Link profile of the netns placement.
    #[arg(long, default_value = "ether10")]
    pub link: String,
    /// How to build the netns link (auto: netem where the kernel has it).
    #[arg(long, value_enum, default_value = "auto")]
    pub link_via: ViaKind,
    /// The netns link's rate (50mbit); overrides --link's.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub link_rate: Option<String>,
    /// The netns link's one-way delay each direction (5ms).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub delay: Option<String>,
    /// The netns link's bottleneck queue: bytes (16K), packets (1000p) or
    /// time at its rate (200ms).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub queue: Option<String>,
    /// The netns link's queue discipline: droptail, codel or fq_codel.
    #[arg(long, value_name = "NAME")]
    pub queue_discipline: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

impl ListedArgs {
    pub fn placements(&self, experiment: &str) -> anyhow::Result<Vec<Placement>> {
        self.placements_with(experiment, None)
    }

    /// The placements with the netns link's queue discipline set to
    /// `discipline` (over `--queue-discipline`), for a cell that varies it.
    pub fn placements_with(
        &self,
        experiment: &str,
        discipline: Option<&str>,
    ) -> anyhow::Result<Vec<Placement>> {
        let ends = self.remote.ends(experiment)?;
        let names = self.placement.as_deref();
        let mut placements = placement::listed(names, &self.link, ends.as_ref())?;
        let discipline = discipline
            .map(str::to_string)
            .or(self.queue_discipline.clone());
        let overridden = self.link_rate.is_some()
            || self.delay.is_some()
            || self.queue.is_some()
            || discipline.is_some();
        if overridden {
            if !placements
                .iter()
                .any(|p| matches!(p, Placement::Netns { .. }))
            {
                bail!(
                    "--link-rate, --delay, --queue and --queue-discipline shape the netns placement's link: add netns to --placement"
                );
            }
            let profile = LinkProfile::with_overrides(&LinkOverrides {
                profile: Some(self.link.clone()),
                rate: self.link_rate.clone(),
                delay: self.delay.clone(),
                queue: self.queue.clone(),
                queue_discipline: discipline,
                ..Default::default()
            })?;
            for p in &mut placements {
                if let Placement::Netns { link, .. } = p {
                    *link = profile.clone();
                }
            }
        }
        placements
            .iter_mut()
            .for_each(|p| p.set_via(self.link_via.into()));
        Ok(placements)
    }
}

impl From<ViaKind> for LinkVia {
    fn from(kind: ViaKind) -> LinkVia {
        match kind {
            ViaKind::Auto => LinkVia::Auto,
            ViaKind::Emulator => LinkVia::Emulator,
        }
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
    pub link_rate: Option<String>,
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
    /// Bottleneck queue: bytes (16K), packets (1000p) or time at the
    /// link's rate (200ms).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub queue: Option<String>,
    /// The bottleneck queue's discipline: droptail, codel (RFC 8289) or
    /// fq_codel (RFC 8290); netlab's emulator runs it, or the kernel's
    /// codel/fq_codel where this kernel has it.
    #[arg(long, value_name = "NAME")]
    pub queue_discipline: Option<String>,
    /// netem's impairments in tc's words: "delay 10ms 2ms 25% distribution
    /// normal loss gemodel 1% 30% duplicate 1% corrupt 0.1% reorder 25%
    /// gap 5 rate 10mbit 24 slot 1ms 3ms packets 8" (tc-netem(8)).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub netem: Option<String>,
    /// Let jitter reorder packets, as netem does without a rate (by
    /// default a packet never overtakes the one sent before it).
    #[arg(long)]
    pub jitter_reorders: bool,
    /// Frames the sending interface holds at once (Sun's LANCE driver: 1).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub tx_queue: Option<i64>,
    /// With --tx-queue: the driver's time to hand over the next frame (150us).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub tx_service: Option<String>,
    /// A receiver that drops frames arriving closer than this (the 82586).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub rx_min_gap: Option<String>,
    /// The emulator spins instead of sleeping: µs instead of tens of µs
    /// added per packet, for a whole CPU.
    #[arg(long)]
    pub emulator_spin: bool,
    /// Pin the emulator to this CPU.
    #[arg(long, value_name = "CPU")]
    pub emulator_cpu: Option<usize>,
    /// Wire-sized packets through the emulator, checksums computed in
    /// software (no GSO super-packets, impaired or not).
    #[arg(long)]
    pub emulator_wire_packets: bool,
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
            || self.link_rate.is_some()
            || self.delay.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.mtu.is_some()
            || self.queue.is_some()
            || self.queue_discipline.is_some()
            || self.netem.is_some()
            || self.jitter_reorders
            || self.tx_queue.is_some()
            || self.tx_service.is_some()
            || self.rx_min_gap.is_some()
            || self.emulator_spin
            || self.emulator_cpu.is_some()
            || self.emulator_wire_packets
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
                    "link options (--link, --link-rate, --delay, --jitter, --loss, --mtu, --queue, --queue-discipline, --netem, --tx-queue, --tx-service, --rx-min-gap, --link-via, --capture, --pcap) need --placement netns"
                );
            }
            return Ok(Placement::Loopback);
        }
        let profile = LinkProfile::with_overrides(&LinkOverrides {
            profile: self.link.clone(),
            rate: self.link_rate.clone(),
            delay: self.delay.clone(),
            jitter: self.jitter.clone(),
            loss: self.loss.clone(),
            mtu: self.mtu,
            queue: self.queue.clone(),
            queue_discipline: self.queue_discipline.clone(),
            netem: self.netem.clone(),
            jitter_reorders: self.jitter_reorders,
            tx_queue: self.tx_queue,
            tx_service: self.tx_service.clone(),
            rx_min_gap: self.rx_min_gap.clone(),
            emulator_spin: self.emulator_spin,
            emulator_cpu: self.emulator_cpu,
            emulator_wire_packets: self.emulator_wire_packets,
        })?;
        Ok(Placement::Netns {
            link: profile,
            via: self.link_via.into(),
            capture: self.capture || self.pcap.is_some(),
            pcap: self.pcap.clone(),
            verbose: self.verbose,
        })
    }
}
