//! The rpc experiment's endpoint role: netlab's ONC RPC server at the `To`
//! end (started, then stopped with its account), the client's timed calls
//! at the `From` end. The protocol itself lives in the core
//! (`endpoint::rpc`, `wire::rpc`); this says what a cell asks of it.

use crate::endpoint::agent::policy::Policy;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::role::{Handler, Link, Protocol, Role, RoleError, Route, route};
use crate::endpoint::rpc::server::{Running, Server, ServerOptions, ServerReport};
use crate::endpoint::rpc::{RpcClientReport, RpcClientSpec, run_client};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// Serve netlab's RPC program on TCP and UDP at `bind`: the port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Serve {
    pub bind: SocketAddr,
    pub options: ServerOptions,
    /// Through an agent: who may call, with which token.
    #[serde(default)]
    pub guard: Option<DataGuard>,
}

/// One cell's calls as the client: their account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call(pub RpcClientSpec);

/// Stop the server: its account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop;

/// The server this endpoint runs, if any.
#[derive(Default)]
pub struct RpcRole {
    server: Option<Running>,
}

crate::endpoint::role::requests! { RpcRole:
    Serve => u16,
    Call => Box<RpcClientReport>,
    Stop => Box<ServerReport>,
}

impl Protocol for RpcRole {
    const ROLE: &'static str = "rpc";
    type Event = ();
}

impl Role for RpcRole {
    const ROUTES: &'static [Route<Self>] = &[route::<Serve>(), route::<Call>(), route::<Stop>()];
}

impl Handler<Serve> for RpcRole {
    fn handle(&mut self, serve: Serve, _: &mut Link<'_>) -> Result<u16, RoleError> {
        let Serve {
            bind,
            options,
            guard,
        } = serve;
        let running = Server::bind_guarded(bind, options, guard)
            .and_then(|s| s.start())
            .map_err(|e| RoleError::failed(format_args!("RPC server on {bind}: {e}")))?;
        let port = running.port();
        self.server = Some(running);
        Ok(port)
    }

    fn check(serve: &mut Serve, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, Self::ROLE, "an RPC server")?;
        policy.guard_data_port(&mut serve.guard, serve.bind.port())
    }
}

impl Handler<Call> for RpcRole {
    fn handle(
        &mut self,
        Call(spec): Call,
        _: &mut Link<'_>,
    ) -> Result<Box<RpcClientReport>, RoleError> {
        run_client(&spec).map(Box::new).map_err(RoleError::Failed)
    }

    fn check(Call(spec): &mut Call, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, Self::ROLE, "an RPC client")?;
        // Over TCP and UDP alike the client sends its calls only after the
        // server consented to the run's token.
        if spec.token.is_none() {
            return Err("an RPC client through an agent calls only after the server's consent, and the controller sent no run token to ask it with".into());
        }
        // The command line's bounds, whoever sent the request.
        spec.check_bounds()?;
        let bytes = (spec.size as u64)
            .saturating_mul(spec.calls as u64)
            .saturating_mul(spec.reps as u64);
        policy.within_bytes(bytes, " of arguments")
    }
}

impl Handler<Stop> for RpcRole {
    fn handle(&mut self, _: Stop, _: &mut Link<'_>) -> Result<Box<ServerReport>, RoleError> {
        let running = self
            .server
            .take()
            .ok_or_else(|| RoleError::failed("Stop with no RPC server running"))?;
        Ok(Box::new(running.stop()))
    }

    fn check(_: &mut Stop, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}
