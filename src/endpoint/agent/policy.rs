//! What an agent lets a controller do: which experiments, which data
//! ports, how long and how much. Pure checks on the typed commands, applied
//! by the agent before an endpoint sees a command.

use crate::endpoint::login::clients::MAX_CORPUS;
use crate::endpoint::login::host::SessionCommand;
use crate::endpoint::protocol::{Amount, Command};
use crate::units::{UnitError, parse_duration, parse_size};
use std::collections::BTreeSet;
use std::time::Duration;

/// The experiments an agent can serve. `login` and `output` start servers,
/// shells and relays on the agent's host, so an agent serves them only
/// where `--allow` lists them.
pub const EXPERIMENTS: [&str; 5] = ["stream", "rpc", "cksum", "login", "output"];
/// Served without `--allow`: they run no command of the agent's host.
pub const DEFAULT_ALLOW: [&str; 3] = ["stream", "rpc", "cksum"];

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub allow: BTreeSet<String>,
    /// The ports (inclusive) an endpoint may listen on for data.
    pub data_ports: (u16, u16),
    /// Longest run (from `Hello` to the last endpoint's end).
    pub max_duration: Duration,
    /// Most bytes one cell may move.
    pub max_bytes: u64,
    /// Runs at once.
    pub max_runs: usize,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            allow: DEFAULT_ALLOW.iter().map(|s| s.to_string()).collect(),
            data_ports: (5311, 5350),
            max_duration: Duration::from_secs(30 * 60),
            max_bytes: 100 << 30,
            max_runs: 1,
        }
    }
}

/// Why an agent's options make no policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("--allow {0}: unknown experiment (one of {list})", list = EXPERIMENTS.join(", "))]
    Unknown(String),
    #[error("--data-ports must be LO-HI, e.g. 5311-5350, not {0}")]
    Ports(String),
    #[error("--data-ports {0}-{1} holds the control port {2}")]
    HoldsControl(u16, u16, u16),
    #[error("--max-duration: {0}")]
    Duration(UnitError),
    #[error("--max-duration must be more than 0")]
    ZeroDuration,
    #[error("--max-bytes: {0}")]
    Bytes(UnitError),
}

impl Policy {
    /// The policy of `netlab agent serve`'s options, checked: known
    /// experiments, a port range `LO-HI` apart from the control port, a
    /// positive duration and a size.
    pub fn from_options(
        allow: &[String],
        data_ports: &str,
        max_duration: &str,
        max_bytes: &str,
        max_runs: usize,
        control_port: u16,
    ) -> Result<Policy, PolicyError> {
        if let Some(name) = allow.iter().find(|n| !EXPERIMENTS.contains(&n.as_str())) {
            return Err(PolicyError::Unknown(name.clone()));
        }
        let bad_ports = || PolicyError::Ports(data_ports.to_string());
        let (lo, hi) = data_ports.split_once('-').ok_or_else(bad_ports)?;
        let port = |s: &str| s.trim().parse::<u16>().ok().filter(|&p| p > 0);
        let (lo, hi) = (
            port(lo).ok_or_else(bad_ports)?,
            port(hi).ok_or_else(bad_ports)?,
        );
        if lo > hi {
            return Err(bad_ports());
        }
        if (lo..=hi).contains(&control_port) {
            return Err(PolicyError::HoldsControl(lo, hi, control_port));
        }
        let max_duration = parse_duration(max_duration).map_err(PolicyError::Duration)?;
        if max_duration.is_zero() {
            return Err(PolicyError::ZeroDuration);
        }
        Ok(Policy {
            allow: allow.iter().cloned().collect(),
            data_ports: (lo, hi),
            max_duration,
            max_bytes: parse_size(max_bytes).map_err(PolicyError::Bytes)?,
            max_runs,
        })
    }
}

/// The experiment name a controller's subcommand runs under (`sweep` runs
/// streams).
pub fn canonical(experiment: &str) -> &str {
    match experiment {
        "sweep" => "stream",
        other => other,
    }
}

impl Policy {
    /// One line for the agent's log and the controller's records.
    pub fn describe(&self) -> String {
        format!(
            "allow {}; data ports {}-{}; at most {} s and {} bytes a run; {} run(s) at once",
            self.allow.iter().cloned().collect::<Vec<_>>().join(","),
            self.data_ports.0,
            self.data_ports.1,
            self.max_duration.as_secs(),
            self.max_bytes,
            self.max_runs
        )
    }

    /// Whether a run of `experiment` may start here. A `lab` run needs
    /// the three experiments served by default; its login and output cells
    /// run where `--allow` lists them.
    pub fn admit(&self, experiment: &str) -> Result<(), String> {
        if experiment == "lab" {
            return DEFAULT_ALLOW
                .iter()
                .try_for_each(|name| self.admit(name))
                .map_err(|why| format!("a lab run needs stream, rpc and cksum: {why}"));
        }
        let name = canonical(experiment);
        if !EXPERIMENTS.contains(&name) {
            return Err(format!("unknown experiment \"{experiment}\""));
        }
        if !self.allow.contains(name) {
            return Err(format!(
                "this agent does not serve {name} (it serves {}; {name} needs --allow {name} on the agent)",
                self.allow.iter().cloned().collect::<Vec<_>>().join(",")
            ));
        }
        Ok(())
    }

    /// Checks `command` of a run of `experiment`, and binds it to the
    /// agent's limits: a listener gets the data ports, a receiver the byte
    /// limit. `Err` names what is refused; the endpoint never sees it.
    pub fn check(&self, experiment: &str, command: &mut Command) -> Result<(), String> {
        let mut experiment = canonical(experiment);
        // A lab run holds each command to its own experiment.
        if experiment == "lab"
            && let Some(kind) = experiment_of(command)
        {
            self.admit(kind)?;
            experiment = kind;
        }
        let listens_for = |what: &str| format!("{what} is not part of a {experiment} run");
        match command {
            Command::StreamReceive(spec) => {
                if experiment != "stream" {
                    return Err(listens_for("a stream receiver"));
                }
                if spec.udp {
                    // A UDP port has no connection to guard with the token.
                    return Err("UDP tests are not served through agents".into());
                }
                let guard = spec.guard.as_mut().ok_or_else(unguarded)?;
                guard.ports = Some(self.ports_for(spec.bind.port())?);
                spec.limit_bytes = Some(self.max_bytes);
            }
            Command::StreamSend(spec) => {
                if experiment != "stream" {
                    return Err(listens_for("a stream sender"));
                }
                if spec.udp.is_some() {
                    return Err("UDP tests are not served through agents".into());
                }
                match spec.amount {
                    Amount::Bytes(bytes) if bytes > self.max_bytes => {
                        return Err(format!(
                            "{bytes} bytes exceed the agent's limit of {} bytes a cell",
                            self.max_bytes
                        ));
                    }
                    Amount::Seconds(s) if s > self.max_duration.as_secs_f64() => {
                        return Err(format!(
                            "{s} s exceeds the agent's limit of {} s a run",
                            self.max_duration.as_secs()
                        ));
                    }
                    _ => {}
                }
            }
            Command::RpcServe { bind, guard, .. } => {
                if experiment != "rpc" {
                    return Err(listens_for("an RPC server"));
                }
                let guard = guard.as_mut().ok_or_else(unguarded)?;
                guard.ports = Some(self.ports_for(bind.port())?);
            }
            Command::RpcClient(spec) => {
                if experiment != "rpc" {
                    return Err(listens_for("an RPC client"));
                }
                let bytes = (spec.size as u64)
                    .saturating_mul(spec.calls as u64)
                    .saturating_mul(spec.reps as u64);
                if bytes > self.max_bytes {
                    return Err(format!(
                        "{bytes} bytes of arguments exceed the agent's limit of {} bytes a cell",
                        self.max_bytes
                    ));
                }
            }
            Command::Cksum(_) => {
                if experiment != "cksum" {
                    return Err(listens_for("a checksum measurement"));
                }
            }
            Command::HostServe(spec) => {
                if experiment != "login" && experiment != "output" {
                    return Err(listens_for("a login server"));
                }
                match spec.session {
                    SessionCommand::Discard { .. } if experiment != "login" => {
                        return Err(listens_for("a typing session"));
                    }
                    SessionCommand::Output { .. } if experiment != "output" => {
                        return Err(listens_for("an output session"));
                    }
                    SessionCommand::Output { bytes, .. } if bytes > self.max_bytes => {
                        return Err(format!(
                            "{bytes} bytes of output exceed the agent's limit of {} bytes a cell",
                            self.max_bytes
                        ));
                    }
                    _ => {}
                }
                let guard = spec.guard.as_mut().ok_or_else(unguarded)?;
                guard.ports = Some(self.ports_for(0)?);
            }
            Command::Type(spec) => {
                if experiment != "login" {
                    return Err(listens_for("a typist"));
                }
                if spec.warmup_s + spec.duration_s > self.max_duration.as_secs_f64() {
                    return Err(format!(
                        "{} s of typing exceeds the agent's limit of {} s a run",
                        spec.warmup_s + spec.duration_s,
                        self.max_duration.as_secs()
                    ));
                }
                if spec.corpus.len() > MAX_CORPUS {
                    return Err(format!(
                        "a corpus of {} bytes is over the {MAX_CORPUS} a typing end takes",
                        spec.corpus.len()
                    ));
                }
            }
            Command::Terminal(_) => {
                if experiment != "output" {
                    return Err(listens_for("a terminal"));
                }
            }
            Command::Emulate(_) | Command::Capture(_) => {
                return Err(
                    "the wire emulator and the capture run only on the controller's host".into(),
                );
            }
            Command::Go
            | Command::Stop
            | Command::Exit
            | Command::WindowOpen
            | Command::WindowClose
            | Command::Proceed => {}
        }
        Ok(())
    }

    fn ports_for(&self, asked: u16) -> Result<(u16, u16), String> {
        let (lo, hi) = self.data_ports;
        if asked == 0 || (lo..=hi).contains(&asked) {
            Ok(if asked == 0 { (lo, hi) } else { (asked, asked) })
        } else {
            Err(format!(
                "port {asked} is outside the agent's data ports {lo}-{hi}"
            ))
        }
    }
}

/// The experiment a command belongs to (None: one every run uses).
pub fn experiment_of(command: &Command) -> Option<&'static str> {
    match command {
        Command::StreamReceive(_) | Command::StreamSend(_) => Some("stream"),
        Command::RpcServe { .. } | Command::RpcClient(_) => Some("rpc"),
        Command::Cksum(_) => Some("cksum"),
        Command::HostServe(spec) => Some(match spec.session {
            SessionCommand::Discard { .. } => "login",
            SessionCommand::Output { .. } => "output",
        }),
        Command::Type(_) => Some("login"),
        Command::Terminal(_) => Some("output"),
        Command::Go
        | Command::Stop
        | Command::Exit
        | Command::WindowOpen
        | Command::WindowClose
        | Command::Proceed
        | Command::Emulate(_)
        | Command::Capture(_) => None,
    }
}

fn unguarded() -> String {
    "the agent opens a data port only for a named peer with a run token, and the controller sent neither".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::protocol::{DataGuard, ReceiveSpec, SendSpec, SocketOptions};
    use crate::experiments::stream::record::{RecvStrategy, SendStrategy};

    #[test]
    fn serve_options_make_a_checked_policy() {
        let allow = vec!["stream".to_string(), "login".to_string()];
        let policy =
            Policy::from_options(&allow, "6000-6010", "10m", "1G", 2, 5310).expect("valid options");
        assert_eq!(policy.data_ports, (6000, 6010));
        assert_eq!(policy.max_duration, Duration::from_secs(600));
        assert_eq!(policy.max_bytes, 1 << 30);
        assert!(policy.allow.contains("login"));
        let refused = |allow: &[String], ports: &str, time: &str| {
            Policy::from_options(allow, ports, time, "1G", 1, 5310)
                .expect_err("bad options")
                .to_string()
        };
        assert!(refused(&["shell".into()], "6000-6010", "1m").contains("unknown experiment"));
        assert!(refused(&allow, "6010-6000", "1m").contains("must be LO-HI"));
        assert!(refused(&allow, "6000", "1m").contains("must be LO-HI"));
        assert_eq!(
            refused(&allow, "5300-5320", "1m"),
            "--data-ports 5300-5320 holds the control port 5310"
        );
        assert!(refused(&allow, "6000-6010", "0s").starts_with("--max-duration"));
    }

    fn receive(guard: Option<DataGuard>, port: u16) -> Command {
        Command::StreamReceive(ReceiveSpec {
            bind: std::net::SocketAddr::from(([10, 0, 0, 2], port)),
            options: SocketOptions::default(),
            strategy: RecvStrategy::Read { buffer: 1 << 17 },
            verify: true,
            progress: false,
            interface: None,
            guard,
            limit_bytes: None,
            udp: false,
            udp_clock_shared: false,
        })
    }

    fn guard() -> DataGuard {
        DataGuard {
            peer: "10.0.0.1".parse().unwrap(),
            token: [5; 16],
            ports: None,
        }
    }

    #[test]
    fn a_receiver_gets_the_data_ports_and_the_byte_limit() {
        let policy = Policy::default();
        let mut command = receive(Some(guard()), 0);
        policy.check("stream", &mut command).unwrap();
        let Command::StreamReceive(spec) = command else {
            unreachable!()
        };
        assert_eq!(spec.guard.unwrap().ports, Some((5311, 5350)));
        assert_eq!(spec.limit_bytes, Some(policy.max_bytes));
        let mut outside = receive(Some(guard()), 80);
        assert!(
            policy
                .check("stream", &mut outside)
                .unwrap_err()
                .contains("outside")
        );
    }

    #[test]
    fn unguarded_listeners_and_foreign_commands_are_refused() {
        let policy = Policy::default();
        assert!(policy.check("stream", &mut receive(None, 0)).is_err());
        assert!(policy.check("rpc", &mut receive(Some(guard()), 0)).is_err());
    }

    #[test]
    fn amounts_over_the_limits_are_refused() {
        let policy = Policy {
            max_bytes: 1000,
            max_duration: Duration::from_secs(10),
            ..Policy::default()
        };
        let send = |amount| {
            Command::StreamSend(SendSpec {
                connect: "10.0.0.2:5311".parse().unwrap(),
                options: SocketOptions::default(),
                strategy: SendStrategy::Write,
                record: 100,
                amount,
                interface: None,
                token: None,
                interval_s: None,
                udp: None,
            })
        };
        assert!(
            policy
                .check("stream", &mut send(Amount::Bytes(1000)))
                .is_ok()
        );
        assert!(
            policy
                .check("stream", &mut send(Amount::Bytes(1001)))
                .is_err()
        );
        assert!(
            policy
                .check("stream", &mut send(Amount::Seconds(11.0)))
                .is_err()
        );
    }

    #[test]
    fn login_needs_allow() {
        let policy = Policy::default();
        assert!(policy.admit("stream").is_ok());
        assert!(policy.admit("sweep").is_ok());
        let refusal = policy.admit("login").unwrap_err();
        assert!(refusal.contains("--allow login"), "{refusal}");
        assert!(policy.admit("rm -rf").is_err());
    }

    #[test]
    fn a_lab_run_holds_each_command_to_its_own_experiment() {
        let policy = Policy::default();
        assert!(policy.admit("lab").is_ok());
        assert!(policy.check("lab", &mut receive(Some(guard()), 0)).is_ok());
        let typing = |session| {
            Command::HostServe(crate::endpoint::login::host::HostServeSpec {
                target: crate::endpoint::login::host::Target::Epoll,
                dialect: crate::endpoint::login::host::Dialect::Rlogin,
                address: "10.0.0.2".parse().unwrap(),
                session,
                max_sessions: 4,
                nodelay: false,
                interface: None,
                measure_idle: false,
                guard: Some(guard()),
                cpu_budget_pct: None,
            })
        };
        let refusal = policy
            .check(
                "lab",
                &mut typing(SessionCommand::Discard { linemode: false }),
            )
            .unwrap_err();
        assert!(refusal.contains("--allow login"), "{refusal}");
        let allowing = Policy {
            allow: ["stream", "rpc", "cksum", "login"].map(String::from).into(),
            ..Policy::default()
        };
        assert!(
            allowing
                .check(
                    "lab",
                    &mut typing(SessionCommand::Discard { linemode: false })
                )
                .is_ok()
        );
        // Output needs its own --allow; and a login run takes no output session.
        let output = || {
            typing(SessionCommand::Output {
                bytes: 10,
                baud: None,
            })
        };
        assert!(allowing.check("lab", &mut output()).is_err());
        assert!(allowing.check("login", &mut output()).is_err());
        let streams_only = Policy {
            allow: ["stream"].map(String::from).into(),
            ..Policy::default()
        };
        assert!(streams_only.admit("lab").is_err());
    }
}
