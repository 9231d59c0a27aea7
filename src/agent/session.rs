//! One run on an agent: the endpoints it starts, each command checked by
//! the policy on its way in, each reply sealed on its way out, and
//! everything killed and reaped when the run ends, however it ends.

use crate::controller::processes::{EXIT_GRACE, describe_exit, exit_within, start_child};
use crate::endpoint::agent::channel::{ChannelError, Opener, Sealer};
use crate::endpoint::agent::policy::Policy;
use crate::endpoint::agent::{FromAgent, ToAgent, lock, source_toward};
use crate::endpoint::protocol::{Command, Reply};
use crate::wire::control::{FrameReader, write_frame};
use std::collections::HashMap;
use std::process::{Child, ChildStdin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a waiting run looks at its deadlines and the stop flag.
const TICK: Duration = Duration::from_millis(500);
/// How long a run's endpoints have to clean up and leave when the run
/// ends before they are killed.
pub const CLEANUP_GRACE: Duration = Duration::from_secs(3);
/// Most endpoints one run may have at once.
const MAX_ENDPOINTS: usize = 16;

struct Endpoint {
    process: Arc<Mutex<Child>>,
    stdin: Option<ChildStdin>,
    forward: JoinHandle<()>,
    /// Killed at this time if still running (after `Exit`).
    kill_at: Option<Instant>,
}

/// How a run ended.
pub struct Outcome {
    pub reason: String,
    pub endpoints: usize,
}

pub struct Session<'p> {
    policy: &'p Policy,
    experiment: String,
    sealer: Arc<Mutex<Sealer>>,
    endpoints: HashMap<u32, Endpoint>,
    started: usize,
    stop: Arc<AtomicBool>,
    metrics: Arc<super::metrics::AgentMetrics>,
}

impl<'p> Session<'p> {
    pub fn new(
        policy: &'p Policy,
        experiment: &str,
        sealer: Sealer,
        stop: Arc<AtomicBool>,
        metrics: Arc<super::metrics::AgentMetrics>,
    ) -> Session<'p> {
        Session {
            policy,
            experiment: experiment.to_string(),
            sealer: Arc::new(Mutex::new(sealer)),
            endpoints: HashMap::new(),
            started: 0,
            stop,
            metrics,
        }
    }

    fn send(&self, message: &FromAgent) {
        // A failed send means the controller is gone; the read side sees it.
        let _ = lock(&self.sealer).send(message);
    }

    fn failed(&self, id: u32, message: String) {
        self.send(&FromAgent::Endpoint {
            id,
            reply: Reply::Failed { message },
        });
    }

    /// Serves the run until it ends; every endpoint is reaped on return.
    pub fn serve(mut self, mut opener: Opener) -> Outcome {
        let deadline = Instant::now() + self.policy.max_duration;
        let reason = loop {
            self.kill_lingering();
            if self.stop.load(Ordering::Relaxed) {
                self.send(&FromAgent::Ended {
                    reason: "the agent is stopping".into(),
                });
                break "the agent is stopping".to_string();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let reason = format!(
                    "the run passed the agent's --max-duration of {} s",
                    self.policy.max_duration.as_secs()
                );
                self.send(&FromAgent::Ended {
                    reason: reason.clone(),
                });
                break reason;
            }
            match opener.recv::<ToAgent>(Some(left.min(TICK))) {
                Ok(ToAgent::Spawn { id, role }) => self.spawn(id, &role),
                Ok(ToAgent::Endpoint { id, command }) => self.command(id, command),
                Ok(ToAgent::Route { to }) => self.send(&FromAgent::Route {
                    from: source_toward(to).map_err(|e| e.to_string()),
                }),
                Ok(ToAgent::Bye) => break "the controller ended it".to_string(),
                Ok(ToAgent::Hello(_)) => break "a second Hello (protocol error)".to_string(),
                Err(ChannelError::Timeout("waiting for a message")) => {}
                Err(ChannelError::Closed) => break "the controller went away".to_string(),
                Err(e) => break format!("control channel: {e}"),
            }
        };
        lock(&self.sealer).shutdown();
        self.reap_all();
        Outcome {
            reason,
            endpoints: self.started,
        }
    }

    fn spawn(&mut self, id: u32, role: &str) {
        // A key holder's text, bound for the log: escaped and cut.
        let role = super::log::printable(role);
        if self.endpoints.contains_key(&id) {
            return self.failed(id, format!("endpoint id {id} is in use"));
        }
        if self.endpoints.len() >= MAX_ENDPOINTS {
            return self.failed(
                id,
                format!("a run may have at most {MAX_ENDPOINTS} endpoints at once"),
            );
        }
        let mut child = match start_child(None, None) {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.failed(
                    id,
                    format!(
                        "cannot start the {role} endpoint: the agent's program was replaced or removed since it started ({e}); restart the agent"
                    ),
                );
            }
            Err(e) => return self.failed(id, format!("cannot start the {role} endpoint: {e}")),
        };
        // Each endpoint's life in the log: what a mesh's test bed reads to
        // see that no host was in two tests at once.
        super::log::log(format_args!(
            "endpoint {id} ({role}) started, pid {}",
            child.id()
        ));
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let process = Arc::new(Mutex::new(child));
        self.metrics.endpoint_started();
        let forward = {
            let (sealer, process, metrics) =
                (self.sealer.clone(), process.clone(), self.metrics.clone());
            std::thread::Builder::new()
                .name(format!("agent-endpoint-{id}"))
                .spawn(move || forward(id, stdout, &sealer, &process, &metrics))
        };
        match forward {
            Ok(forward) => {
                self.started += 1;
                self.endpoints.insert(
                    id,
                    Endpoint {
                        process,
                        stdin,
                        forward,
                        kill_at: None,
                    },
                );
            }
            Err(e) => {
                let _ = lock(&process).kill();
                let _ = lock(&process).wait();
                self.failed(id, format!("cannot relay the {role} endpoint: {e}"));
            }
        }
    }

    fn command(&mut self, id: u32, mut command: Command) {
        if let Err(reason) = self.policy.check(&self.experiment, &mut command) {
            return self.failed(id, format!("refused by the agent: {reason}"));
        }
        let Some(endpoint) = self.endpoints.get_mut(&id) else {
            // An endpoint that already ended: its Gone is on its way.
            return;
        };
        let exit = command == Command::Exit;
        if let Some(stdin) = endpoint.stdin.as_mut()
            && write_frame(stdin, &command).is_err()
        {
            endpoint.stdin = None;
        }
        if exit {
            endpoint.stdin = None;
            endpoint.kill_at = Some(Instant::now() + EXIT_GRACE);
        }
    }

    /// Kills endpoints that did not leave after `Exit`, and forgets the
    /// ones whose relay has ended (it reaped them and said `Gone`).
    fn kill_lingering(&mut self) {
        let now = Instant::now();
        self.endpoints.retain(|_, endpoint| {
            if endpoint.kill_at.is_some_and(|t| now >= t) {
                let _ = lock(&endpoint.process).kill();
            }
            !endpoint.forward.is_finished()
        });
    }

    /// Ends every endpoint of the run: each gets the end of its input
    /// first, so one between commands stops what it started (a login
    /// server's sessions, sshd and its test user) and leaves; whatever
    /// still runs [`CLEANUP_GRACE`] later (an endpoint busy in a data
    /// path) is killed.
    fn reap_all(&mut self) {
        let mut endpoints: Vec<Endpoint> = self.endpoints.drain().map(|(_, e)| e).collect();
        for endpoint in &mut endpoints {
            endpoint.stdin = None;
        }
        let deadline = Instant::now() + CLEANUP_GRACE;
        for endpoint in endpoints {
            {
                let mut child = lock(&endpoint.process);
                let _ = exit_within(
                    &mut child,
                    deadline.saturating_duration_since(Instant::now()),
                );
                // By PID through the Child handle, which knows if it was reaped.
                let _ = child.kill();
            }
            let _ = endpoint.forward.join();
        }
    }
}

/// Relays endpoint `id`'s replies to the controller until it closes its
/// channel, then reaps it and says how it ended.
fn forward(
    id: u32,
    stdout: std::process::ChildStdout,
    sealer: &Mutex<Sealer>,
    process: &Mutex<Child>,
    metrics: &super::metrics::AgentMetrics,
) {
    let mut reader = FrameReader::new(stdout);
    while let Ok(Some(reply)) = reader.next_message::<Reply>() {
        if lock(sealer)
            .send(&FromAgent::Endpoint { id, reply })
            .is_err()
        {
            break;
        }
    }
    // It is leaving (its channel is closed): the lock is held for the few
    // ms that takes, or for the grace before it is killed. Its I/O is read
    // first, while /proc still has it.
    let mut child = lock(process);
    metrics.endpoint_io(child.id());
    let status = match exit_within(&mut child, EXIT_GRACE) {
        Ok(Some(status)) => describe_exit(status),
        Ok(None) => {
            let _ = child.kill();
            match child.wait() {
                Ok(status) => format!(
                    "closed its control channel and was killed ({})",
                    describe_exit(status)
                ),
                Err(e) => format!("status unknown ({e})"),
            }
        }
        Err(e) => format!("status unknown ({e})"),
    };
    drop(child);
    super::log::log(format_args!("endpoint {id} ended: {status}"));
    let _ = lock(sealer).send(&FromAgent::Gone { id, status });
}
