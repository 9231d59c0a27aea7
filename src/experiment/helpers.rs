//! The netns side of a run: the testbed, and the helper processes that
//! carry (the wire emulator) and watch (the capture) its link.

use super::launcher::{End, Launcher};
use super::processes::{ControlError, EndpointProcess, Wait};
use crate::endpoint::testbed::{
    CaptureReply, CaptureRequest, CaptureRole, EmulatorReply, EmulatorRequest, EmulatorRole,
};
use crate::record::testbed::{LinkVia, Placement, Realisation};
use crate::testbed::{
    capture::CaptureSpec,
    emulator::{EmulatorSpec, TunSide},
    netns::Testbed,
};

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
            let request = EmulatorRequest::Start(Box::new(EmulatorSpec {
                sides: [0, 1].map(|side| TunSide {
                    netns: testbed.netns_path(side),
                    interface: testbed.interface(side).to_string(),
                }),
                link: link.clone(),
                queue_bytes: link.queue_bytes.unwrap_or(EMULATOR_DEFAULT_QUEUE),
                seed,
            }));
            match emulator.ask::<EmulatorRole>(&request, Wait::up_to(10, "starting"))? {
                EmulatorReply::Emulating => Some(emulator),
                other => return Err(emulator.out_of_turn("starting", &other)),
            }
        } else {
            None
        };
        let capture = if *capture {
            let mut capture = Launcher::for_testbed(&testbed).spawn("capture", End::From)?;
            let request = CaptureRequest::Start(CaptureSpec {
                interface: testbed.interface(0).to_string(),
                pcap: pcap.clone(),
                snaplen: 128,
                rate_bps: link.rate_bps,
                port: None,
            });
            match capture.ask::<CaptureRole>(&request, Wait::up_to(10, "starting"))? {
                CaptureReply::Capturing => Some(capture),
                other => return Err(capture.out_of_turn("starting", &other)),
            }
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
            capture.wait_through_interrupt();
            match capture.ask::<CaptureRole>(&CaptureRequest::Stop, Wait::up_to(30, "stopping"))? {
                CaptureReply::Done(report) => outcome.capture = Some(*report),
                other => return Err(capture.out_of_turn("stopping", &other)),
            }
            capture.finish();
        }
        if let Some(mut emulator) = self.emulator.take() {
            emulator.wait_through_interrupt();
            match emulator
                .ask::<EmulatorRole>(&EmulatorRequest::Stop, Wait::up_to(10, "stopping"))?
            {
                EmulatorReply::Done(mut report) => {
                    report.seed = self.seed;
                    outcome.emulator = Some(*report);
                }
                other => return Err(emulator.out_of_turn("stopping", &other)),
            }
            emulator.finish();
        }
        Ok(outcome)
    }
}

/// What a netns run adds to the result.
pub struct NetnsOutcome {
    pub link: crate::record::testbed::LinkFacts,
    pub emulator: Option<crate::record::testbed::EmulatorReport>,
    pub capture: Option<crate::record::testbed::CaptureReport>,
}
