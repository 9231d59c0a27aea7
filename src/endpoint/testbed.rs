//! The testbed's own roles: the wire emulator that carries an emulated
//! link between two TUN devices, and the capture that watches an
//! interface. Both run only on the controller's host (an agent refuses
//! them), each in its own endpoint process so its CPU is its own.

use super::agent::policy::Policy;
use super::role::{Link, Protocol, Role, RoleError};
use crate::record::testbed::CaptureReport;
use crate::record::testbed::EmulatorReport;
use crate::testbed::capture::{Capture, CaptureSpec};
use crate::testbed::emulator::{Emulator, EmulatorSpec};
use serde::{Deserialize, Serialize};

/// What the agent says of a testbed helper.
fn helpers_stay_home<T>(_: &mut T, _: &str, _: &Policy) -> Result<(), String> {
    Err("the wire emulator and the capture run only on the controller's host".into())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum EmulatorRequest {
    /// Relay between two TUN devices as the link's model says.
    Start(Box<EmulatorSpec>),
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum EmulatorReply {
    Emulating,
    Done(Box<EmulatorReport>),
}

/// The wire emulator, from `Start` to `Stop`.
#[derive(Default)]
pub struct EmulatorRole {
    running: Option<Emulator>,
}

impl Protocol for EmulatorRole {
    const ROLE: &'static str = "emulator";
    type Request = EmulatorRequest;
    type Reply = EmulatorReply;
    type Event = ();
}

impl Role for EmulatorRole {
    fn handle(
        &mut self,
        request: EmulatorRequest,
        _: &mut Link<'_>,
    ) -> Result<EmulatorReply, RoleError> {
        match request {
            EmulatorRequest::Start(spec) => {
                let emulator = Emulator::start(*spec).map_err(|e| {
                    RoleError::failed(format_args!("starting the wire emulator: {e}"))
                })?;
                self.running = Some(emulator);
                Ok(EmulatorReply::Emulating)
            }
            EmulatorRequest::Stop => {
                let emulator = self
                    .running
                    .take()
                    .ok_or_else(|| RoleError::failed("Stop with no emulator running"))?;
                let report = emulator.stop().map_err(RoleError::failed)?;
                Ok(EmulatorReply::Done(Box::new(report)))
            }
        }
    }

    fn check(request: &mut EmulatorRequest, run: &str, policy: &Policy) -> Result<(), String> {
        helpers_stay_home(request, run, policy)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CaptureRequest {
    /// Capture an interface in this endpoint's namespace.
    Start(CaptureSpec),
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CaptureReply {
    Capturing,
    Done(Box<CaptureReport>),
}

/// The capture, from `Start` to `Stop`.
#[derive(Default)]
pub struct CaptureRole {
    running: Option<Capture>,
}

impl Protocol for CaptureRole {
    const ROLE: &'static str = "capture";
    type Request = CaptureRequest;
    type Reply = CaptureReply;
    type Event = ();
}

impl Role for CaptureRole {
    fn handle(
        &mut self,
        request: CaptureRequest,
        _: &mut Link<'_>,
    ) -> Result<CaptureReply, RoleError> {
        match request {
            CaptureRequest::Start(spec) => {
                let interface = spec.interface.clone();
                let capture = Capture::start(spec).map_err(|e| {
                    RoleError::failed(format_args!("capturing on {interface}: {e}"))
                })?;
                self.running = Some(capture);
                Ok(CaptureReply::Capturing)
            }
            CaptureRequest::Stop => {
                let capture = self
                    .running
                    .take()
                    .ok_or_else(|| RoleError::failed("Stop with no capture running"))?;
                let report = capture.stop().map_err(RoleError::failed)?;
                Ok(CaptureReply::Done(Box::new(report)))
            }
        }
    }

    fn check(request: &mut CaptureRequest, run: &str, policy: &Policy) -> Result<(), String> {
        helpers_stay_home(request, run, policy)
    }
}
