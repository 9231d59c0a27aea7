//! One rpm cell: the serving end (namespace B, an agent's `--to`, or this
//! host) and the measuring end (namespace A, `--from`, or this host), the
//! test run in the measuring end, and the analysis of what it saw.

use super::analysis::summarise;
use super::record::{RpmData, RpmParams, RpmResult};
use crate::analysis::responsiveness::Params;
use crate::controller::Interrupted;
use crate::controller::helpers::Bed;
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, Wait};
use crate::controller::resume::CellKey;
use crate::controller::runner::{MeasureCell, Measured};
use crate::endpoint::rpm::role::{Measure, Serve, Stop};
use crate::endpoint::rpm::types::ClientSpec;
use crate::measure::irtt::{self, IrttRun};
use std::net::SocketAddr;
use std::time::Duration;

/// Runs one cell.
pub fn run_cell(params: &RpmParams) -> Result<RpmResult, ControlError> {
    let bed = Bed::create(&params.placement)?;
    let launcher = Launcher::for_run(&params.placement, bed.as_ref())?;
    let bind = launcher.address(End::To);
    let mut server = launcher.spawn("rpm server", End::To)?;
    // Guarded on this host too: its probes' figures are the point, and a
    // stranger's downloads from the same host would change them.
    let (guard, token) = launcher.guard_here_too(End::To)?;
    let addr = server.call(
        Serve {
            bind: SocketAddr::from((bind, 0)),
            guard: Some(guard),
            sockets: params.sockets.clone(),
        },
        Wait::up_to(10, "starting"),
    )?;
    let draft = Params {
        mnp: params.max_connections,
        mps: params.probe_rate,
        ..Params::default()
    };
    // irtt beside the probes: its server at the serving end, an idle run
    // now, and a run through the whole test, stopped with it.
    let mut irtt = match params.irtt {
        true => Some(IrttBeside::start(bed.as_ref(), bind, params)?),
        false => None,
    };
    let mut client = launcher.spawn("rpm client", End::From)?;
    let spec = ClientSpec {
        server: SocketAddr::from((bind, addr.port())),
        direction: params.direction,
        max_connections: params.max_connections,
        probe_rate: params.probe_rate,
        max_duration_s: params.max_duration_s,
        idle_probes: params.idle_probes,
        draft,
        sockets: params.sockets.clone(),
        token: Some(token),
    };
    let report = client.call(Measure(spec), Wait::until_done("measuring"));
    let irtt_runs = irtt.take().map(IrttBeside::stop).transpose();
    let report = report?;
    let irtt_runs = irtt_runs?;
    client.finish();
    server.wait_through_interrupt();
    let served = server.call(Stop, Wait::up_to(10, "stopping"))?;
    server.finish();
    let netns = bed.map(Bed::finish).transpose()?;
    let summary = summarise(&report, draft);
    let mut result = RpmResult {
        draft,
        client: *report,
        server: *served,
        link: netns.as_ref().map(|n| n.link.clone()),
        emulator: netns.and_then(|n| n.emulator),
        summary,
        split: None,
        irtt: None,
    };
    result.split = super::split::split(&result, params.direction);
    result.irtt = irtt_runs.map(|(idle, loaded)| {
        super::analysis::side_by_side(&result.client, &result.summary, &draft, &idle, &loaded)
    });
    Ok(result)
}

/// irtt's server and its run under the load, while the test runs.
struct IrttBeside {
    _server: irtt::Server,
    idle: IrttRun,
    loaded: irtt::Client,
}

/// irtt's port in netlab's namespaces (its own default).
const IRTT_PORT: u16 = 2112;

impl IrttBeside {
    fn start(
        bed: Option<&Bed>,
        bind: std::net::IpAddr,
        params: &RpmParams,
    ) -> Result<IrttBeside, ControlError> {
        let failed = |e: irtt::IrttError| ControlError::Failed {
            role: "irtt",
            message: e.to_string(),
        };
        let side = |s: usize| bed.map(|b| b.testbed.netns_path(s));
        let (ns_from, ns_to) = (side(0), side(1));
        let port = match bed {
            Some(_) => IRTT_PORT,
            // On loopback, a port free now.
            None => std::net::UdpSocket::bind((bind, 0))
                .and_then(|s| s.local_addr())
                .map(|a| a.port())
                .map_err(|e| ControlError::Failed {
                    role: "irtt",
                    message: format!("no free UDP port: {e}"),
                })?,
        };
        let server_addr = SocketAddr::from((bind, port));
        let server = irtt::Server::start(ns_to.as_deref(), server_addr).map_err(failed)?;
        let idle = irtt::Client::start(ns_from.as_deref(), server_addr, IRTT_IDLE)
            .and_then(irtt::Client::wait)
            .map_err(failed)?;
        // Longer than the test can be: the idle probes, the load's most,
        // and their slack; stopped when the test ends.
        let most = Duration::from_secs_f64(
            params.max_duration_s + f64::from(params.idle_probes) * 0.5 + 30.0,
        );
        let loaded = irtt::Client::start(ns_from.as_deref(), server_addr, most).map_err(failed)?;
        Ok(IrttBeside {
            _server: server,
            idle,
            loaded,
        })
    }

    fn stop(self) -> Result<(IrttRun, IrttRun), ControlError> {
        let loaded = self.loaded.interrupt().map_err(|e| ControlError::Failed {
            role: "irtt",
            message: e.to_string(),
        })?;
        Ok((self.idle, loaded))
    }
}

/// How long irtt measures the idle path.
const IRTT_IDLE: Duration = Duration::from_secs(2);

/// Measures rpm cells.
pub struct RpmMeasure;

impl MeasureCell for RpmMeasure {
    type Cell = RpmParams;
    type Data = RpmData;

    fn label(&self, cell: &RpmParams) -> String {
        format!(
            "rpm {} {}{}",
            cell.placement.name(),
            cell.direction.name(),
            cell.label
                .as_ref()
                .map(|l| format!(" {l}"))
                .unwrap_or_default()
        )
    }

    fn key(&self, cell: &RpmParams) -> CellKey {
        CellKey::of("rpm", cell)
    }

    fn measure(&mut self, cell: &RpmParams) -> Result<Measured<RpmData>, Interrupted> {
        crate::controller::measured(cell.placement.name(), run_cell(cell), |result| RpmData {
            params: cell.clone(),
            result,
        })
    }
}
