//! What an agent lets a controller do: which experiments, which data
//! ports, how long and how much. Pure checks on the typed commands, applied
//! by the agent before an endpoint sees a command.

use crate::endpoint::protocol::{Command, DataGuard};
use crate::units::{UnitError, parse_duration, parse_size};
use std::collections::BTreeSet;
use std::time::Duration;

/// How an agent serves one experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// Without `--allow`: it runs no command of the agent's host.
    ByDefault,
    /// Only with `--allow NAME`: it starts servers, shells and relays there.
    OnAllow,
    /// Its runs are made of other experiments' cells through an agent (a
    /// sweep runs streams; a mesh runs streams and RPC ping-pongs), and
    /// are served when every one of those is.
    As(&'static [&'static str]),
}

/// One role's check of the requests it is sent through an agent, by the
/// role's name: each request's own `Handler::check`, found by the
/// request's name (`crate::endpoint::role::check_of` makes these; the
/// registry lists them). It may tighten the request.
#[derive(Clone, Copy)]
pub struct RoleCheck {
    pub role: &'static str,
    /// Checks request `name` of the role, its body as JSON, in a run.
    pub check: fn(&str, &mut serde_json::Value, &str, &Policy) -> Result<(), String>,
}

impl std::fmt::Debug for RoleCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.role)
    }
}

/// Checks are the same when they are the same role's.
impl PartialEq for RoleCheck {
    fn eq(&self, other: &RoleCheck) -> bool {
        self.role == other.role
    }
}

/// What the registry tells an agent about the experiments it can serve;
/// this module names none of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Served {
    /// Every experiment an agent knows, and how it serves it.
    pub experiments: &'static [(&'static str, Serve)],
    /// The run that holds the experiments served by default and each
    /// request to its own experiment's `--allow` (the lab).
    pub every: &'static str,
    /// The roles whose requests the agent checks, each by its own rules.
    pub roles: &'static [RoleCheck],
}

impl Served {
    /// Nothing: an agent without the registry's list serves no run.
    pub const NONE: Served = Served {
        experiments: &[],
        every: "",
        roles: &[],
    };

    /// Every name `--allow` takes.
    pub fn allowable(&self) -> Vec<&'static str> {
        self.experiments
            .iter()
            .filter(|(_, how)| !matches!(how, Serve::As(_)))
            .map(|(name, _)| *name)
            .collect()
    }

    /// The experiments served without `--allow`.
    pub fn by_default(&self) -> Vec<&'static str> {
        self.experiments
            .iter()
            .filter(|(_, how)| *how == Serve::ByDefault)
            .map(|(name, _)| *name)
            .collect()
    }

    /// The experiments whose cells a run of `run` is made of, when it is
    /// made of others' (`None`: of its own).
    pub fn made_of(&self, run: &str) -> Option<&'static [&'static str]> {
        match self.experiments.iter().find(|(name, _)| *name == run) {
            Some((_, Serve::As(experiments))) => Some(experiments),
            _ => None,
        }
    }
}

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
    /// The experiments and roles it knows (the registry's; none by
    /// default, so every run and request is refused).
    pub served: Served,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            allow: BTreeSet::new(),
            data_ports: (5311, 5350),
            max_duration: Duration::from_secs(30 * 60),
            max_bytes: 100 << 30,
            max_runs: 1,
            served: Served::NONE,
        }
    }
}

/// Why an agent's options make no policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("--allow {0}: unknown experiment (one of {1})")]
    Unknown(String, String),
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
        served: Served,
    ) -> Result<Policy, PolicyError> {
        let allowable = served.allowable();
        if let Some(name) = allow.iter().find(|n| !allowable.contains(&n.as_str())) {
            return Err(PolicyError::Unknown(name.clone(), allowable.join(", ")));
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
            served,
        })
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

    /// Whether a run of `experiment` may start here. A lab run needs the
    /// experiments served by default; its other cells run where `--allow`
    /// lists them.
    pub fn admit(&self, experiment: &str) -> Result<(), String> {
        let served = &self.served;
        if !served.every.is_empty() && experiment == served.every {
            let by_default = served.by_default();
            return by_default
                .iter()
                .try_for_each(|name| self.admit(name))
                .map_err(|why| {
                    format!(
                        "a {} run needs {}: {why}",
                        served.every,
                        by_default.join(", ")
                    )
                });
        }
        // A run made of others' cells is admitted when the agent serves any
        // of them; each request in it is then held to its own experiment's
        // `--allow` ([`Policy::part_of`]), so that an agent allowed stream
        // and rpc still serves a mesh of those tests.
        if let Some(parts) = served.made_of(experiment) {
            return match parts
                .iter()
                .map(|name| self.admit(name))
                .find(Result::is_ok)
            {
                Some(_) => Ok(()),
                None => Err(format!(
                    "a {experiment} run is made of {} cells, and this agent serves none of them (it serves {}; each needs --allow on the agent)",
                    parts.join(", "),
                    self.allow.iter().cloned().collect::<Vec<_>>().join(",")
                )),
            };
        }
        let name = experiment;
        if !served.allowable().contains(&name) {
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
    /// Checks one command of a run of `experiment` before an endpoint sees
    /// it: a request goes to its role's own check, which may tighten it.
    pub fn check(&self, experiment: &str, command: &mut Command) -> Result<(), String> {
        match command {
            Command::Role {
                role,
                request,
                params,
            } => {
                let entry = self
                    .served
                    .roles
                    .iter()
                    .find(|c| c.role == role)
                    .ok_or_else(|| format!("no endpoint role \"{role}\""))?;
                (entry.check)(request, params, experiment, self)
            }
            Command::Proceed | Command::Exit => Ok(()),
        }
    }

    /// For a role's check: a request for `what` of `experiment` belongs in
    /// a `run` of that experiment, or in a lab run that this agent admits
    /// it to.
    pub fn part_of(&self, run: &str, experiment: &str, what: &str) -> Result<(), String> {
        if !self.served.every.is_empty() && run == self.served.every {
            return self.admit(experiment);
        }
        let belongs = match self.served.made_of(run) {
            Some(parts) => parts.contains(&experiment),
            None => run == experiment,
        };
        if !belongs {
            return Err(format!("{what} is not part of a {run} run"));
        }
        if run != experiment {
            // A part of a made-of run: the run's admission asked for any
            // part, this request for its own.
            return self
                .admit(experiment)
                .map_err(|why| format!("{what} in a {run} run: {why}"));
        }
        Ok(())
    }

    /// For a role's check: a listener serves only a named peer with a run
    /// token, on the agent's data ports (`asked`, or any of them for 0).
    pub fn guard_data_port(&self, guard: &mut Option<DataGuard>, asked: u16) -> Result<(), String> {
        let guard = guard.as_mut().ok_or_else(unguarded)?;
        guard.ports = Some(self.ports_for(asked)?);
        Ok(())
    }

    /// For a role's check: `bytes` (of `what`, e.g. " of output") within
    /// the agent's limit for a cell.
    pub fn within_bytes(&self, bytes: u64, what: &str) -> Result<(), String> {
        if bytes > self.max_bytes {
            return Err(format!(
                "{bytes} bytes{what} exceed the agent's limit of {} bytes a cell",
                self.max_bytes
            ));
        }
        Ok(())
    }

    /// For a role's check: `seconds` (of `what`) within the agent's limit
    /// for a run.
    pub fn within_seconds(&self, seconds: f64, what: &str) -> Result<(), String> {
        if seconds > self.max_duration.as_secs_f64() {
            return Err(format!(
                "{seconds} s{what} exceeds the agent's limit of {} s a run",
                self.max_duration.as_secs()
            ));
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

fn unguarded() -> String {
    "the agent opens a data port only for a named peer with a run token, and the controller sent neither".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::bulk::spec::{ReceiveSpec, SendSpec};
    use crate::endpoint::bulk::types::{Amount, RecvStrategy, SendStrategy, SocketOptions};
    use crate::endpoint::login::host::SessionCommand;
    use crate::experiments::login::role::{Serve as LoginServe, Type};
    use crate::experiments::stream::role::{Connect, Listen};

    /// The agent's default policy, checking the registry's roles.
    fn default() -> Policy {
        Policy {
            served: crate::experiments::SERVED,
            allow: crate::experiments::SERVED
                .by_default()
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Policy::default()
        }
    }

    fn request(request: impl crate::endpoint::role::Request) -> Command {
        crate::endpoint::role::command(&request).unwrap()
    }

    /// A request of `role` by its name and body, as any peer could send it.
    fn raw(role: &str, request: &str, params: serde_json::Value) -> Command {
        Command::Role {
            role: role.into(),
            request: request.into(),
            params,
        }
    }

    #[test]
    fn serve_options_make_a_checked_policy() {
        let allow = vec!["stream".to_string(), "login".to_string()];
        let policy = Policy::from_options(
            &allow,
            "6000-6010",
            "10m",
            "1G",
            2,
            5310,
            crate::experiments::SERVED,
        )
        .expect("valid options");
        assert_eq!(policy.data_ports, (6000, 6010));
        assert_eq!(policy.max_duration, Duration::from_secs(600));
        assert_eq!(policy.max_bytes, 1 << 30);
        assert!(policy.allow.contains("login"));
        let refused = |allow: &[String], ports: &str, time: &str| {
            Policy::from_options(
                allow,
                ports,
                time,
                "1G",
                1,
                5310,
                crate::experiments::SERVED,
            )
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
        request(Listen(ReceiveSpec {
            tls: None,
            quic: None,
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
        }))
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
        let policy = default();
        let mut command = receive(Some(guard()), 0);
        policy.check("stream", &mut command).unwrap();
        let Command::Role { params, .. } = command else {
            unreachable!()
        };
        let Ok(Listen(spec)) = serde_json::from_value(params) else {
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
        let policy = default();
        assert!(policy.check("stream", &mut receive(None, 0)).is_err());
        assert!(policy.check("rpc", &mut receive(Some(guard()), 0)).is_err());
    }

    #[test]
    fn amounts_over_the_limits_are_refused() {
        let policy = Policy {
            max_bytes: 1000,
            max_duration: Duration::from_secs(10),
            ..default()
        };
        let sender = |record: usize, amount, token, interval_s: Option<f64>| {
            request(Connect(SendSpec {
                tls: None,
                quic: None,
                connect: "10.0.0.2:5311".parse().unwrap(),
                options: SocketOptions::default(),
                strategy: SendStrategy::Write,
                record,
                amount,
                interface: None,
                token,
                interval_s,
                udp: None,
            }))
        };
        let send_with = |amount, token| sender(100, amount, token, None);
        let send = |amount| send_with(amount, Some([1; crate::endpoint::protocol::TOKEN_LEN]));
        assert!(
            policy
                .check("stream", &mut send(Amount::Bytes(1000)))
                .is_ok()
        );
        // A sender with no token could not ask for the receiver's consent.
        let refused = policy
            .check("stream", &mut send_with(Amount::Bytes(1000), None))
            .unwrap_err();
        assert!(refused.contains("consent"), "{refused}");
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
        // Values the command line refuses are refused here too, whoever
        // holds the key: no time, no record, a record past the bounds, an
        // interval of nothing (JSON carries no NaN or infinity: those
        // arrive as null and do not parse).
        for amount in [Amount::Seconds(-1.0), Amount::Seconds(0.0)] {
            let refused = policy.check("stream", &mut send(amount)).unwrap_err();
            assert!(refused.contains("not a positive number"), "{refused}");
        }
        let with = |record: usize, interval_s: Option<f64>| {
            sender(
                record,
                Amount::Seconds(1.0),
                Some([1; crate::endpoint::protocol::TOKEN_LEN]),
                interval_s,
            )
        };
        for (record, interval, says) in [
            (0, None, "record size 0"),
            (1 << 40, None, "exceeds the maximum"),
            (100, Some(0.0), "give 10ms or more"),
            (100, Some(5.0), "longer than the run"),
        ] {
            let refused = policy
                .check("stream", &mut with(record, interval))
                .unwrap_err();
            assert!(refused.contains(says), "{record} {interval:?}: {refused}");
        }
        let mut huge_read = receive(Some(guard()), 0);
        if let Command::Role { params, .. } = &mut huge_read {
            params["strategy"] =
                serde_json::to_value(RecvStrategy::Read { buffer: 1 << 40 }).unwrap();
        }
        let refused = policy.check("stream", &mut huge_read).unwrap_err();
        assert!(refused.contains("--rbuf"), "{refused}");
    }

    #[test]
    fn an_rpm_test_the_command_line_would_refuse_is_refused_through_an_agent() {
        use crate::endpoint::rpm::role::Measure;
        use crate::endpoint::rpm::types::ClientSpec;
        let policy = default();
        let measure = |max_connections: usize, probe_rate: u32, seconds: f64, idle: u32| {
            request(Measure(ClientSpec {
                server: "10.0.0.2:5311".parse().unwrap(),
                direction: crate::endpoint::rpm::types::Direction::Down,
                max_connections,
                probe_rate,
                max_duration_s: seconds,
                idle_probes: idle,
                draft: Default::default(),
                sockets: Default::default(),
                token: Some([1; crate::endpoint::protocol::TOKEN_LEN]),
            }))
        };
        assert!(policy.check("rpm", &mut measure(16, 100, 10.0, 10)).is_ok());
        for (spec, says) in [
            (measure(100_000, 100, 10.0, 10), "--max-connections"),
            (measure(0, 100, 10.0, 10), "--max-connections"),
            (measure(16, 1_000_000, 10.0, 10), "--probe-rate"),
            (measure(16, 100, 0.001, 10), "--duration"),
            (measure(16, 100, -5.0, 10), "--duration"),
            (measure(16, 100, 10.0, 4_000_000), "--idle-probes"),
        ] {
            let mut spec = spec;
            let refused = policy.check("rpm", &mut spec).unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
    }

    #[test]
    fn an_rpc_cell_the_command_line_would_refuse_is_refused_through_an_agent() {
        use crate::endpoint::rpc::{Proto, RpcClientSpec, client};
        use crate::experiments::rpc::role::Call;
        let policy = default();
        let call = |size: usize, calls: u32, reps: u32| {
            request(Call(RpcClientSpec {
                server: "10.0.0.2:5311".parse().unwrap(),
                proto: Proto::Tcp,
                strategy: client::Strategy::Sun,
                options: Default::default(),
                size,
                calls,
                reps,
                token: Some([1; crate::endpoint::protocol::TOKEN_LEN]),
            }))
        };
        assert!(policy.check("rpc", &mut call(8192, 100, 20)).is_ok());
        for (mut spec, says) in [
            (call(1 << 20, 1, 1), "too large"),
            (call(100, 0, 1), "--calls 0"),
            (call(100, 1, 100_000), "--reps 100000"),
        ] {
            let refused = policy.check("rpc", &mut spec).unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
    }

    #[test]
    fn login_needs_allow() {
        let policy = default();
        assert!(policy.admit("stream").is_ok());
        assert!(policy.admit("sweep").is_ok());
        let refusal = policy.admit("login").unwrap_err();
        assert!(refusal.contains("--allow login"), "{refusal}");
        assert!(policy.admit("rm -rf").is_err());
    }

    #[test]
    fn a_mesh_run_is_made_of_stream_rpc_and_rpm_cells_each_held_to_its_allow() {
        let policy = default();
        assert!(policy.admit("mesh").is_ok());
        assert!(policy.check("mesh", &mut receive(Some(guard()), 0)).is_ok());
        let mut checksum = raw(
            "cksum",
            "Measure",
            serde_json::json!({"size": 64, "cold_pool": 0, "batches": 1}),
        );
        assert!(policy.check("cksum", &mut checksum).is_ok());
        // A cell past this host's memory is refused before an endpoint
        // would try to allocate it.
        let mut huge = raw(
            "cksum",
            "Measure",
            serde_json::json!({"size": 1u64 << 50, "cold_pool": 0, "batches": 1}),
        );
        let refusal = policy.check("cksum", &mut huge).unwrap_err();
        assert!(refusal.contains("more than half"), "{refusal}");
        let refusal = policy.check("mesh", &mut checksum).unwrap_err();
        assert!(refusal.contains("not part of a mesh run"), "{refusal}");
        let streams_only = Policy {
            allow: ["stream"].map(String::from).into(),
            ..default()
        };
        // An agent allowed streams alone serves a mesh's stream tests, and
        // refuses its other cells, each naming what it needs.
        assert!(streams_only.admit("mesh").is_ok());
        assert!(
            streams_only
                .check("mesh", &mut receive(Some(guard()), 0))
                .is_ok()
        );
        let mut rpm_server = request(crate::endpoint::rpm::role::Serve {
            bind: "10.0.0.2:0".parse().unwrap(),
            guard: Some(guard()),
            sockets: Default::default(),
        });
        assert!(policy.check("mesh", &mut rpm_server.clone()).is_ok());
        let refusal = streams_only.check("mesh", &mut rpm_server).unwrap_err();
        assert!(
            refusal.contains("an rpm server in a mesh run") && refusal.contains("--allow rpm"),
            "{refusal}"
        );
        let nothing = Policy {
            allow: ["login"].map(String::from).into(),
            ..default()
        };
        let refusal = nothing.admit("mesh").unwrap_err();
        assert!(
            refusal.contains("made of stream, rpc, rpm cells"),
            "{refusal}"
        );
    }

    #[test]
    fn a_login_request_passes_the_command_lines_checks_and_this_hosts_limits() {
        use crate::endpoint::login::clients::{LoginTarget, TypeSpec};
        use crate::endpoint::login::host::{Dialect, HostServeSpec, Target};
        let policy = Policy {
            allow: ["stream", "login"].map(String::from).into(),
            ..default()
        };
        let typing = |users: usize, rate: f64, warmup_s: f64, stall_ms: u64| {
            request(Type(TypeSpec {
                target: LoginTarget {
                    server: "10.0.0.2:5311".parse().unwrap(),
                    dialect: Dialect::Rlogin,
                    ssh: None,
                    token: Some([5; 16]),
                    stall: crate::endpoint::stall::StallBound { ms: stall_ms },
                },
                users,
                rate,
                poisson: false,
                corpus: b"hello".to_vec(),
                warmup_s,
                duration_s: 5.0,
            }))
        };
        assert!(
            policy
                .check("login", &mut typing(16, 5.0, 1.0, 5000))
                .is_ok()
        );
        for (mut hostile, says) in [
            // Duration::from_secs_f64(-1.0) would have panicked the endpoint.
            (typing(16, 5.0, -1.0, 5000), "--warmup -1"),
            (typing(0, 5.0, 1.0, 5000), "zero users"),
            (typing(1_000_000_000, 5.0, 1.0, 5000), "at most 65536 users"),
            (typing(16, 1e12, 1.0, 5000), "--rate 1000000000000"),
            (
                typing(16, 5.0, 1.0, 0),
                "--stall-timeout must be above zero",
            ),
        ] {
            let refused = policy.check("login", &mut hostile).unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
        // Within the bounds, past what this host holds: more users than
        // its ephemeral ports (28,232 by Linux's default range) are refused
        // before an endpoint starts one of them.
        let ports = crate::measure::limits::HostLimits::read()
            .ephemeral_ports
            .map(|(lo, hi)| hi - lo + 1);
        if let Some(ports) = ports.filter(|&p| p < 65_536) {
            let refused = policy
                .check("login", &mut typing(ports as usize + 1, 5.0, 1.0, 5000))
                .unwrap_err();
            assert!(refused.contains("ephemeral ports"), "{refused}");
        }
        let serving = |max_sessions: usize, interface: Option<&str>, budget: Option<f64>| {
            request(LoginServe(HostServeSpec {
                target: Target::Fork,
                dialect: Dialect::Rlogin,
                address: "10.0.0.2".parse().unwrap(),
                session: SessionCommand::Discard { linemode: false },
                max_sessions,
                nodelay: false,
                interface: interface.map(String::from),
                measure_idle: false,
                guard: Some(guard()),
                cpu_budget_pct: budget,
            }))
        };
        assert!(
            policy
                .check("login", &mut serving(32, Some("veth0"), Some(5.0)))
                .is_ok()
        );
        for (mut hostile, says) in [
            (serving(0, None, None), "a server of 0 sessions"),
            (serving(10_000_000, None, None), "at most 65552 sessions"),
            (serving(32, Some("../../etc"), None), "interface name"),
            (
                serving(32, None, Some(0.0)),
                "--host-cpu 0: must be at least",
            ),
        ] {
            let refused = policy.check("login", &mut hostile).unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
    }

    #[test]
    fn a_lab_run_holds_each_command_to_its_own_experiment() {
        let policy = default();
        assert!(policy.admit("lab").is_ok());
        assert!(policy.check("lab", &mut receive(Some(guard()), 0)).is_ok());
        let typing = |session| {
            request(LoginServe(crate::endpoint::login::host::HostServeSpec {
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
            }))
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
            ..default()
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
            ..default()
        };
        assert!(streams_only.admit("lab").is_err());
    }
}

#[cfg(test)]
mod role_tests {
    use super::*;

    #[test]
    fn a_request_for_no_role_and_the_testbed_helpers_are_refused() {
        let policy = Policy {
            served: crate::experiments::SERVED,
            ..Policy::default()
        };
        let mut unknown = Command::Role {
            role: "shell".into(),
            request: "ls".into(),
            params: serde_json::Value::Null,
        };
        assert!(
            policy
                .check("stream", &mut unknown)
                .unwrap_err()
                .contains("no endpoint role")
        );
        let mut emulate = Command::Role {
            role: "emulator".into(),
            request: "Stop".into(),
            params: serde_json::Value::Null,
        };
        assert!(
            policy
                .check("stream", &mut emulate)
                .unwrap_err()
                .contains("controller's host")
        );
        let mut garbled = Command::Role {
            role: "stream".into(),
            request: "Listen".into(),
            params: serde_json::json!(3),
        };
        let refusal = policy.check("stream", &mut garbled).unwrap_err();
        assert!(
            refusal.starts_with("a stream Listen request that does not parse"),
            "{refusal}"
        );
        // A request the role does not answer is refused by its name, with
        // the names it does answer.
        let mut unknown_request = Command::Role {
            role: "stream".into(),
            request: "Shell".into(),
            params: serde_json::Value::Null,
        };
        assert_eq!(
            policy.check("stream", &mut unknown_request).unwrap_err(),
            "the stream role answers no request \"Shell\" (it answers Listen, Connect, Go)"
        );
        // Without the registry's roles an agent serves nothing.
        let mut go = Command::Role {
            role: "stream".into(),
            request: "Go".into(),
            params: serde_json::Value::Null,
        };
        assert!(Policy::default().check("stream", &mut go).is_err());
    }
}
