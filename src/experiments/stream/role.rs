//! The stream experiment's endpoint role: a receiver (TCP, or UDP with
//! `--udp`) set up to listen, a sender set up to connect, and `Go` to move
//! the bytes; set-up is its own request, so it is outside every measured
//! interval. The sender's `--interval` samples are events as they end; a
//! receiver asked for progress sends byte counts about four times a second.

use crate::endpoint::agent::policy::Policy;
use crate::endpoint::bulk::quic::{QuicReceiver, QuicSender};
use crate::endpoint::bulk::receiver::Receiver;
use crate::endpoint::bulk::sender::Sender;
use crate::endpoint::bulk::spec::{ReceiveSpec, SendSpec};
use crate::endpoint::bulk::types::{Amount, BudgetUse, EndpointReport, IntervalSample};
use crate::endpoint::bulk::udp::{UdpReceiver, UdpSender};
use crate::endpoint::role::{Handler, Link, Protocol, Role, RoleError, Route, route};
use crate::testbed::cgroup::CpuBudget;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// Listen (or bind, for UDP): the address listened on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listen(pub ReceiveSpec);

/// Connect (or open a UDP socket): the local address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connect(pub SendSpec);

/// Move the bytes now: the end's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Go;

/// What the endpoint holds between set-up and `Go`.
#[derive(Default)]
enum State {
    #[default]
    Idle,
    Receiver(Box<Receiver>),
    Sender(Box<Sender>),
    UdpReceiver(Box<UdpReceiver>),
    UdpSender(Box<UdpSender>),
    QuicReceiver(Box<QuicReceiver>),
    QuicSender(Box<QuicSender>),
}

/// One end of one connection of a stream cell.
#[derive(Default)]
pub struct StreamRole {
    state: State,
    /// `--sender-cpu` / `--receiver-cpu`: made at set-up (so a host that
    /// cannot make it says so before anything runs), entered by the data
    /// path's thread for `Go` alone, removed when the role ends.
    budget: Option<CpuBudget>,
}

/// A CPU budget of `percent` of one CPU, if one was asked for.
fn make_budget(percent: Option<f64>) -> Result<Option<CpuBudget>, RoleError> {
    percent
        .map(|p| {
            CpuBudget::create(p)
                .map_err(|e| RoleError::failed(format_args!("a CPU budget of {p}%: {e}")))
        })
        .transpose()
}

crate::endpoint::role::requests! { StreamRole:
    Listen => SocketAddr,
    Connect => SocketAddr,
    Go => Box<EndpointReport>,
}

impl Protocol for StreamRole {
    const ROLE: &'static str = "stream";
    /// A sender's interval, as it ends (`--interval`).
    type Event = IntervalSample;
}

impl Role for StreamRole {
    const ROUTES: &'static [Route<Self>] = &[route::<Listen>(), route::<Connect>(), route::<Go>()];
}

impl Handler<Listen> for StreamRole {
    fn handle(&mut self, Listen(spec): Listen, _: &mut Link<'_>) -> Result<SocketAddr, RoleError> {
        self.budget = make_budget(spec.options.receiver_cpu_pct)?;
        let (addr, state) = if let Some(quic) = spec.quic.clone() {
            let receiver = QuicReceiver::bind(spec, quic).map_err(RoleError::failed)?;
            (
                receiver.local_addr()?,
                State::QuicReceiver(Box::new(receiver)),
            )
        } else if spec.udp {
            let bind = spec.bind;
            let receiver = UdpReceiver::bind(spec)
                .map_err(|e| RoleError::failed(format_args!("binding UDP {bind}: {e}")))?;
            (
                receiver.local_addr()?,
                State::UdpReceiver(Box::new(receiver)),
            )
        } else {
            let receiver = Receiver::listen(spec).map_err(RoleError::failed)?;
            (receiver.local_addr()?, State::Receiver(Box::new(receiver)))
        };
        self.state = state;
        Ok(addr)
    }

    fn check(Listen(spec): &mut Listen, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, Self::ROLE, "a stream receiver")?;
        // The command line's bounds, whoever sent the request.
        super::bounds::check_receiver(spec.strategy).map_err(|e| e.to_string())?;
        if let Some(quic) = &spec.quic
            && (spec.udp || spec.tls.is_some())
        {
            let _ = quic;
            return Err("--quic with --udp or --tls: QUIC is its own transport".into());
        }
        if spec.options.mptcp && (spec.udp || spec.quic.is_some()) {
            return Err("--mptcp with --udp or --quic: MPTCP is TCP's".into());
        }
        if let Some(tls) = &spec.tls {
            let write = crate::endpoint::bulk::types::SendStrategy::Write;
            super::bounds::check_tls(Some(&tls.choice()), write, spec.strategy)
                .map_err(|e| e.to_string())?;
        }
        policy.guard_data_port(&mut spec.guard, spec.bind.port())?;
        spec.limit_bytes = Some(policy.max_bytes);
        Ok(())
    }
}

impl Handler<Connect> for StreamRole {
    fn handle(
        &mut self,
        Connect(spec): Connect,
        _: &mut Link<'_>,
    ) -> Result<SocketAddr, RoleError> {
        self.budget = make_budget(spec.options.sender_cpu_pct)?;
        let (local, state) = match spec.udp {
            None if spec.quic.is_some() => {
                let quic = spec.quic.clone().expect("checked");
                let sender = QuicSender::connect(spec, quic).map_err(RoleError::failed)?;
                (sender.local_addr()?, State::QuicSender(Box::new(sender)))
            }
            Some(pace) => {
                let to = spec.connect;
                let sender = UdpSender::connect(spec, pace)
                    .map_err(|e| RoleError::failed(format_args!("UDP socket to {to}: {e}")))?;
                (sender.local_addr()?, State::UdpSender(Box::new(sender)))
            }
            None => {
                let sender = Sender::connect(spec).map_err(RoleError::failed)?;
                (sender.local_addr()?, State::Sender(Box::new(sender)))
            }
        };
        self.state = state;
        Ok(local)
    }

    fn check(Connect(spec): &mut Connect, run: &str, policy: &Policy) -> Result<(), String> {
        policy.part_of(run, Self::ROLE, "a stream sender")?;
        // The agent sends datagrams only to a receiver that answered the
        // run's token (the sender waits for it).
        if spec.udp.is_some() && spec.token.is_none() {
            return Err("a UDP sender through an agent sends only after the receiver's consent, and the controller sent no run token to ask it with".into());
        }
        // A TCP sender too: it waits for the receiver's consent to the
        // token before its first byte of data.
        if spec.token.is_none() {
            return Err("a sender through an agent sends only after the receiver's consent, and the controller sent no run token to ask it with".into());
        }
        if let Some(pace) = &spec.udp {
            pace.check()?;
        }
        super::bounds::check_sender(spec.record as u64, spec.amount, spec.interval_s)
            .map_err(|e| e.to_string())?;
        super::bounds::check_mptcp(&spec.options, spec.strategy, spec.udp.is_some())
            .map_err(|e| e.to_string())?;
        if spec.options.mptcp && spec.quic.is_some() {
            return Err("--mptcp with --quic: MPTCP is TCP's".into());
        }
        if let Some(tls) = &spec.tls {
            let read = crate::endpoint::bulk::types::RecvStrategy::Read { buffer: 1 };
            super::bounds::check_tls(Some(&tls.choice()), spec.strategy, read)
                .map_err(|e| e.to_string())?;
            if spec.udp.is_some() {
                return Err("--tls over --udp: TLS needs TCP's byte stream".into());
            }
        }
        if spec.quic.is_some() && (spec.udp.is_some() || spec.tls.is_some()) {
            return Err("--quic with --udp or --tls: QUIC is its own transport".into());
        }
        match spec.amount {
            Amount::Bytes(bytes) => policy.within_bytes(bytes, ""),
            Amount::Seconds(s) => policy.within_seconds(s, ""),
        }
    }
}

impl Handler<Go> for StreamRole {
    fn handle(&mut self, _: Go, link: &mut Link<'_>) -> Result<Box<EndpointReport>, RoleError> {
        self.go(link).map(Box::new)
    }

    fn check(_: &mut Go, _: &str, _: &Policy) -> Result<(), String> {
        Ok(())
    }
}

impl StreamRole {
    /// Runs what was set up, inside its CPU budget if it has one; the
    /// data path's errors become `Failed`, the control channel's end the
    /// endpoint.
    fn go(&mut self, link: &mut Link<'_>) -> Result<EndpointReport, RoleError> {
        let Some(budget) = self.budget.take() else {
            return self.run(link);
        };
        budget.enter_thread().map_err(RoleError::failed)?;
        let result = self.run(link);
        // Lifted before leaving, so nothing after the data path (the
        // report, the teardown) runs at the budget's pace.
        let _ = budget.lift();
        let used = BudgetUse {
            percent: budget.percent,
            throttled_s: budget.throttled().map(|d| d.as_secs_f64()),
        };
        let _ = budget.leave_thread();
        drop(budget);
        result.map(|mut report| {
            report.cpu_budget = Some(used);
            report
        })
    }

    fn run(&mut self, link: &mut Link<'_>) -> Result<EndpointReport, RoleError> {
        match std::mem::take(&mut self.state) {
            State::Receiver(receiver) => {
                let mut channel = None;
                let result = receiver.run(&mut |bytes| {
                    if let Err(e) = link.progress(bytes) {
                        channel.get_or_insert(e);
                    }
                });
                if let Some(e) = channel {
                    return Err(RoleError::Channel(e));
                }
                result.map_err(RoleError::failed)
            }
            State::Sender(sender) => {
                fault_injection_point();
                let mut channel = None;
                let result = sender.run(&mut |sample| {
                    if let Err(e) = link.event::<StreamRole>(sample) {
                        channel.get_or_insert(e);
                    }
                });
                if let Some(e) = channel {
                    return Err(RoleError::Channel(e));
                }
                result.map_err(RoleError::failed)
            }
            State::UdpReceiver(receiver) => receiver
                .run()
                .map_err(|e| RoleError::failed(format_args!("receiving UDP: {e}"))),
            State::UdpSender(sender) => sender
                .run()
                .map_err(|e| RoleError::failed(format_args!("sending UDP: {e}"))),
            State::QuicReceiver(receiver) => receiver.run().map_err(RoleError::failed),
            State::QuicSender(sender) => {
                fault_injection_point();
                sender.run().map_err(RoleError::failed)
            }
            State::Idle => Err(RoleError::failed("Go before any set-up request")),
        }
    }
}

/// Test hook: `NETLAB_FAULT=sender-abort` makes a sender die by SIGABRT as it
/// starts, so tests can check how the controller handles an endpoint that
/// dies mid-run; `sender-abort-first:PATH` only the first (the one that
/// finds no file at PATH, and makes it). Documented in
/// docs/ARCHITECTURE.md; never set in normal use.
fn fault_injection_point() {
    match std::env::var("NETLAB_FAULT").as_deref() {
        Ok("sender-abort") => std::process::abort(),
        Ok(fault) if fault.starts_with("sender-abort-first:") => {
            let marker = &fault["sender-abort-first:".len()..];
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(marker)
                .is_ok()
            {
                std::process::abort();
            }
        }
        _ => {}
    }
}
