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
    #[command(flatten)]
    pub probes: ProbeArgs,
}

/// The agent's own probing of a fleet (`docs/FLEET.md`): with
/// `--probe-peers`, it probes its peer list each cycle over UDP on its
/// port, answers its peers' probes, and keeps summaries a controller
/// reads (`netlab mesh watch`) and its metrics serve.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The fleet: a file of hosts (`HOST[:PORT] zone=Z rack=R` a line) or
    /// `dns:NAME[:PORT]` (every address of a name; each peer tells its
    /// zone and rack in its answers).
    #[arg(long, value_name = "FILE|dns:NAME")]
    pub probe_peers: Option<String>,
    /// This agent as the fleet lists it (its pod's address on Kubernetes);
    /// by default `--listen`'s address.
    #[arg(long, value_name = "ADDR:PORT", env = "NETLAB_PROBE_AS")]
    pub probe_as: Option<SocketAddr>,
    /// The probe cycle (every agent of a fleet gives the same).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "PERIOD")]
    pub probe_every: std::time::Duration,
    /// The probe budget: probe calls a second that reach each agent, as
    /// caller and as answerer (its peers a cycle follow from it).
    #[arg(long, default_value_t = 10.0, value_name = "CALLS_PER_S")]
    pub probe_rate: f64,
    /// Calls a probe makes.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub probe_calls: u32,
    /// A call unanswered this long is lost.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, value_name = "TIME")]
    pub probe_timeout: std::time::Duration,
    /// Seed of the fleet's lists and start times (every agent the same).
    #[arg(long, default_value_t = 0)]
    pub probe_seed: u64,
    /// Peers served as series of their own (the worst K).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub probe_worst: u32,
    /// Probes kept of each peer.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub probe_window: u32,
}

impl ProbeArgs {
    /// The prober's settings, or None without `--probe-peers`.
    pub fn config(
        &self,
        key: &Key,
        listen: SocketAddr,
        identity: &crate::record::testbed::Identity,
    ) -> anyhow::Result<Option<crate::fleet::prober::ProberConfig>> {
        use crate::fleet::prober::{PeerSource, ProberConfig};
        let Some(spec) = &self.probe_peers else {
            return Ok(None);
        };
        let source = PeerSource::parse(spec, listen.port())
            .map_err(|e| anyhow::anyhow!("--probe-peers {e}"))?;
        let me = match self.probe_as {
            Some(me) => me,
            None if listen.ip().is_unspecified() => anyhow::bail!(
                "--probe-peers: the agent listens on {listen}, so say which address the fleet lists it by (--probe-as ADDR:PORT)"
            ),
            None => listen,
        };
        if !(self.probe_rate.is_finite() && self.probe_rate > 0.0) {
            anyhow::bail!(
                "--probe-rate {}: a rate of calls a second above 0",
                self.probe_rate
            );
        }
        if self.probe_every < std::time::Duration::from_secs(1) {
            anyhow::bail!("--probe-every {:?}: at least 1 s", self.probe_every);
        }
        let peers =
            crate::fleet::peers::peers_within(self.probe_rate, self.probe_every, self.probe_calls);
        if peers == 0 {
            anyhow::bail!(
                "--probe-rate {} over --probe-every {:?} leaves no room for one probe of {} calls each way: raise the rate or the cycle",
                self.probe_rate,
                self.probe_every,
                self.probe_calls
            );
        }
        if let PeerSource::File(path) = &source
            && !path.is_file()
        {
            anyhow::bail!(
                "--probe-peers {}: no such file (give a file of hosts or dns:NAME)",
                path.display()
            );
        }
        // A probe's calls go at most 10 ms apart, and all of them within
        // its share of the cycle.
        let share = self.probe_every / peers as u32;
        let spacing = (share / (self.probe_calls + 1)).min(std::time::Duration::from_millis(10));
        let label = |k: &str| identity.labels.get(k).cloned().unwrap_or_default();
        Ok(Some(ProberConfig {
            key: crate::wire::probe::ProbeKey::derive(key.bytes()),
            bind: listen,
            me,
            zone: label("zone"),
            rack: label("rack"),
            source,
            every: self.probe_every,
            peers,
            calls: self.probe_calls,
            spacing,
            timeout: self.probe_timeout,
            seed: self.probe_seed,
            window: self.probe_window as usize,
            max_peers: (4 * peers).max(64),
            worst: self.probe_worst as usize,
            reload: 10,
        }))
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
            let probes = serve.probes.config(&key, serve.listen, &identity)?;
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
                    probes,
                },
                interrupt_flag(),
            )?;
            Ok(())
        }
    }
}
