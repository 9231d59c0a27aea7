//! stream's share of the lab: 1981's 4 MB in 1 KB records (Bill Joy's
//! transfer) on loopback, profiled by layer where this host can, then over
//! an emulated 10 Mbit/s Ethernet watched on the wire, then 1988's sound
//! barrier (Sun's one-packet LANCE driver) on that Ethernet and its fix;
//! then today's per-byte cost 1988 did not have: the same bulk transfer
//! over TLS 1.3 beside plain TCP (#65).

use super::cell::{StreamCell, StreamConfig, StreamMeasure};
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};
use crate::controller::profile::Profiling;
use crate::endpoint::bulk::types::Amount;
use crate::record::testbed::Placement;
use crate::testbed::netns::has_net_admin;

/// Joy's 4 MB transfers per loopback run (about half a second here).
pub const JOY_LOOPBACK_TRANSFERS: u64 = 64;

/// Van Jacobson's "sound barrier" (003) on `ether10`: Sun's if_le.c
/// handing the LANCE one frame at a time, each hand-over after the
/// interrupt's service (his "more than 150us", then the service that
/// gives his 550 KB/s), and the same with a 32-frame queue (his fix). 1 MB
/// in 8 KB records each; a queue deep enough that tail drop plays no part.
pub fn sound_barrier(ether10: &Placement) -> Vec<StreamConfig> {
    let barrier_service_us = crate::testbed::impair::service_for_throughput(
        1408 + 40,
        10_000_000,
        Some(crate::record::testbed::Framing::Ethernet),
        550.0 * 1024.0 * 1448.0 / 1408.0,
    )
    .round() as u64;
    [(1, 150), (1, barrier_service_us), (32, 150)]
        .into_iter()
        .map(|(queue, service_us)| {
            let mut placement = ether10.clone();
            if let Placement::Netns { link, .. } = &mut placement {
                link.impair.tx_queue = Some(queue);
                link.impair.tx_service_us = service_us;
                link.queue_bytes = Some(256 << 10);
            }
            StreamConfig {
                amount: Amount::Bytes(1 << 20),
                record: 8192,
                placement,
                ..StreamConfig::joy_1981()
            }
        })
        .collect()
}

/// The lab's stream runs, in the order they run.
#[derive(Debug, Clone)]
pub struct StreamLab {
    /// 1981: Bill Joy's 4 MB in 1 KB records, on loopback.
    pub joy: StreamConfig,
    pub joy_repeat: u32,
    /// The same over an emulated 10 Mbit/s Ethernet (as root).
    pub joy_ether10: Option<StreamConfig>,
    pub ether10_repeat: u32,
    /// Why there is no run over the emulated Ethernet, if there is none.
    pub ether10_skipped: String,
    /// 1988's sound barrier on that Ethernet (as root): Sun's one-packet
    /// driver at two service times, then a deep queue.
    pub barrier: Vec<StreamConfig>,
    /// Profile the 1981 cells by layer (where this host can), to set
    /// beside Berkeley's split; off across hosts (the sampler sees this
    /// host only).
    pub profile_joy: bool,
    /// Today: a bulk transfer over TLS 1.3 (AES-128-GCM), each run beside
    /// the same transfer in the clear.
    pub tls: StreamConfig,
    pub tls_repeat: u32,
}

/// The lab's encrypted transfer: 128 KB writes sealed into 16 KB records
/// with AES-128-GCM (TLS 1.3's mandatory cipher, RFC 8446 §9.1), `bytes`
/// of them.
pub fn encrypted(bytes: u64, placement: Placement) -> StreamConfig {
    StreamConfig {
        amount: Amount::Bytes(bytes),
        record: 128 << 10,
        tls: Some(crate::endpoint::tls::TlsChoice {
            cipher: crate::checksum::aead::Cipher::Aes128Gcm,
            record: None,
        }),
        placement,
        ..StreamConfig::default()
    }
}

impl StreamLab {
    pub fn new(profile: Profile) -> StreamLab {
        // On loopback Joy's 4 MB take a few ms, too short for the CPU
        // figures to mean much (a cold start, a page fault, one tick of
        // the sampled user/system split): each run moves the transfer
        // JOY_LOOPBACK_TRANSFERS times over and the report gives the time
        // per 4 MB. Over the emulated Ethernet 4 MB already take 3.4 s.
        let joy = StreamConfig {
            amount: Amount::Bytes(JOY_LOOPBACK_TRANSFERS * (4 << 20)),
            ..StreamConfig::joy_1981()
        };
        let ether10 = has_net_admin().then(Placement::ether10);
        StreamLab {
            joy,
            joy_repeat: profile.pick(2, 5, 20),
            barrier: ether10.as_ref().map_or_else(Vec::new, sound_barrier),
            // The 1981 transfer over the Ethernet is watched on the wire.
            joy_ether10: ether10.map(|mut placement| {
                if let Placement::Netns { capture, .. } = &mut placement {
                    *capture = true;
                }
                StreamConfig {
                    placement,
                    ..StreamConfig::joy_1981()
                }
            }),
            ether10_repeat: profile.pick(1, 2, 5),
            ether10_skipped:
                "stream over netns ether10 (the netns placement needs CAP_NET_ADMIN; run as root)"
                    .into(),
            profile_joy: true,
            // Half a second or less a run on loopback here (2 to 3 GB/s).
            tls: encrypted(
                profile.pick(256 << 20, 1 << 30, 4 << 30),
                Placement::Loopback,
            ),
            tls_repeat: profile.pick(1, 1, 5),
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }

    /// Runs `config` `repeat` times and shows its table.
    fn transfers(
        lab: &mut Lab,
        config: &StreamConfig,
        repeat: u32,
        title: String,
    ) -> Result<(), LabError> {
        let cells = StreamCell::repeats(config, repeat);
        let records = lab.runner.grid(&mut StreamMeasure::default(), &cells)?;
        lab.measured(
            report::stream_section(&title, &records)
                + &crate::report::profile::then_and_now(&records),
        )
    }
}

impl LabPart for StreamLab {
    fn across(&mut self, across: &Across) {
        // A real path's speed is unknown: the source's 4 MB.
        self.joy = StreamConfig {
            placement: across.path(),
            ..StreamConfig::joy_1981()
        };
        self.joy_ether10 = None;
        self.barrier.clear();
        self.profile_joy = false;
        // A real path's speed is unknown: 64 MB, a second at 500 Mbit/s.
        self.tls = encrypted(64 << 20, across.path());
        self.ether10_skipped = format!(
            "stream over an emulated 10 Mbit/s Ethernet: this lab runs across the real path from {} to {}",
            across.from, across.to
        );
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        // 1981: Bill Joy's 4 MB in 1024-byte records, profiled by layer
        // when this host can (root) to set beside Berkeley's split of its CPU.
        let restore = match (
            self.profile_joy && !lab.runner.is_profiling(),
            Profiling::check(),
        ) {
            (true, Ok(profiling)) => Some(lab.runner.swap_profiling(Some(profiling))),
            (true, Err(e)) => {
                eprintln!("lab: stream cells not profiled by layer: {e}");
                None
            }
            (false, _) => None,
        };
        let joy = &self.joy;
        eprintln!("lab: stream, {} ({} runs)", joy.describe(), self.joy_repeat);
        Self::transfers(lab, joy, self.joy_repeat, joy.describe())?;

        // 1981 again, over a 10 Mbit/s Ethernet between two hosts (namespaces).
        match &self.joy_ether10 {
            Some(over_ether) => {
                eprintln!(
                    "lab: stream over netns ether10, {} ({} runs)",
                    over_ether.describe(),
                    self.ether10_repeat
                );
                let title = format!(
                    "{} over an emulated 10 Mbit/s Ethernet",
                    over_ether.describe()
                );
                Self::transfers(lab, over_ether, self.ether10_repeat, title)?;
            }
            None => lab.skipped(self.ether10_skipped.clone())?,
        }
        if let Some(before) = restore {
            lab.runner.swap_profiling(before);
        }

        // 1988: Sun's one-packet LANCE driver and its "sound barrier".
        if !self.barrier.is_empty() {
            eprintln!(
                "lab: 1988's sound barrier over netns ether10 ({} runs)",
                self.barrier.len()
            );
            let cells: Vec<StreamCell> = self
                .barrier
                .iter()
                .flat_map(|config| StreamCell::repeats(config, 1))
                .collect();
            let records = lab.runner.grid(&mut StreamMeasure::default(), &cells)?;
            let mut text =
                report::stream_table("1988's sound barrier, over netns ether10", &records);
            text.push_str(&report::barrier_text(&records).unwrap_or_default());
            lab.measured(text)?;
        }

        // Today: the per-byte cost 1988 did not have, beside plain TCP.
        eprintln!(
            "lab: stream, {} ({} runs, each beside plain TCP)",
            self.tls.describe(),
            self.tls_repeat
        );
        let cells = StreamCell::beside_plain(&self.tls, self.tls_repeat);
        let records = lab.runner.grid(&mut StreamMeasure::default(), &cells)?;
        lab.measured(report::stream_section(
            &format!("today's per-byte cost: {}", self.tls.describe()),
            &records,
        ))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joy_s_transfer_in_both_profiles() {
        let quick = StreamLab::new(Profile::Quick);
        assert_eq!(quick.joy.record, 1024);
        assert_eq!(
            quick.joy.amount,
            Amount::Bytes(JOY_LOOPBACK_TRANSFERS * (4 << 20))
        );
        assert_eq!(quick.joy_repeat, 5);
        assert_eq!(StreamLab::new(Profile::Full).joy_repeat, 20);
        assert_eq!(StreamLab::new(Profile::Smoke).joy_repeat, 2);
        // One encrypted pair in the quick profile, its config one a
        // stream accepts.
        assert_eq!(quick.tls_repeat, 1);
        assert!(quick.tls.validate().is_ok());
        assert_eq!(StreamCell::beside_plain(&quick.tls, 1).len(), 2);
    }

    #[test]
    fn across_a_path_nothing_is_emulated() {
        let mut part = StreamLab::new(Profile::Quick);
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, _| true,
        });
        assert_eq!(
            part.joy.placement,
            Placement::Remote {
                from: "a:5310".into(),
                to: "b:5310".into()
            }
        );
        assert!(part.joy_ether10.is_none());
        assert!(part.barrier.is_empty());
        assert!(!part.profile_joy);
        assert!(part.ether10_skipped.contains("real path"));
        assert_eq!(part.tls.placement, part.joy.placement);
        assert!(part.tls.tls.is_some());
    }
}
