//! The rpc experiment's endpoint role: netlab's ONC RPC server at the `To`
//! end (started, then stopped with its account), the client's timed calls
//! at the `From` end. The protocol itself lives in the core
//! (`endpoint::rpc`, `wire::rpc`); this says what a cell asks of it.

use crate::endpoint::agent::policy::Policy;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::role::{Link, Protocol, Role, RoleError};
use crate::endpoint::rpc::server::{Running, Server, ServerOptions, ServerReport};
use crate::endpoint::rpc::{RpcClientReport, RpcClientSpec, run_client};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RpcRequest {
    /// Serve netlab's RPC program on TCP and UDP at `bind`.
    Serve {
        bind: SocketAddr,
        options: ServerOptions,
        /// Through an agent: who may call, with which token.
        #[serde(default)]
        guard: Option<DataGuard>,
    },
    /// Make one cell's calls as the client.
    Call(RpcClientSpec),
    /// Stop the server; its account.
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RpcReply {
    Serving { port: u16 },
    Called(Box<RpcClientReport>),
    Stopped(Box<ServerReport>),
}

/// Serve netlab's RPC program on TCP and UDP at `bind`: the port.
#[derive(Debug)]
pub struct Serve {
    pub bind: SocketAddr,
    pub options: ServerOptions,
    pub guard: Option<DataGuard>,
}
/// One cell's calls as the client: their account.
#[derive(Debug)]
pub struct Call(pub RpcClientSpec);
/// Stop the server: its account.
#[derive(Debug)]
pub struct Stop;

crate::endpoint::role::requests! { RpcRole:
    Serve, |Serve { bind, options, guard }| RpcRequest::Serve { bind, options, guard };
    RpcReply::Serving { port } => u16 = port;
    Call, |Call(spec)| RpcRequest::Call(spec);
    RpcReply::Called(report) => Box<RpcClientReport> = report;
    Stop, |Stop| RpcRequest::Stop;
    RpcReply::Stopped(report) => Box<ServerReport> = report;
}

/// The server this endpoint runs, if any.
#[derive(Default)]
pub struct RpcRole {
    server: Option<Running>,
}

impl Protocol for RpcRole {
    const ROLE: &'static str = "rpc";
    type Request = RpcRequest;
    type Reply = RpcReply;
    type Event = ();
}

impl Role for RpcRole {
    fn handle(&mut self, request: RpcRequest, _: &mut Link<'_>) -> Result<RpcReply, RoleError> {
        match request {
            RpcRequest::Serve {
                bind,
                options,
                guard,
            } => {
                let running = Server::bind_guarded(bind, options, guard)
                    .and_then(|s| s.start())
                    .map_err(|e| RoleError::failed(format_args!("RPC server on {bind}: {e}")))?;
                let port = running.port();
                self.server = Some(running);
                Ok(RpcReply::Serving { port })
            }
            RpcRequest::Call(spec) => run_client(&spec)
                .map(|report| RpcReply::Called(Box::new(report)))
                .map_err(RoleError::Failed),
            RpcRequest::Stop => {
                let running = self
                    .server
                    .take()
                    .ok_or_else(|| RoleError::failed("Stop with no RPC server running"))?;
                Ok(RpcReply::Stopped(Box::new(running.stop())))
            }
        }
    }

    fn check(request: &mut RpcRequest, run: &str, policy: &Policy) -> Result<(), String> {
        match request {
            RpcRequest::Serve { bind, guard, .. } => {
                policy.part_of(run, Self::ROLE, "an RPC server")?;
                policy.guard_data_port(guard, bind.port())
            }
            RpcRequest::Call(spec) => {
                policy.part_of(run, Self::ROLE, "an RPC client")?;
                // Over TCP and UDP alike the client sends its calls only
                // after the server consented to the run's token.
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
            RpcRequest::Stop => Ok(()),
        }
    }
}
