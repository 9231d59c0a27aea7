//! One rpm cell: the serving end (namespace B, an agent's `--to`, or this
//! host) and the measuring end (namespace A, `--from`, or this host), the
//! test run in the measuring end, and the analysis of what it saw.

use super::analysis::summarise;
use super::record::{ClientSpec, RpmData, RpmParams, RpmResult};
use super::role::{Measure, Serve, Stop};
use crate::analysis::responsiveness::Params;
use crate::controller::Interrupted;
use crate::controller::helpers::Bed;
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, Wait};
use crate::controller::runner::{MeasureCell, Measured};
use std::net::SocketAddr;

/// Runs one cell.
pub fn run_cell(params: &RpmParams) -> Result<RpmResult, ControlError> {
    let bed = Bed::create(&params.placement)?;
    let launcher = Launcher::for_run(&params.placement, bed.as_ref())?;
    let bind = launcher.address(End::To);
    let mut server = launcher.spawn("rpm server", End::To)?;
    let addr = server.call(
        Serve {
            bind: SocketAddr::from((bind, 0)),
            guard: launcher.guard(End::To),
            sockets: params.sockets.clone(),
        },
        Wait::up_to(10, "starting"),
    )?;
    let draft = Params {
        mnp: params.max_connections,
        mps: params.probe_rate,
        ..Params::default()
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
        token: launcher.token(),
    };
    let report = client.call(Measure(spec), Wait::until_done("measuring"))?;
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
    };
    result.split = super::split::split(&result, params.direction);
    Ok(result)
}

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

    fn measure(&mut self, cell: &RpmParams) -> Result<Measured<RpmData>, Interrupted> {
        crate::controller::measured(cell.placement.name(), run_cell(cell), |result| RpmData {
            params: cell.clone(),
            result,
        })
    }
}
