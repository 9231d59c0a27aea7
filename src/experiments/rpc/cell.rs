//! The RPC experiment (source: 001, Sun RPC over TCP and UDP, 1989): a
//! client calling a null procedure with an N-byte array argument, `calls`
//! calls per repetition, `reps` repetitions per cell, across argument sizes,
//! TCP and UDP, local and remote.
//!
//! This file is one cell: one server process and one client process
//! (placed in namespaces B and A for `netns`, on agents' hosts for a remote
//! run); the controller only starts them through the rpc role, waits, and
//! records what they report.

use crate::controller::Interrupted;
use crate::controller::helpers::{Bed, start_helper, stop_helper};
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, Wait};
use crate::controller::resume::CellKey;
use crate::controller::runner::{MeasureCell, Measured};
use crate::endpoint::rpc::RpcClientSpec;
use crate::experiments::rpc::record::RpcData;
use crate::experiments::rpc::record::{Purpose, RpcParams, RpcResult};
use crate::experiments::rpc::role::{Call, Serve, Stop};
use crate::record::stats::Spread;
use crate::testbed::capture::{Capture, CaptureSpec};
use std::net::SocketAddr;

/// Runs one cell.
pub fn run_cell(params: &RpcParams) -> Result<RpcResult, ControlError> {
    let bed = Bed::create(&params.placement)?;
    let launcher = Launcher::for_run(&params.placement, bed.as_ref())?;
    let bind = launcher.address(End::To);
    let mut server = launcher.spawn("rpc server", End::To)?;
    let serve = Serve {
        bind: SocketAddr::from((bind, 0)),
        options: params.server.clone(),
        guard: launcher.guard(End::To),
    };
    let port = server.call(serve, Wait::up_to(10, "starting"))?;
    // The capture is a testbed helper: on this host's loopback or
    // namespaces, not on an agent's host.
    let mut capture = if params.capture_timeline && launcher.agent(End::From).is_none() {
        let interface = launcher
            .interface(End::From)
            .unwrap_or_else(|| "lo".to_string());
        let mut capture = launcher.spawn("capture", End::From)?;
        let spec = CaptureSpec {
            interface,
            pcap: None,
            snaplen: 128,
            rate_bps: None,
            port: Some(port),
        };
        start_helper::<Capture>(&mut capture, spec)?;
        Some(capture)
    } else {
        None
    };
    let mut client = launcher.spawn("rpc client", End::From)?;
    let call = Call(RpcClientSpec {
        server: SocketAddr::from((bind, port)),
        proto: params.proto,
        strategy: params.strategy,
        options: params.client.clone(),
        size: params.size,
        calls: params.calls,
        reps: params.reps,
        token: launcher.token(),
    });
    let report = client.call(call, Wait::until_done("calling"))?;
    client.finish();
    let timeline_capture = match capture.as_mut() {
        Some(capture) => Some(stop_helper::<Capture>(capture, 10)?),
        None => None,
    };
    if let Some(mut capture) = capture {
        capture.finish();
    }
    server.wait_through_interrupt();
    let served = server.call(Stop, Wait::up_to(10, "stopping"))?;
    server.finish();
    let netns = bed.map(Bed::finish).transpose()?;
    let per_100: Vec<f64> = report
        .rep_seconds
        .iter()
        .map(|s| s * 1e3 * 100.0 / f64::from(params.calls.max(1)))
        .collect();
    let calls = f64::from(params.calls * params.reps).max(1.0);
    let mut result = RpcResult {
        ms_per_100_calls: Spread::of(&per_100).unwrap_or_default(),
        delayed_acks_per_call: served.counters.get("TcpExt.DelayedACKs") as f64 / calls,
        client: *report,
        server: *served,
        link: netns.as_ref().map(|n| n.link.clone()),
        emulator: netns.as_ref().and_then(|n| n.emulator.clone()),
        capture: timeline_capture.or(netns.and_then(|n| n.capture)),
        server_port: port,
        call_split: None,
    };
    result.call_split = crate::experiments::rpc::analysis::call_split(params, &result);
    Ok(result)
}

/// Measures RPC cells with a server and a client process each.
pub struct RpcMeasure;

impl MeasureCell for RpcMeasure {
    type Cell = RpcParams;
    type Data = RpcData;

    fn label(&self, cell: &RpcParams) -> String {
        let what = match &cell.purpose {
            Purpose::Measure => "measuring",
            Purpose::FindCliffs => "probing",
            Purpose::Diagnose(_) if cell.capture_timeline => "capturing",
            Purpose::Diagnose(_) | Purpose::Other(_) => "diagnosing",
        };
        format!("{what} {} {} B", cell.column(), cell.size)
    }

    fn key(&self, cell: &RpcParams) -> CellKey {
        CellKey::of("rpc", cell)
    }

    fn measure(&mut self, cell: &RpcParams) -> Result<Measured<RpcData>, Interrupted> {
        crate::controller::measured(cell.placement.name(), run_cell(cell), |result| RpcData {
            params: cell.clone(),
            result,
        })
    }
}
