//! The seam between the endpoint process and the experiments: each
//! experiment's side of an endpoint is a [`Role`], and each request a role
//! answers is a type of its own ([`Request`]) that names its reply type
//! beside it (the lsp-types shape). The role answers it through
//! [`Handler::handle`], whose return type is that reply, so a reply of the
//! wrong type does not compile, at either end. A request travels as
//! [`Command::Role`] (the role's name, the request's name and the request
//! as JSON) and is answered by [`Reply::Role`] (the reply as JSON), inside
//! the usual frame (see [`crate::wire::control`]).
//!
//! The endpoint process knows no experiment: it is handed a [`RoleTable`]
//! (built by the registry, `crate::experiments`) and looks a request's role
//! up by the experiment's name, then the request by its name among the
//! role's [`Role::ROUTES`]. A role lives from its first request to the end
//! of the process, so it can hold what it started (a server, a listening
//! receiver) between requests; dropping it must stop all of that. The
//! agent checks every request against its policy by the request's own type
//! ([`Handler::check`], reached through [`check_of`], which the registry
//! lists) before the endpoint sees it.
//!
//! Invariants: a role answers every request with exactly one
//! [`Reply::Role`] or [`Reply::Failed`]; before that it may send events
//! ([`Link::event`]), progress ([`Link::progress`]) and wait for the
//! controller's [`Command::Proceed`] ([`Link::proceed`]). A request the
//! role does not route, or whose body does not parse as its type, is
//! answered `Failed` naming it, and the endpoint goes on serving.

use super::protocol::{Command, Reply};
use crate::endpoint::agent::policy::{Policy, RoleCheck};
use crate::wire::control::write_frame;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::io::{self, Write};

/// One experiment's role, as both ends name it.
pub trait Protocol {
    /// The experiment whose role answers (its name in the registry).
    const ROLE: &'static str;
    /// What the role says while a request is under way (intervals, the
    /// edges of a measured window); `()` when it says nothing.
    type Event: Serialize + DeserializeOwned + Debug;
}

/// One request of a role, declared once: the type is the request as the
/// wire carries it, and it fixes the reply the role must give.
pub trait Request: Serialize + DeserializeOwned + Debug {
    /// The role that answers.
    type Role: Protocol;
    /// The reply, as the wire carries it and the caller gets it.
    type Reply: Serialize + DeserializeOwned + Debug;
    /// The request's name on the wire, unique within its role.
    const NAME: &'static str;
}

/// Declares requests of one role, each with its reply type and named on
/// the wire by its type's name:
///
/// ```text
/// requests! { StreamRole: Listen => SocketAddr, Go => Box<EndpointReport> }
/// ```
///
/// A type that cannot travel (not serde) fails at [`Request`]'s bounds.
macro_rules! requests {
    ($Role:ty: $($Type:ident => $Reply:ty),+ $(,)?) => {$(
        impl $crate::endpoint::role::Request for $Type {
            type Role = $Role;
            type Reply = $Reply;
            const NAME: &'static str = stringify!($Type);
        }
    )+};
}
pub(crate) use requests;

/// A role's answer to request `R`: the return type is `R`'s reply, so a
/// handler that returns anything else does not compile:
///
/// ```compile_fail,E0053
/// use netlab::endpoint::agent::policy::Policy;
/// use netlab::endpoint::role::{Handler, Link, Protocol, Request, RoleError};
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// struct Ping;
/// struct Toy;
/// impl Protocol for Toy {
///     const ROLE: &'static str = "toy";
///     type Event = ();
/// }
/// impl Request for Ping {
///     type Role = Toy;
///     type Reply = u64;
///     const NAME: &'static str = "Ping";
/// }
/// impl Handler<Ping> for Toy {
///     // Ping's reply is a u64, not a String.
///     fn handle(&mut self, _: Ping, _: &mut Link<'_>) -> Result<String, RoleError> {
///         Ok("pong".into())
///     }
///     fn check(_: &mut Ping, _: &str, _: &Policy) -> Result<(), String> {
///         Ok(())
///     }
/// }
/// ```
///
/// and a role cannot route a request it has no handler for:
///
/// ```compile_fail,E0277
/// use netlab::endpoint::role::{Protocol, Request, Role, Route, route};
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// struct Ping;
/// #[derive(Default)]
/// struct Toy;
/// impl Protocol for Toy {
///     const ROLE: &'static str = "toy";
///     type Event = ();
/// }
/// impl Request for Ping {
///     type Role = Toy;
///     type Reply = u64;
///     const NAME: &'static str = "Ping";
/// }
/// impl Role for Toy {
///     const ROUTES: &'static [Route<Self>] = &[route::<Ping>()];
/// }
/// ```
pub trait Handler<R: Request<Role = Self>>: Protocol + Sized {
    fn handle(&mut self, request: R, link: &mut Link<'_>) -> Result<R::Reply, RoleError>;

    /// The agent's check of `request` in a run before the role sees it:
    /// `run` is the experiment the controller said it runs (`lab` for a
    /// lab run, whose requests are admitted one experiment at a time with
    /// [`Policy::admit`]). It may tighten the request (the agent's data
    /// ports, its byte limit).
    fn check(request: &mut R, run: &str, policy: &Policy) -> Result<(), String>;
}

/// One request a role answers, as the dispatcher and the agent hold it:
/// its name, and its handler and check on JSON.
pub struct Route<S> {
    pub name: &'static str,
    handle: fn(&mut S, serde_json::Value, &mut Link<'_>) -> Result<serde_json::Value, RoleError>,
    check: fn(&mut serde_json::Value, &str, &Policy) -> Result<(), String>,
}

/// The route of request `R` to its role's handler.
pub const fn route<R>() -> Route<R::Role>
where
    R: Request,
    R::Role: Handler<R>,
{
    Route {
        name: R::NAME,
        handle: handle_json::<R>,
        check: check_json::<R>,
    }
}

fn parse<R: Request>(body: serde_json::Value) -> Result<R, String> {
    serde_json::from_value(body).map_err(|e| {
        format!(
            "a {} {} request that does not parse: {e}",
            <R::Role as Protocol>::ROLE,
            R::NAME
        )
    })
}

fn handle_json<R>(
    role: &mut R::Role,
    body: serde_json::Value,
    link: &mut Link<'_>,
) -> Result<serde_json::Value, RoleError>
where
    R: Request,
    R::Role: Handler<R>,
{
    let request = parse::<R>(body).map_err(RoleError::Failed)?;
    let reply = role.handle(request, link)?;
    serde_json::to_value(&reply).map_err(|e| RoleError::Channel(io::Error::other(e)))
}

fn check_json<R>(body: &mut serde_json::Value, run: &str, policy: &Policy) -> Result<(), String>
where
    R: Request,
    R::Role: Handler<R>,
{
    let mut typed = parse::<R>(body.clone())?;
    <R::Role as Handler<R>>::check(&mut typed, run, policy)?;
    *body = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    Ok(())
}

/// The command that carries `request` to its role.
pub fn command<R: Request>(request: &R) -> Result<Command, serde_json::Error> {
    Ok(Command::Role {
        role: <R::Role as Protocol>::ROLE.to_string(),
        request: R::NAME.to_string(),
        params: serde_json::to_value(request)?,
    })
}

/// Why a role could not answer a request.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// The request failed; the controller is told why and the endpoint
    /// goes on serving.
    #[error("{0}")]
    Failed(String),
    /// The control channel broke: the endpoint ends.
    #[error("control channel: {0}")]
    Channel(#[from] io::Error),
}

impl RoleError {
    pub fn failed(error: impl std::fmt::Display) -> RoleError {
        RoleError::Failed(error.to_string())
    }
}

/// What a role may do on the control channel while it handles a request.
pub struct Link<'a> {
    output: &'a mut dyn Write,
    next_command: &'a mut dyn FnMut() -> io::Result<Option<Command>>,
}

impl<'a> Link<'a> {
    pub fn new(
        output: &'a mut dyn Write,
        next_command: &'a mut dyn FnMut() -> io::Result<Option<Command>>,
    ) -> Link<'a> {
        Link {
            output,
            next_command,
        }
    }

    /// Tells the controller how many bytes have moved (its progress
    /// display, and its sign that the run is alive).
    pub fn progress(&mut self, bytes: u64) -> io::Result<()> {
        write_frame(&mut self.output, &Reply::Progress { bytes })
    }

    /// Sends one of the protocol's events.
    pub fn event<P: Protocol>(&mut self, event: &P::Event) -> io::Result<()> {
        let value = serde_json::to_value(event).map_err(io::Error::other)?;
        write_frame(&mut self.output, &Reply::Event(value))
    }

    /// Waits for the controller's `Proceed`.
    pub fn proceed(&mut self) -> io::Result<()> {
        match (self.next_command)()? {
            Some(Command::Proceed) => Ok(()),
            Some(other) => Err(io::Error::other(format!("expected Proceed, got {other:?}"))),
            None => Err(io::Error::other("the controller left while awaited")),
        }
    }
}

/// What an endpoint process does for one experiment: the requests it
/// answers, each routed to its [`Handler`].
pub trait Role: Protocol + Default + Send + Sized + 'static {
    /// Every request the role answers: `route::<R>()` for each, which
    /// compiles only where the role handles `R` with `R`'s reply.
    const ROUTES: &'static [Route<Self>];
}

fn route_of<S: Role>(name: &str) -> Result<&'static Route<S>, String> {
    S::ROUTES.iter().find(|r| r.name == name).ok_or_else(|| {
        let known: Vec<&str> = S::ROUTES.iter().map(|r| r.name).collect();
        format!(
            "the {} role answers no request \"{name}\" (it answers {})",
            S::ROLE,
            known.join(", ")
        )
    })
}

/// A role as the dispatcher holds it: requests by name, bodies as JSON.
pub trait AnyRole: Send {
    fn handle(
        &mut self,
        request: &str,
        params: serde_json::Value,
        link: &mut Link<'_>,
    ) -> Result<serde_json::Value, RoleError>;
}

impl<R: Role> AnyRole for R {
    fn handle(
        &mut self,
        request: &str,
        params: serde_json::Value,
        link: &mut Link<'_>,
    ) -> Result<serde_json::Value, RoleError> {
        let route = route_of::<R>(request).map_err(RoleError::Failed)?;
        (route.handle)(self, params, link)
    }
}

/// One experiment's role in the table.
#[derive(Clone, Copy)]
pub struct RoleEntry {
    /// The experiment's name, as requests carry it.
    pub role: &'static str,
    pub make: fn() -> Box<dyn AnyRole>,
    /// The names of the requests it routes, in its order.
    pub requests: fn() -> Vec<&'static str>,
}

impl RoleEntry {
    pub const fn of<R: Role>() -> RoleEntry {
        RoleEntry {
            role: R::ROLE,
            make: make::<R>,
            requests: request_names::<R>,
        }
    }
}

fn request_names<R: Role>() -> Vec<&'static str> {
    R::ROUTES.iter().map(|r| r.name).collect()
}

/// A role's checks as an agent's policy holds them: on the request as it
/// travels (its name and its body as JSON), each by the request's type.
pub const fn check_of<R: Role>() -> RoleCheck {
    RoleCheck {
        role: R::ROLE,
        check: check::<R>,
    }
}

fn make<R: Role>() -> Box<dyn AnyRole> {
    Box::new(R::default())
}

fn check<R: Role>(
    request: &str,
    params: &mut serde_json::Value,
    run: &str,
    policy: &Policy,
) -> Result<(), String> {
    (route_of::<R>(request)?.check)(params, run, policy)
}

/// The roles an endpoint process can play: the registry's.
pub type RoleTable = &'static [RoleEntry];

/// The entry for `experiment`.
pub fn find(table: RoleTable, role: &str) -> Option<&'static RoleEntry> {
    table.iter().find(|e| e.role == role)
}

impl std::fmt::Debug for RoleEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.role)
    }
}

/// Entries are the same role when they answer to the same name.
impl PartialEq for RoleEntry {
    fn eq(&self, other: &RoleEntry) -> bool {
        self.role == other.role
    }
}
