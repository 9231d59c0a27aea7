//! `netlab agent keygen` and `netlab agent serve`: the far end of runs
//! between real hosts (`docs/DEPLOY.md`).

use super::Output;
use crate::agent::AgentConfig;
use crate::endpoint::agent::key::Key;
use crate::endpoint::agent::policy::{EXPERIMENTS, Policy};
use crate::experiment::endpoints::interrupt_flag;
use crate::units::{parse_duration, parse_size};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(subcommand)]
    pub command: AgentCommand,
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Make a pre-shared key (mode 0600; never overwrites a file).
    Keygen {
        /// Where to write it.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Serve controllers that hold the key.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The pre-shared key (`netlab agent keygen`).
    #[arg(long, value_name = "FILE", env = "NETLAB_KEY_FILE")]
    pub key: PathBuf,
    /// Address and port of the control channel. Only loopback by default:
    /// an address other hosts reach must be given here.
    #[arg(long, default_value = "127.0.0.1:5310", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Experiments served (login and output run servers and shells on this
    /// host, so they are served only when listed).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "stream,rpc,cksum",
        value_name = "EXPERIMENTS"
    )]
    pub allow: Vec<String>,
    /// Ports the data connections may use, for a firewall.
    #[arg(long, default_value = "5311-5350", value_name = "LO-HI")]
    pub data_ports: String,
    /// Longest run; the agent ends a run that passes it.
    #[arg(long, default_value = "30m", value_name = "TIME")]
    pub max_duration: String,
    /// Most bytes one cell may move.
    #[arg(long, default_value = "100G", value_name = "SIZE")]
    pub max_bytes: String,
    /// Runs at once; another controller is told who holds the agent.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_runs: u32,
}

impl ServeArgs {
    fn policy(&self) -> anyhow::Result<Policy> {
        for name in &self.allow {
            if !EXPERIMENTS.contains(&name.as_str()) {
                bail!(
                    "--allow {name}: unknown experiment (one of {})",
                    EXPERIMENTS.join(", ")
                );
            }
        }
        let usage = || {
            format!(
                "--data-ports must be LO-HI, e.g. 5311-5350, not {}",
                self.data_ports
            )
        };
        let (lo, hi) = self.data_ports.split_once('-').with_context(usage)?;
        let port = |s: &str| s.trim().parse::<u16>().ok().filter(|&p| p > 0);
        let (lo, hi) = (port(lo).with_context(usage)?, port(hi).with_context(usage)?);
        if lo > hi {
            bail!("{}", usage());
        }
        if (lo..=hi).contains(&self.listen.port()) {
            bail!(
                "--data-ports {lo}-{hi} holds the control port {}",
                self.listen.port()
            );
        }
        let max_duration = parse_duration(&self.max_duration).context("--max-duration")?;
        if max_duration.is_zero() {
            bail!("--max-duration must be more than 0");
        }
        Ok(Policy {
            allow: self.allow.iter().cloned().collect(),
            data_ports: (lo, hi),
            max_duration,
            max_bytes: parse_size(&self.max_bytes).context("--max-bytes")?,
            max_runs: self.max_runs as usize,
        })
    }
}

pub fn run(args: AgentArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        AgentCommand::Keygen { out: path } => {
            Key::generate()?.write_new(&path)?;
            out.text(&format!(
                "wrote a new key to {} (mode 0600); copy it to the controller and each agent over a channel you trust\n",
                path.display()
            ))?;
            Ok(())
        }
        AgentCommand::Serve(serve) => {
            let policy = serve.policy()?;
            let key = Key::load(&serve.key)?;
            if !serve.listen.ip().is_loopback() {
                eprintln!(
                    "netlab agent: serving on {}, reachable from other hosts: only holders of the key get past the handshake",
                    serve.listen
                );
            }
            crate::agent::serve(
                AgentConfig {
                    key,
                    listen: serve.listen,
                    policy,
                },
                interrupt_flag(),
            )?;
            Ok(())
        }
    }
}
