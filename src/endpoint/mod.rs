//! The programs that run at each end of an experiment.
//!
//! The binary re-executes itself as `netlab endpoint` (a hidden subcommand):
//! it reads [`protocol::Command`]s framed by [`crate::wire::control`] on
//! stdin and answers with [`protocol::Reply`]s on stdout; diagnostics go to
//! stderr. One endpoint process serves one role for one run, so its rusage is
//! that role's alone. The same loop will serve a namespace (started with
//! `ip netns exec`) and a remote agent (over TCP instead of a pipe).

pub mod agent;
pub mod bulk;
pub mod guard;
pub mod iperf3;
pub mod login;
pub mod pattern;
pub mod pin;
pub mod protocol;
pub mod quic;
pub mod ratelog;
pub mod role;
pub mod rpc;
pub mod rpm;
pub mod stall;
pub mod testbed;
pub mod tls;
pub mod waiting;

use crate::wire::control::{FrameReader, write_frame};
use protocol::{Command, Reply};
use role::{AnyRole, Link, RoleError, RoleTable};
use std::io::{Read, Write};

/// Serves commands from `input`, replying on `output`, until `Exit` or end
/// of input, playing the roles of `roles` (the registry's table). Errors of
/// the data path are replied as `Failed`; only a broken control channel is
/// returned as an error. Every role played is dropped on the way out, which
/// stops whatever it still runs.
pub fn serve<R: Read, W: Write>(roles: RoleTable, input: R, mut output: W) -> std::io::Result<()> {
    let mut reader = FrameReader::new(input);
    write_frame(
        &mut output,
        &Reply::Ready {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
    )?;
    let mut playing: Vec<(&'static str, Box<dyn AnyRole>)> = Vec::new();
    while let Some(command) = reader.next_message::<Command>()? {
        let reply = match command {
            Command::Exit => break,
            Command::Proceed => failed("Proceed with nothing awaiting it"),
            Command::Role {
                role,
                request,
                params,
            } => match role::find(roles, &role) {
                None => failed(format_args!("this endpoint plays no role \"{role}\"")),
                Some(entry) => {
                    let at = match playing.iter().position(|(name, _)| *name == entry.role) {
                        Some(at) => at,
                        None => {
                            playing.push((entry.role, (entry.make)()));
                            playing.len() - 1
                        }
                    };
                    let mut next = || reader.next_message::<Command>();
                    let mut link = Link::new(&mut output, &mut next);
                    match playing[at].1.handle(&request, params, &mut link) {
                        Ok(value) => Reply::Role(value),
                        Err(RoleError::Failed(message)) => Reply::Failed { message },
                        Err(RoleError::Channel(e)) => return Err(e),
                    }
                }
            },
        };
        write_frame(&mut output, &reply)?;
    }
    Ok(())
}

fn failed(error: impl std::fmt::Display) -> Reply {
    Reply::Failed {
        message: error.to_string(),
    }
}
