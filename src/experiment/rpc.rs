//! The RPC experiment (source: 001, Sun RPC over TCP and UDP, 1989): a
//! client calling a null procedure with an N-byte array argument, `calls`
//! calls per repetition, `reps` repetitions per cell, across argument sizes,
//! TCP and UDP, local and remote.
//!
//! One cell is one server process and one client process (placed in
//! namespaces B and A for `netns`); the controller only starts them, waits,
//! and records what they report.

use super::bed::Bed;
use super::endpoints::{ControlError, EndpointProcess};
use super::stream::MeasureError;
use crate::analysis::stats::Spread;
use crate::endpoint::protocol::{Command, Reply};
use crate::endpoint::rpc::RpcClientSpec;
use crate::measure::host::HostFacts;
pub use crate::record::rpc::{RpcParams, RpcResult};
use crate::record::{Record, RecordData, RecordWriter};
use crate::testbed::{capture::CaptureSpec, netns::ADDR_B};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Runs one cell.
pub fn run_cell(params: &RpcParams) -> Result<RpcResult, ControlError> {
    let bed = Bed::create(&params.placement)?;
    let (bind, netns) = match &bed {
        None => (Ipv4Addr::LOCALHOST, [None, None]),
        Some(bed) => (
            ADDR_B,
            [
                Some(bed.testbed.netns_path(0)),
                Some(bed.testbed.netns_path(1)),
            ],
        ),
    };
    let mut server = EndpointProcess::spawn_in("rpc server", netns[1].as_deref())?;
    server.send(&Command::RpcServe {
        bind: SocketAddr::from((bind, 0)),
        options: params.server.clone(),
    })?;
    let port = match server.recv(Some(Duration::from_secs(10)), "starting", &mut |_| {})? {
        Reply::RpcServing { port } => port,
        other => return Err(server.unexpected("starting", &other)),
    };
    let mut capture = if params.capture_timeline {
        let interface = bed
            .as_ref()
            .map_or("lo".to_string(), |b| b.testbed.interface(0).to_string());
        let mut capture = EndpointProcess::spawn_in("capture", netns[0].as_deref())?;
        capture.send(&Command::Capture(CaptureSpec {
            interface,
            pcap: None,
            snaplen: 128,
            rate_bps: None,
            port: Some(port),
        }))?;
        match capture.recv(Some(Duration::from_secs(10)), "starting", &mut |_| {})? {
            Reply::Capturing => Some(capture),
            other => return Err(capture.unexpected("starting", &other)),
        }
    } else {
        None
    };
    let mut client = EndpointProcess::spawn_in("rpc client", netns[0].as_deref())?;
    client.send(&Command::RpcClient(RpcClientSpec {
        server: SocketAddr::from((bind, port)),
        proto: params.proto,
        strategy: params.strategy,
        options: params.client.clone(),
        size: params.size,
        calls: params.calls,
        reps: params.reps,
    }))?;
    let report = match client.recv(None, "calling", &mut |_| {})? {
        Reply::RpcClientDone(report) => *report,
        other => return Err(client.unexpected("calling", &other)),
    };
    client.finish();
    let timeline_capture = match capture.as_mut() {
        Some(capture) => {
            capture.wait_through_interrupt();
            capture.send(&Command::Stop)?;
            match capture.recv(Some(Duration::from_secs(10)), "stopping", &mut |_| {})? {
                Reply::CaptureDone(report) => Some(*report),
                other => return Err(capture.unexpected("stopping", &other)),
            }
        }
        None => None,
    };
    if let Some(capture) = capture {
        capture.finish();
    }
    server.wait_through_interrupt();
    server.send(&Command::Stop)?;
    let served = match server.recv(Some(Duration::from_secs(10)), "stopping", &mut |_| {})? {
        Reply::RpcServerDone(report) => *report,
        other => return Err(server.unexpected("stopping", &other)),
    };
    server.finish();
    let netns = bed.map(Bed::finish).transpose()?;
    let per_100: Vec<f64> = report
        .rep_seconds
        .iter()
        .map(|s| s * 1e3 * 100.0 / f64::from(params.calls.max(1)))
        .collect();
    let calls = f64::from(params.calls * params.reps).max(1.0);
    Ok(RpcResult {
        ms_per_100_calls: Spread::of(&per_100).unwrap_or(Spread {
            min: 0.0,
            median: 0.0,
            max: 0.0,
            n: 0,
        }),
        delayed_acks_per_call: served.counters.get("TcpExt.DelayedACKs") as f64 / calls,
        client: report,
        server: served,
        link: netns.as_ref().map(|n| n.link.clone()),
        emulator: netns.as_ref().and_then(|n| n.emulator.clone()),
        capture: timeline_capture.or(netns.and_then(|n| n.capture)),
        server_port: port,
    })
}

/// Runs a cell and records it (failed cells too); an interrupt is not recorded.
pub fn measure_cell(
    params: &RpcParams,
    host: &HostFacts,
    writer: Option<&mut RecordWriter>,
) -> Result<Record, MeasureError> {
    super::record_run(
        params.placement.name(),
        host,
        writer,
        || run_cell(params),
        |result| RecordData::Rpc {
            params: params.clone(),
            result,
        },
    )
}
