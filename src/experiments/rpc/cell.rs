//! The RPC experiment (source: 001, Sun RPC over TCP and UDP, 1989): a
//! client calling a null procedure with an N-byte array argument, `calls`
//! calls per repetition, `reps` repetitions per cell, across argument sizes,
//! TCP and UDP, local and remote.
//!
//! One cell is one server process and one client process (placed in
//! namespaces B and A for `netns`); the controller only starts them, waits,
//! and records what they report.

use crate::analysis::stats::Spread;
use crate::endpoint::rpc::RpcClientSpec;
use crate::endpoint::rpc::client::{ClientOptions, Strategy};
use crate::endpoint::rpc::{Proto, server::ServerOptions};
use crate::endpoint::testbed::{CaptureReply, CaptureRequest, CaptureRole};
use crate::experiment::Interrupted;
use crate::experiment::bed::Bed;
use crate::experiment::endpoints::{ControlError, Wait};
use crate::experiment::launcher::{End, Launcher};
use crate::experiment::placement;
use crate::experiment::runner::{MeasureCell, Measured};
use crate::experiments::rpc::record::RpcData;
use crate::experiments::rpc::record::{Purpose, RpcParams, RpcResult};
use crate::experiments::rpc::role::{RpcReply, RpcRequest, RpcRole};
use crate::testbed::capture::CaptureSpec;
use crate::testbed::{LinkVia, Placement, link::LinkProfile, netns::has_net_admin};
use std::net::SocketAddr;

/// Runs one cell.
pub fn run_cell(params: &RpcParams) -> Result<RpcResult, ControlError> {
    let bed = Bed::create(&params.placement)?;
    let launcher = Launcher::for_run(&params.placement, bed.as_ref())?;
    let bind = launcher.address(End::To);
    let mut server = launcher.spawn("rpc server", End::To)?;
    let serve = RpcRequest::Serve {
        bind: SocketAddr::from((bind, 0)),
        options: params.server.clone(),
        guard: launcher.guard(End::To),
    };
    let RpcReply::Serving { port } = server.ask::<RpcRole>(&serve, Wait::up_to(10, "starting"))?
    else {
        return Err(server.out_of_turn("starting", &serve));
    };
    // The capture is a testbed helper: on this host's loopback or
    // namespaces, not on an agent's host.
    let mut capture = if params.capture_timeline && launcher.agent(End::From).is_none() {
        let interface = launcher
            .interface(End::From)
            .unwrap_or_else(|| "lo".to_string());
        let mut capture = launcher.spawn("capture", End::From)?;
        let start = CaptureRequest::Start(CaptureSpec {
            interface,
            pcap: None,
            snaplen: 128,
            rate_bps: None,
            port: Some(port),
        });
        let CaptureReply::Capturing =
            capture.ask::<CaptureRole>(&start, Wait::up_to(10, "starting"))?
        else {
            return Err(capture.out_of_turn("starting", &start));
        };
        Some(capture)
    } else {
        None
    };
    let mut client = launcher.spawn("rpc client", End::From)?;
    let call = RpcRequest::Call(RpcClientSpec {
        server: SocketAddr::from((bind, port)),
        proto: params.proto,
        strategy: params.strategy,
        options: params.client.clone(),
        size: params.size,
        calls: params.calls,
        reps: params.reps,
        token: launcher.token(),
    });
    let RpcReply::Called(report) = client.ask::<RpcRole>(&call, Wait::until_done("calling"))?
    else {
        return Err(client.out_of_turn("calling", &call));
    };
    client.finish();
    let timeline_capture = match capture.as_mut() {
        Some(capture) => {
            capture.wait_through_interrupt();
            match capture.ask::<CaptureRole>(&CaptureRequest::Stop, Wait::up_to(10, "stopping"))? {
                CaptureReply::Done(report) => Some(*report),
                other => return Err(capture.out_of_turn("stopping", &other)),
            }
        }
        None => None,
    };
    if let Some(mut capture) = capture {
        capture.finish();
    }
    server.wait_through_interrupt();
    let RpcReply::Stopped(served) =
        server.ask::<RpcRole>(&RpcRequest::Stop, Wait::up_to(10, "stopping"))?
    else {
        return Err(server.out_of_turn("stopping", &RpcRequest::Stop));
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
        client: *report,
        server: *served,
        link: netns.as_ref().map(|n| n.link.clone()),
        emulator: netns.as_ref().and_then(|n| n.emulator.clone()),
        capture: timeline_capture.or(netns.and_then(|n| n.capture)),
        server_port: port,
    })
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

    fn measure(&mut self, cell: &RpcParams) -> Result<Measured<RpcData>, Interrupted> {
        crate::experiment::measured(cell.placement.name(), run_cell(cell), |result| RpcData {
            params: cell.clone(),
            result,
        })
    }
}

/// Validated settings of an RPC run: the grid (sizes x protocols x
/// placements) and how every cell calls.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcPlan {
    pub sizes: Vec<usize>,
    pub protos: Vec<Proto>,
    pub placements: Vec<Placement>,
    pub strategy: Strategy,
    pub client: ClientOptions,
    pub server: ServerOptions,
    pub calls: u32,
    pub reps: u32,
    /// Rerun each flagged TCP cell with one change at a time, and capture one.
    pub diagnose: bool,
    /// What the plan left out and why (e.g. netns without root).
    pub skipped: Vec<String>,
}

/// The 1989 document's argument sizes.
pub const SIZES_1989: [usize; 8] = [0, 512, 1024, 2048, 4000, 4096, 8000, 8192];

impl Default for RpcPlan {
    /// The 1989 table: its sizes, TCP and UDP, local and (as root) remote
    /// over an emulated 10 Mbit/s Ethernet, Sun's writes, 100 calls x 20.
    fn default() -> Self {
        let mut skipped = Vec::new();
        let placements = if has_net_admin() {
            vec![Placement::Loopback, remote_1989()]
        } else {
            skipped.push(NETNS_SKIPPED.into());
            vec![Placement::Loopback]
        };
        RpcPlan {
            sizes: SIZES_1989.to_vec(),
            protos: vec![Proto::Tcp, Proto::Udp],
            placements,
            strategy: Strategy::Sun,
            client: ClientOptions::default(),
            server: ServerOptions::default(),
            calls: 100,
            reps: 20,
            diagnose: true,
            skipped,
        }
    }
}

/// Why the default plan has no remote column without root.
const NETNS_SKIPPED: &str =
    "remote (netns) placement skipped: it needs CAP_NET_ADMIN (run as root)";

impl RpcPlan {
    /// The placements `names` lists ([`placement::named`]), or when it is
    /// empty the 1989 table's two, local and remote (between real hosts
    /// both; here remote only as root, else left out with the reason in
    /// the second list).
    pub fn placements(
        names: &[String],
        link: &str,
        ends: Option<&placement::Ends>,
    ) -> Result<(Vec<Placement>, Vec<String>), placement::PlacementError> {
        let mut skipped = Vec::new();
        let names = if !names.is_empty() {
            names.to_vec()
        } else if ends.is_some() || has_net_admin() {
            vec!["local".to_string(), "remote".to_string()]
        } else {
            skipped.push(NETNS_SKIPPED.to_string());
            vec!["local".to_string()]
        };
        Ok((
            placement::named("--placements", &names, link, ends)?,
            skipped,
        ))
    }

    /// The lab's quick profile: 20 calls x 3 repetitions per cell.
    pub fn quick() -> Self {
        RpcPlan {
            calls: 20,
            reps: 3,
            ..RpcPlan::default()
        }
    }

    /// The source's counts: 100 calls x 20 repetitions.
    pub fn full() -> Self {
        RpcPlan::default()
    }

    /// The grid's cells, each with `purpose`.
    pub fn cells(&self, purpose: Purpose) -> Vec<RpcParams> {
        let mut cells = Vec::new();
        for placement in &self.placements {
            for &proto in &self.protos {
                for &size in &self.sizes {
                    cells.push(RpcParams {
                        size,
                        proto,
                        strategy: self.strategy,
                        client: self.client.clone(),
                        server: self.server.clone(),
                        calls: self.calls,
                        reps: self.reps,
                        placement: placement.clone(),
                        purpose: purpose.clone(),
                        capture_timeline: false,
                    });
                }
            }
        }
        cells
    }

    /// The heading line of the table.
    pub fn title(&self) -> String {
        let flag = |on: bool, text: &'static str| if on { text } else { "" };
        format!(
            "netlab rpc: {} calls x {} reps per cell, {} strategy{}{}{}{}{}{}\n",
            self.calls,
            self.reps,
            self.strategy.name(),
            flag(self.client.nodelay, ", TCP_NODELAY"),
            flag(self.server.quickack, ", server TCP_QUICKACK"),
            flag(self.client.cork, ", TCP_CORK"),
            match self.client.busy_poll_us {
                0 => String::new(),
                us => format!(", busy poll {us} µs"),
            },
            match (self.client.cpu, self.server.cpu) {
                (Some(client), Some(server)) =>
                    format!(", client on CPU {client}, server on CPU {server}"),
                _ => String::new(),
            },
            self.client.sockbuf.map_or(String::new(), |size| format!(
                ", SO_SNDBUF/SO_RCVBUF {size} asked on both ends"
            )),
        )
    }
}

/// 1989's "remote": two hosts on a 10 Mbit/s Ethernet, as two namespaces.
pub fn remote_1989() -> Placement {
    Placement::Netns {
        link: LinkProfile::named("ether10").expect("a known profile"),
        via: LinkVia::Auto,
        capture: false,
        pcap: None,
        verbose: false,
    }
}
