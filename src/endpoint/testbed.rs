//! The testbed's own roles: the wire emulator that carries an emulated
//! link between two TUN devices, and the capture that watches an
//! interface. Both run only on the controller's host (an agent refuses
//! them), each in its own endpoint process so its CPU is its own.
//!
//! Both have one life, `Start(spec)` then `Stop` with a report, so one
//! generic role ([`HelperRole`]) plays either; a [`Helper`] says what is
//! started and what its report is.

use super::agent::policy::Policy;
use super::role::{Handler, Link, Protocol, Request, Role, RoleError, Route, route};
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

/// Start a helper from its spec: answered when it runs.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Start<H: Helper>(pub H::Spec);

/// Stop a helper: its report.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Stop<H>(#[serde(skip)] pub PhantomData<H>);

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
    type Reply = ();
    const NAME: &'static str = "Start";
}

impl<H: Helper> Request for Stop<H> {
    type Role = HelperRole<H>;
    type Reply = H::Report;
    const NAME: &'static str = "Stop";
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
    type Event = ();
}

impl<H: Helper> Role for HelperRole<H> {
    const ROUTES: &'static [Route<Self>] = &[route::<Start<H>>(), route::<Stop<H>>()];
}

/// What an agent answers a helper's request: refused, whichever.
const CONTROLLER_HOST_ONLY: &str =
    "the wire emulator and the capture run only on the controller's host";

impl<H: Helper> Handler<Start<H>> for HelperRole<H> {
    fn handle(&mut self, Start(spec): Start<H>, _: &mut Link<'_>) -> Result<(), RoleError> {
        let doing = H::doing(&spec);
        let helper = H::start(spec).map_err(|e| RoleError::failed(format_args!("{doing}: {e}")))?;
        self.running = Some(helper);
        Ok(())
    }

    fn check(_: &mut Start<H>, _: &str, _: &Policy) -> Result<(), String> {
        Err(CONTROLLER_HOST_ONLY.into())
    }
}

impl<H: Helper> Handler<Stop<H>> for HelperRole<H> {
    fn handle(&mut self, _: Stop<H>, _: &mut Link<'_>) -> Result<H::Report, RoleError> {
        let helper = self
            .running
            .take()
            .ok_or_else(|| RoleError::failed(format_args!("Stop with no {} running", H::ROLE)))?;
        helper.stop().map_err(RoleError::failed)
    }

    fn check(_: &mut Stop<H>, _: &str, _: &Policy) -> Result<(), String> {
        Err(CONTROLLER_HOST_ONLY.into())
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
