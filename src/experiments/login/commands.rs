//! `netlab login serve`: TELNET and rlogin servers on ptys with the relay
//! design as a switch (`--relay fork|epoll|splice|uring|batch`; see
//! [`crate::endpoint::login::server`]).

use crate::endpoint::login::conn::SessionConfig;
use crate::endpoint::login::protocol::Protocol;
use crate::endpoint::login::relay_fork;
use crate::endpoint::login::server::{self, LoginServeSpec, Relay, pace};
use crate::experiment::endpoints::wait_for_interrupt;
use crate::options::Output;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoginArgs {
    #[command(subcommand)]
    pub command: Option<LoginCommand>,
    #[command(flatten)]
    pub experiment: crate::experiments::login::options::LoginExperimentArgs,
}

#[derive(Debug, Subcommand)]
pub enum LoginCommand {
    /// Serve TELNET or rlogin sessions, each running a command on its own pty.
    Serve(ServeArgs),
    /// Internal: write FILE to stdout at a terminal's pace (`netlab output --baud`).
    #[command(hide = true)]
    Pace {
        #[arg(long)]
        bytes_per_s: u64,
        file: std::path::PathBuf,
    },
    /// Internal: one session (fork design) on the socket inherited as fd 3.
    #[command(hide = true)]
    Session {
        #[arg(long, value_parser = ["telnet", "rlogin"])]
        protocol: String,
        #[arg(long)]
        linemode: bool,
        #[arg(long)]
        nodelay: bool,
        #[arg(long)]
        idle_s: u64,
        #[arg(long)]
        peer: SocketAddr,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Protocol.
    #[arg(long, default_value = "telnet", value_parser = ["telnet", "rlogin"])]
    pub protocol: String,
    /// Relay design: how bytes move between socket and pty.
    #[arg(long, value_enum, default_value = "fork")]
    pub relay: Relay,
    #[command(flatten)]
    pub bind: crate::options::BindArgs,
    /// Ask clients for LINEMODE (they edit and echo lines locally).
    #[arg(long)]
    pub linemode: bool,
    /// TCP_NODELAY on every session's socket (off, as in telnetd: Nagle
    /// then holds small output writes until the client's delayed ACK).
    #[arg(long)]
    pub nodelay: bool,
    /// Most sessions at once; more are refused.
    #[arg(long, default_value_t = 256)]
    pub max_sessions: usize,
    /// Close sessions without input for this many seconds.
    #[arg(long, default_value_t = 300)]
    pub idle_timeout: u64,
    /// The command each session runs (default `cat`, not a shell); give it
    /// last: every word after it, dashes included, is the command's.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, default_values = ["cat"])]
    pub command: Vec<String>,
}

pub fn run(args: LoginArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        None => crate::experiments::login::options::run(args.experiment, out),
        Some(LoginCommand::Serve(serve_args)) => serve(serve_args, out),
        Some(LoginCommand::Pace { bytes_per_s, file }) => {
            let data =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            Ok(pace(bytes_per_s, &data, &mut std::io::stdout().lock())?)
        }
        Some(LoginCommand::Session {
            protocol,
            linemode,
            nodelay,
            idle_s,
            peer,
            command,
        }) => {
            let config = SessionConfig {
                protocol: Protocol::parse(&protocol).expect("checked by clap"),
                linemode,
                command,
                idle: Duration::from_secs(idle_s),
                nodelay,
                guard: None,
            };
            Ok(relay_fork::session_on_fd3(peer, &config)?)
        }
    }
}

fn serve(args: ServeArgs, out: &mut Output) -> anyhow::Result<()> {
    let bind = args.bind.checked(
        "login serve",
        "the protocol carries no encryption and the command runs as this user",
    )?;
    let running = server::Running::start(LoginServeSpec {
        bind,
        relay: args.relay,
        protocol: args.protocol,
        linemode: args.linemode,
        nodelay: args.nodelay,
        max_sessions: args.max_sessions,
        idle_timeout_s: args.idle_timeout,
        command: args.command,
        guard: None,
    })
    .with_context(|| format!("cannot serve on {bind}"))?;
    out.text(&format!("{}\n", running.port()))?;
    wait_for_interrupt();
    running.stop()?;
    Ok(())
}
