//! The testbed's own roles: the wire emulator that carries an emulated
//! link between two TUN devices, and the capture that watches an
//! interface. Both run only on the controller's host (an agent refuses
//! them), each in its own endpoint process so its CPU is its own.
//!
//! Both have one life, `Start(spec)` then `Stop` with a report, so one
//! generic role ([`HelperRole`]) plays either; a [`Helper`] says what is
//! started and what its report is.

use super::agent::policy::Policy;
use super::role::{Link, Protocol, Request, Role, RoleError};
use crate::record::testbed::{CaptureReport, EmulatorReport};
use crate::testbed::capture::{Capture, CaptureSpec};
use crate::testbed::emulator::{Emulator, EmulatorSpec};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;

/// A testbed helper: started from a spec, stopped into a report.
pub trait Helper: Sized + Send + 'static {
    /// The role's name, as requests carry it.
    const ROLE: &'static str;
    type Spec: Serialize + DeserializeOwned + Debug;
    type Report: Serialize + DeserializeOwned + Debug;
    /// What is being started, for an error ("capturing on lo").
    fn doing(spec: &Self::Spec) -> String;
    fn start(spec: Self::Spec) -> io::Result<Self>;
    fn stop(self) -> io::Result<Self::Report>;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum HelperRequest<S> {
    Start(Box<S>),
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum HelperReply<R> {
    /// Started, running until `Stop`.
    Running,
    Done(Box<R>),
}

/// Start a helper from its spec.
pub struct Start<H: Helper>(pub H::Spec);
/// Stop a helper: its report.
pub struct Stop<H>(pub PhantomData<H>);

impl<H: Helper> Debug for Start<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Start").field(&self.0).finish()
    }
}

impl<H> Debug for Stop<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stop")
    }
}

impl<H: Helper> Request for Start<H> {
    type Role = HelperRole<H>;
    type Answer = ();
    fn into_wire(self) -> HelperRequest<H::Spec> {
        HelperRequest::Start(Box::new(self.0))
    }
    fn answer(reply: HelperReply<H::Report>) -> Result<(), HelperReply<H::Report>> {
        match reply {
            HelperReply::Running => Ok(()),
            other => Err(other),
        }
    }
}

impl<H: Helper> Request for Stop<H> {
    type Role = HelperRole<H>;
    type Answer = H::Report;
    fn into_wire(self) -> HelperRequest<H::Spec> {
        HelperRequest::Stop
    }
    fn answer(reply: HelperReply<H::Report>) -> Result<H::Report, HelperReply<H::Report>> {
        match reply {
            HelperReply::Done(report) => Ok(*report),
            other => Err(other),
        }
    }
}

/// A helper from `Start` to `Stop`.
pub struct HelperRole<H> {
    running: Option<H>,
}

impl<H> Default for HelperRole<H> {
    fn default() -> Self {
        HelperRole { running: None }
    }
}

impl<H: Helper> Protocol for HelperRole<H> {
    const ROLE: &'static str = H::ROLE;
    type Request = HelperRequest<H::Spec>;
    type Reply = HelperReply<H::Report>;
    type Event = ();
}

impl<H: Helper> Role for HelperRole<H> {
    fn handle(
        &mut self,
        request: HelperRequest<H::Spec>,
        _: &mut Link<'_>,
    ) -> Result<HelperReply<H::Report>, RoleError> {
        match request {
            HelperRequest::Start(spec) => {
                let doing = H::doing(&spec);
                let helper =
                    H::start(*spec).map_err(|e| RoleError::failed(format_args!("{doing}: {e}")))?;
                self.running = Some(helper);
                Ok(HelperReply::Running)
            }
            HelperRequest::Stop => {
                let helper = self.running.take().ok_or_else(|| {
                    RoleError::failed(format_args!("Stop with no {} running", H::ROLE))
                })?;
                let report = helper.stop().map_err(RoleError::failed)?;
                Ok(HelperReply::Done(Box::new(report)))
            }
        }
    }

    fn check(_: &mut HelperRequest<H::Spec>, _: &str, _: &Policy) -> Result<(), String> {
        Err("the wire emulator and the capture run only on the controller's host".into())
    }
}

impl Helper for Emulator {
    const ROLE: &'static str = "emulator";
    type Spec = EmulatorSpec;
    type Report = EmulatorReport;
    fn doing(_: &EmulatorSpec) -> String {
        "starting the wire emulator".into()
    }
    fn start(spec: EmulatorSpec) -> io::Result<Emulator> {
        Emulator::start(spec)
    }
    fn stop(self) -> io::Result<EmulatorReport> {
        Emulator::stop(self)
    }
}

impl Helper for Capture {
    const ROLE: &'static str = "capture";
    type Spec = CaptureSpec;
    type Report = CaptureReport;
    fn doing(spec: &CaptureSpec) -> String {
        format!("capturing on {}", spec.interface)
    }
    fn start(spec: CaptureSpec) -> io::Result<Capture> {
        Capture::start(spec)
    }
    fn stop(self) -> io::Result<CaptureReport> {
        Capture::stop(self)
    }
}

/// The wire emulator's role.
pub type EmulatorRole = HelperRole<Emulator>;
/// The capture's role.
pub type CaptureRole = HelperRole<Capture>;
