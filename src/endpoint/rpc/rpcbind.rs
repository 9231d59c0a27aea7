//! Registering with rpcbind (the portmapper, program 100000) so that tools
//! that look programs up there, such as `rpcinfo`, find netlab's server.
//!
//! Uses PMAP version 2 (RFC 1833 §3): PMAPPROC_SET and PMAPPROC_UNSET take
//! a mapping (prog, vers, prot, port) and answer a boolean. rpcbind accepts
//! them from the local host.

use super::client::{CallError, call_once_tcp};
use crate::wire::rpc::Call;
use crate::wire::xdr::{Reader, Writer};
use std::net::{Ipv4Addr, SocketAddr};
use thiserror::Error;

pub const PMAP_PROGRAM: u32 = 100_000;
pub const PMAP_VERSION: u32 = 2;
const PMAPPROC_SET: u32 = 1;
const PMAPPROC_UNSET: u32 = 2;
pub const IPPROTO_TCP: u32 = 6;
pub const IPPROTO_UDP: u32 = 17;

fn mapping(prog: u32, vers: u32, prot: u32, port: u16) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(prog).u32(vers).u32(prot).u32(u32::from(port));
    w.into_bytes()
}

fn boolean_call(rpcbind: SocketAddr, proc_: u32, args: &[u8]) -> Result<bool, CallError> {
    let xid = std::process::id() ^ proc_.rotate_left(16) ^ 0x5eed;
    let call = Call::new(xid, PMAP_PROGRAM, PMAP_VERSION, proc_);
    let (_, results) = call_once_tcp(rpcbind, &call, args)?;
    Reader::new(&results)
        .bool()
        .map_err(|e| CallError::BadReply(e.to_string()))
}

/// Registers `prog`/`vers` on `port` for TCP and UDP. Returns whether rpcbind agreed.
pub fn register(rpcbind: SocketAddr, prog: u32, vers: u32, port: u16) -> Result<bool, CallError> {
    // A stale mapping from an earlier run would make SET fail.
    let _ = unregister(rpcbind, prog, vers, port);
    let tcp = boolean_call(
        rpcbind,
        PMAPPROC_SET,
        &mapping(prog, vers, IPPROTO_TCP, port),
    )?;
    let udp = boolean_call(
        rpcbind,
        PMAPPROC_SET,
        &mapping(prog, vers, IPPROTO_UDP, port),
    )?;
    Ok(tcp && udp)
}

/// Removes the mappings of `prog`/`vers` (all protocols).
pub fn unregister(rpcbind: SocketAddr, prog: u32, vers: u32, port: u16) -> Result<bool, CallError> {
    boolean_call(rpcbind, PMAPPROC_UNSET, &mapping(prog, vers, 0, port))
}

/// rpcbind on this host.
pub const LOCAL_RPCBIND: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 111);

#[derive(Debug, Error)]
pub enum RegisterError {
    #[error("rpcbind refused to register program {0}")]
    Refused(u32),
    #[error("cannot register with rpcbind at {LOCAL_RPCBIND}: {0}")]
    Call(#[from] CallError),
}

/// A program registered with the local rpcbind for as long as this lives.
pub struct Registration {
    prog: u32,
    vers: u32,
    port: u16,
}

impl Registration {
    /// Registers `prog`/`vers` on `port` (TCP and UDP) with the local rpcbind.
    pub fn new(prog: u32, vers: u32, port: u16) -> Result<Registration, RegisterError> {
        if register(LOCAL_RPCBIND, prog, vers, port)? {
            Ok(Registration { prog, vers, port })
        } else {
            Err(RegisterError::Refused(prog))
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = unregister(LOCAL_RPCBIND, self.prog, self.vers, self.port);
    }
}
