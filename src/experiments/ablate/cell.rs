//! `netlab ablate`: what-if experiments as full factorials. Every
//! combination of the factors' levels runs `reps` times; each repetition is
//! a block holding every combination once, in a random order of its own
//! (seeded, recorded), so that drift over the run hits every combination
//! alike. Every run is a record (its levels in `params.design`); the
//! effects come from [`crate::analysis::factorial`].
//!
//! Factors (first part): the stream's own settings (record size, send and
//! receive strategies, Nagle, socket buffers, congestion control) and, on
//! the netns placement, the link's MTU and whether it is a veth pair or the
//! TUN emulator (where checksums are computed in software). Each is set per
//! cell: socket options die with the cell's sockets and a netns cell builds
//! and removes its own link, so nothing outlives a run (success, error or
//! Ctrl-C) and nothing needs restoring.

use crate::analysis::factorial::{Analysis, Factor, FactorialError, analyse, combinations};
use crate::checksum::aead::Cipher;
use crate::endpoint::bulk::types::Amount;
use crate::endpoint::bulk::types::{RecvStrategy, SendStrategy};
use crate::endpoint::quic::QuicChoice;
use crate::endpoint::tls::TlsChoice;
use crate::experiments::stream::cell::{StreamCell, StreamConfig};
use crate::experiments::stream::record::DesignContext;
use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::measure::host::on_path;
use crate::record::now_rfc3339;
use crate::record::testbed::LinkVia;
use crate::record::testbed::Placement;
use crate::units::parse_size;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::time::Duration;
use thiserror::Error;

/// What a factor changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    Record,
    Send,
    Recv,
    Nodelay,
    Sndbuf,
    Rcvbuf,
    Rcvlowat,
    Cc,
    Mss,
    Mtu,
    Link,
    /// An offload on both ends' devices, by ethtool's short name.
    Offload(&'static str),
    /// TCP, TCP+TLS or QUIC (#65).
    Transport,
    /// The AEAD of the encrypted transport.
    Cipher,
    /// TLS's plaintext per record.
    TlsRecord,
    /// QUIC's UDP GSO and GRO.
    QuicGso,
}

impl Knob {
    /// A knob of the encrypted transports that does nothing in the clear.
    fn needs_encryption(self) -> bool {
        matches!(self, Knob::Cipher | Knob::TlsRecord | Knob::QuicGso)
    }
}

/// Every factor `--factor` takes, with what its levels may be.
pub const KNOBS: [(&str, Knob, &str); 20] = [
    ("record", Knob::Record, "sizes, e.g. 1K,64K"),
    (
        "send",
        Knob::Send,
        "write, chunked (1 KB writes, sosend-style), writev, sendfile, splice, zerocopy",
    ),
    (
        "recv",
        Knob::Recv,
        "read, splice, zerocopy (TCP_ZEROCOPY_RECEIVE)",
    ),
    ("nodelay", Knob::Nodelay, "off, on"),
    ("sndbuf", Knob::Sndbuf, "default or sizes"),
    ("rcvbuf", Knob::Rcvbuf, "default or sizes"),
    (
        "rcvlowat",
        Knob::Rcvlowat,
        "off or sizes (SO_RCVLOWAT, recv read)",
    ),
    (
        "cc",
        Knob::Cc,
        "congestion control names, e.g. cubic,reno,bbr",
    ),
    ("mss", Knob::Mss, "default or 88 to 65495 (TCP_MAXSEG)"),
    ("mtu", Knob::Mtu, "576 to 65535 (netns)"),
    (
        "link",
        Knob::Link,
        "veth, emulator (netns: the TUN emulator computes checksums in software)",
    ),
    ("tx-checksum", Knob::Offload("tx"), "off, on (netns)"),
    ("rx-checksum", Knob::Offload("rx"), "off, on (netns)"),
    ("tso", Knob::Offload("tso"), "off, on (netns)"),
    ("gso", Knob::Offload("gso"), "off, on (netns)"),
    ("gro", Knob::Offload("gro"), "off, on (netns)"),
    ("transport", Knob::Transport, "tcp, tls, quic"),
    (
        "cipher",
        Knob::Cipher,
        "aes-128-gcm, aes-256-gcm, chacha20-poly1305 (with tls or quic)",
    ),
    (
        "tls-record",
        Knob::TlsRecord,
        "sizes of 27 to 16K plaintext bytes (with tls)",
    ),
    (
        "quic-gso",
        Knob::QuicGso,
        "off, on (UDP GSO and GRO, with quic)",
    ),
];

#[derive(Debug, Error, PartialEq)]
pub enum AblateError {
    #[error("--factor {0}: expected NAME=V1,V2[,...]")]
    Syntax(String),
    #[error("unknown factor {name} (known: {known})", known = KNOBS.map(|k| k.0).join(", "))]
    UnknownFactor { name: String },
    #[error("factor {name}: {level} is not a level it takes ({takes})")]
    Level {
        name: String,
        level: String,
        takes: &'static str,
    },
    #[error("factor {0} needs at least two levels")]
    OneLevel(String),
    #[error("factor {0} is given twice")]
    Twice(String),
    #[error("factor {name} cannot change on the {placement} placement: {why}")]
    Placement {
        name: String,
        placement: &'static str,
        why: &'static str,
    },
    #[error("factor {name}={level}: {reason}")]
    Refused {
        name: String,
        level: String,
        reason: String,
    },
    #[error("the combination {combination} cannot run: {reason}")]
    Combination { combination: String, reason: String },
    #[error("--preset runs on two namespaces: it needs CAP_NET_ADMIN (run as root)")]
    NeedsRoot,
    #[error("no factor: give at least one --factor NAME=V1,V2")]
    NoFactor,
    #[error(
        "--budget {budget}: {runs} runs ({cells} combinations x {reps} reps) take about {estimate} at {per_run:.1} s each (the run and its set-up)"
    )]
    Budget {
        budget: String,
        runs: usize,
        cells: usize,
        reps: u32,
        estimate: String,
        per_run: f64,
    },
}

/// `NAME=V1,V2[,...]`: the factor of `knobs` it names, what that factor
/// takes, and its levels (at least two); a name not in `knobs` is
/// `unknown(name, levels)`.
pub fn parse_factor<K: Copy>(
    text: &str,
    knobs: &[(&'static str, K, &'static str)],
    unknown: impl FnOnce(&str, &str) -> AblateError,
) -> Result<(K, &'static str, Factor), AblateError> {
    let (name, levels) = text
        .split_once('=')
        .ok_or_else(|| AblateError::Syntax(text.to_string()))?;
    let name = name.trim();
    let Some(&(_, knob, takes)) = knobs.iter().find(|k| k.0 == name) else {
        return Err(unknown(name, levels));
    };
    let levels: Vec<String> = levels
        .split(',')
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if levels.len() < 2 {
        return Err(AblateError::OneLevel(name.into()));
    }
    let name = name.into();
    Ok((knob, takes, Factor { name, levels }))
}

/// A factor of the design and what it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct DesignFactor {
    pub knob: Knob,
    pub factor: Factor,
}

impl DesignFactor {
    /// `NAME=V1,V2[,...]`, each level checked against what the factor takes.
    pub fn parse(text: &str) -> Result<DesignFactor, AblateError> {
        let (knob, takes, factor) = parse_factor(text, &KNOBS, |name, _| {
            AblateError::UnknownFactor { name: name.into() }
        })?;
        let factor = DesignFactor { knob, factor };
        for level in &factor.factor.levels {
            factor
                .apply(level, &mut StreamConfig::default())
                .map_err(|_| AblateError::Level {
                    name: factor.factor.name.clone(),
                    level: level.clone(),
                    takes,
                })?;
        }
        Ok(factor)
    }

    /// Sets this factor's `level` in `config` (placement checks apart:
    /// [`AblatePlan::new`]).
    fn apply(&self, level: &str, config: &mut StreamConfig) -> Result<(), String> {
        let size = |text: &str| -> Result<usize, String> {
            parse_size(text)
                .map_err(|e| e.to_string())
                .and_then(|n| usize::try_from(n).map_err(|e| e.to_string()))
        };
        let buffer = |text: &str| -> Result<Option<usize>, String> {
            if text == "default" {
                Ok(None)
            } else {
                size(text).map(Some)
            }
        };
        match self.knob {
            Knob::Record => config.record = size(level)? as u64,
            Knob::Send => {
                config.send = match level {
                    "write" => SendStrategy::Write,
                    "chunked" => SendStrategy::Chunked { chunk: 1024 },
                    "writev" => SendStrategy::Writev { records: 16 },
                    "sendfile" => SendStrategy::Sendfile,
                    "splice" => SendStrategy::Splice,
                    "zerocopy" => SendStrategy::Zerocopy,
                    other => return Err(format!("unknown send strategy {other}")),
                }
            }
            Knob::Recv => {
                config.recv =
                    match level {
                        "read" => RecvStrategy::Read {
                            buffer: match config.recv {
                                RecvStrategy::Read { buffer }
                                | RecvStrategy::Zerocopy { buffer } => buffer,
                                RecvStrategy::Splice => 128 << 10,
                            },
                        },
                        "splice" => RecvStrategy::Splice,
                        "zerocopy" => RecvStrategy::Zerocopy {
                            buffer: match config.recv {
                                RecvStrategy::Read { buffer }
                                | RecvStrategy::Zerocopy { buffer } => buffer,
                                RecvStrategy::Splice => 128 << 10,
                            },
                        },
                        other => return Err(format!("unknown receive strategy {other}")),
                    }
            }
            Knob::Nodelay => {
                config.options.nodelay = match level {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("{other}: on or off")),
                }
            }
            Knob::Sndbuf => config.options.sndbuf = buffer(level)?,
            Knob::Rcvbuf => config.options.rcvbuf = buffer(level)?,
            Knob::Rcvlowat => {
                config.options.rcvlowat = match level {
                    "off" => None,
                    text => Some(
                        u32::try_from(size(text)?).map_err(|_| format!("{text} is too large"))?,
                    ),
                }
            }
            Knob::Cc => {
                if level.is_empty() || !level.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(format!("{level} is no congestion control name"));
                }
                config.options.congestion_control = Some(level.to_string());
            }
            Knob::Mss => {
                config.options.mss = match level {
                    "default" => None,
                    text => {
                        let mss: u32 = text.parse().map_err(|_| format!("{text}: a number"))?;
                        if !(88..=65495).contains(&mss) {
                            return Err(format!("{mss} is out of 88..65495"));
                        }
                        Some(mss)
                    }
                }
            }
            Knob::Mtu => {
                let mtu: u32 = level.parse().map_err(|_| format!("{level}: a number"))?;
                if !(576..=65535).contains(&mtu) {
                    return Err(format!("{mtu} is out of 576..65535"));
                }
                if let Placement::Netns { link, .. } = &mut config.placement {
                    link.mtu = mtu;
                }
            }
            Knob::Link => {
                let via = match level {
                    "veth" => LinkVia::Auto,
                    "emulator" => LinkVia::Emulator,
                    other => return Err(format!("{other}: veth or emulator")),
                };
                if let Placement::Netns { via: v, link, .. } = &mut config.placement {
                    *v = via;
                    // The emulator level stands for the link where checksums
                    // are computed in software: wire packets, no offloads.
                    link.emulator.wire_packets = via == LinkVia::Emulator;
                }
            }
            Knob::Transport | Knob::Cipher | Knob::TlsRecord | Knob::QuicGso => {
                encrypted_transport(self.knob, level, config)?
            }
            Knob::Offload(feature) => {
                let on = match level {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("{other}: on or off")),
                };
                if let Placement::Netns { link, .. } = &mut config.placement {
                    link.offloads.retain(|(f, _)| f != feature);
                    link.offloads.push((feature.to_string(), on));
                }
            }
        }
        Ok(())
    }
}

/// The encrypted transports' knobs (#65): the transport, then the
/// cipher, TLS's record size and QUIC's GSO of whichever it chose.
fn encrypted_transport(knob: Knob, level: &str, config: &mut StreamConfig) -> Result<(), String> {
    let size = |text: &str| -> Result<usize, String> {
        parse_size(text)
            .map_err(|e| e.to_string())
            .and_then(|n| usize::try_from(n).map_err(|e| e.to_string()))
    };
    match knob {
        Knob::Transport => {
            let cipher = config
                .tls
                .map(|t| t.cipher)
                .or(config.quic.map(|q| q.cipher))
                .unwrap_or(Cipher::Aes128Gcm);
            let record = config.tls.and_then(|t| t.record);
            let gso = config.quic.is_none_or(|q| q.gso);
            (config.tls, config.quic) = match level {
                "tcp" => (None, None),
                "tls" => (Some(TlsChoice { cipher, record }), None),
                "quic" => (None, Some(QuicChoice { cipher, gso })),
                other => return Err(format!("{other}: tcp, tls or quic")),
            };
        }
        Knob::Cipher => {
            let cipher: Cipher = level.parse()?;
            if let Some(tls) = &mut config.tls {
                tls.cipher = cipher;
            }
            if let Some(quic) = &mut config.quic {
                quic.cipher = cipher;
            }
        }
        Knob::TlsRecord => {
            let record = size(level)?;
            if !(crate::endpoint::tls::MIN_RECORD..=crate::endpoint::tls::MAX_RECORD)
                .contains(&record)
            {
                return Err(format!("{record} bytes is out of 27..16384"));
            }
            if let Some(tls) = &mut config.tls {
                tls.record = Some(record);
            }
        }
        Knob::QuicGso => {
            let on = match level {
                "on" => true,
                "off" => false,
                other => return Err(format!("{other}: on or off")),
            };
            if let Some(quic) = &mut config.quic {
                quic.gso = on;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The source documents' what-ifs as designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// Bill Joy's 1981 ladder (004) with his transfer (4 MB in 1 KB
    /// records), each step's nearest feature today.
    Joy1981,
    /// Van Jacobson's 1988 sosend change (003): 1 KB protocol calls against
    /// whole writes, with checksum offload and GRO, leave-one-out against
    /// the full factorial.
    Vj1988,
}

impl Preset {
    /// The factors, each first level the baseline, in the source's order.
    pub fn factors(self) -> &'static [&'static str] {
        match self {
            // Joy's steps 2-5 (step 1, IP fragmentation of 4 KB TCP
            // segments, has no Linux counterpart: TCP sets DF and sizes
            // its segments to the path MTU). His 4136-byte packets carried
            // 4096 data bytes under 40 bytes of headers; with today's
            // 12-byte timestamp option that is an MTU of 4148, and whole
            // 4 KB pages of payload are what zero-copy receive maps.
            Preset::Joy1981 => &[
                "recv=read,zerocopy",
                "tx-checksum=off,on",
                "mtu=1500,4148",
                "send=write,zerocopy",
            ],
            Preset::Vj1988 => &["send=chunked,write", "tx-checksum=off,on", "gro=off,on"],
        }
    }

    /// [`Preset::stream`], refused without root (two namespaces).
    pub fn base(self) -> Result<StreamConfig, AblateError> {
        if !crate::testbed::netns::has_net_admin() {
            return Err(AblateError::NeedsRoot);
        }
        Ok(self.stream())
    }

    /// The stream every combination varies: on two namespaces over an
    /// unshaped veth pair (the CPU, not a wire, is the limit, as in both
    /// sources); Joy's 4 MB in 1 KB records moved 64 times a run (4 MB
    /// alone is milliseconds today), his links without segmentation
    /// offloads (1981 had none); Van Jacobson's 64 KB writes.
    pub fn stream(self) -> StreamConfig {
        let mut link = crate::record::testbed::LinkProfile::default();
        let (record, offloads) = match self {
            Preset::Joy1981 => (
                1024,
                vec![
                    ("tso".into(), false),
                    ("gso".into(), false),
                    ("gro".into(), false),
                ],
            ),
            Preset::Vj1988 => (64 << 10, Vec::new()),
        };
        link.offloads = offloads;
        StreamConfig {
            amount: Amount::Bytes(64 * (4 << 20)),
            record,
            placement: Placement::Netns {
                link,
                via: LinkVia::Auto,
                capture: false,
                pcap: None,
                verbose: false,
            },
            ..StreamConfig::default()
        }
    }
}

/// A validated factorial design over a stream run.
#[derive(Debug, Clone)]
pub struct AblatePlan {
    pub base: StreamConfig,
    pub factors: Vec<DesignFactor>,
    pub reps: u32,
    pub seed: u64,
}

/// The congestion control algorithms the host at `end` offers (`local`,
/// or an agent, from the facts it sent at the handshake); None when the
/// agent did not say (an older netlab: its runs then say what it refused).
fn available_congestion_control(end: &str) -> Result<Option<Vec<String>>, String> {
    let facts = if end == "local" {
        crate::measure::host::HostFacts::gather()
    } else {
        crate::controller::remote::link(end)
            .map_err(|e| e.to_string())?
            .facts()
            .host
    };
    Ok((!facts.available_congestion_control.is_empty())
        .then_some(facts.available_congestion_control))
}

impl AblatePlan {
    /// Checks every combination before anything runs: a factor the
    /// placement cannot change, a level the kernel would refuse, a
    /// combination the stream refuses.
    pub fn new(
        base: StreamConfig,
        factors: Vec<DesignFactor>,
        reps: u32,
        seed: u64,
    ) -> Result<AblatePlan, AblateError> {
        if factors.is_empty() {
            return Err(AblateError::NoFactor);
        }
        let encrypted = base.tls.is_some()
            || base.quic.is_some()
            || factors.iter().any(|f| f.knob == Knob::Transport);
        for (i, f) in factors.iter().enumerate() {
            if factors[..i].iter().any(|g| g.factor.name == f.factor.name) {
                return Err(AblateError::Twice(f.factor.name.clone()));
            }
            if f.knob.needs_encryption() && !encrypted {
                return Err(AblateError::Refused {
                    name: f.factor.name.clone(),
                    level: f.factor.levels.join(","),
                    reason: "it changes an encrypted transport, and every run here is plain TCP: give --tls or --quic, or a transport factor".into(),
                });
            }
            let placement = base.placement.name();
            match (f.knob, &base.placement) {
                (Knob::Offload(_), Placement::Netns { .. }) if !on_path("ethtool") => {
                    return Err(AblateError::Refused {
                        name: f.factor.name.clone(),
                        level: f.factor.levels.join(","),
                        reason: "needs ethtool (Debian package ethtool)".into(),
                    });
                }
                (Knob::Offload(_), Placement::Netns { .. }) => {}
                (Knob::Offload(_) | Knob::Mtu | Knob::Link, Placement::Remote { .. }) => {
                    return Err(AblateError::Placement {
                        name: f.factor.name.clone(),
                        placement,
                        why: "between agents the path is the hosts' own, and netlab changes only links it builds; use --placement netns",
                    });
                }
                (Knob::Offload(_), _) => {
                    return Err(AblateError::Placement {
                        name: f.factor.name.clone(),
                        placement,
                        why: "offloads are switched only on the links netlab builds (never the host's own devices); use --placement netns",
                    });
                }
                (Knob::Mtu, Placement::Netns { .. }) | (Knob::Link, Placement::Netns { .. }) => {}
                (Knob::Mtu, _) => {
                    return Err(AblateError::Placement {
                        name: f.factor.name.clone(),
                        placement,
                        why: "netlab builds no link there (the loopback MTU is the host's own); use --placement netns",
                    });
                }
                (Knob::Link, _) => {
                    return Err(AblateError::Placement {
                        name: f.factor.name.clone(),
                        placement,
                        why: "only a netns placement has a link netlab builds; use --placement netns",
                    });
                }
                (Knob::Cc, placement) => {
                    // Both ends set it: each end's kernel must offer it.
                    let ends = match placement {
                        Placement::Remote { from, to } => vec![from.as_str(), to.as_str()],
                        _ => vec!["local"],
                    };
                    for end in ends {
                        let available = available_congestion_control(end).map_err(|reason| {
                            AblateError::Refused {
                                name: f.factor.name.clone(),
                                level: f.factor.levels.join(","),
                                reason,
                            }
                        })?;
                        let Some(available) = available else { continue };
                        if let Some(level) = f.factor.levels.iter().find(|l| !available.contains(l))
                        {
                            let host = if end == "local" {
                                "this kernel".to_string()
                            } else {
                                format!("the kernel at {end}")
                            };
                            return Err(AblateError::Refused {
                                name: f.factor.name.clone(),
                                level: level.clone(),
                                reason: format!(
                                    "{host} offers {} (modprobe tcp_{level} may add it)",
                                    available.join(", ")
                                ),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        let plan = AblatePlan {
            base,
            factors,
            reps,
            seed,
        };
        let mut probed: Vec<Vec<(String, bool)>> = Vec::new();
        for levels in combinations(&plan.design()) {
            let config = plan.config(&levels)?;
            // Offloads the kernel would not grant together (TSO without
            // checksum offload, say): refused now on a scratch veth pair,
            // not found by a failed run.
            if let Placement::Netns { link, .. } = &config.placement
                && !link.offloads.is_empty()
                && !probed.contains(&link.offloads)
            {
                crate::testbed::netns::probe_offloads(&link.offloads, false).map_err(|e| {
                    AblateError::Combination {
                        combination: plan.combination(&levels),
                        reason: e.to_string(),
                    }
                })?;
                probed.push(link.offloads.clone());
            }
            config.validate().map_err(|e| AblateError::Combination {
                combination: plan.combination(&levels),
                reason: e.to_string(),
            })?;
        }
        Ok(plan)
    }

    /// The design in one line: the stream, the factors and the seed.
    pub fn title(&self) -> String {
        format!(
            "stream, {}; factors {}; seed {}",
            self.base.describe(),
            self.factors
                .iter()
                .map(|f| format!("{}={}", f.factor.name, f.factor.levels.join(",")))
                .collect::<Vec<_>>()
                .join(" "),
            self.seed
        )
    }

    /// The factors as the analysis sees them.
    pub fn design(&self) -> Vec<Factor> {
        self.factors.iter().map(|f| f.factor.clone()).collect()
    }

    /// A combination as people write it: `record=1K nodelay=on`.
    fn combination(&self, levels: &[usize]) -> String {
        self.named(levels)
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn named(&self, levels: &[usize]) -> Vec<(String, String)> {
        named(&self.design(), levels)
    }

    /// The stream run of one combination.
    pub fn config(&self, levels: &[usize]) -> Result<StreamConfig, AblateError> {
        let mut config = self.base.clone();
        // The transport first: the cipher, record size and GSO apply to
        // the transport it chose.
        let mut order: Vec<(&DesignFactor, &usize)> = self.factors.iter().zip(levels).collect();
        order.sort_by_key(|(f, _)| f.knob != Knob::Transport);
        for (f, &l) in order {
            let level = &f.factor.levels[l];
            f.apply(level, &mut config)
                .map_err(|reason| AblateError::Refused {
                    name: f.factor.name.clone(),
                    level: level.clone(),
                    reason,
                })?;
        }
        Ok(config)
    }

    pub fn runs(&self) -> usize {
        combinations(&self.design()).len() * self.reps as usize
    }

    /// Refuses a design whose runs would not fit `budget`, counting each
    /// run's time and its set-up: endpoints (and on netns the link)
    /// started and stopped, 0.1-0.3 s on loopback and about 1 s on netns
    /// here.
    pub fn check_budget(&self, budget: Duration) -> Result<(), AblateError> {
        // This host's set-up times (building a link; spawning endpoints on
        // agents; on loopback).
        let setup_s = match self.base.placement.name() {
            "netns" => 1.0,
            "remote" => 0.5,
            _ => 0.3,
        };
        let per_run = match self.base.amount {
            Amount::Seconds(s) => s + setup_s,
            // A byte count's time is unknown before it runs: the set-up only.
            Amount::Bytes(_) => setup_s,
        };
        check_budget(self.runs(), self.reps, per_run, budget)
    }

    /// Every run in the order it runs: block by block, each block every
    /// combination once in its own random order.
    pub fn cells(&self) -> Vec<StreamCell> {
        self.cells_in(now_rfc3339())
    }

    /// [`AblatePlan::cells`] of the design `id` (a resumed one's).
    pub fn cells_in(&self, id: String) -> Vec<StreamCell> {
        blocks(&self.design(), self.reps, self.seed)
            .into_iter()
            .map(|(block, levels)| StreamCell {
                config: self
                    .config(&levels)
                    .expect("every combination was checked by AblatePlan::new"),
                repeat_index: block,
                sweep: None,
                design: Some(DesignContext {
                    id: id.clone(),
                    factors: self.named(&levels),
                    block,
                    seed: self.seed,
                    design: self
                        .factors
                        .iter()
                        .map(|f| (f.factor.name.clone(), f.factor.levels.clone()))
                        .collect(),
                }),
            })
            .collect()
    }
}

/// A fresh seed for a design's random order, from the kernel.
/// Every combination of `factors` once a block, `reps` blocks, each
/// block in its own random order drawn from `seed`: (block, levels).
pub fn blocks(factors: &[Factor], reps: u32, seed: u64) -> Vec<(u32, Vec<usize>)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let all = combinations(factors);
    let mut runs = Vec::with_capacity(all.len() * reps as usize);
    for block in 0..reps {
        let mut order = all.clone();
        order.shuffle(&mut rng);
        runs.extend(order.into_iter().map(|levels| (block, levels)));
    }
    runs
}

/// Each factor's name and its level in `levels`.
pub fn named(factors: &[Factor], levels: &[usize]) -> Vec<(String, String)> {
    factors
        .iter()
        .zip(levels)
        .map(|(f, &l)| (f.name.clone(), f.levels[l].clone()))
        .collect()
}

/// Refuses `runs` runs (`reps` a combination) of about `per_run` seconds
/// each when they would take longer than `budget`.
pub fn check_budget(
    runs: usize,
    reps: u32,
    per_run: f64,
    budget: Duration,
) -> Result<(), AblateError> {
    let estimate = per_run * runs as f64;
    if estimate > budget.as_secs_f64() {
        return Err(AblateError::Budget {
            budget: humantime::format_duration(budget).to_string(),
            runs,
            cells: runs / reps as usize,
            reps,
            estimate: humantime::format_duration(Duration::from_secs(estimate.ceil() as u64))
                .to_string(),
            per_run,
        });
    }
    Ok(())
}

pub fn fresh_seed() -> std::io::Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(u64::from_le_bytes(bytes))
}

/// The effects on throughput (Mbit/s) of the records of one design, read
/// back from the records alone: each record's levels by name. Failed runs
/// leave their cell short: the analysis then refuses (unbalanced), naming
/// the cell.
pub fn analyse_records(
    factors: &[Factor],
    records: &[Record],
    level: f64,
) -> Result<Analysis, FactorialError> {
    let runs: Vec<(Vec<usize>, f64)> = records
        .iter()
        .filter_map(|r| match &r.data {
            StreamData {
                params,
                result: Some(result),
            } => {
                let design = params.design.as_ref()?;
                let levels = factors
                    .iter()
                    .map(|f| {
                        let (_, level) = design.factors.iter().find(|(n, _)| n == &f.name)?;
                        f.levels.iter().position(|l| l == level)
                    })
                    .collect::<Option<Vec<usize>>>()?;
                Some((levels, result.figures.throughput_mbit_s))
            }
            _ => None,
        })
        .collect();
    analyse(factors, &runs, level)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(factors: &[&str], reps: u32) -> Result<AblatePlan, AblateError> {
        let factors = factors
            .iter()
            .map(|f| DesignFactor::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        AblatePlan::new(
            StreamConfig {
                amount: Amount::Seconds(0.5),
                ..StreamConfig::default()
            },
            factors,
            reps,
            7,
        )
    }

    #[test]
    fn every_combination_runs_once_a_block_in_a_seeded_random_order() {
        let plan = plan(
            &["record=1K,64K", "nodelay=off,on", "send=write,chunked"],
            3,
        )
        .unwrap();
        let cells = plan.cells();
        assert_eq!(cells.len(), 24);
        for block in cells.chunks(8) {
            let mut seen: Vec<Vec<(String, String)>> = block
                .iter()
                .map(|c| c.design.as_ref().unwrap().factors.clone())
                .collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), 8, "each block holds every combination once");
        }
        // The levels reach the run: 1 KB records with chunked 1 KB writes.
        let cell = cells
            .iter()
            .find(|c| {
                let f = &c.design.as_ref().unwrap().factors;
                f[0].1 == "1K" && f[2].1 == "chunked"
            })
            .unwrap();
        assert_eq!(cell.config.record, 1024);
        assert_eq!(cell.config.send, SendStrategy::Chunked { chunk: 1024 });
        // Seeded: the same order again; blocks differ from one another.
        let again: Vec<_> = plan
            .cells()
            .into_iter()
            .map(|c| c.design.unwrap().factors)
            .collect();
        let first: Vec<_> = cells
            .iter()
            .map(|c| c.design.clone().unwrap().factors)
            .collect();
        assert_eq!(again, first);
        assert_ne!(first[..8], first[8..16]);
    }

    #[test]
    fn bad_factors_are_refused_before_anything_runs() {
        let refused = |factors: &[&str]| plan(factors, 2).expect_err("refused").to_string();
        assert!(refused(&["speed=1,2"]).starts_with("unknown factor speed"));
        assert!(refused(&["record"]).contains("expected NAME=V1,V2"));
        assert_eq!(
            refused(&["nodelay=on"]),
            "factor nodelay needs at least two levels"
        );
        assert!(refused(&["send=write,carrier-pigeon"]).contains("carrier-pigeon is not a level"));
        assert!(refused(&["nodelay=on,off", "nodelay=off,on"]).contains("given twice"));
        assert!(refused(&["mtu=1500,9000"]).contains("cannot change on the loopback placement"),);
        assert!(refused(&["cc=cubic,no_such_cc"]).contains("this kernel offers"));
        assert!(refused(&["record=1K,64G"]).starts_with("the combination record=64G cannot run"));
        assert_eq!(plan(&[], 1).unwrap_err(), AblateError::NoFactor);
    }

    #[test]
    fn the_transport_is_set_first_and_its_knobs_follow_it() {
        let design = plan(
            &[
                "cipher=aes-256-gcm,chacha20-poly1305",
                "transport=tcp,tls,quic",
                "quic-gso=on,off",
            ],
            1,
        )
        .unwrap();
        // cipher=chacha20-poly1305, transport=quic, quic-gso=off: the
        // cipher given before the transport still reaches it.
        let c = design.config(&[1, 2, 1]).unwrap();
        assert_eq!(c.tls, None);
        assert_eq!(
            c.quic,
            Some(QuicChoice {
                cipher: Cipher::Chacha20Poly1305,
                gso: false
            })
        );
        let c = design.config(&[0, 1, 0]).unwrap();
        assert_eq!(c.tls.map(|t| t.cipher), Some(Cipher::Aes256Gcm));
        assert_eq!(
            (
                design.config(&[0, 0, 0]).unwrap().tls,
                design.config(&[0, 0, 0]).unwrap().quic
            ),
            (None, None)
        );
        // The transports' knobs need an encrypted transport somewhere.
        let refused = plan(&["cipher=aes-128-gcm,aes-256-gcm"], 1)
            .expect_err("plain TCP only")
            .to_string();
        assert!(refused.contains("give --tls or --quic"), "{refused}");
        assert!(plan(&["transport=tcp,warp"], 1).is_err());
        assert!(plan(&["transport=tls,tcp", "tls-record=1K,20"], 1).is_err());
    }

    #[test]
    fn a_design_that_cannot_fit_its_budget_is_refused_with_its_count() {
        let plan = plan(&["record=1K,4K,64K", "nodelay=off,on"], 5).unwrap();
        assert_eq!(plan.runs(), 30);
        let err = plan
            .check_budget(Duration::from_secs(10))
            .expect_err("30 runs of 0.8 s");
        assert!(
            err.to_string()
                .contains("30 runs (6 combinations x 5 reps)"),
            "{err}"
        );
        assert!(plan.check_budget(Duration::from_secs(60)).is_ok());
    }
}
