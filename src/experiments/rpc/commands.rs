//! `netlab rpc`: the 1989 RPC experiment, and its server and a ping.

use crate::endpoint::rpc::client;
use crate::endpoint::rpc::rpcbind;
use crate::endpoint::rpc::server::{PROGRAM, Server, ServerOptions, VERSION};
use crate::experiment::endpoints::wait_for_interrupt;
use crate::options::Output;
use crate::units::{parse_duration, parse_size};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::io::Write;
use std::net::SocketAddr;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RpcArgs {
    #[command(subcommand)]
    pub command: Option<RpcCommand>,
    #[command(flatten)]
    pub experiment: crate::experiments::rpc::options::RpcExperimentArgs,
}

#[derive(Debug, Subcommand)]
pub enum RpcCommand {
    /// Serve netlab's RPC program (NULL and SINK) on TCP and UDP.
    Serve(ServeArgs),
    /// Call procedure 0 (NULL) of any ONC RPC program, like `rpcinfo -t/-u`.
    Ping(PingArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to serve (one port for both TCP and UDP).
    #[command(flatten)]
    pub bind: crate::options::BindArgs,
    /// Register with the local rpcbind (so rpcinfo finds the program), and unregister on exit.
    #[arg(long)]
    pub register: bool,
    #[arg(long)]
    pub nodelay: bool,
    /// Never delay ACKs (TCP_QUICKACK re-armed after every read).
    #[arg(long)]
    pub quickack: bool,
    /// Spin on non-blocking receives this many µs before sleeping (0: never).
    #[arg(long, default_value_t = 0, value_name = "US", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub busy_poll: u32,
    /// Largest record accepted.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub max_record: u64,
    /// Close connections idle this long.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct PingArgs {
    /// Server address, e.g. 127.0.0.1:111.
    pub server: SocketAddr,
    /// Program number (100000 is rpcbind).
    pub program: u32,
    /// Version.
    pub version: u32,
    /// Use UDP instead of TCP.
    #[arg(long)]
    pub udp: bool,
}

pub fn run(args: RpcArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        Some(RpcCommand::Serve(serve_args)) => serve(serve_args, out),
        Some(RpcCommand::Ping(ping_args)) => ping(ping_args, out),
        None => crate::experiments::rpc::options::run(args.experiment, out),
    }
}

fn serve(args: ServeArgs, out: &mut Output) -> anyhow::Result<()> {
    let bind = args
        .bind
        .checked("rpc serve", "any peer may call the program")?;
    let options = ServerOptions {
        max_record: args.max_record as usize,
        nodelay: args.nodelay,
        quickack: args.quickack,
        busy_poll_us: args.busy_poll,
        idle_timeout_ms: args.idle_timeout.as_millis() as u64,
        ..Default::default()
    };
    let server = Server::bind(bind, options).with_context(|| format!("cannot bind {bind}"))?;
    let running = server.start()?;
    let port = running.port();
    out.text(&format!("{port}\n"))?;
    let _ = std::io::stdout().flush();
    let registration = args
        .register
        .then(|| rpcbind::Registration::new(PROGRAM, VERSION, port))
        .transpose()?;
    eprintln!(
        "netlab rpc serve: program {PROGRAM} (0x{PROGRAM:08x}) version {VERSION} on {}:{port} TCP and UDP{}; Ctrl-C stops",
        bind.ip(),
        if registration.is_some() {
            ", registered with rpcbind"
        } else {
            ""
        }
    );
    wait_for_interrupt();
    drop(registration);
    let report = running.stop();
    eprintln!(
        "netlab rpc serve: {} calls, {} connections, {} closed for misbehaving, {} records dropped",
        report.calls, report.connections, report.closed_bad_peers, report.dropped_records
    );
    Ok(())
}

fn ping(args: PingArgs, out: &mut Output) -> anyhow::Result<()> {
    let proto = if args.udp { "udp" } else { "tcp" };
    let took =
        client::ping(args.server, args.program, args.version, args.udp).with_context(|| {
            format!(
                "program {} version {} at {} ({proto})",
                args.program, args.version, args.server
            )
        })?;
    out.text(&format!(
        "program {} version {} ready and waiting ({proto} {} µs)\n",
        args.program,
        args.version,
        took.as_micros()
    ))?;
    Ok(())
}
