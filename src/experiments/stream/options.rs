//! `netlab stream`: one bulk transfer (or `--repeat K` of them) on loopback.

use crate::endpoint::bulk::types::Amount;
use crate::endpoint::bulk::types::RecvStrategy;
use crate::endpoint::bulk::types::SendStrategy;
use crate::endpoint::bulk::types::SocketOptions;
use crate::endpoint::bulk::types::UdpPace;
use crate::endpoint::quic::QuicChoice;
use crate::endpoint::tls::TlsChoice;
use crate::experiments::stream::bounds::MAX_PARALLEL;
use crate::experiments::stream::cell::{
    Confidence, StreamCell, StreamConfig, StreamMeasure, run_until_confident,
};
use crate::experiments::stream::record::{Direction, Flows};
use crate::options::Output;
use crate::options::run::{Print, RunOutcome};
use crate::units::parse_size;
use anyhow::bail;
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SendKind {
    /// One write(2) per record.
    Write,
    /// sosend-style: write(2)s of at most --chunk bytes per record.
    Chunked,
    /// One writev(2) of --iov records.
    Writev,
    /// sendfile(2) from a page-cached file.
    Sendfile,
    /// splice(2) file -> pipe -> socket.
    Splice,
    /// send(2) with MSG_ZEROCOPY.
    Zerocopy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecvKind {
    /// read(2) into a --rbuf buffer, verifying the data.
    Read,
    /// splice(2) to /dev/null (no copy to user space, no verification).
    Splice,
    /// TCP_ZEROCOPY_RECEIVE: whole pages of payload mapped, not copied
    /// (the rest read; the record counts both). Pages need page-sized
    /// payloads: --mss 4108 on loopback, an MTU of 4148 on netns.
    Zerocopy,
}

/// The options every stream run takes, shared by `stream` and `sweep stream`.
#[derive(Debug, Clone, Args)]
pub struct StreamOptions {
    /// How the sender hands data to the kernel.
    #[arg(long, value_enum, default_value = "write")]
    pub strategy: SendKind,
    /// Bytes per write for --strategy chunked (Van Jacobson's sosend copied 1 KB at a time).
    #[arg(long, value_parser = crate::options::usize_size_arg, value_name = "SIZE")]
    pub chunk: Option<usize>,
    /// Records gathered per writev(2) for --strategy writev.
    #[arg(long, value_name = "N")]
    pub iov: Option<usize>,
    /// How the receiver takes data from the kernel.
    #[arg(long, value_enum, default_value = "read")]
    pub recv: RecvKind,
    /// Receiver's read buffer.
    #[arg(long, value_parser = crate::options::usize_size_arg, default_value = "128K", value_name = "SIZE")]
    pub rbuf: usize,
    /// Set TCP_NODELAY on both sockets.
    #[arg(long)]
    pub nodelay: bool,
    /// SO_SNDBUF for both sockets (the kernel doubles it).
    #[arg(long, value_parser = crate::options::usize_size_arg, value_name = "SIZE")]
    pub sndbuf: Option<usize>,
    /// SO_RCVBUF for both sockets (the kernel doubles it).
    #[arg(long, value_parser = crate::options::usize_size_arg, value_name = "SIZE")]
    pub rcvbuf: Option<usize>,
    /// SO_RCVLOWAT on the receiving socket after its first read: each read
    /// waits for SIZE bytes, so the receiver is woken less often (--recv
    /// read). On long paths it starves the receive window (EXPERIMENTS.md).
    #[arg(long, value_parser = crate::options::u32_size_arg, value_name = "SIZE")]
    pub rcvlowat: Option<u32>,
    /// Congestion control algorithm (TCP_CONGESTION), e.g. cubic, reno, bbr.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// TCP_MAXSEG on both sockets: the largest segment either end sends.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(88..=65495))]
    pub mss: Option<u32>,
    /// Do not verify the received bytes (for comparisons with tools that do not).
    #[arg(long)]
    pub no_verify: bool,
    /// Receiver's port on 127.0.0.1 (0 picks a free one; with -P the
    /// connections take the ports after it).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Parallel connections, each between its own two processes (spread
    /// over the cores), each measured, and their sum and Jain's fairness.
    /// --bytes is each connection's.
    #[arg(
        short = 'P',
        long = "parallel",
        default_value_t = 1,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub parallel: i64,
    /// The --to end sends (to the --from end).
    #[arg(long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both ends send at once: -P connections each way.
    #[arg(long)]
    pub bidir: bool,
    /// UDP instead of TCP: datagrams paced at --rate, each numbered and
    /// time-stamped; loss, duplicates, reordering, jitter (RFC 3550) and,
    /// on one host, one-way latency.
    #[arg(long, requires = "rate")]
    pub udp: bool,
    /// --udp's rate of UDP payload (10mbit, 1gbit, ...); over TCP, the
    /// kernel's pacing rate for the sending connection (SO_MAX_PACING_RATE).
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// --udp's datagram length in bytes, netlab's 24-byte header included.
    #[arg(
        long,
        value_name = "BYTES",
        requires = "udp",
        allow_hyphen_values = true
    )]
    pub length: Option<i64>,
    /// TLS 1.3 over the TCP stream (rustls on ring, the run's own
    /// certificate): each end's time sealing or opening records measured
    /// apart from its system calls, and a plain TCP stream run beside it,
    /// alternating, in the same run (not with --confidence).
    #[arg(long)]
    pub tls: bool,
    /// QUIC instead of TCP (quinn, on the same rustls and ring, the run's
    /// own certificate): one connection a -P, its packets' protection
    /// timed apart from its UDP system calls; plain TCP and TCP+TLS run
    /// beside it, rotating, in the same run (not with --confidence).
    #[arg(long, conflicts_with_all = ["tls", "udp"])]
    pub quic: bool,
    /// Multipath TCP (RFC 8684): both ends open MPTCP sockets and the
    /// kernel adds subflows over the paths it knows; on a netns placement
    /// netlab gives it a second link, and reports each subflow's share.
    #[arg(long, conflicts_with_all = ["quic", "udp"])]
    pub mptcp: bool,
    /// --quic without UDP GSO and GRO: one system call a datagram.
    #[arg(long, requires = "quic")]
    pub no_gso: bool,
    /// --tls's or --quic's cipher: aes-128-gcm (default), aes-256-gcm or
    /// chacha20-poly1305.
    #[arg(long, value_name = "NAME")]
    pub cipher: Option<String>,
    /// --tls's most plaintext per record (default 16K, TLS's largest).
    #[arg(long, requires = "tls", value_parser = crate::options::usize_size_arg, value_name = "SIZE")]
    pub tls_record: Option<usize>,
    /// Run the sending end's data path under a CPU budget of PERCENT of
    /// one CPU (a cgroup quota; 0.1 to 100 per CPU). Both ends local
    /// or through agents; needs root and a cgroup CPU controller.
    #[arg(long, value_name = "PERCENT", allow_hyphen_values = true)]
    pub sender_cpu: Option<f64>,
    /// The same for the receiving end.
    #[arg(long, value_name = "PERCENT", allow_hyphen_values = true)]
    pub receiver_cpu: Option<f64>,
    #[command(flatten)]
    pub place: crate::options::placement::PlacementArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

impl StreamOptions {
    /// `--udp --rate R [--length L]`, checked.
    fn udp_pace(&self) -> anyhow::Result<Option<UdpPace>> {
        if !self.udp {
            return Ok(None);
        }
        let rate = self.rate.as_deref().unwrap_or("");
        let rate_bps = crate::testbed::link::parse_rate(rate)
            .map_err(|e| anyhow::anyhow!("--rate {rate}: {e}"))?;
        if rate_bps == 0 {
            bail!("--rate {rate}: a UDP rate must be above zero");
        }
        let length = self.length.unwrap_or(1460);
        let (lo, hi) = (
            crate::endpoint::bulk::types::MIN_LENGTH,
            crate::endpoint::bulk::types::MAX_LENGTH,
        );
        if !(lo as i64..=hi as i64).contains(&length) {
            bail!("--length {length}: give {lo} to {hi} bytes (netlab's header is 24)");
        }
        let pace = UdpPace {
            rate_bps,
            length: length as usize,
        };
        pace.check()
            .map_err(|why| anyhow::anyhow!("--rate {rate} --length {length}: {why}"))?;
        Ok(Some(pace))
    }

    /// `--tls [--cipher NAME] [--tls-record SIZE]`, the cipher checked.
    fn tls_choice(&self) -> anyhow::Result<Option<TlsChoice>> {
        if self.cipher.is_some() && !self.tls && !self.quic {
            bail!("--cipher applies to --tls or --quic");
        }
        if !self.tls {
            return Ok(None);
        }
        let cipher = self.cipher()?;
        Ok(Some(TlsChoice {
            cipher,
            record: self.tls_record,
        }))
    }

    /// `--cipher`, checked (AES-128-GCM where none is given).
    fn cipher(&self) -> anyhow::Result<crate::checksum::aead::Cipher> {
        self.cipher
            .as_deref()
            .unwrap_or("aes-128-gcm")
            .parse()
            .map_err(|why| anyhow::anyhow!("--cipher: {why}"))
    }

    /// `--quic [--cipher NAME] [--no-gso]`.
    fn quic_choice(&self) -> anyhow::Result<Option<QuicChoice>> {
        if !self.quic {
            return Ok(None);
        }
        Ok(Some(QuicChoice {
            cipher: self.cipher()?,
            gso: !self.no_gso,
        }))
    }

    /// TCP `--rate R`, checked: the kernel's pacing rate, bits/s.
    fn tcp_pacing(&self) -> anyhow::Result<Option<u64>> {
        let Some(rate) = self.rate.as_deref().filter(|_| !self.udp) else {
            return Ok(None);
        };
        let bps = crate::testbed::link::parse_rate(rate)
            .map_err(|e| anyhow::anyhow!("--rate {rate}: {e}"))?;
        if bps < 8 {
            bail!("--rate {rate}: a TCP pacing rate must be at least one byte a second");
        }
        Ok(Some(bps))
    }

    /// Builds the run configuration, checking option combinations.
    pub fn config(&self, amount: Amount, record: u64) -> anyhow::Result<StreamConfig> {
        if self.chunk.is_some() && self.strategy != SendKind::Chunked {
            bail!("--chunk applies only to --strategy chunked");
        }
        if self.iov.is_some() && self.strategy != SendKind::Writev {
            bail!("--iov applies only to --strategy writev");
        }
        if self.iov == Some(0) {
            bail!("--iov must be at least 1");
        }
        let send = match self.strategy {
            SendKind::Write => SendStrategy::Write,
            SendKind::Chunked => SendStrategy::Chunked {
                chunk: self.chunk.unwrap_or(1024),
            },
            SendKind::Writev => SendStrategy::Writev {
                records: self.iov.unwrap_or(16),
            },
            SendKind::Sendfile => SendStrategy::Sendfile,
            SendKind::Splice => SendStrategy::Splice,
            SendKind::Zerocopy => SendStrategy::Zerocopy,
        };
        let recv = match self.recv {
            RecvKind::Read => RecvStrategy::Read { buffer: self.rbuf },
            RecvKind::Splice => RecvStrategy::Splice,
            RecvKind::Zerocopy => RecvStrategy::Zerocopy { buffer: self.rbuf },
        };
        let config = StreamConfig {
            amount,
            record,
            send,
            recv,
            options: SocketOptions {
                nodelay: self.nodelay,
                sndbuf: self.sndbuf,
                rcvbuf: self.rcvbuf,
                congestion_control: self.cc.clone(),
                mss: self.mss,
                rcvlowat: self.rcvlowat,
                pacing_bps: self.tcp_pacing()?,
                sender_cpu_pct: self.sender_cpu,
                receiver_cpu_pct: self.receiver_cpu,
                stall: self.run.stall_option()?,
                mptcp: self.mptcp,
            },
            verify: !self.no_verify,
            port: self.port,
            placement: self.place.placement("stream")?,
            interval_s: None,
            udp: self.udp_pace()?,
            tls: self.tls_choice()?,
            quic: self.quic_choice()?,
            flows: Flows {
                parallel: u32::try_from(self.parallel)
                    .ok()
                    .filter(|&n| (1..=MAX_PARALLEL).contains(&n))
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "-P {}: give 1 to {MAX_PARALLEL} connections",
                            self.parallel
                        )
                    })?,
                direction: match (self.reverse, self.bidir) {
                    (true, _) => Direction::Reverse,
                    (_, true) => Direction::Both,
                    _ => Direction::Forward,
                },
            },
        };
        config.validate()?;
        Ok(config)
    }
}

/// The shape of stream's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonFormat {
    Netlab,
    Iperf3,
}

/// Run a bulk transfer between two endpoint processes.
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Total bytes to send (4M, 4MiB, 1G, 1GB, ...).
    #[arg(long, value_parser = parse_size, conflicts_with = "duration", value_name = "SIZE", allow_hyphen_values = true)]
    pub bytes: Option<u64>,
    /// Send for this long instead (500ms, 2s, ...). Default: 2s when --bytes is absent.
    #[arg(long, value_parser = crate::options::seconds_arg, value_name = "TIME", allow_hyphen_values = true)]
    pub duration: Option<f64>,
    /// Bytes per record (per write, for --strategy write).
    #[arg(long, value_parser = parse_size, default_value = "128K", value_name = "SIZE", allow_hyphen_values = true)]
    pub record: u64,
    /// Runs to make; tables then show min/median/max.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Report every TIME (1s, 100ms): throughput (bytes acknowledged),
    /// retransmits, cwnd, RTT and delivery rate per interval, from each
    /// sender's TCP_INFO; in the table and the record.
    #[arg(long, value_parser = crate::options::seconds_arg, value_name = "TIME", allow_hyphen_values = true)]
    pub interval: Option<f64>,
    /// Repeat until the mean throughput's LEVEL% confidence interval is
    /// within ±WIDTH/2 % of the mean (netperf's -I), e.g. 99,5; at least
    /// 3 runs (or --repeat), at most --max-runs; says whether it got there.
    #[arg(long, value_name = "LEVEL,WIDTH", allow_hyphen_values = true)]
    pub confidence: Option<String>,
    /// The most runs --confidence makes.
    #[arg(long, default_value_t = 30, requires = "confidence", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_runs: u32,
    /// Print JSON Lines while the run goes: one line per interval as it
    /// ends, then one line with the whole document (implies --json; needs
    /// --interval, except against an iperf3 server, whose intervals are
    /// 1 s unless --interval says otherwise). With --format iperf3:
    /// iperf3's event lines (start, interval, end).
    #[arg(long)]
    pub json_stream: bool,
    /// The JSON's shape: netlab's own document, or iperf3's (`iperf3 -J`:
    /// start, intervals, end; netlab's verdict and host facts under the
    /// key `netlab`), for readers of iperf3's output. Implies --json.
    /// iperf3's shape is for tests against an iperf3 server (`--to
    /// iperf3:HOST`).
    #[arg(long, value_enum, default_value_t = JsonFormat::Netlab)]
    pub format: JsonFormat,
    /// `linux`: measure this kernel. `bsd41`: Berkeley's 1981 TCP/IP (004,
    /// a VAX-11/750 sending 4 MB in 1 KB records to an 11/780) as a CPU
    /// model that runs nothing: 004's figures beside its predictions, Bill
    /// Joy's ladder, and each constant's source.
    #[arg(long, value_enum, default_value = "linux")]
    pub stack: StreamStack,
    /// With --stack bsd41: a stream results file (`netlab stream --out`)
    /// whose runs' measured work a KB is priced on two 750s: today's code
    /// on 1981's machine (`-`: standard input).
    #[arg(long, value_name = "RESULTS")]
    pub counts_from: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: StreamOptions,
}

/// Which stack the stream runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamStack {
    Linux,
    Bsd41,
}

/// `--stack bsd41`: the model's table, and today's runs on 1981's
/// machine from `--counts-from`. Options that would measure are refused:
/// the model describes one transfer (004's) and runs no endpoints.
fn run_model(args: StreamArgs, out: &mut Output) -> anyhow::Result<()> {
    let c = &args.common;
    let measuring = [
        (
            c.place.placement != crate::options::placement::PlacementKind::Loopback
                || c.place.remote.from.is_some()
                || c.place.remote.to.is_some(),
            "--placement, --from and --to",
        ),
        (
            args.bytes.is_some() || args.duration.is_some(),
            "--bytes and --duration (the model moves 004's 4 MB)",
        ),
        (
            args.repeat > 1 || args.confidence.is_some(),
            "--repeat and --confidence",
        ),
        (
            args.interval.is_some() || args.json_stream,
            "--interval and --json-stream",
        ),
        (
            c.tls || c.quic || c.mptcp || c.udp,
            "--tls, --quic, --mptcp and --udp",
        ),
        (c.parallel != 1, "-P"),
        (args.format == JsonFormat::Iperf3, "--format iperf3"),
    ];
    if let Some((_, option)) = measuring.iter().find(|(given, _)| *given) {
        anyhow::bail!(
            "--stack bsd41: the model describes 004's transfer only (VAX-11/750 to 11/780 over a 3 Mbit/s Ethernet) and runs no endpoints: {option} do not apply"
        );
    }
    let today = match &args.counts_from {
        None => Vec::new(),
        Some(path) => crate::record::counts_from(
            path,
            crate::experiments::stream::model::today,
            "no TCP stream there carries its work a KB (each end's system calls and the sender's TCP_INFO segments)",
        )
        .map_err(anyhow::Error::msg)?,
    };
    use crate::experiments::stream::model::{model_doc, model_text};
    args.common
        .run
        .finish_unrecorded(out, model_doc(&today), || model_text(&today))
}

impl StreamArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        self.common.run.json || self.json_stream || self.format == JsonFormat::Iperf3
    }
}

impl StreamArgs {
    fn amount(&self) -> Amount {
        match (self.bytes, self.duration) {
            (Some(bytes), _) => Amount::Bytes(bytes),
            (None, Some(seconds)) => Amount::Seconds(seconds),
            (None, None) => Amount::Seconds(2.0),
        }
    }
}

/// The test `args` asks for, refused where an option does not apply.
fn iperf3_spec(
    args: &StreamArgs,
    target: &str,
) -> anyhow::Result<crate::endpoint::iperf3::types::Iperf3Spec> {
    let c = &args.common;
    let unsupported = [
        (
            c.place.remote.from.is_some(),
            "--from (netlab is the client, here)",
        ),
        (args.confidence.is_some(), "--confidence"),
        (args.repeat > 1, "--repeat"),
        (
            c.sender_cpu.is_some() || c.receiver_cpu.is_some(),
            "--sender-cpu/--receiver-cpu",
        ),
    ];
    if let Some((_, option)) = unsupported.iter().find(|(given, _)| *given) {
        anyhow::bail!(
            "--to iperf3:{target}: {option} does not apply to a test against an iperf3 server"
        );
    }
    if !(1..=128).contains(&c.parallel) {
        anyhow::bail!("-P {}: iperf3 runs 1 to 128 streams", c.parallel);
    }
    let duration = args.duration.unwrap_or(2.0);
    if !(duration.is_finite() && (1.0..=86_400.0).contains(&duration)) && args.bytes.is_none() {
        anyhow::bail!("--duration {duration}: iperf3 tests run 1 s to a day, in whole seconds");
    }
    if args.record == 0 || args.record > 1 << 24 {
        anyhow::bail!("--record {}: 1 byte to 16 MiB a write", args.record);
    }
    // UDP: iperf3's datagram (its 12-byte header included) at --rate.
    let (udp_bps, len) = if c.udp {
        let rate = c.rate.as_deref().unwrap_or_default();
        let bps =
            crate::testbed::link::parse_rate(rate).map_err(|e| anyhow::anyhow!("--rate: {e}"))?;
        let len = c.length.unwrap_or(1460);
        if !(12..=65_507).contains(&len) {
            anyhow::bail!("--length {len}: an iperf3 datagram is 12 to 65507 bytes");
        }
        (Some(bps), len as usize)
    } else {
        (None, args.record as usize)
    };
    Ok(crate::endpoint::iperf3::types::Iperf3Spec {
        server: crate::experiments::stream::iperf3::server_address(target)?,
        parallel: c.parallel as u32,
        reverse: c.reverse,
        bidir: c.bidir,
        duration: std::time::Duration::from_secs_f64(duration.ceil()),
        bytes: args.bytes,
        len,
        udp_bps,
        timeout: std::time::Duration::from_secs(10),
        interval: match args.interval {
            // iperf3's -i 0: no intervals.
            Some(0.0) => None,
            Some(s) if s < 0.1 || !s.is_finite() => {
                anyhow::bail!("--interval {s}: iperf3's intervals are 0.1 s or longer (0: none)")
            }
            Some(s) => Some(std::time::Duration::from_secs_f64(s)),
            None => Some(std::time::Duration::from_secs(1)),
        },
    })
}

/// The ways of printing a run that go together: iperf3's document is one
/// test, its event lines are for tests against iperf3 itself, and JSON
/// Lines come one an interval.
fn check_printing(args: &StreamArgs) -> anyhow::Result<()> {
    let iperf3_format = args.format == JsonFormat::Iperf3;
    if iperf3_format && (args.repeat > 1 || args.confidence.is_some()) {
        anyhow::bail!(
            "--format iperf3: iperf3's document is one test; --repeat and --confidence make several (use --json)"
        );
    }
    if iperf3_format && args.json_stream {
        anyhow::bail!(
            "--format iperf3 --json-stream: iperf3's event lines are written for tests against an iperf3 server (--to iperf3:HOST); netlab's own run streams its own lines (--json-stream alone) or prints iperf3's whole document at its end (--format iperf3)"
        );
    }
    if args.json_stream && args.interval.is_none() {
        anyhow::bail!("--json-stream: give --interval TIME (the lines are one per interval)");
    }
    Ok(())
}

pub fn run(args: StreamArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.stack == StreamStack::Bsd41 {
        return run_model(args, out);
    }
    if args.counts_from.is_some() {
        anyhow::bail!("--counts-from feeds measured counts into the model: add --stack bsd41");
    }
    if let Some(target) = args
        .common
        .place
        .remote
        .to
        .as_deref()
        .and_then(|to| to.strip_prefix("iperf3:"))
    {
        let spec = iperf3_spec(&args, target)?;
        let mut run = args.common.run.clone();
        run.json |= args.json();
        return crate::experiments::stream::iperf3::run_against(
            &spec,
            &run,
            crate::experiments::stream::iperf3::Printing {
                iperf3: args.format == JsonFormat::Iperf3,
                lines: args.json_stream,
            },
            out,
        );
    }
    let iperf3_format = args.format == JsonFormat::Iperf3;
    check_printing(&args)?;
    let mut config = args.common.config(args.amount(), args.record)?;
    config.interval_s = args.interval;
    config.check_interval()?;
    config.check_quic()?;
    config.check_udp()?;
    config.check_limits()?;
    if let crate::record::testbed::Placement::Remote { from, to } = &config.placement {
        let (cell_seconds, cell_bytes) = match config.amount {
            Amount::Seconds(s) => (Some(s), None),
            Amount::Bytes(b) => (None, Some(b)),
        };
        crate::controller::remote::check_budget(
            &[from, to],
            crate::controller::remote::RunBudget {
                cell_seconds,
                cells: args.repeat,
                cell_bytes,
            },
        )?;
    }
    let confidence = args
        .confidence
        .as_deref()
        .map(|text| Confidence::parse(text, args.repeat, args.max_runs))
        .transpose()?;
    let mut run = args.common.run.clone();
    // JSON Lines: progress off, errors as JSON, as under --json.
    run.json |= args.json_stream;
    // --tls: a plain TCP stream beside each run (not under --confidence,
    // whose interval is of one stream's runs).
    let cells = StreamCell::beside_plain(&config, args.repeat);
    let records_file = run.out.clone();
    run.measure(out, |runner| {
        // Each interval a line on stdout as it ends; a reader that went
        // away loses the lines, never the run.
        let mut measure = StreamMeasure {
            tap: args.json_stream.then(|| runner.tap()),
        };
        if args.json_stream {
            runner.add_sink(crate::controller::sink::JsonLines::new(
                std::io::stdout(),
                "stdout",
            ));
        }
        let (records, confident) = match &confidence {
            Some(asked) => {
                let (records, confident) =
                    run_until_confident(runner, &mut measure, &config, *asked)?;
                (records, Some(confident))
            }
            None => (runner.grid(&mut measure, &cells)?, None),
        };
        let mut doc = crate::experiments::stream::report::stream_doc(&config.describe(), &records);
        if let Some(confident) = &confident {
            doc["confidence"] = serde_json::json!(confident);
        }
        let print = if args.json_stream {
            Print::Lines(doc)
        } else if iperf3_format {
            Print::Foreign(crate::export::Export::render(
                &crate::export::iperf3::Document(iperf3_document(
                    &config,
                    &records,
                    &records_file,
                )?),
            )?)
        } else {
            let mut text =
                crate::experiments::stream::report::stream_section(&config.describe(), &records);
            if let Some(confident) = &confident {
                text.push_str(&crate::experiments::stream::report::confidence_text(
                    confident,
                ));
            }
            Print::DocOrText { doc, text }
        };
        Ok(RunOutcome {
            records,
            judged: true,
            print,
        })
    })
}

/// `--format iperf3`: the run's last record as iperf3's `-J` document,
/// with netlab's own facts under its `netlab` key.
fn iperf3_document(
    config: &StreamConfig,
    records: &[crate::experiments::stream::record::Record],
    records_file: &std::path::Path,
) -> anyhow::Result<serde_json::Value> {
    let record = records
        .last()
        .ok_or_else(|| anyhow::anyhow!("--format iperf3: the run made no record"))?;
    let netlab = serde_json::json!({
        "experiment": "stream",
        "description": config.describe(),
        "records_file": records_file,
        "placement": record.placement,
        "limits": record.data.result.as_ref().and_then(|r| r.limits.clone()),
        "host": record.host,
        "agents": record.agents,
    });
    crate::experiments::stream::iperf3_native::document(record, netlab)
}
