//! The RPC experiment's plan ([`RpcPlan`]: sizes, protocols, placements,
//! strategy, options, counts; `Default`, `quick()`, `full()`) and the ways
//! it is run: the grid, then the searches, each a sequence of cells through
//! the runner whose next step depends on the records so far:
//!
//! - [`find_and_diagnose`]: every cliff the grid shows is rerun with one
//!   thing changed at a time (TCP_NODELAY on the client, TCP_QUICKACK on the
//!   server, the request in one writev) and once captured, and the reruns
//!   name its cause ([`crate::analysis::diagnosis`]);
//! - [`find_cliffs`]: maps, to the byte, the argument sizes at which TCP
//!   calls stall on each placement, as the 1989 document's 4045-4952 and
//!   8090-8960 ranges did. A coarse pass probes every 500 bytes, every power
//!   of two and every multiple of the path's MSS (and a byte either side),
//!   plus anchors below the range; the cliff detector models the fast
//!   regime; then every boundary between a fast and a slow probe is bisected
//!   down to adjacent sizes. A probe is a short cell (5 calls, judged by its
//!   mean call), recorded like any other with purpose `find-cliffs`.
//!
//! Both take any [`MeasureCell`] of RPC cells, so their tests run against
//! mocks with known stalls.

use crate::analysis::cliff::{DEFAULT_FACTOR, find_cliffs as model_cliffs};
use crate::controller::MeasureError;
use crate::controller::placement;
use crate::controller::runner::{MeasureCell, Runner};
use crate::endpoint::rpc::client::{ClientOptions, Strategy};
use crate::endpoint::rpc::{Proto, server::ServerOptions};
use crate::experiments::rpc::analysis::{
    Finding, StallRange, coarse_sizes, findings_from_records, flag_cliffs, is_stall,
    mean_ms_per_call, mss_for_mtu, stall_ranges,
};
use crate::experiments::rpc::record::Record;
use crate::experiments::rpc::record::RpcData;
use crate::experiments::rpc::record::{Purpose, RpcParams};
use crate::record::testbed::Placement;
use crate::testbed::netns::has_net_admin;
use std::collections::BTreeMap;
use thiserror::Error;

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
            vec![Placement::Loopback, Placement::ether10()]
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

    /// The lab's smoke profile: 10 calls x 2 repetitions per cell.
    pub fn smoke() -> Self {
        RpcPlan {
            calls: 10,
            reps: 2,
            ..RpcPlan::default()
        }
    }

    /// The lab's quick profile: 10 calls x 3 repetitions per cell. A
    /// stalled call on loopback waits a delayed ACK (about 40 ms), so each
    /// stalling cell costs its calls x 40 ms: 20 calls took 2.6 s a cell
    /// and 10 s of the profile's three minutes (2026-12-03), while 10 show
    /// the same stall on every call.
    pub fn quick() -> Self {
        RpcPlan {
            calls: 10,
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

/// Calls per `--find-cliffs` probe.
pub const PROBE_CALLS: u32 = 5;

/// Calls per diagnosis rerun, at most.
pub const RERUN_CALLS: u32 = 20;

/// One change to a flagged cell, for a diagnostic rerun.
type Change = fn(&mut RpcParams);

/// The reruns that tell Nagle, delayed ACKs and split writes apart.
const CHANGES: [(&str, Change); 3] = [
    ("TCP_NODELAY on the client", |p| p.client.nodelay = true),
    ("TCP_QUICKACK on the server", |p| p.server.quickack = true),
    ("the request in one writev", |p| {
        p.strategy = Strategy::Writev
    }),
];

/// What an RPC run measured and what it made of it.
#[derive(Debug, Clone)]
pub struct Explained {
    /// The grid's records.
    pub records: Vec<Record>,
    /// Its cliffs, each with the cause its reruns show.
    pub findings: Vec<Finding>,
    /// The diagnosis reruns' records.
    pub reruns: Vec<Record>,
}

/// Runs the plan's grid, finds its cliffs and, if the plan says so,
/// diagnoses each.
pub fn measure_and_explain<M: MeasureCell<Cell = RpcParams, Data = RpcData>>(
    runner: &mut Runner,
    measure: &mut M,
    plan: &RpcPlan,
) -> Result<Explained, MeasureError> {
    let records = runner.grid(measure, &plan.cells(Purpose::Measure))?;
    let (findings, reruns) = find_and_diagnose(
        runner,
        measure,
        &records,
        plan.diagnose,
        plan.calls.min(RERUN_CALLS),
    )?;
    Ok(Explained {
        records,
        findings,
        reruns,
    })
}

/// Finds the cliffs among `records` (the grid) and, if `diagnose_cells`,
/// reruns each TCP cliff with one change at a time and once captured.
/// Returns the findings, read from the records exactly as `netlab report`
/// reads them ([`findings_from_records`]), and the reruns' records.
pub fn find_and_diagnose<M: MeasureCell<Cell = RpcParams, Data = RpcData>>(
    runner: &mut Runner,
    measure: &mut M,
    records: &[Record],
    diagnose_cells: bool,
    rerun_calls: u32,
) -> Result<(Vec<Finding>, Vec<Record>), MeasureError> {
    let mut reruns = Vec::new();
    if diagnose_cells {
        for (_, _, params, _) in flag_cliffs(records) {
            if params.proto != Proto::Tcp {
                continue;
            }
            for cell in diagnosis_cells(params, rerun_calls) {
                reruns.push(runner.cell(measure, &cell)?);
            }
        }
    }
    let all: Vec<Record> = records.iter().chain(&reruns).cloned().collect();
    Ok((findings_from_records(&all), reruns))
}

/// The reruns that explain a stalled cell: each of [`CHANGES`] alone, then
/// one short run with the connection captured, to show a stalled call.
fn diagnosis_cells(stalled: &RpcParams, rerun_calls: u32) -> Vec<RpcParams> {
    let mut cells: Vec<RpcParams> = CHANGES
        .iter()
        .map(|(change, apply)| {
            let mut cell = stalled.clone();
            apply(&mut cell);
            cell.calls = rerun_calls;
            cell.reps = 1;
            cell.purpose = Purpose::Diagnose((*change).into());
            cell
        })
        .collect();
    cells.push(RpcParams {
        calls: 3,
        reps: 1,
        capture_timeline: true,
        purpose: Purpose::Diagnose("packet timeline".into()),
        ..stalled.clone()
    });
    cells
}

#[derive(Debug, Error)]
pub enum SearchError {
    #[error(transparent)]
    Stopped(#[from] MeasureError),
    #[error("--cliff-range {lo}..{hi}: need LO < HI <= 60000")]
    Range { lo: usize, hi: usize },
    #[error("probe at {size} bytes failed: {error}")]
    ProbeFailed { size: usize, error: String },
    #[error("too few probes to model {column}")]
    NoModel { column: String },
}

/// Probes sizes: every probe's mean ms per call, by size (a size probed
/// more than once reads as the median of its probes).
struct Prober<'r, 'w, M> {
    runner: &'r mut Runner<'w>,
    measure: &'r mut M,
    base: RpcParams,
    times: BTreeMap<usize, Vec<f64>>,
}

/// Probes of each size beside a boundary: the median of three is a
/// majority, so one sporadic stall (a probe in a few near 4 KB, under
/// load) cannot move the boundary by a byte.
const CONFIRM_PROBES: usize = 3;
/// Steps a confirmation may move a boundary before it stops.
const CONFIRM_STEPS: usize = 8;

impl<M: MeasureCell<Cell = RpcParams, Data = RpcData>> Prober<'_, '_, M> {
    /// The size's time: its first probe, or the median of those made.
    fn probe(&mut self, size: usize) -> Result<f64, SearchError> {
        if let Some(ms) = self.median(size) {
            return Ok(ms);
        }
        self.probe_again(size)?;
        Ok(self.median(size).expect("probed"))
    }

    /// The median of `size`'s probes, [`CONFIRM_PROBES`] of them at least.
    fn confirm(&mut self, size: usize) -> Result<f64, SearchError> {
        while self.times.get(&size).map_or(0, Vec::len) < CONFIRM_PROBES {
            self.probe_again(size)?;
        }
        Ok(self.median(size).expect("probed"))
    }

    fn median(&self, size: usize) -> Option<f64> {
        let mut ms = self.times.get(&size)?.clone();
        ms.sort_by(f64::total_cmp);
        Some(ms[ms.len() / 2])
    }

    fn probe_again(&mut self, size: usize) -> Result<(), SearchError> {
        let cell = RpcParams {
            size,
            ..self.base.clone()
        };
        let record = self.runner.cell(self.measure, &cell)?;
        let ms = match &record.data {
            RpcData {
                result: Some(r), ..
            } => mean_ms_per_call(r, cell.calls),
            _ => {
                return Err(SearchError::ProbeFailed {
                    size,
                    error: record.error.unwrap_or_default(),
                });
            }
        };
        self.times.entry(size).or_default().push(ms);
        Ok(())
    }
}

/// The MSS of a placement's path: the netns link's MTU, or loopback's
/// (read from the interface; 65536 if it cannot be read).
pub fn path_mss(placement: &Placement) -> usize {
    let mtu = match placement {
        Placement::Netns { link, .. } => link.mtu,
        Placement::Loopback => std::fs::read_to_string("/sys/class/net/lo/mtu")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(65536),
        // Between real hosts the path's MTU is not known before a
        // connection: Ethernet's is assumed (each record's TCP_INFO carries
        // the MSS the path really had).
        Placement::Remote { .. } => 1500,
    };
    mss_for_mtu(mtu)
}

/// Maps where TCP calls stall between `lo` and `hi` bytes on each of the
/// plan's placements (MSS from [`path_mss`]).
pub fn find_cliffs<M: MeasureCell<Cell = RpcParams, Data = RpcData>>(
    runner: &mut Runner,
    measure: &mut M,
    plan: &RpcPlan,
    lo: usize,
    hi: usize,
) -> Result<Vec<StallRange>, SearchError> {
    let mut ranges = Vec::new();
    for placement in &plan.placements {
        ranges.extend(find_cliffs_on(
            runner,
            measure,
            plan,
            placement,
            path_mss(placement),
            lo,
            hi,
        )?);
    }
    Ok(ranges)
}

/// [`find_cliffs`] on one placement whose path has this MSS.
pub fn find_cliffs_on<M: MeasureCell<Cell = RpcParams, Data = RpcData>>(
    runner: &mut Runner,
    measure: &mut M,
    plan: &RpcPlan,
    placement: &Placement,
    mss: usize,
    lo: usize,
    hi: usize,
) -> Result<Vec<StallRange>, SearchError> {
    if lo >= hi || hi > 60_000 {
        return Err(SearchError::Range { lo, hi });
    }
    let base = RpcParams {
        size: 0,
        proto: Proto::Tcp,
        strategy: plan.strategy,
        client: plan.client.clone(),
        server: plan.server.clone(),
        calls: PROBE_CALLS,
        reps: 1,
        placement: placement.clone(),
        purpose: Purpose::FindCliffs,
        capture_timeline: false,
    };
    let column = base.column();
    let coarse = coarse_sizes(lo, hi, mss);
    let mut prober = Prober {
        runner,
        measure,
        base,
        times: BTreeMap::new(),
    };
    for &size in &coarse {
        prober.probe(size)?;
    }
    let points: Vec<(f64, f64)> = coarse
        .iter()
        .map(|&s| (s as f64, prober.median(s).expect("probed")))
        .collect();
    let (_, model) = model_cliffs(&points, DEFAULT_FACTOR);
    let Some(model) = model else {
        return Err(SearchError::NoModel { column });
    };
    // Bisect every boundary between neighbours of different kinds.
    for pair in coarse.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let (sa, sb) = (
            is_stall(&model, a, prober.probe(a)?),
            is_stall(&model, b, prober.probe(b)?),
        );
        if sa == sb {
            continue;
        }
        let (mut fast_side, mut slow_side) = if sa { (b, a) } else { (a, b) };
        while fast_side.abs_diff(slow_side) > 1 {
            let mid = (fast_side + slow_side) / 2;
            let ms = prober.probe(mid)?;
            if is_stall(&model, mid, ms) {
                slow_side = mid;
            } else {
                fast_side = mid;
            }
        }
        // The boundary confirmed: both its sides by a majority of probes,
        // moved a byte at a time while a majority says a side was misread.
        // Slow sizes lie above the fast ones (a cliff) or below (its end).
        let up = slow_side > fast_side;
        let step = |from: usize, toward_slow: bool| {
            let next = if up == toward_slow {
                from.checked_add(1)
            } else {
                from.checked_sub(1)
            };
            next.filter(|s| (lo..=hi).contains(s))
        };
        for _ in 0..CONFIRM_STEPS {
            if is_stall(&model, fast_side, prober.confirm(fast_side)?) {
                let Some(next) = step(fast_side, false) else {
                    break;
                };
                (slow_side, fast_side) = (fast_side, next);
            } else if !is_stall(&model, slow_side, prober.confirm(slow_side)?) {
                let Some(next) = step(slow_side, true) else {
                    break;
                };
                (fast_side, slow_side) = (slow_side, next);
            } else {
                break;
            }
        }
    }
    let probes: Vec<(usize, f64)> = prober
        .times
        .keys()
        .map(|&s| (s, prober.median(s).expect("probed")))
        .collect();
    Ok(stall_ranges(&column, &probes, &model, lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::Interrupted;
    use crate::controller::runner::Measured;
    use crate::controller::runner::mock::{Mock, runner};
    use crate::experiments::rpc::record::RpcResult;

    /// A made-up RPC cell: `ms` per call, the median call too.
    fn rpc_measured(cell: &RpcParams, ms: f64) -> Result<Measured<RpcData>, Interrupted> {
        let mut result = RpcResult::default();
        result.client.rep_seconds = vec![ms * 1e-3 * f64::from(cell.calls); cell.reps as usize];
        result.client.latency_us_p50 = ms * 1e3;
        result.client.writes_per_call = 2;
        Ok(Measured {
            placement: cell.placement.name().into(),
            data: RpcData {
                params: cell.clone(),
                result: Some(Box::new(result)),
            },
            error: None,
        })
    }

    /// A fast call: 0.1 ms plus 10 ns a byte.
    fn fast(size: usize) -> f64 {
        0.1 + size as f64 * 1e-5
    }

    /// The search on loopback, with a path of this MSS, over `lo..=hi`.
    fn search(
        mock: &mut impl MeasureCell<Cell = RpcParams, Data = RpcData>,
        mss: usize,
        (lo, hi): (usize, usize),
    ) -> Result<Vec<StallRange>, SearchError> {
        find_cliffs_on(
            &mut runner(),
            mock,
            &tcp_plan(),
            &Placement::Loopback,
            mss,
            lo,
            hi,
        )
    }

    fn tcp_plan() -> RpcPlan {
        RpcPlan {
            placements: vec![Placement::Loopback],
            protos: vec![Proto::Tcp],
            skipped: Vec::new(),
            ..RpcPlan::default()
        }
    }

    #[test]
    fn the_cliff_search_finds_a_stall_range_to_the_byte() {
        let mut mock = Mock::new(|cell: &RpcParams| {
            let stall = if (4097..=8192).contains(&cell.size) {
                200.0
            } else {
                0.0
            };
            rpc_measured(cell, fast(cell.size) + stall)
        });
        let ranges = search(&mut mock, 1448, (0, 12000)).unwrap();
        assert_eq!(ranges.len(), 1, "{ranges:?}");
        assert_eq!((ranges[0].from, ranges[0].to), (4097, 8192));
        assert!(!ranges[0].open_ended);
        assert!((ranges[0].ms_per_call - 200.1).abs() < 1.0);
        // Every probe is a short cell of the find-cliffs purpose, measured once.
        assert!(
            mock.measured
                .iter()
                .all(|c| c.purpose == Purpose::FindCliffs
                    && c.calls == PROBE_CALLS
                    && c.proto == Proto::Tcp)
        );
        // Each boundary's two sides are probed three times (a majority),
        // every other size once.
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for c in &mock.measured {
            *counts.entry(c.size).or_default() += 1;
        }
        let confirmed: Vec<usize> = counts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(s, n)| {
                assert_eq!(*n, CONFIRM_PROBES, "size {s}");
                *s
            })
            .collect();
        assert_eq!(confirmed, vec![4096, 4097, 8192, 8193]);
    }

    #[test]
    fn one_sporadic_stall_beside_the_boundary_does_not_move_it() {
        // 3952 bytes stalls once in three probes (as a loaded host's
        // sporadic stall near 4 KB); 3953 and up always.
        let seen = std::cell::Cell::new(0);
        let mut mock = Mock::new(|cell: &RpcParams| {
            let stall = match cell.size {
                3953.. => 200.0,
                3952 => {
                    seen.set(seen.get() + 1);
                    if seen.get() == 1 { 200.0 } else { 0.0 }
                }
                _ => 0.0,
            };
            rpc_measured(cell, fast(cell.size) + stall)
        });
        let ranges = search(&mut mock, 65483, (3800, 4200)).unwrap();
        assert_eq!(ranges.len(), 1, "{ranges:?}");
        assert_eq!(ranges[0].from, 3953, "{ranges:?}");
    }

    #[test]
    fn a_stall_to_the_end_of_the_range_is_open_ended() {
        let mut mock = Mock::new(|cell: &RpcParams| {
            let stall = if cell.size >= 9001 { 40.0 } else { 0.0 };
            rpc_measured(cell, fast(cell.size) + stall)
        });
        let ranges = search(&mut mock, 65483, (0, 12000)).unwrap();
        assert_eq!(ranges.len(), 1, "{ranges:?}");
        assert_eq!((ranges[0].from, ranges[0].to), (9001, 12000));
        assert!(ranges[0].open_ended);
    }

    #[test]
    fn no_stall_no_range() {
        let mut mock = Mock::new(|cell: &RpcParams| rpc_measured(cell, fast(cell.size)));
        let ranges = search(&mut mock, 1448, (0, 12000)).unwrap();
        assert!(ranges.is_empty(), "{ranges:?}");
    }

    #[test]
    fn a_failed_probe_ends_the_search_with_its_reason() {
        let mut mock = Mock::new(|cell: &RpcParams| {
            if cell.size == 4096 {
                Ok(Measured {
                    placement: "loopback".into(),
                    data: RpcData {
                        params: cell.clone(),
                        result: None,
                    },
                    error: Some("server endpoint died".into()),
                })
            } else {
                rpc_measured(cell, fast(cell.size))
            }
        });
        let err = search(&mut mock, 1448, (0, 12000)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "probe at 4096 bytes failed: server endpoint died"
        );
    }

    #[test]
    fn a_bad_range_is_refused_before_any_probe() {
        let mut mock = Mock::new(|cell: &RpcParams| rpc_measured(cell, 1.0));
        for (lo, hi) in [(5, 5), (10, 2), (0, 60_001)] {
            assert!(matches!(
                search(&mut mock, 1448, (lo, hi)),
                Err(SearchError::Range { .. })
            ));
        }
        assert!(mock.measured.is_empty());
    }

    /// 1989's mechanism as a mock: a request in two writes stalls 40 ms
    /// (Nagle holds the second write until the delayed ACK), unless the
    /// client sets TCP_NODELAY, the server acks at once, or one writev
    /// carries the request.
    fn nagle_meets_delayed_ack(cell: &RpcParams) -> Result<Measured<RpcData>, Interrupted> {
        let two_writes = cell.size == 4096 || cell.size == 8192;
        let fixed =
            cell.client.nodelay || cell.server.quickack || cell.strategy == Strategy::Writev;
        let stall = if two_writes && !fixed && cell.proto == Proto::Tcp {
            40.0
        } else {
            0.0
        };
        rpc_measured(cell, fast(cell.size) + stall)
    }

    #[test]
    fn the_diagnosis_reruns_each_tcp_cliff_and_names_its_fixes() {
        let plan = RpcPlan {
            protos: vec![Proto::Tcp, Proto::Udp],
            ..tcp_plan()
        };
        let mut mock = Mock::new(nagle_meets_delayed_ack);
        let Explained {
            records,
            findings,
            reruns,
        } = measure_and_explain(&mut runner(), &mut mock, &plan).unwrap();
        assert_eq!(records.len(), 16);
        let flagged: Vec<(String, usize)> = findings
            .iter()
            .map(|f| (f.column.clone(), f.size))
            .collect();
        assert_eq!(
            flagged,
            [
                ("TCP local".to_string(), 4096),
                ("TCP local".to_string(), 8192)
            ]
        );
        // Three one-change reruns and one capture per cliff.
        assert_eq!(reruns.len(), 8);
        for finding in &findings {
            let diagnosis = finding.diagnosis.as_ref().expect("diagnosed");
            let fixes: Vec<&str> = diagnosis.fixes.iter().map(|f| f.0.as_str()).collect();
            assert_eq!(
                fixes,
                [
                    "TCP_NODELAY on the client",
                    "TCP_QUICKACK on the server",
                    "the request in one writev"
                ]
            );
            assert!((diagnosis.stall_ms_per_call - 40.0).abs() < 0.1);
        }
        let purposes: Vec<String> = mock.measured[16..]
            .iter()
            .map(|c| String::from(c.purpose.clone()))
            .collect();
        assert_eq!(
            purposes[..4],
            [
                "diagnose: TCP_NODELAY on the client",
                "diagnose: TCP_QUICKACK on the server",
                "diagnose: the request in one writev",
                "diagnose: packet timeline"
            ]
        );
        assert!(
            mock.measured[16..].iter().all(
                |c| c.calls == RERUN_CALLS && c.reps == 1 || c.capture_timeline && c.calls == 3
            )
        );
    }

    #[test]
    fn without_diagnosis_cliffs_are_flagged_and_nothing_reruns() {
        let plan = RpcPlan {
            diagnose: false,
            ..tcp_plan()
        };
        let mut mock = Mock::new(nagle_meets_delayed_ack);
        let Explained {
            findings, reruns, ..
        } = measure_and_explain(&mut runner(), &mut mock, &plan).unwrap();
        assert_eq!(findings.len(), 2);
        assert!(findings.iter().all(|f| f.diagnosis.is_none()));
        assert!(reruns.is_empty());
        assert_eq!(mock.measured.len(), 8);
    }
}
