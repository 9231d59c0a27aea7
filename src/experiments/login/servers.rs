//! The controller's side of a login-load or terminal-output cell: the
//! serving end (an endpoint at `To` that starts netlab's server, telnetd
//! or sshd, [`crate::endpoint::login::host`]) and the measured window it
//! samples while the typing end (an endpoint at `From`,
//! [`crate::endpoint::login::clients`]) announces the window's edges.
//!
//! Both ends are endpoints the launcher places, so a cell runs the same
//! on loopback, between two namespaces, and between agents' hosts.
//!
//! Invariant: the serving end is stopped (every session, telnetd or sshd
//! tree, test user and key file with it) when [`ServerProcess`] drops, if
//! [`ServerProcess::stop`] did not do it first.

use crate::controller::CellError;
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, EndpointProcess, Wait};
use crate::endpoint::login::clients::LoginTarget;
use crate::endpoint::login::host::HostServeSpec;
use crate::endpoint::login::host::{Dialect, Target};
use crate::endpoint::login::host::{HostReport, SessionCommand};
use crate::endpoint::login::programs::SshAccess;
use crate::endpoint::protocol::Token;
use crate::endpoint::role::Request;
use crate::experiments::login::role::{
    Budget, LoginRole, Serve, Stop, WindowClose, WindowEdge, WindowOpen,
};
use crate::measure::window::HostWindow;
use std::net::SocketAddr;
use std::time::Duration;

/// How a server is started.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub target: Target,
    pub dialect: Dialect,
    /// What each session runs.
    pub session: SessionCommand,
    /// Most sessions at once.
    pub max_sessions: usize,
    /// TCP_NODELAY on netlab's sessions (telnetd cannot; sshd sets it on
    /// interactive sessions itself).
    pub nodelay: bool,
    /// Measure the serving host's idle CPU before the server starts.
    pub measure_idle: bool,
    /// A CPU budget for the server, percent of one CPU (`--host-cpu`).
    pub cpu_budget_pct: Option<f64>,
}

/// A running serving end.
pub struct ServerProcess {
    endpoint: EndpointProcess,
    pub addr: SocketAddr,
    /// For sshd: how a client logs in.
    pub ssh: Option<SshAccess>,
    /// What a client sends first (netlab's own servers through an agent).
    pub token: Option<Token>,
    /// The serving host's busy CPUs when idle, if asked.
    pub idle_busy_cpus: Option<f64>,
    /// The CPU budget as applied, or why not.
    pub cpu_budget: Option<String>,
    stopped: bool,
}

/// Starts the server `spec` names at the launcher's `To` end.
pub fn start(spec: &ServerSpec, launcher: &Launcher) -> Result<ServerProcess, CellError> {
    spec.target
        .speaks(spec.dialect)
        .map_err(CellError::Refused)?;
    let mut endpoint = launcher.spawn("login server", End::To)?;
    let serve = Serve(HostServeSpec {
        target: spec.target,
        dialect: spec.dialect,
        address: launcher.address(End::To),
        session: spec.session,
        max_sessions: spec.max_sessions,
        nodelay: spec.nodelay,
        interface: launcher.interface(End::To),
        measure_idle: spec.measure_idle,
        guard: launcher.guard(End::To),
        cpu_budget_pct: spec.cpu_budget_pct,
    });
    // sshd's keys and test user, and an idle second, come first.
    let serving = *endpoint.call(serve, Wait::up_to(30, "starting"))?;
    Ok(ServerProcess {
        addr: SocketAddr::new(launcher.address(End::To), serving.port),
        ssh: serving.ssh,
        // telnetd and sshd speak their protocol from the first byte.
        token: launcher.token().filter(|_| spec.target.relay().is_some()),
        idle_busy_cpus: serving.idle_busy_cpus,
        cpu_budget: serving.cpu_budget,
        endpoint,
        stopped: false,
    })
}

impl ServerProcess {
    /// What a typing end needs to log in to this server in `dialect`.
    pub fn target(&self, dialect: Dialect) -> LoginTarget {
        LoginTarget {
            server: self.addr,
            dialect,
            ssh: self.ssh.clone(),
            token: self.token,
            stall: Default::default(),
        }
    }

    /// `error` of the cell, with the server stopped and its log's last
    /// line after it.
    pub fn failed(self, error: CellError) -> CellError {
        let log = self.stop().map(|r| r.log_tail).unwrap_or_default();
        match log.trim().lines().last() {
            Some(line) => error.with(format!("server log: {line}")),
            None => error,
        }
    }

    /// Puts the budget's quota on the server (every session is in).
    pub fn apply_budget(&mut self) -> Result<(), CellError> {
        self.endpoint
            .call(Budget, Wait::up_to(30, "applying the CPU budget"))
            .map_err(CellError::from)
    }

    pub fn open_window(&mut self) -> Result<(), CellError> {
        self.endpoint
            .call(WindowOpen, Wait::up_to(30, "opening the window"))
            .map_err(CellError::from)
    }

    pub fn close_window(&mut self) -> Result<HostWindow, CellError> {
        let window = self
            .endpoint
            .call(WindowClose, Wait::up_to(30, "closing the window"))?;
        Ok(*window)
    }

    /// Stops the server and every session; its account and log.
    pub fn stop(mut self) -> Result<HostReport, CellError> {
        self.stopped = true;
        self.stop_endpoint()
    }

    fn stop_endpoint(&mut self) -> Result<HostReport, CellError> {
        // Even after Ctrl-C: the serving end must stop its sessions, sshd
        // and test user before it goes.
        self.endpoint.wait_through_interrupt();
        self.endpoint.thaw();
        let report = self.endpoint.call(Stop, Wait::up_to(15, "stopping"));
        self.endpoint.finish();
        Ok(*report?)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop_endpoint();
        }
    }
}

/// Sends `request` to the typing end and serves its window edges: the
/// serving host's window opens and closes with the typing end's. Returns
/// the typing end's answer and the host's window (None: it never opened).
pub fn drive<R: Request<Role = LoginRole>>(
    client: &mut EndpointProcess,
    server: &mut ServerProcess,
    request: R,
    timeout: Duration,
) -> Result<(R::Reply, Option<HostWindow>), CellError> {
    let mut window = None;
    let mut failure = None;
    let wait = Wait {
        timeout: Some(timeout),
        what: "running",
    };
    let reply = client.call_hearing(
        request,
        wait,
        &mut |_| {},
        &mut |edge: WindowEdge, client| {
            let sampled = if edge.logged_in {
                server.apply_budget()
            } else if edge.open {
                server.open_window()
            } else {
                server.close_window().map(|w| window = Some(w))
            };
            if let Err(e) = sampled {
                // The serving end's own error is the cell's; the typing end
                // is told nothing more and ends with the channel.
                failure = Some(e);
                return Err(ControlError::Interrupted);
            }
            if edge.awaits {
                client.proceed()?;
            }
            Ok(())
        },
    );
    match (reply, failure) {
        (_, Some(e)) => Err(e),
        (reply, None) => Ok((reply?, window)),
    }
}
