//! `netlab login --load stream[:N]`: the typists of 000 on the queues of
//! 003. N bulk TCP streams run from the server's end to the users' end
//! (the way the echoes go) for the whole cell, through rpm's
//! load-generating connections, and each fix is a cell of its own on the
//! same link: the bottleneck's discipline (FQ-CoDel or CoDel in netlab's
//! emulator), TCP_NOTSENT_LOWAT or BBR on the load's senders, or small
//! socket buffers. The echo's p50 and p99 are read against the 100 ms at
//! which a delay stops feeling instantaneous (`cell::verdict`).

use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, EndpointProcess, Wait};
use crate::endpoint::rpm::role::{LoadStart, LoadStop, Serve, Stop};
use crate::endpoint::rpm::types::{ClientSpec, Direction, LoadReport, LoadSockets};
use crate::experiments::login::record::BulkLoad;
use std::net::SocketAddr;

/// The most bulk streams `--load` takes (the draft's MNP).
pub const MAX_STREAMS: usize = 16;
/// Streams when `--load stream` names no count.
pub const DEFAULT_STREAMS: usize = 4;

/// One fix for the typists under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadFix {
    /// The load as it comes: the link's drop-tail queue, default sockets.
    None,
    /// FQ-CoDel (RFC 8290) at the link's bottleneck: each flow its queue.
    FqCodel,
    /// CoDel (RFC 8289) at the link's bottleneck: one queue kept short.
    Codel,
    /// TCP_NOTSENT_LOWAT 16 KB on the load's senders.
    NotsentLowat,
    /// BBR on the load's senders.
    Bbr,
    /// 64 KB send and receive buffers on the load's sockets.
    SmallBuffers,
}

impl LoadFix {
    pub const ALL: [LoadFix; 6] = [
        LoadFix::None,
        LoadFix::FqCodel,
        LoadFix::Codel,
        LoadFix::NotsentLowat,
        LoadFix::Bbr,
        LoadFix::SmallBuffers,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LoadFix::None => "none",
            LoadFix::FqCodel => "fq_codel",
            LoadFix::Codel => "codel",
            LoadFix::NotsentLowat => "notsent-lowat",
            LoadFix::Bbr => "bbr",
            LoadFix::SmallBuffers => "small-buffers",
        }
    }

    pub fn parse(text: &str) -> Result<LoadFix, String> {
        LoadFix::ALL
            .into_iter()
            .find(|f| f.name() == text)
            .ok_or_else(|| {
                format!(
                    "--load-fix {text}: not one of {}",
                    LoadFix::ALL.map(LoadFix::name).join(", ")
                )
            })
    }

    /// The link's queue discipline this fix runs (None: the link's own).
    pub fn discipline(self) -> Option<&'static str> {
        match self {
            LoadFix::FqCodel => Some("fq_codel"),
            LoadFix::Codel => Some("codel"),
            _ => None,
        }
    }

    /// The load's sockets under this fix.
    pub fn sockets(self) -> LoadSockets {
        match self {
            LoadFix::NotsentLowat => LoadSockets {
                notsent_lowat: Some(16 << 10),
                ..Default::default()
            },
            LoadFix::Bbr => LoadSockets {
                congestion: Some("bbr".into()),
                ..Default::default()
            },
            LoadFix::SmallBuffers => LoadSockets {
                sndbuf: Some(64 << 10),
                rcvbuf: Some(64 << 10),
                ..Default::default()
            },
            _ => LoadSockets::default(),
        }
    }
}

/// `--load stream[:N]`: N (default 4, 1 to 16).
pub fn parse_load(text: &str) -> Result<usize, String> {
    let (kind, count) = match text.split_once(':') {
        Some((kind, count)) => (kind, Some(count)),
        None => (text, None),
    };
    if kind != "stream" {
        return Err(format!(
            "--load {text}: the load is `stream` or `stream:N` (N bulk TCP streams)"
        ));
    }
    let streams = match count {
        None => DEFAULT_STREAMS,
        Some(n) => n
            .parse::<usize>()
            .map_err(|_| format!("--load {text}: N is a count of streams"))?,
    };
    if streams == 0 || streams > MAX_STREAMS {
        return Err(format!(
            "--load {text}: from 1 to {MAX_STREAMS} streams (the draft's most load connections)"
        ));
    }
    Ok(streams)
}

/// The load's two ends while it runs.
pub struct Running {
    server: EndpointProcess,
    client: EndpointProcess,
}

/// Starts `load` across `launcher`'s ends: rpm's serving end at the
/// login server's end, its download connections at the users' end.
pub fn start(load: &BulkLoad, launcher: &Launcher) -> Result<Running, ControlError> {
    let bind = launcher.address(End::To);
    let mut server = launcher.spawn("load server", End::To)?;
    let addr = server.call(
        Serve {
            bind: SocketAddr::from((bind, 0)),
            guard: launcher.guard(End::To),
            sockets: load.sockets.clone(),
        },
        Wait::up_to(10, "starting the load's server"),
    )?;
    let mut client = launcher.spawn("load", End::From)?;
    client.call(
        LoadStart(ClientSpec {
            server: SocketAddr::from((bind, addr.port())),
            direction: Direction::Down,
            max_connections: load.streams,
            probe_rate: 1,
            max_duration_s: 0.0,
            idle_probes: 0,
            draft: Default::default(),
            sockets: load.sockets.clone(),
            token: launcher.token(),
        }),
        Wait::up_to(20, "opening the load's connections"),
    )?;
    Ok(Running { server, client })
}

impl Running {
    /// Stops the load: what it carried.
    pub fn stop(mut self) -> Result<LoadReport, ControlError> {
        let carried = self
            .client
            .call(LoadStop, Wait::up_to(20, "stopping the load"))?;
        self.client.finish();
        self.server
            .call(Stop, Wait::up_to(10, "stopping the load's server"))?;
        self.server.finish();
        Ok(carried)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_takes_stream_and_a_count_within_the_drafts_sixteen() {
        assert_eq!(parse_load("stream"), Ok(DEFAULT_STREAMS));
        assert_eq!(parse_load("stream:16"), Ok(16));
        for bad in ["stream:0", "stream:17", "stream:x", "udp:4", ""] {
            let why = parse_load(bad).unwrap_err();
            assert!(why.starts_with(&format!("--load {bad}")), "{why}");
        }
    }

    #[test]
    fn every_fix_parses_by_its_name_and_sets_one_thing() {
        for fix in LoadFix::ALL {
            assert_eq!(LoadFix::parse(fix.name()), Ok(fix));
            let changed = usize::from(fix.discipline().is_some())
                + usize::from(fix.sockets() != LoadSockets::default());
            assert_eq!(changed, usize::from(fix != LoadFix::None), "{fix:?}");
        }
        assert!(LoadFix::parse("cake").unwrap_err().contains("fq_codel"));
    }
}
