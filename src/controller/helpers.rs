//! The netns side of a run: the testbed, and the helper processes that
//! carry (the wire emulator) and watch (the capture) its link.

use super::launcher::{End, Launcher};
use super::processes::{ControlError, EndpointProcess, Wait};
use crate::endpoint::testbed::{Helper, Start, Stop};
use crate::record::testbed::{LinkVia, Placement, Realisation};
use crate::testbed::{
    capture::{Capture, CaptureSpec},
    emulator::{Emulator, EmulatorSpec, TunSide},
    netns::Testbed,
};
use std::marker::PhantomData;

/// A run's ends from its bed: here, beside the bed it needs (the
/// launcher itself knows placements, not beds).
impl Launcher {
    /// The ends of a netns bed (or loopback when there is none).
    pub fn for_bed(bed: Option<&Bed>) -> Launcher {
        match bed {
            None => Launcher::loopback(),
            Some(bed) => Launcher::for_testbed(&bed.testbed),
        }
    }

    /// The ends of `placement`: its bed's for netns, its agents' for remote.
    pub fn for_run(placement: &Placement, bed: Option<&Bed>) -> Result<Launcher, ControlError> {
        match placement {
            Placement::Remote { from, to } => Launcher::remote(from, to),
            _ => Ok(Launcher::for_bed(bed)),
        }
    }
}

/// Default queue of the wire emulator when the profile names none: enough
/// for a window of a few MB, so an unshaped delayed link is not queue-bound.
const EMULATOR_DEFAULT_QUEUE: u64 = 8 << 20;

/// The emulator and capture processes of a netns run, and the link. Fields
/// drop in order: the processes go before their namespaces.
pub struct Bed {
    emulator: Option<EndpointProcess>,
    capture: Option<EndpointProcess>,
    pub testbed: Testbed,
    seed: u64,
}

impl Bed {
    /// Builds the link for a netns placement (`None` for loopback), starting
    /// the emulator and the capture when the placement needs them.
    pub fn create(placement: &Placement) -> Result<Option<Bed>, ControlError> {
        let Placement::Netns {
            link,
            via,
            capture,
            pcap,
            verbose,
        } = placement
        else {
            return Ok(None);
        };
        let testbed = Testbed::create(link, *via == LinkVia::Emulator, *verbose)?;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let emulator = if testbed.facts().realised_by == Realisation::Emulator {
            let mut emulator = Launcher::helper("emulator")?;
            let spec = EmulatorSpec {
                sides: [0, 1].map(|side| TunSide {
                    netns: testbed.netns_path(side),
                    interface: testbed.interface(side).to_string(),
                }),
                link: link.clone(),
                queue_bytes: link.queue_bytes.unwrap_or(EMULATOR_DEFAULT_QUEUE),
                seed,
            };
            start_helper::<Emulator>(&mut emulator, spec)?;
            Some(emulator)
        } else {
            None
        };
        let capture = if *capture {
            let mut capture = Launcher::for_testbed(&testbed).spawn("capture", End::From)?;
            let spec = CaptureSpec {
                interface: testbed.interface(0).to_string(),
                pcap: pcap.clone(),
                snaplen: 128,
                rate_bps: link.rate_bps,
                port: None,
            };
            start_helper::<Capture>(&mut capture, spec)?;
            Some(capture)
        } else {
            None
        };
        Ok(Some(Bed {
            testbed,
            emulator,
            capture,
            seed,
        }))
    }

    /// Stops capture and emulator and collects their reports.
    pub fn finish(mut self) -> Result<NetnsOutcome, ControlError> {
        let mut outcome = NetnsOutcome {
            link: self.testbed.facts().clone(),
            emulator: None,
            capture: None,
        };
        if let Some(mut capture) = self.capture.take() {
            outcome.capture = Some(stop_helper::<Capture>(&mut capture, 30)?);
            capture.finish();
        }
        if let Some(mut emulator) = self.emulator.take() {
            let mut report = stop_helper::<Emulator>(&mut emulator, 10)?;
            report.seed = self.seed;
            outcome.emulator = Some(report);
            emulator.finish();
        }
        Ok(outcome)
    }
}

/// Starts a testbed helper in its endpoint process.
pub fn start_helper<H: Helper>(
    process: &mut EndpointProcess,
    spec: H::Spec,
) -> Result<(), ControlError> {
    process.call(Start::<H>(spec), Wait::up_to(10, "starting"))
}

/// Stops a testbed helper (after any Ctrl-C has been let through) and
/// takes its report, waiting up to `seconds`.
pub fn stop_helper<H: Helper>(
    process: &mut EndpointProcess,
    seconds: u64,
) -> Result<H::Report, ControlError> {
    process.wait_through_interrupt();
    process.thaw();
    process.call(Stop::<H>(PhantomData), Wait::up_to(seconds, "stopping"))
}

/// What a netns run adds to the result.
pub struct NetnsOutcome {
    pub link: crate::record::testbed::LinkFacts,
    pub emulator: Option<crate::record::testbed::EmulatorReport>,
    pub capture: Option<crate::record::testbed::CaptureReport>,
}
