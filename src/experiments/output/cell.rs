//! The terminal-output experiment (002_61bb30b7ada03247.txt, 1987): typing
//! text files to a terminal through a remote login, and what it costs per
//! KB on each side. A session runs `cat FILE` (or a paced writer, for a
//! `--baud` terminal) through the cell's server; the terminal (netlab's
//! client, or OpenSSH's `ssh -tt` against sshd) discards the output. The
//! command then prints an end marker and waits, so the session (and its
//! CPU time) is still there when the server's process tree is sampled.
//!
//! Both ends are endpoints the launcher places ([`crate::experiments::login::servers`]): the
//! serving end at `To` writes the file and starts the server; the terminal
//! at `From` announces the window (from the line that starts the output to
//! the end marker), over which the serving end samples its server's tree.
//!
//! Per cell: terminal throughput (the file's bytes over that window),
//! server CPU per KB (the scheduler's accounting of the server's process
//! tree: server, session, command), client CPU per KB (the terminal
//! thread's, or the `ssh` process's), and from the client socket's
//! TCP_INFO (for `ssh`, its socket duplicated with `pidfd_getfd(2)`) the
//! data segments received per KB of terminal data and their mean size.

use crate::controller::CellError;
use crate::controller::Interrupted;
use crate::controller::helpers::Bed;
use crate::controller::launcher::{End, Launcher};
use crate::controller::resume::CellKey;
use crate::controller::runner::{MeasureCell, Measured};
use crate::endpoint::login::clients::LoginTarget;
use crate::endpoint::login::host::Dialect;
use crate::endpoint::login::host::SessionCommand;
use crate::endpoint::login::host::Target;
use crate::endpoint::login::server::Relay;
use crate::endpoint::stall::StallBound;
use crate::experiments::login::role::Terminal;
use crate::experiments::login::servers::{self, ServerSpec};
use crate::experiments::output::record::OutputCounts;
use crate::experiments::output::record::OutputData;
use crate::experiments::output::record::OutputParams;
use crate::experiments::output::record::OutputResult;
use crate::record::testbed::Placement;
use std::time::Duration;

/// Runs one cell: the server, the file typed through it, the terminal in
/// the cell's placement.
pub fn run_cell(params: &OutputParams) -> Result<OutputResult, CellError> {
    params
        .relay
        .speaks(params.protocol)
        .map_err(CellError::Refused)?;
    let bed = Bed::create(&params.placement)?;
    let launcher = Launcher::for_run(&params.placement, bed.as_ref())?;
    let mut server = servers::start(
        &ServerSpec {
            target: params.relay,
            dialect: params.protocol,
            session: SessionCommand::Output {
                bytes: params.file_bytes,
                baud: params.baud,
            },
            max_sessions: 4,
            nodelay: params.nodelay,
            measure_idle: false,
            cpu_budget_pct: None,
        },
        &launcher,
    )?;
    let mut terminal = launcher.spawn("terminal", End::From)?;
    let spec = LoginTarget {
        stall: params.stall.unwrap_or_default(),
        ..server.target(params.protocol)
    };
    // The session gives up after 600 s without its end marker.
    let driven = servers::drive(
        &mut terminal,
        &mut server,
        Terminal(spec),
        Duration::from_secs(660),
    );
    let (client, window) = match driven {
        Ok((client, Some(window))) => (*client, window),
        Ok((_, None)) => {
            return Err(server.failed(CellError::Refused(
                "the terminal finished without opening its measured window".into(),
            )));
        }
        Err(e) => return Err(server.failed(e)),
    };
    terminal.finish();
    server.stop()?;
    let link = match bed {
        Some(bed) => Some(bed.finish()?.link),
        None => None,
    };
    let kb = client.bytes as f64 / 1024.0;
    let seconds = client.seconds.max(1e-9);
    let (segs, bytes) = client.tcp_info.as_ref().map_or((0.0, 0.0), |info| {
        (
            info.data_segs_in.unwrap_or(0) as f64,
            info.bytes_received.unwrap_or(0) as f64,
        )
    });
    Ok(OutputResult {
        params: params.clone(),
        bytes_received: client.bytes,
        seconds,
        kbytes_per_s: kb / seconds,
        server_cpu_us_per_kb: window.tree_ns as f64 / 1e3 / kb,
        client_cpu_us_per_kb: client.client_ns as f64 / 1e3 / kb,
        segments_per_kb: segs / kb.max(1e-9),
        mean_segment_bytes: bytes / segs.max(1.0),
        server_cpu_pct: 100.0 * window.tree_ns as f64 / 1e9 / seconds,
        link,
        per_kb: window.tree_counts.map(|c| OutputCounts {
            syscalls: c.syscalls as f64 / kb.max(1e-9),
            context_switches: c.context_switches as f64 / kb.max(1e-9),
            packets_out: segs / kb.max(1e-9),
            packets_in: client
                .tcp_info
                .as_ref()
                .and_then(|i| i.segs_out)
                .map_or(0.0, |n| f64::from(n) / kb.max(1e-9)),
            pty_transfers: window.pty_transfers.map(|n| n as f64 / kb.max(1e-9)),
        }),
        tcp_info: client.tcp_info,
        waits: window.waits,
    })
}

/// The grid of an output run: servers x protocols x placements, one file.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputPlan {
    pub relays: Vec<Target>,
    pub protocols: Vec<Dialect>,
    pub placements: Vec<Placement>,
    /// Bytes of text typed.
    pub size: u64,
    /// Pace the output like a serial line of this many baud.
    pub baud: Option<u32>,
    /// TCP_NODELAY on netlab's sessions.
    pub nodelay: bool,
    /// `--stall-timeout` (none: the default bound).
    pub stall: Option<StallBound>,
}

impl Default for OutputPlan {
    /// netlab's four designs that answer at once, over TELNET and rlogin,
    /// on loopback, 4 MB unpaced.
    fn default() -> Self {
        OutputPlan {
            relays: Relay::ALL.into_iter().map(Target::of).collect(),
            protocols: vec![Dialect::Telnet, Dialect::Rlogin],
            placements: vec![Placement::Loopback],
            size: 4 << 20,
            baud: None,
            nodelay: false,
            stall: None,
        }
    }
}

impl OutputPlan {
    /// The lab's smoke profile: 256 KB through each design.
    pub fn smoke() -> Self {
        OutputPlan {
            size: 256 << 10,
            ..OutputPlan::default()
        }
    }

    /// The lab's quick profile: 1 MB through each design.
    pub fn quick() -> Self {
        OutputPlan {
            size: 1 << 20,
            ..OutputPlan::default()
        }
    }

    pub fn full() -> Self {
        OutputPlan::default()
    }

    /// The cells, each server once per protocol it is asked with (sshd's
    /// always speak SSH, once).
    pub fn cells(&self) -> Vec<OutputParams> {
        let mut cells = Vec::new();
        for placement in &self.placements {
            for &protocol in &self.protocols {
                for &relay in &self.relays {
                    let cell = OutputParams {
                        relay,
                        protocol: relay.dialect_for(protocol),
                        placement: placement.clone(),
                        file_bytes: self.size,
                        baud: self.baud,
                        nodelay: self.nodelay,
                        stall: self.stall,
                    };
                    if !cells.contains(&cell) {
                        cells.push(cell);
                    }
                }
            }
        }
        cells
    }
}

/// Types a file through each cell's server.
pub struct OutputMeasure;

impl MeasureCell for OutputMeasure {
    type Cell = OutputParams;
    type Data = OutputData;

    fn label(&self, cell: &OutputParams) -> String {
        format!(
            "output {} {} {}",
            cell.relay.name(),
            cell.protocol.name(),
            cell.placement.name()
        )
    }

    fn key(&self, cell: &OutputParams) -> CellKey {
        CellKey::of("output", cell)
    }

    fn measure(&mut self, cell: &OutputParams) -> Result<Measured<OutputData>, Interrupted> {
        crate::controller::measured(cell.placement.name(), run_cell(cell), |result| OutputData {
            params: cell.clone(),
            result,
        })
    }
}
