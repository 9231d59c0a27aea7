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
use crate::endpoint::role::{Handler, Link, Protocol, Role, RoleError, Route, route};
use crate::experiments::login::bounds;
use crate::measure::limits::{HostLimits, Needs};
use crate::measure::window::HostWindow;
use serde::{Deserialize, Serialize};

/// Start the cell's server, serving until `Stop`: what a client needs of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Serve(pub HostServeSpec);

/// Every session is logged in: put the CPU budget's quota on the server
/// (if it has a budget).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget;

/// Open the serving host's measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowOpen;

/// Close it: the host's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowClose;

/// Type a login load against a server: the typists' account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Type(pub TypeSpec);

/// Read one file's output through a server as a terminal: its account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terminal(pub LoginTarget);

/// End the server and every session: its account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop;

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

crate::endpoint::role::requests! { LoginRole:
    Serve => Box<HostServing>,
    Budget => (),
    WindowOpen => (),
    WindowClose => Box<HostWindow>,
    Type => Box<TypistReport>,
    Terminal => Box<TerminalReport>,
    Stop => Box<HostReport>,
}

impl Protocol for LoginRole {
    const ROLE: &'static str = "login";
    type Event = WindowEdge;
}

impl Role for LoginRole {
    const ROUTES: &'static [Route<Self>] = &[
        route::<Serve>(),
        route::<Budget>(),
        route::<WindowOpen>(),
        route::<WindowClose>(),
        route::<Type>(),
        route::<Terminal>(),
        route::<Stop>(),
    ];
}

/// Tells the controller of a window's edge and, when it `awaits`, waits
/// for its `Proceed`.
fn window_edge(link: &mut Link<'_>, moment: Moment, awaits: bool) -> std::io::Result<()> {
    link.event::<LoginRole>(&WindowEdge {
        open: moment == Moment::WindowOpen,
        awaits,
        logged_in: moment == Moment::LoggedIn,
    })?;
    if awaits {
        link.proceed()?;
    }
    Ok(())
}

impl Handler<Serve> for LoginRole {
    fn handle(
        &mut self,
        Serve(spec): Serve,
        _: &mut Link<'_>,
    ) -> Result<Box<HostServing>, RoleError> {
        let target = spec.target.name();
        let (host, serving) = Host::start(spec)
            .map_err(|e| RoleError::failed(format_args!("starting {target}: {e}")))?;
        self.host = Some(Box::new(host));
        Ok(Box::new(serving))
    }

    fn check(Serve(spec): &mut Serve, run: &str, policy: &Policy) -> Result<(), String> {
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
}

impl Handler<Budget> for LoginRole {
    fn handle(&mut self, _: Budget, _: &mut Link<'_>) -> Result<(), RoleError> {
        self.serving()?.apply_budget().map_err(RoleError::failed)
    }

    fn check(_: &mut Budget, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}

impl Handler<WindowOpen> for LoginRole {
    fn handle(&mut self, _: WindowOpen, _: &mut Link<'_>) -> Result<(), RoleError> {
        self.serving()?.open_window().map_err(RoleError::failed)
    }

    fn check(_: &mut WindowOpen, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}

impl Handler<WindowClose> for LoginRole {
    fn handle(&mut self, _: WindowClose, _: &mut Link<'_>) -> Result<Box<HostWindow>, RoleError> {
        let window = self.serving()?.close_window().map_err(RoleError::failed)?;
        Ok(Box::new(window))
    }

    fn check(_: &mut WindowClose, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}

impl Handler<Type> for LoginRole {
    fn handle(
        &mut self,
        Type(spec): Type,
        link: &mut Link<'_>,
    ) -> Result<Box<TypistReport>, RoleError> {
        type_load(&spec, &mut |moment, awaits| {
            window_edge(link, moment, awaits)
        })
        .map(Box::new)
        .map_err(RoleError::failed)
    }

    fn check(Type(spec): &mut Type, run: &str, policy: &Policy) -> Result<(), String> {
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
        within_this_hosts_limits(bounds::typing_needs(spec.users, spec.target.ssh.is_some()))
    }
}

impl Handler<Terminal> for LoginRole {
    fn handle(
        &mut self,
        Terminal(target): Terminal,
        link: &mut Link<'_>,
    ) -> Result<Box<TerminalReport>, RoleError> {
        terminal(&target, &mut |moment, awaits| {
            window_edge(link, moment, awaits)
        })
        .map(Box::new)
        .map_err(RoleError::failed)
    }

    fn check(Terminal(target): &mut Terminal, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, "output", "a terminal")?;
        bounds::check_stall(target.stall.ms).map_err(|e| e.to_string())
    }
}

impl Handler<Stop> for LoginRole {
    fn handle(&mut self, _: Stop, _: &mut Link<'_>) -> Result<Box<HostReport>, RoleError> {
        let host = self
            .host
            .take()
            .ok_or_else(|| RoleError::failed("Stop with no server running"))?;
        host.stop().map(Box::new).map_err(RoleError::failed)
    }

    fn check(_: &mut Stop, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
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
