//! rpm's endpoint role: the serving end (`Serve`, then `Stop` for its
//! report) and the measuring end (`Measure`: the whole test, raw figures
//! back), or a load alone (`LoadStart`, then `LoadStop` for what it
//! carried) beside another experiment's cell.

use super::client::{self, BackgroundLoad};
use super::server::Server;
use super::types::{ClientReport, ClientSpec, LoadReport, LoadSockets, ServerReport};
use crate::endpoint::agent::policy::Policy;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::role::{Link, Protocol, Role, RoleError};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RpmRequest {
    Serve {
        bind: SocketAddr,
        guard: Option<DataGuard>,
        sockets: LoadSockets,
    },
    Measure(Box<ClientSpec>),
    Stop,
    /// Load-generating connections to `spec.server` (its direction, at
    /// most `spec.max_connections` each way), no probes, until `LoadStop`.
    LoadStart(Box<ClientSpec>),
    LoadStop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RpmReply {
    Serving { addr: SocketAddr },
    Measured(Box<ClientReport>),
    Stopped(Box<ServerReport>),
    Loading,
    Loaded(LoadReport),
}

/// Serve load and probe connections on `bind`.
#[derive(Debug)]
pub struct Serve {
    pub bind: SocketAddr,
    pub guard: Option<DataGuard>,
    pub sockets: LoadSockets,
}
/// Run the test.
#[derive(Debug)]
pub struct Measure(pub ClientSpec);
/// Stop serving: what was served.
#[derive(Debug)]
pub struct Stop;
/// Start a load alone (`max_connections` connections each way).
#[derive(Debug)]
pub struct LoadStart(pub ClientSpec);
/// Stop the load: what it carried.
#[derive(Debug)]
pub struct LoadStop;

crate::endpoint::role::requests! { RpmRole:
    Serve, |Serve { bind, guard, sockets }| RpmRequest::Serve { bind, guard, sockets };
    RpmReply::Serving { addr } => SocketAddr = addr;
    Measure, |Measure(spec)| RpmRequest::Measure(Box::new(spec));
    RpmReply::Measured(report) => Box<ClientReport> = report;
    Stop, |Stop| RpmRequest::Stop;
    RpmReply::Stopped(report) => Box<ServerReport> = report;
    LoadStart, |LoadStart(spec)| RpmRequest::LoadStart(Box::new(spec));
    RpmReply::Loading => () = ();
    LoadStop, |LoadStop| RpmRequest::LoadStop;
    RpmReply::Loaded(report) => LoadReport = report;
}

#[derive(Default)]
pub struct RpmRole {
    server: Option<Server>,
    load: Option<BackgroundLoad>,
}

impl Protocol for RpmRole {
    const ROLE: &'static str = "rpm";
    type Request = RpmRequest;
    type Reply = RpmReply;
    type Event = ();
}

impl Role for RpmRole {
    fn handle(&mut self, request: RpmRequest, _link: &mut Link<'_>) -> Result<RpmReply, RoleError> {
        match request {
            RpmRequest::Serve {
                bind,
                guard,
                sockets,
            } => {
                let server = Server::start(bind, guard, sockets)
                    .map_err(|e| RoleError::failed(format_args!("rpm server on {bind}: {e}")))?;
                let addr = server.local_addr();
                self.server = Some(server);
                Ok(RpmReply::Serving { addr })
            }
            RpmRequest::Measure(spec) => client::run(&spec)
                .map(|r| RpmReply::Measured(Box::new(r)))
                .map_err(RoleError::Failed),
            RpmRequest::Stop => {
                let server = self
                    .server
                    .take()
                    .ok_or_else(|| RoleError::failed("Stop with no rpm server running"))?;
                Ok(RpmReply::Stopped(Box::new(server.stop())))
            }
            RpmRequest::LoadStart(spec) => {
                if self.load.is_some() {
                    return Err(RoleError::failed("a load is already running"));
                }
                self.load = Some(
                    BackgroundLoad::start(&spec, spec.max_connections)
                        .map_err(RoleError::Failed)?,
                );
                Ok(RpmReply::Loading)
            }
            RpmRequest::LoadStop => {
                let load = self
                    .load
                    .take()
                    .ok_or_else(|| RoleError::failed("LoadStop with no load running"))?;
                Ok(RpmReply::Loaded(load.stop()))
            }
        }
    }

    fn check(request: &mut RpmRequest, run: &str, policy: &Policy) -> Result<(), String> {
        match request {
            RpmRequest::Serve { bind, guard, .. } => {
                policy.part_of(run, Self::ROLE, "an rpm server")?;
                policy.guard_data_port(guard, bind.port())
            }
            RpmRequest::Measure(spec) => {
                policy.part_of(run, Self::ROLE, "an rpm measuring end")?;
                if spec.token.is_none() {
                    return Err("an rpm measuring end through an agent sends only after the server's consent, and the controller sent no run token to ask it with".into());
                }
                // The command line's bounds, whoever sent the request (a
                // minute at most).
                super::bounds::check_bounds(
                    spec.probe_rate,
                    spec.max_connections,
                    spec.max_duration_s,
                    spec.idle_probes,
                )?;
                policy.within_seconds(spec.max_duration_s, " of load")
            }
            RpmRequest::LoadStart(spec) => {
                // A load beside another experiment's cell runs only in
                // rpm's own runs through an agent (login's uses it on
                // loopback and in namespaces).
                policy.part_of(run, Self::ROLE, "an rpm load")?;
                if spec.token.is_none() {
                    return Err("an rpm load through an agent needs the run's token".into());
                }
                Ok(())
            }
            RpmRequest::Stop | RpmRequest::LoadStop => Ok(()),
        }
    }
}
