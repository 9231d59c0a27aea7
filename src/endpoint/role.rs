//! The seam between the endpoint process and the experiments: each
//! experiment's side of an endpoint is a [`Role`] with its own typed
//! requests and replies ([`Protocol`]), carried on the control channel as
//! [`Command::Role`] and [`Reply::Role`] (JSON inside the usual frame, see
//! [`crate::wire::control`]).
//!
//! The endpoint process knows no experiment: it is handed a [`RoleTable`]
//! (built by the registry, `crate::experiments`) and looks a request's role
//! up by the experiment's name. A role lives from its first request to the
//! end of the process, so it can hold what it started (a server, a
//! listening receiver) between requests; dropping it must stop all of that.
//! The agent checks every request against its policy through each role's
//! [`check_of`] (listed by the registry) before the endpoint sees it.
//!
//! Invariants: a role answers every request with exactly one
//! [`Reply::Role`] or [`Reply::Failed`]; before that it may send events
//! ([`Link::event`]), progress ([`Link::progress`]) and wait for the
//! controller's [`Command::Proceed`] ([`Link::proceed`]).

use super::protocol::{Command, Reply};
use crate::endpoint::agent::policy::{Policy, RoleCheck};
use crate::wire::control::write_frame;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::io::{self, Write};

/// One experiment's messages between the controller and its role.
pub trait Protocol {
    /// The experiment whose role answers (its name in the registry).
    const ROLE: &'static str;
    type Request: Serialize + DeserializeOwned + Debug;
    type Reply: Serialize + DeserializeOwned + Debug;
    /// What the role says while a request is under way (intervals, the
    /// edges of a measured window); `()` when it says nothing.
    type Event: Serialize + DeserializeOwned + Debug;
}

/// One request of a role's protocol, typed with the answer it gets: the
/// controller calls with it and receives that answer, so no call site
/// looks at the reply's variant. The wire carries the protocol's own
/// request and reply enums, unchanged.
pub trait Request: Debug {
    /// The role that answers.
    type Role: Protocol;
    /// What the matching reply carries.
    type Answer;
    /// The request as the wire carries it.
    fn into_wire(self) -> <Self::Role as Protocol>::Request;
    /// The answer in `reply`, or `reply` back when it answers another
    /// request (a role out of step with its controller).
    fn answer(
        reply: <Self::Role as Protocol>::Reply,
    ) -> Result<Self::Answer, <Self::Role as Protocol>::Reply>;
}

/// Declares typed [`Request`]s of one role: each request type, the wire
/// request it becomes, and the reply pattern that answers it.
///
/// ```text
/// requests! { StreamRole:
///     Listen, |Listen(spec)| StreamRequest::Receive(Box::new(spec));
///     StreamReply::Listening { addr } => SocketAddr = addr;
///     Go, |Go| StreamRequest::Go;
///     StreamReply::Done(report) => Box<EndpointReport> = report;
/// }
/// ```
///
/// Each line pair: the request type and how it becomes the wire's request,
/// then the reply that answers it and what the caller gets of it.
macro_rules! requests {
    ($Role:ty: $(
        $Type:ty, |$this:pat_param| $wire:expr;
        $reply:pat => $Answer:ty = $answer:expr;
    )*) => {$(
        impl $crate::endpoint::role::Request for $Type {
            type Role = $Role;
            type Answer = $Answer;
            fn into_wire(self) -> <$Role as $crate::endpoint::role::Protocol>::Request {
                let $this = self;
                $wire
            }
            fn answer(
                reply: <$Role as $crate::endpoint::role::Protocol>::Reply,
            ) -> Result<$Answer, <$Role as $crate::endpoint::role::Protocol>::Reply> {
                #[allow(unreachable_patterns)]
                match reply {
                    $reply => Ok($answer),
                    other => Err(other),
                }
            }
        }
    )*};
}
pub(crate) use requests;

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

/// What an endpoint process does for one experiment.
pub trait Role: Protocol + Default + Send + 'static {
    fn handle(
        &mut self,
        request: Self::Request,
        link: &mut Link<'_>,
    ) -> Result<Self::Reply, RoleError>;

    /// The agent's check of one request of a run before the role sees it:
    /// `run` is the experiment the controller said it runs (`lab` for a
    /// lab run, whose requests are admitted one experiment at a time with
    /// [`Policy::admit`]). It may tighten the request (the agent's data
    /// ports, its byte limit).
    fn check(request: &mut Self::Request, run: &str, policy: &Policy) -> Result<(), String>;
}

/// A role as the dispatcher holds it: requests and replies as JSON.
pub trait AnyRole: Send {
    fn handle(
        &mut self,
        request: serde_json::Value,
        link: &mut Link<'_>,
    ) -> Result<serde_json::Value, RoleError>;
}

impl<R: Role> AnyRole for R {
    fn handle(
        &mut self,
        request: serde_json::Value,
        link: &mut Link<'_>,
    ) -> Result<serde_json::Value, RoleError> {
        let request: R::Request = serde_json::from_value(request).map_err(|e| {
            RoleError::Failed(format!("a {} request that does not parse: {e}", R::ROLE))
        })?;
        let reply = Role::handle(self, request, link)?;
        serde_json::to_value(&reply).map_err(|e| RoleError::Channel(io::Error::other(e)))
    }
}

/// One experiment's role in the table.
pub struct RoleEntry {
    /// The experiment's name, as requests carry it.
    pub role: &'static str,
    pub make: fn() -> Box<dyn AnyRole>,
}

impl RoleEntry {
    pub const fn of<R: Role>() -> RoleEntry {
        RoleEntry {
            role: R::ROLE,
            make: make::<R>,
        }
    }
}

/// [`Role::check`] as an agent's policy holds it: on the request as it
/// travels, as JSON.
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
    request: &mut serde_json::Value,
    run: &str,
    policy: &Policy,
) -> Result<(), String> {
    let mut typed: R::Request = serde_json::from_value(request.clone())
        .map_err(|e| format!("a {} request that does not parse: {e}", R::ROLE))?;
    R::check(&mut typed, run, policy)?;
    *request = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    Ok(())
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
