//! `netlab agent keygen` and `netlab agent serve`: the far end of runs
//! between real hosts (`docs/DEPLOY.md`).

use crate::agent::AgentConfig;
use crate::controller::processes::interrupt_flag;
use crate::endpoint::agent::key::Key;
use crate::endpoint::agent::policy::Policy;
use crate::options::Output;
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
    Serve(Box<ServeArgs>),
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
    /// Experiments served besides the defaults (stream, rpc, cksum): login
    /// and output run servers and shells on this host, so they are served
    /// only when listed here (`--allow login,output`).
    #[arg(long, value_delimiter = ',', value_name = "EXPERIMENTS")]
    pub allow: Vec<String>,
    /// Serve exactly these experiments, the defaults only if listed
    /// (`--allow-only stream` serves stream alone).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "EXPERIMENTS",
        conflicts_with = "allow"
    )]
    pub allow_only: Option<Vec<String>>,
    /// Ports the data connections may use, for a firewall.
    #[arg(long, default_value = "5311-5350", value_name = "LO-HI")]
    pub data_ports: String,
    /// Longest run; the agent ends a run that passes it.
    #[arg(long, default_value = "30m", value_name = "TIME")]
    pub max_duration: String,
    /// Most bytes one cell may move.
    #[arg(long, default_value = "100G", value_name = "SIZE")]
    pub max_bytes: String,
    /// A label the agent gives controllers (KEY=VALUE, repeatable: `--label
    /// zone=a --label rack=r1`); also `NETLAB_LABEL_<KEY>` in the
    /// environment, and the node's name from `NODE_NAME`.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Runs at once; another controller is told who holds the agent.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_runs: u32,
    /// Serve the agent's own metrics (runs served, refusals by reason,
    /// its endpoints' bytes) at http://ADDR:PORT/metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
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
            let allow = match &serve.allow_only {
                Some(only) => only.clone(),
                None => crate::experiments::SERVED
                    .by_default()
                    .into_iter()
                    .map(String::from)
                    .chain(serve.allow.iter().cloned())
                    .collect(),
            };
            let policy = Policy::from_options(
                &allow,
                &serve.data_ports,
                &serve.max_duration,
                &serve.max_bytes,
                serve.max_runs as usize,
                serve.listen.port(),
                crate::experiments::SERVED,
            )?;
            let identity =
                crate::record::testbed::Identity::gather(&serve.labels, std::env::vars())
                    .map_err(anyhow::Error::msg)?;
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
                    identity,
                    metrics: serve.metrics,
                },
                interrupt_flag(),
            )?;
            Ok(())
        }
    }
}
