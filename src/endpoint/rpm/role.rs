//! rpm's endpoint role: the serving end (`Serve`, then `Stop` for its
//! report) and the measuring end (`Measure`: the whole test, raw figures
//! back), or a load alone (`LoadStart`, then `LoadStop` for what it
//! carried) beside another experiment's cell.

use super::client::{self, BackgroundLoad};
use super::server::Server;
use super::types::{ClientReport, ClientSpec, LoadReport, LoadSockets, ServerReport};
use crate::endpoint::agent::policy::Policy;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::role::{Handler, Link, Protocol, Role, RoleError, Route, route};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// Serve load and probe connections on `bind`: the address served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Serve {
    pub bind: SocketAddr,
    pub guard: Option<DataGuard>,
    pub sockets: LoadSockets,
}

/// Run the test: its raw figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measure(pub ClientSpec);

/// Stop serving: what was served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop;

/// Start a load alone: load-generating connections to `spec.server` (its
/// direction, at most `spec.max_connections` each way), no probes, until
/// `LoadStop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadStart(pub ClientSpec);

/// Stop the load: what it carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadStop;

#[derive(Default)]
pub struct RpmRole {
    server: Option<Server>,
    load: Option<BackgroundLoad>,
}

crate::endpoint::role::requests! { RpmRole:
    Serve => SocketAddr,
    Measure => Box<ClientReport>,
    Stop => Box<ServerReport>,
    LoadStart => (),
    LoadStop => LoadReport,
}

impl Protocol for RpmRole {
    const ROLE: &'static str = "rpm";
    type Event = ();
}

impl Role for RpmRole {
    const ROUTES: &'static [Route<Self>] = &[
        route::<Serve>(),
        route::<Measure>(),
        route::<Stop>(),
        route::<LoadStart>(),
        route::<LoadStop>(),
    ];
}

impl Handler<Serve> for RpmRole {
    fn handle(&mut self, serve: Serve, _: &mut Link<'_>) -> Result<SocketAddr, RoleError> {
        let Serve {
            bind,
            guard,
            sockets,
        } = serve;
        let server = Server::start(bind, guard, sockets)
            .map_err(|e| RoleError::failed(format_args!("rpm server on {bind}: {e}")))?;
        let addr = server.local_addr();
        self.server = Some(server);
        Ok(addr)
    }

    fn check(serve: &mut Serve, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, Self::ROLE, "an rpm server")?;
        policy.guard_data_port(&mut serve.guard, serve.bind.port())
    }
}

impl Handler<Measure> for RpmRole {
    fn handle(
        &mut self,
        Measure(spec): Measure,
        _: &mut Link<'_>,
    ) -> Result<Box<ClientReport>, RoleError> {
        client::run(&spec).map(Box::new).map_err(RoleError::Failed)
    }

    fn check(Measure(spec): &mut Measure, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, Self::ROLE, "an rpm measuring end")?;
        if spec.token.is_none() {
            return Err("an rpm measuring end through an agent sends only after the server's consent, and the controller sent no run token to ask it with".into());
        }
        // The command line's bounds, whoever sent the request (a minute at
        // most).
        super::bounds::check_bounds(
            spec.probe_rate,
            spec.max_connections,
            spec.max_duration_s,
            spec.idle_probes,
        )?;
        policy.within_seconds(spec.max_duration_s, " of load")
    }
}

impl Handler<Stop> for RpmRole {
    fn handle(&mut self, _: Stop, _: &mut Link<'_>) -> Result<Box<ServerReport>, RoleError> {
        let server = self
            .server
            .take()
            .ok_or_else(|| RoleError::failed("Stop with no rpm server running"))?;
        Ok(Box::new(server.stop()))
    }

    fn check(_: &mut Stop, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}

impl Handler<LoadStart> for RpmRole {
    fn handle(&mut self, LoadStart(spec): LoadStart, _: &mut Link<'_>) -> Result<(), RoleError> {
        if self.load.is_some() {
            return Err(RoleError::failed("a load is already running"));
        }
        self.load =
            Some(BackgroundLoad::start(&spec, spec.max_connections).map_err(RoleError::Failed)?);
        Ok(())
    }

    fn check(LoadStart(spec): &mut LoadStart, run: &str, policy: &Policy) -> Result<(), String> {
        // A load beside another experiment's cell runs only in rpm's own
        // runs through an agent (login's uses it on loopback and in
        // namespaces).
        policy.part_of(run, Self::ROLE, "an rpm load")?;
        if spec.token.is_none() {
            return Err("an rpm load through an agent needs the run's token".into());
        }
        Ok(())
    }
}

impl Handler<LoadStop> for RpmRole {
    fn handle(&mut self, _: LoadStop, _: &mut Link<'_>) -> Result<LoadReport, RoleError> {
        let load = self
            .load
            .take()
            .ok_or_else(|| RoleError::failed("LoadStop with no load running"))?;
        Ok(load.stop())
    }

    fn check(_: &mut LoadStop, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}
