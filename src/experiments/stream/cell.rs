//! The bulk-transfer experiment: one sender process, one receiver process,
//! one TCP connection, N bytes (or T seconds) in R-byte records.
//!
//! Source: Bill Joy's 1981 VAX measurement (4 MB in 1024-byte records, CPU by
//! side) and Van Jacobson's 1988 notes (throughput vs write size, sosend's
//! 1 KB chunking). The controller sets both endpoints up (connection set-up
//! is outside the measured interval), samples `/proc/stat` around the data
//! path, and turns the two endpoint reports into one [`Record`].

use super::bounds::{ConfigError, MAX_PARALLEL, check_interval, check_receiver, check_sender};
use crate::analysis::limits::judge;
use crate::controller::Interrupted;
use crate::controller::helpers::Bed;
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, EndpointProcess, Sent, Wait};
use crate::controller::resume::CellKey;
use crate::controller::runner::Tap;
use crate::controller::runner::{MeasureCell, Measured};
use crate::endpoint::bulk::spec::{ReceiveSpec, SendSpec};
use crate::endpoint::bulk::types::Amount;
use crate::endpoint::bulk::types::EndpointReport;
use crate::endpoint::bulk::types::RecvStrategy;
use crate::endpoint::bulk::types::SendStrategy;
use crate::endpoint::bulk::types::SocketOptions;
use crate::endpoint::bulk::types::{IntervalSample, UdpPace};
use crate::endpoint::quic::QuicChoice;
use crate::endpoint::stall::STALL_PHRASE;
use crate::endpoint::tls::{RunCertificate, TlsChoice, TlsSpec};
use crate::experiments::stream::analysis::{
    combined_figures, figures, flow_evidence, jain_fairness, udp_loss_sites,
};
use crate::experiments::stream::record::DesignContext;
use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::experiments::stream::record::StreamParams;
use crate::experiments::stream::record::StreamResult;
use crate::experiments::stream::record::SweepContext;
use crate::experiments::stream::record::{Direction, FlowResult, Flows};
use crate::experiments::stream::role::{Connect, Go, Listen};
use crate::measure::procstat;
use crate::record::testbed::Placement;
use crate::units::format_size;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A bulk transfer to run.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    pub amount: Amount,
    pub record: u64,
    pub send: SendStrategy,
    pub recv: RecvStrategy,
    pub options: SocketOptions,
    pub verify: bool,
    /// Receiver's port; 0 picks a free one.
    pub port: u16,
    pub placement: Placement,
    /// Connections and which way each goes (`-P`, `--reverse`, `--bidir`).
    pub flows: Flows,
    /// `--interval`: each sender reports TCP_INFO this often.
    pub interval_s: Option<f64>,
    /// `--udp`: paced datagrams instead of a TCP stream.
    pub udp: Option<UdpPace>,
    /// `--tls`: TLS 1.3 over the TCP stream.
    pub tls: Option<TlsChoice>,
    /// `--quic`: QUIC instead of TCP.
    pub quic: Option<QuicChoice>,
}

impl Default for StreamConfig {
    /// `netlab stream`'s defaults: 2 s of 128 KB writes on loopback, read
    /// into a 128 KB buffer and verified.
    fn default() -> Self {
        StreamConfig {
            amount: Amount::Seconds(2.0),
            record: 128 << 10,
            send: SendStrategy::Write,
            recv: RecvStrategy::Read { buffer: 128 << 10 },
            options: SocketOptions::default(),
            verify: true,
            port: 0,
            placement: Placement::Loopback,
            flows: Flows::default(),
            interval_s: None,
            udp: None,
            tls: None,
            quic: None,
        }
    }
}

impl StreamConfig {
    /// Bill Joy's 1981 transfer: 4 MB in 1024-byte records, read 1 KB at a
    /// time, on loopback.
    pub fn joy_1981() -> Self {
        StreamConfig {
            amount: Amount::Bytes(4 << 20),
            record: 1024,
            recv: RecvStrategy::Read { buffer: 1024 },
            ..StreamConfig::default()
        }
    }

    /// Refuses a run whose connections would cross this host's limits
    /// (two processes, a port and a few descriptors each), when any end
    /// runs here.
    pub fn check_limits(&self) -> Result<(), crate::measure::limits::LimitsCrossed> {
        if matches!(self.placement, Placement::Remote { .. }) {
            return Ok(());
        }
        let connections = self.flows.each().len() as u64;
        crate::measure::limits::refuse_or_prepare(crate::measure::limits::Needs {
            what: format!("a stream of {connections} connections"),
            ptys: 0,
            descriptors_per_process: 64,
            processes: 2 * connections,
            ephemeral_ports: connections,
        })
    }

    /// `--udp`: a rate the link can carry, on a placement that has it.
    pub fn check_udp(&self) -> Result<(), ConfigError> {
        let Some(pace) = self.udp else {
            return Ok(());
        };
        let refuse = |why: String| Err(ConfigError::Udp(why));
        match &self.placement {
            Placement::Remote { .. } => {}
            Placement::Netns { link, .. } => {
                if let Some(link_bps) = link.rate_bps
                    && pace.rate_bps > link_bps
                {
                    return refuse(format!(
                        "--rate {} Mbit/s is beyond the link profile's {} Mbit/s: the excess would only be dropped at the queue (ask for at most the link's rate)",
                        pace.rate_bps as f64 / 1e6,
                        link_bps as f64 / 1e6
                    ));
                }
            }
            Placement::Loopback => {}
        }
        if self.interval_s.is_some() {
            return refuse("--interval reads TCP_INFO: it applies to TCP streams".into());
        }
        if let Amount::Bytes(b) = self.amount
            && b < pace.length as u64
        {
            return refuse(format!(
                "--bytes {b} is less than one datagram of {}",
                pace.length
            ));
        }
        Ok(())
    }

    /// `--quic`: no option of TCP's, TLS's or bare UDP's beside it.
    pub fn check_quic(&self) -> Result<(), ConfigError> {
        if self.quic.is_none() {
            return Ok(());
        }
        super::bounds::check_quic(super::bounds::Beside {
            udp: self.udp.is_some(),
            tls: self.tls.is_some(),
            send: self.send,
            recv: self.recv,
            options: &self.options,
            interval: self.interval_s.is_some(),
        })
    }

    /// `--mptcp`: options its sockets take, not beside QUIC, and a kernel
    /// that opens MPTCP sockets where this host places the ends (asked of
    /// an agent's kernel by its own socket, when it opens one). A netns
    /// placement's namespaces are new, with MPTCP on wherever the kernel
    /// has it, so only a kernel without MPTCP refuses there.
    pub fn check_mptcp(&self) -> Result<(), ConfigError> {
        use crate::measure::mptcp::{Support, support};
        if !self.options.mptcp {
            return Ok(());
        }
        if self.quic.is_some() {
            return Err(ConfigError::Mptcp(
                "--quic: QUIC runs over UDP; MPTCP is TCP's".into(),
            ));
        }
        super::bounds::check_mptcp(&self.options, self.send, self.udp.is_some())?;
        match (&self.placement, support()) {
            (_, Support::Present) | (Placement::Remote { .. }, _) => Ok(()),
            (Placement::Netns { .. }, Support::Refused(_))
                if std::path::Path::new("/proc/sys/net/mptcp").exists() =>
            {
                Ok(())
            }
            (_, Support::Refused(why)) => Err(ConfigError::Mptcp(why)),
        }
    }

    /// `--interval`: above 10 ms, and within a timed run's length.
    pub fn check_interval(&self) -> Result<(), ConfigError> {
        check_interval(self.interval_s, self.amount)
    }

    /// `--sender-cpu` / `--receiver-cpu`: a share of one CPU the kernel can
    /// enforce (each data path is one thread, so at most one CPU), and a
    /// cgroup CPU controller here when an end runs here.
    fn check_budgets(&self) -> Result<(), ConfigError> {
        use crate::testbed::cgroup;
        for (end, percent) in self.options.cpu_budgets() {
            let Some(percent) = percent else { continue };
            let option = format!("--{end}-cpu");
            if !(cgroup::MIN_PERCENT..=100.0).contains(&percent) {
                return Err(ConfigError::CpuBudget(format!(
                    "{option} {percent}: give {} to 100 percent of one CPU (the kernel's smallest quota is 1 ms a second; a data path is one thread)",
                    cgroup::MIN_PERCENT
                )));
            }
            if !matches!(self.placement, Placement::Remote { .. })
                && let Err(e) = cgroup::available()
            {
                return Err(ConfigError::CpuBudget(format!("{option}: {e}")));
            }
        }
        Ok(())
    }

    /// Rejects configurations that cannot run, before any process starts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_PARALLEL).contains(&self.flows.parallel) {
            return Err(ConfigError::Parallel(self.flows.parallel));
        }
        self.check_budgets()?;
        check_sender(self.record, self.amount, None)?;
        check_receiver(self.recv)?;
        super::bounds::check_tls(self.tls.as_ref(), self.send, self.recv)?;
        if self.tls.is_some() && self.udp.is_some() {
            return Err(ConfigError::Tls(
                "TLS runs over TCP's byte stream, and --udp sends datagrams (DTLS is not built; QUIC is the encrypted transport over UDP)".into(),
            ));
        }
        self.check_quic()?;
        self.check_mptcp()?;
        if self.tls.is_some() && self.options.rcvlowat.is_some() {
            return Err(ConfigError::Tls(
                "--rcvlowat: the record layer reads as records come, a whole record at a time"
                    .into(),
            ));
        }
        if let Some(lowat) = self.options.rcvlowat {
            let refuse = |why: &str| {
                Err(ConfigError::Rcvlowat(format!(
                    "{}: {why}",
                    format_size(lowat as u64)
                )))
            };
            if lowat == 0 || lowat > i32::MAX as u32 {
                return refuse("give 1 byte to 2G");
            }
            if self.udp.is_some() {
                return refuse("a TCP receive option; --udp reads whole datagrams");
            }
            if !matches!(self.recv, RecvStrategy::Read { .. }) {
                return refuse(
                    "applies to --recv read (splice and zero-copy receive wait on their own terms)",
                );
            }
        }
        Ok(())
    }

    /// The parameters as recorded.
    pub fn params(&self, repeat_index: u32, sweep: Option<SweepContext>) -> StreamParams {
        let (bytes, duration_s) = match self.amount {
            Amount::Bytes(b) => (Some(b), None),
            Amount::Seconds(s) => (None, Some(s)),
        };
        StreamParams {
            bytes,
            duration_s,
            record: self.record,
            send: self.send,
            recv: self.recv,
            options: self.options.clone(),
            verify: self.verify && self.recv.sees_bytes(),
            repeat_index,
            sweep,
            placement: self.placement.clone(),
            design: None,
            flows: self.flows,
            interval_s: self.interval_s,
            udp: self.udp,
            tls: self.tls,
            quic: self.quic,
        }
    }

    /// One line describing the run, e.g. `4M in 1K records, write -> read(128K), verified`.
    pub fn describe(&self) -> String {
        let amount = match self.amount {
            Amount::Bytes(b) => format_size(b),
            Amount::Seconds(s) => format!("{s} s"),
        };
        if let Some(pace) = self.udp {
            // A UDP run has no records, strategies or verification of a
            // byte stream: say what it sent.
            return format!(
                "{amount} of UDP at {} Mbit/s in {}-byte datagrams (netlab's 24-byte header included), sequence-checked",
                pace.rate_bps as f64 / 1e6,
                pace.length
            );
        }
        let send = match self.send {
            SendStrategy::Chunked { chunk } => format!("chunked({})", format_size(chunk as u64)),
            SendStrategy::Writev { records } => format!("writev({records} records/call)"),
            other => other.name().to_string(),
        };
        let recv = match self.recv {
            RecvStrategy::Read { buffer } => format!("read({})", format_size(buffer as u64)),
            RecvStrategy::Splice => "splice to /dev/null".into(),
            RecvStrategy::Zerocopy { buffer } => {
                format!("zero-copy receive({})", format_size(buffer as u64))
            }
        };
        let verify = if self.params(0, None).verify {
            "verified"
        } else {
            "not verified"
        };
        let flows = match (self.flows.parallel, self.flows.direction) {
            (1, Direction::Forward) => String::new(),
            (n, direction) => format!(
                ", {n} connection{}{}",
                if n == 1 { "" } else { "s" },
                match direction {
                    Direction::Forward => "",
                    Direction::Reverse => " reversed (--to sends)",
                    Direction::Both => " each way",
                }
            ),
        };
        let mut budgets = String::new();
        for (who, percent) in self.options.cpu_budgets() {
            if let Some(p) = percent {
                budgets.push_str(&format!(", {who} held to {p}% of one CPU"));
            }
        }
        let tls = match (self.tls, self.quic) {
            (_, Some(q)) => format!(", over {}", q.describe()),
            (Some(t), None) => format!(", over {}", t.describe()),
            (None, None) => String::new(),
        };
        format!(
            "{amount} in {} records, {send} -> {recv}, {verify}{flows}{budgets}{tls}",
            format_size(self.record)
        )
    }
}

/// How long past its nominal length a timed run may take before the
/// controller gives up on it.
const TIMED_RUN_GRACE: Duration = Duration::from_secs(30);

/// One connection's two endpoint processes.
struct Pair {
    sender: EndpointProcess,
    receiver: EndpointProcess,
    reverse: bool,
}

/// Starts one connection's receiver and sender and connects them: `--from`
/// sends unless `reverse`. A fixed `--port` is the first connection's; the
/// others take the ports after it.
fn set_up(
    config: &StreamConfig,
    launcher: &Launcher,
    index: usize,
    reverse: bool,
    tls: Option<&TlsSpec>,
) -> Result<Pair, ControlError> {
    // --quic: the run's certificate carried as QUIC's, not over TCP.
    let (tls, quic) = match config.quic {
        Some(choice) => (
            None,
            tls.map(|t| crate::endpoint::quic::QuicSpec {
                tls: t.clone(),
                gso: choice.gso,
            }),
        ),
        None => (tls, None),
    };
    let (send_end, receive_end) = if reverse {
        (End::To, End::From)
    } else {
        (End::From, End::To)
    };
    let mut receiver = launcher.spawn("receiver", receive_end)?;
    let mut sender = launcher.spawn("sender", send_end)?;
    let setup = |what| Wait::up_to(10, what);
    let port = if config.port == 0 {
        0
    } else {
        config.port.saturating_add(index as u16)
    };
    let receive = Listen(ReceiveSpec {
        bind: SocketAddr::from((launcher.address(receive_end), port)),
        options: config.options.clone(),
        strategy: config.recv,
        verify: config.verify,
        // Nothing reads byte counts during the run: the receiver sends none
        // (no clock reads or control frames on its data path).
        progress: false,
        interface: launcher.interface(receive_end),
        guard: launcher.guard(receive_end),
        limit_bytes: None,
        udp: config.udp.is_some(),
        udp_clock_shared: launcher.same_host(),
        tls: tls.cloned(),
        quic: quic.clone(),
    });
    let addr = receiver.call(receive, setup("setting up"))?;
    let send = Connect(SendSpec {
        connect: addr,
        options: config.options.clone(),
        strategy: config.send,
        record: config.record as usize,
        amount: config.amount,
        interface: launcher.interface(send_end),
        token: launcher.token(),
        interval_s: config.interval_s,
        udp: config.udp,
        tls: tls.cloned(),
        quic,
    });
    sender.call(send, setup("connecting"))?;
    Ok(Pair {
        sender,
        receiver,
        reverse,
    })
}

/// `--tls`: the run's own certificate, for both ends' addresses (either
/// may receive: `--reverse`, `--bidir`), made for this run alone and held
/// in memory; it reaches the ends in their set-up requests.
fn run_certificate(launcher: &Launcher) -> Result<RunCertificate, ControlError> {
    let mut names: Vec<String> = [End::To, End::From]
        .map(|end| launcher.address(end).to_string())
        .to_vec();
    names.dedup();
    RunCertificate::new(&names).map_err(|e| ControlError::Failed {
        role: "controller",
        message: e.to_string(),
    })
}

/// Waits for one connection's reports: the sender's first (it finishes
/// only after its receiver has closed), looking at the receiver meanwhile.
fn wait_for(
    pair: &mut Pair,
    go: &Sent<Go>,
    limit: Option<Duration>,
    start: Instant,
    on_interval: &mut dyn FnMut(&IntervalSample),
) -> Result<(EndpointReport, EndpointReport), ControlError> {
    let Pair {
        sender, receiver, ..
    } = pair;
    let mut received = None;
    let sent = loop {
        let sending = Wait {
            timeout: Some(Duration::from_millis(200)),
            what: "sending",
        };
        let heard = sender.answer(go, sending, &mut |_| {}, &mut |sample, _| {
            on_interval(&sample);
            Ok(())
        });
        match heard {
            Ok(report) => break report,
            Err(ControlError::Timeout { .. }) => {
                if limit.is_some_and(|l| start.elapsed() > l) {
                    return Err(ControlError::Timeout {
                        role: "sender",
                        seconds: start.elapsed().as_secs_f64(),
                        what: "sending",
                    });
                }
                if received.is_none() {
                    received = match receiver_report(receiver, go) {
                        Ok(report) => report,
                        Err(e) => return Err(with_other_side(e, sender, go, false)),
                    };
                }
            }
            Err(e) => return Err(with_other_side(e, receiver, go, true)),
        }
    };
    let received = match received {
        Some(report) => report,
        None => receiver.answer(
            go,
            Wait::up_to(10, "finishing"),
            &mut |_| {},
            &mut |_, _| Ok(()),
        )?,
    };
    Ok((*sent, *received))
}

/// One end's failure with the other end's account: a sender fails when
/// its receiver went away, so the receiver's own account (a corrupt byte,
/// its death) is the real cause and comes first; when both ends stalled
/// (`--stall-timeout`), both say what they saw, the receiver first.
fn with_other_side(
    failed: ControlError,
    other: &mut EndpointProcess,
    go: &Sent<Go>,
    other_is_receiver: bool,
) -> ControlError {
    let stalled = |e: &ControlError| matches!(e, ControlError::Failed { message, .. } if message.starts_with(STALL_PHRASE));
    // Both ends' waits began when the bytes stopped; the other's ends soon.
    let wait = if stalled(&failed) { 2000 } else { 500 };
    let heard = other.answer(
        go,
        Wait {
            timeout: Some(Duration::from_millis(wait)),
            what: if other_is_receiver {
                "receiving"
            } else {
                "sending"
            },
        },
        &mut |_| {},
        &mut |_, _| Ok(()),
    );
    match heard {
        Err(cause) if stalled(&failed) && stalled(&cause) => {
            let (first, second) = if other_is_receiver {
                (cause, failed)
            } else {
                (failed, cause)
            };
            match (first, second) {
                (
                    ControlError::Failed { role, message },
                    ControlError::Failed { message: more, .. },
                ) => ControlError::Failed {
                    role,
                    message: format!("{message}; and {more}"),
                },
                (first, _) => first,
            }
        }
        // The other end said nothing: say what its kernel shows it doing.
        Err(ControlError::Timeout { .. }) if stalled(&failed) => {
            let side = if other_is_receiver {
                "receiver"
            } else {
                "sender"
            };
            match (failed, other.waiting_in()) {
                (ControlError::Failed { role, message }, doing) => ControlError::Failed {
                    role,
                    message: match doing {
                        Some(doing) => format!("{message}; the {side} is {doing}"),
                        None => format!(
                            "{message}; the {side} said nothing in {wait} ms and was waiting in no call its kernel shows"
                        ),
                    },
                },
                (failed, _) => failed,
            }
        }
        Err(cause @ (ControlError::Failed { .. } | ControlError::Died { .. }))
            if other_is_receiver =>
        {
            cause
        }
        _ => failed,
    }
}

/// Runs one transfer: one connection, or with `-P`, `--reverse` or
/// `--bidir` several, each between its own pair of endpoint processes, all
/// set up before any starts and started together.
/// `on_interval` gets each connection's intervals (`--interval`) as they
/// end, with the connection's index.
pub fn run_once(
    config: &StreamConfig,
    on_interval: &mut dyn FnMut(usize, &IntervalSample),
) -> Result<StreamResult, ControlError> {
    // Dropped last: the namespaces outlive every process placed in them.
    let mut bed = Bed::create(&config.placement)?;
    if let (Some(bed), Placement::Netns { link, .. }) = (bed.as_mut(), &config.placement)
        && config.options.mptcp
    {
        bed.testbed.add_second_path(link)?;
    }
    let launcher = Launcher::for_run(&config.placement, bed.as_ref())?;
    let asked = config.tls.or(config.quic.map(|q| TlsChoice {
        cipher: q.cipher,
        record: None,
    }));
    let tls = asked
        .map(|choice| run_certificate(&launcher).map(|c| choice.spec(c)))
        .transpose()?;
    let mut pairs = Vec::new();
    for (index, reverse) in config.flows.each().into_iter().enumerate() {
        pairs.push(set_up(config, &launcher, index, reverse, tls.as_ref())?);
    }
    let limit = match config.amount {
        Amount::Seconds(s) => Some(Duration::from_secs_f64(s) + TIMED_RUN_GRACE),
        Amount::Bytes(_) => None,
    };
    let stat_before = procstat::StatSnapshot::read().ok();
    let start = Instant::now();
    let mut go = None;
    for pair in &mut pairs {
        go = Some(pair.receiver.send(Go)?);
    }
    for pair in &mut pairs {
        go = Some(pair.sender.send(Go)?);
    }
    let go = go.expect("a stream has at least one flow");
    let mut flows = Vec::new();
    for (index, pair) in pairs.iter_mut().enumerate() {
        let (sender, mut receiver) =
            wait_for(pair, &go, limit, start, &mut |s| on_interval(index, s))?;
        crate::endpoint::bulk::udp::count_losses_from_sender(&mut receiver, &sender);
        flows.push(FlowResult {
            reverse: pair.reverse,
            figures: figures(&sender, &receiver, config.record),
            sender,
            receiver,
            limits: None,
        });
    }
    let seconds = start.elapsed().as_secs_f64();
    let system = match (stat_before, procstat::StatSnapshot::read().ok()) {
        (Some(before), Some(after)) => procstat::system_cpu(&before, &after, seconds),
        _ => Default::default(),
    };
    for mut pair in pairs {
        pair.sender.finish();
        pair.receiver.finish();
    }
    let netns = bed.map(Bed::finish).transpose()?;
    let (link, emulator) = netns
        .as_ref()
        .map_or((None, None), |n| (Some(&n.link), n.emulator.as_ref()));
    for flow in &mut flows {
        flow.limits = flow_evidence(
            &flow.sender,
            &flow.receiver,
            config.record,
            config.options.pacing_bps,
            flow.reverse,
            link,
            emulator,
        )
        .map(|evidence| judge(&evidence))
        .or_else(|| super::quic::verdict(&flow.sender, &flow.receiver));
    }
    let udp_loss = flows
        .first()
        .and_then(|f| udp_loss_sites(&f.sender, &f.receiver, f.reverse, link, emulator));
    // The main direction's first connection speaks for the transfer.
    let mut limits = flows
        .iter()
        .find(|f| !f.reverse)
        .or(flows.first())
        .and_then(|f| f.limits.clone());
    let (sender, receiver, figures, fairness, reverse) = if config.flows.is_single() {
        let only = flows.pop().expect("one connection");
        (only.sender, only.receiver, only.figures, None, None)
    } else {
        let forward: Vec<&FlowResult> = flows.iter().filter(|f| !f.reverse).collect();
        let backward: Vec<&FlowResult> = flows.iter().filter(|f| f.reverse).collect();
        let main = if forward.is_empty() {
            &backward
        } else {
            &forward
        };
        let (sender, receiver, together) = combined_figures(main, config.record);
        let rates: Vec<f64> = main.iter().map(|f| f.figures.throughput_mbit_s).collect();
        let reverse = (!forward.is_empty() && !backward.is_empty())
            .then(|| combined_figures(&backward, config.record).2);
        (sender, receiver, together, jain_fairness(&rates), reverse)
    };
    // --mptcp with -P: no connection has TCP_INFO of its own to read, so
    // the main direction's connections together meet the paths' rate.
    if config.options.mptcp && !config.flows.is_single() {
        let main_reversed = flows.iter().all(|f| f.reverse);
        limits = flow_evidence(
            &sender,
            &receiver,
            config.record,
            None,
            main_reversed,
            link,
            emulator,
        )
        .map(|evidence| judge(&evidence));
    }
    Ok(StreamResult {
        sender,
        receiver,
        system,
        figures,
        link: netns.as_ref().map(|n| n.link.clone()),
        emulator: netns.as_ref().and_then(|n| n.emulator.clone()),
        capture: netns.and_then(|n| n.capture),
        flows,
        fairness,
        reverse,
        limits,
        udp_loss,
    })
}

/// The receiver's report if it has finished, without blocking long.
fn receiver_report(
    receiver: &mut EndpointProcess,
    go: &Sent<Go>,
) -> Result<Option<Box<EndpointReport>>, ControlError> {
    let glance = Wait {
        timeout: Some(Duration::from_millis(1)),
        what: "receiving",
    };
    match receiver.answer(go, glance, &mut |_| {}, &mut |_, _| Ok(())) {
        Ok(report) => Ok(Some(report)),
        Err(ControlError::Timeout { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One stream cell: a transfer, and where it sits among repeats and sweeps.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCell {
    pub config: StreamConfig,
    /// 0-based index among `--repeat` runs.
    pub repeat_index: u32,
    pub sweep: Option<SweepContext>,
    pub design: Option<DesignContext>,
}

impl StreamCell {
    /// `--tls`: `repeat` runs of `config`, each beside a run of the same
    /// stream without TLS, the pair's order alternating (plain first in
    /// even runs) so that a drift in the host's speed falls on both
    /// alike. Without TLS, [`StreamCell::repeats`].
    pub fn beside_plain(config: &StreamConfig, repeat: u32) -> Vec<StreamCell> {
        if let Some(quic) = config.quic {
            return StreamCell::rotating(config, quic, repeat);
        }
        if config.tls.is_none() {
            return StreamCell::repeats(config, repeat);
        }
        let plain = StreamConfig {
            tls: None,
            ..config.clone()
        };
        let cell = |config: &StreamConfig, repeat_index| StreamCell {
            config: config.clone(),
            repeat_index,
            sweep: None,
            design: None,
        };
        (0..repeat)
            .flat_map(|i| {
                let pair = [cell(&plain, i), cell(config, i)];
                if i % 2 == 0 {
                    pair
                } else {
                    let [a, b] = pair;
                    [b, a]
                }
            })
            .collect()
    }

    /// `--quic`: each run beside plain TCP and TCP+TLS of the same cipher,
    /// the three in an order that rotates from run to run.
    fn rotating(config: &StreamConfig, quic: QuicChoice, repeat: u32) -> Vec<StreamCell> {
        let plain = StreamConfig {
            quic: None,
            tls: None,
            ..config.clone()
        };
        let tls = StreamConfig {
            tls: Some(TlsChoice {
                cipher: quic.cipher,
                record: None,
            }),
            ..plain.clone()
        };
        (0..repeat)
            .flat_map(|repeat_index| {
                let mut three = [plain.clone(), tls.clone(), config.clone()];
                three.rotate_left(repeat_index as usize % 3);
                three.map(|config| StreamCell {
                    config,
                    repeat_index,
                    sweep: None,
                    design: None,
                })
            })
            .collect()
    }

    /// `repeat` runs of `config`, as cells of a grid.
    pub fn repeats(config: &StreamConfig, repeat: u32) -> Vec<StreamCell> {
        (0..repeat)
            .map(|repeat_index| StreamCell {
                config: config.clone(),
                repeat_index,
                sweep: None,
                design: None,
            })
            .collect()
    }
}

/// `--confidence LEVEL,WIDTH`: run until the mean throughput's confidence
/// interval at LEVEL percent is within ±WIDTH/2 percent of the mean, at
/// least `min_runs` and at most `max_runs` runs (netperf's `-I` and `-i`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Confidence {
    pub level_pct: f64,
    pub width_pct: f64,
    pub min_runs: u32,
    pub max_runs: u32,
}

impl Confidence {
    /// `99,5`: a level in (50, 99.9] and a width above 0 and at most 100.
    pub fn parse(text: &str, min_runs: u32, max_runs: u32) -> Result<Confidence, ConfigError> {
        let bad = |why: &str| ConfigError::Confidence(format!("{text}: {why}"));
        let (level, width) = text
            .split_once(',')
            .ok_or_else(|| bad("give LEVEL,WIDTH in percent, e.g. 99,5"))?;
        let number = |s: &str| s.trim().trim_end_matches('%').parse::<f64>().ok();
        let level = number(level).ok_or_else(|| bad("the level is not a number"))?;
        let width = number(width).ok_or_else(|| bad("the width is not a number"))?;
        if !(level > 50.0 && level <= 99.9) {
            return Err(bad("the level must be above 50 and at most 99.9 percent"));
        }
        if !(width > 0.0 && width <= 100.0) {
            return Err(bad("the width must be above 0 and at most 100 percent"));
        }
        let min_runs = min_runs.max(3);
        if max_runs < min_runs {
            return Err(bad(&format!(
                "--max-runs {max_runs} is below the {min_runs} runs an interval needs first"
            )));
        }
        Ok(Confidence {
            level_pct: level,
            width_pct: width,
            min_runs,
            max_runs,
        })
    }
}

/// What `--confidence` reached.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Confident {
    pub asked: Confidence,
    /// Runs made, and those that measured (failed runs are recorded and
    /// left out of the interval).
    pub runs: u32,
    pub measured: u32,
    pub mean_mbit_s: Option<f64>,
    pub half_width_mbit_s: Option<f64>,
    /// The half-width as a percent of the mean.
    pub half_width_pct: Option<f64>,
    pub reached: bool,
}

/// Runs `config` again and again until [`Confidence`] is met or its
/// maximum reached; every run is a record.
pub fn run_until_confident<M: MeasureCell<Cell = StreamCell, Data = StreamData>>(
    runner: &mut crate::controller::runner::Runner,
    measure: &mut M,
    config: &StreamConfig,
    asked: Confidence,
) -> Result<(Vec<Record>, Confident), crate::controller::MeasureError> {
    let mut records = Vec::new();
    let mut throughputs = Vec::new();
    let mut confident = Confident {
        asked,
        runs: 0,
        measured: 0,
        mean_mbit_s: None,
        half_width_mbit_s: None,
        half_width_pct: None,
        reached: false,
    };
    while confident.runs < asked.max_runs {
        let cell = StreamCell {
            config: config.clone(),
            repeat_index: confident.runs,
            sweep: None,
            design: None,
        };
        let record = runner.cell(measure, &cell)?;
        confident.runs += 1;
        if let StreamData {
            result: Some(result),
            ..
        } = &record.data
            && record.error.is_none()
        {
            throughputs.push(result.figures.throughput_mbit_s);
        }
        records.push(record);
        confident.measured = throughputs.len() as u32;
        if let Some((mean, half)) =
            crate::analysis::stats::mean_interval(&throughputs, asked.level_pct / 100.0)
        {
            confident.mean_mbit_s = Some(mean);
            confident.half_width_mbit_s = Some(half);
            confident.half_width_pct = (mean > 0.0).then(|| 100.0 * half / mean);
            confident.reached = confident.measured >= asked.min_runs
                && confident
                    .half_width_pct
                    .is_some_and(|pct| pct <= asked.width_pct / 2.0);
        }
        if confident.reached {
            break;
        }
    }
    Ok((records, confident))
}

/// Measures stream cells with two endpoint processes each (a pair per
/// connection); with a `tap`, tells the runner's sinks each connection's
/// intervals as they end (`--json-stream`), as
/// [`interval_line`]s.
#[derive(Default)]
pub struct StreamMeasure<'w> {
    pub tap: Option<Tap<'w>>,
}

impl MeasureCell for StreamMeasure<'_> {
    type Cell = StreamCell;
    type Data = StreamData;

    fn label(&self, cell: &StreamCell) -> String {
        format!(
            "record {} run {}",
            format_size(cell.config.record),
            cell.repeat_index + 1
        )
    }

    fn key(&self, cell: &StreamCell) -> CellKey {
        CellKey::of(
            "stream",
            &StreamParams {
                design: cell.design.clone(),
                ..cell.config.params(cell.repeat_index, cell.sweep.clone())
            },
        )
    }

    fn measure(&mut self, cell: &StreamCell) -> Result<Measured<StreamData>, Interrupted> {
        let config = &cell.config;
        let run = cell.repeat_index;
        let result = run_once(config, &mut |connection, sample| {
            if let Some(tap) = &self.tap {
                let line = interval_line(run, connection, sample);
                tap.sample(&line.to_string());
            }
        });
        crate::controller::measured(config.placement.name(), result, |result| StreamData {
            params: StreamParams {
                design: cell.design.clone(),
                ..config.params(cell.repeat_index, cell.sweep.clone())
            },
            result,
        })
    }
}

/// One `--json-stream` line: an interval of run `run` (0-based) on
/// connection `connection` (0-based), as it ended.
pub fn interval_line(
    run: u32,
    connection: usize,
    sample: &crate::endpoint::bulk::types::IntervalSample,
) -> serde_json::Value {
    let mut line = serde_json::json!({
        "event": "interval",
        "run": run + 1,
        "connection": connection + 1,
    });
    if let (Some(map), Ok(serde_json::Value::Object(fields))) =
        (line.as_object_mut(), serde_json::to_value(sample))
    {
        map.extend(fields);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(amount: Amount, record: u64) -> StreamConfig {
        StreamConfig {
            amount,
            record,
            recv: RecvStrategy::Read { buffer: 131072 },
            ..StreamConfig::default()
        }
    }

    /// A mock stream whose runs measure `throughputs` in turn.
    fn confident_after(throughputs: &[f64], asked: Confidence) -> Confident {
        use crate::controller::runner::mock::{Mock, runner};
        let mut next = throughputs.iter().copied();
        let mut measure = Mock::new(|_: &StreamCell| {
            let mut record = crate::experiments::stream::record::fixture_stream_run();
            if let StreamData {
                result: Some(result),
                ..
            } = &mut record.data
            {
                result.figures.throughput_mbit_s = next.next().expect("no more runs scripted");
            }
            Ok(Measured {
                placement: "loopback".into(),
                data: record.data,
                error: None,
            })
        });
        let config = config(Amount::Seconds(1.0), 1024);
        let (records, confident) =
            run_until_confident(&mut runner(), &mut measure, &config, asked).unwrap();
        assert_eq!(records.len() as u32, confident.runs);
        confident
    }

    #[test]
    fn confidence_runs_until_the_interval_is_narrow_enough_or_says_it_was_not() {
        let asked = Confidence::parse("95,5", 1, 10).unwrap();
        assert_eq!(asked.min_runs, 3);
        // Three runs agree to 0.1%: done after the minimum.
        let c = confident_after(&[1000.0, 1001.0, 999.0], asked);
        assert_eq!((c.runs, c.reached), (3, true));
        assert!((c.mean_mbit_s.unwrap() - 1000.0).abs() < 1e-9);
        // Noisy at first, then steady: more runs until within ±2.5%.
        let noisy = [
            950.0, 1050.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0,
        ];
        let c = confident_after(&noisy, asked);
        // s = 26.7 after 8 runs; t(0.975, 7) = 2.365: ±22.3, 2.2% of 1000.
        assert_eq!((c.runs, c.reached), (8, true), "{c:?}");
        assert!(c.half_width_pct.unwrap() <= 2.5);
        // Never steady: stops at the maximum and says so.
        let wild = [
            500.0, 1500.0, 500.0, 1500.0, 500.0, 1500.0, 500.0, 1500.0, 500.0, 1500.0,
        ];
        let c = confident_after(&wild, asked);
        assert_eq!((c.runs, c.reached), (10, false));
        assert!(c.half_width_pct.unwrap() > 2.5);
    }

    #[test]
    fn confidence_refuses_levels_and_widths_out_of_range() {
        for bad in ["50,5", "99.95,5", "99,0", "99,-1", "99", "x,5", "99,101"] {
            assert!(
                matches!(
                    Confidence::parse(bad, 1, 10),
                    Err(ConfigError::Confidence(_))
                ),
                "{bad}"
            );
        }
        assert!(Confidence::parse("99.9,1", 1, 10).is_ok());
        assert!(
            Confidence::parse("99,5", 1, 2).is_err(),
            "max below the minimum"
        );
    }

    #[test]
    fn tls_runs_alternate_with_plain_twins_of_the_same_stream() {
        let mut tls = config(Amount::Seconds(1.0), 16384);
        tls.tls = Some(TlsChoice {
            cipher: crate::checksum::aead::Cipher::Chacha20Poly1305,
            record: None,
        });
        let cells = StreamCell::beside_plain(&tls, 3);
        let shape: Vec<(u32, bool)> = cells
            .iter()
            .map(|c| (c.repeat_index, c.config.tls.is_some()))
            .collect();
        assert_eq!(
            shape,
            [
                (0, false),
                (0, true),
                (1, true),
                (1, false),
                (2, false),
                (2, true)
            ]
        );
        for c in &cells {
            assert_eq!(
                c.config,
                StreamConfig {
                    tls: c.config.tls,
                    ..tls.clone()
                }
            );
        }
        let plain = config(Amount::Seconds(1.0), 16384);
        assert_eq!(StreamCell::beside_plain(&plain, 2).len(), 2);
    }

    #[test]
    fn tls_refuses_what_it_cannot_carry() {
        let mut c = config(Amount::Seconds(1.0), 16384);
        c.tls = Some(TlsChoice {
            cipher: crate::checksum::aead::Cipher::Aes128Gcm,
            record: None,
        });
        assert!(c.validate().is_ok());
        let refused = |c: &StreamConfig| match c.validate() {
            Err(ConfigError::Tls(why)) => why,
            other => panic!("{other:?}"),
        };
        let mut udp = c.clone();
        udp.udp = Some(UdpPace {
            rate_bps: 1_000_000,
            length: 1400,
        });
        assert!(refused(&udp).contains("--udp"));
        let mut sendfile = c.clone();
        sendfile.send = SendStrategy::Sendfile;
        assert!(refused(&sendfile).contains("--strategy sendfile"));
        let mut splice = c.clone();
        splice.recv = RecvStrategy::Splice;
        assert!(refused(&splice).contains("--recv splice"));
        for record in [0, 26, 16385, 1 << 20] {
            let mut big = c.clone();
            big.tls = Some(TlsChoice {
                record: Some(record),
                ..c.tls.unwrap()
            });
            assert!(refused(&big).contains("27 to 16384"), "{record}");
        }
        assert!(
            c.describe()
                .ends_with("over TLS 1.3, aes-128-gcm, 16K records")
        );
    }

    #[test]
    fn validation_names_the_problem() {
        assert!(config(Amount::Bytes(4 << 20), 1024).validate().is_ok());
        assert_eq!(
            config(Amount::Bytes(1 << 20), 4 << 20).validate(),
            Err(ConfigError::RecordExceedsTotal {
                record: "4M".into(),
                total: "1M".into()
            })
        );
        assert!(matches!(
            config(Amount::Seconds(1.0), 1 << 30).validate(),
            Err(ConfigError::RecordTooLarge(_))
        ));
        assert!(config(Amount::Seconds(f64::NAN), 1024).validate().is_err());
    }

    #[test]
    fn description_reads_like_the_command() {
        let c = config(Amount::Bytes(4 << 20), 1024);
        assert_eq!(
            c.describe(),
            "4M in 1K records, write -> read(128K), verified"
        );
        let mut c = c;
        c.send = SendStrategy::Chunked { chunk: 1024 };
        c.recv = RecvStrategy::Splice;
        assert_eq!(
            c.describe(),
            "4M in 1K records, chunked(1K) -> splice to /dev/null, not verified"
        );
        let mut udp = config(Amount::Seconds(2.0), 1024);
        udp.udp = Some(UdpPace {
            rate_bps: 100_000_000,
            length: 1472,
        });
        assert_eq!(
            udp.describe(),
            "2 s of UDP at 100 Mbit/s in 1472-byte datagrams (netlab's 24-byte header included), sequence-checked"
        );
    }
}
