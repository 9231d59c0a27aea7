//! The login experiment's endpoint role, which its variant `output` uses
//! too: the serving end (netlab's relays, telnetd or sshd started and
//! measured, `endpoint::login::host`) and the typing ends (the typist's N
//! users, or the 1987 terminal, `endpoint::login::clients`), which tell
//! the controller the measured window's edges as events and, where asked,
//! wait for it to sample the serving host first.

use crate::endpoint::agent::policy::Policy;
use crate::endpoint::login::clients::{
    LoginTarget, MAX_CORPUS, TerminalReport, TypeSpec, terminal, type_load,
};
use crate::endpoint::login::host::{Host, HostReport, HostServeSpec, HostServing, SessionCommand};
use crate::endpoint::login::typist::{Moment, TypistReport};
use crate::endpoint::role::{Link, Protocol, Role, RoleError};
use crate::experiments::login::bounds;
use crate::measure::limits::{HostLimits, Needs};
use crate::measure::window::HostWindow;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LoginRequest {
    /// Start the cell's server, serving until `Stop`.
    Serve(Box<HostServeSpec>),
    /// Every session is logged in: put the CPU budget's quota on the
    /// server (if it has a budget).
    Budget,
    /// Open the serving host's measured window.
    WindowOpen,
    /// Close it; the host's window.
    WindowClose,
    /// Type a login load against a server.
    Type(Box<TypeSpec>),
    /// Read one file's output through a server as a terminal.
    Terminal(Box<LoginTarget>),
    /// End the server and every session; its account.
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LoginReply {
    Serving(Box<HostServing>),
    WindowOpened,
    BudgetApplied,
    Window(Box<HostWindow>),
    Typed(Box<TypistReport>),
    Terminal(Box<TerminalReport>),
    Stopped(Box<HostReport>),
}

/// Start the cell's server: what a client needs of it.
#[derive(Debug)]
pub struct Serve(pub HostServeSpec);
/// Put the CPU budget's quota on the server.
#[derive(Debug)]
pub struct Budget;
/// Open the serving host's measured window.
#[derive(Debug)]
pub struct WindowOpen;
/// Close it: the host's window.
#[derive(Debug)]
pub struct WindowClose;
/// Type a login load against a server: the typists' account.
#[derive(Debug)]
pub struct Type(pub TypeSpec);
/// Read one file's output through a server as a terminal: its account.
#[derive(Debug)]
pub struct Terminal(pub LoginTarget);
/// End the server and every session: its account.
#[derive(Debug)]
pub struct Stop;

crate::endpoint::role::requests! { LoginRole:
    Serve, |Serve(spec)| LoginRequest::Serve(Box::new(spec));
    LoginReply::Serving(serving) => Box<HostServing> = serving;
    Budget, |Budget| LoginRequest::Budget;
    LoginReply::BudgetApplied => () = ();
    WindowOpen, |WindowOpen| LoginRequest::WindowOpen;
    LoginReply::WindowOpened => () = ();
    WindowClose, |WindowClose| LoginRequest::WindowClose;
    LoginReply::Window(window) => Box<HostWindow> = window;
    Type, |Type(spec)| LoginRequest::Type(Box::new(spec));
    LoginReply::Typed(report) => Box<TypistReport> = report;
    Terminal, |Terminal(target)| LoginRequest::Terminal(Box::new(target));
    LoginReply::Terminal(report) => Box<TerminalReport> = report;
    Stop, |Stop| LoginRequest::Stop;
    LoginReply::Stopped(report) => Box<HostReport> = report;
}

/// The typing end's measured window opens or closes, or (`logged_in`)
/// every session has logged in; when `awaits`, it waits for the
/// controller's `Proceed`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowEdge {
    pub open: bool,
    pub awaits: bool,
    #[serde(default)]
    pub logged_in: bool,
}

/// The server this endpoint serves, if any.
#[derive(Default)]
pub struct LoginRole {
    host: Option<Box<Host>>,
}

impl Protocol for LoginRole {
    const ROLE: &'static str = "login";
    type Request = LoginRequest;
    type Reply = LoginReply;
    type Event = WindowEdge;
}

impl Role for LoginRole {
    fn handle(
        &mut self,
        request: LoginRequest,
        link: &mut Link<'_>,
    ) -> Result<LoginReply, RoleError> {
        let mut edge = |moment: Moment, awaits| {
            link.event::<LoginRole>(&WindowEdge {
                open: moment == Moment::WindowOpen,
                awaits,
                logged_in: moment == Moment::LoggedIn,
            })?;
            if awaits {
                link.proceed()?;
            }
            Ok(())
        };
        match request {
            LoginRequest::Serve(spec) => {
                let target = spec.target.name();
                let (host, serving) = Host::start(*spec)
                    .map_err(|e| RoleError::failed(format_args!("starting {target}: {e}")))?;
                self.host = Some(Box::new(host));
                Ok(LoginReply::Serving(Box::new(serving)))
            }
            LoginRequest::Budget => {
                self.serving()?.apply_budget().map_err(RoleError::failed)?;
                Ok(LoginReply::BudgetApplied)
            }
            LoginRequest::WindowOpen => {
                self.serving()?.open_window().map_err(RoleError::failed)?;
                Ok(LoginReply::WindowOpened)
            }
            LoginRequest::WindowClose => {
                let window = self.serving()?.close_window().map_err(RoleError::failed)?;
                Ok(LoginReply::Window(Box::new(window)))
            }
            LoginRequest::Type(spec) => type_load(&spec, &mut edge)
                .map(|r| LoginReply::Typed(Box::new(r)))
                .map_err(RoleError::failed),
            LoginRequest::Terminal(target) => terminal(&target, &mut edge)
                .map(|r| LoginReply::Terminal(Box::new(r)))
                .map_err(RoleError::failed),
            LoginRequest::Stop => {
                let host = self
                    .host
                    .take()
                    .ok_or_else(|| RoleError::failed("Stop with no server running"))?;
                let report = host.stop().map_err(RoleError::failed)?;
                Ok(LoginReply::Stopped(Box::new(report)))
            }
        }
    }

    fn check(request: &mut LoginRequest, run: &str, policy: &Policy) -> Result<(), String> {
        match request {
            LoginRequest::Serve(spec) => {
                let (experiment, what) = match spec.session {
                    SessionCommand::Discard { .. } => ("login", "a typing session"),
                    SessionCommand::Output { .. } => ("output", "an output session"),
                };
                let what = if matches!(run, "login" | "output") {
                    what
                } else {
                    "a login server"
                };
                policy.part_of(run, experiment, what)?;
                if let SessionCommand::Output { bytes, .. } = spec.session {
                    policy.within_bytes(bytes, " of output")?;
                }
                bounds::check_serving(spec.max_sessions, spec.interface.as_deref())
                    .map_err(|e| e.to_string())?;
                if let Some(percent) = spec.cpu_budget_pct {
                    bounds::check_budget(percent).map_err(|e| e.to_string())?;
                }
                within_this_hosts_limits(bounds::serving_needs(spec.target, spec.max_sessions))?;
                policy.guard_data_port(&mut spec.guard, 0)
            }
            LoginRequest::Type(spec) => {
                policy.part_of(run, "login", "a typist")?;
                bounds::check_typing(spec.users, spec.rate, spec.warmup_s, spec.duration_s)
                    .and_then(|()| bounds::check_stall(spec.target.stall.ms))
                    .map_err(|e| e.to_string())?;
                policy.within_seconds(spec.warmup_s + spec.duration_s, " of typing")?;
                if spec.corpus.len() > MAX_CORPUS {
                    return Err(format!(
                        "a corpus of {} bytes is over the {MAX_CORPUS} a typing end takes",
                        spec.corpus.len()
                    ));
                }
                within_this_hosts_limits(bounds::typing_needs(
                    spec.users,
                    spec.target.ssh.is_some(),
                ))
            }
            LoginRequest::Terminal(target) => {
                policy.part_of(run, "output", "a terminal")?;
                bounds::check_stall(target.stall.ms).map_err(|e| e.to_string())
            }
            LoginRequest::Budget
            | LoginRequest::WindowOpen
            | LoginRequest::WindowClose
            | LoginRequest::Stop => Ok(()),
        }
    }
}

/// Refuses work that would cross this host's limits (ptys, descriptors,
/// processes, ephemeral ports) before an endpoint starts any of it: the
/// controller cannot check an agent's host for it.
fn within_this_hosts_limits(needs: Needs) -> Result<(), String> {
    let crossed = crate::measure::limits::check(&needs, &HostLimits::read());
    if crossed.is_empty() {
        return Ok(());
    }
    Err(crate::measure::limits::LimitsCrossed {
        what: needs.what,
        crossed,
    }
    .to_string())
}

impl LoginRole {
    fn serving(&mut self) -> Result<&mut Host, RoleError> {
        self.host
            .as_deref_mut()
            .ok_or_else(|| RoleError::failed("a window with no server running"))
    }
}
