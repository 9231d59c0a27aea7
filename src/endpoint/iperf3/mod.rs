//! netlab as an iperf3 client: a TCP or UDP test against any stock `iperf3 -s`
//! through iperf3's own control protocol ([`crate::wire::iperf3`]), with
//! `-P`, `-R` and `--bidir`, by time or by bytes. The data streams run on
//! threads of this process, so netlab's end measures what it always does;
//! the server's figures come back in its results.
//!
//! Invariants: the server is trusted for nothing. Every wait on it is
//! bounded (`Iperf3Spec::timeout`) and so is the whole exchange (the
//! test's duration and four timeouts), however its bytes trickle; its
//! states are taken once each, in order ([`Expect`]), so a repeated
//! CREATE_STREAMS opens no more streams than asked and a repeated
//! TEST_RUNNING runs no second test; every stream thread is joined
//! before [`run`] returns.

mod control;
mod streams;
#[cfg(test)]
mod tests;
pub mod types;

use crate::wire::iperf3::{self, Cookie, Expect, Results, State, Step, StreamResult};
use control::Control;
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use streams::{POLL_EVERY, Shared, Stream, join, open_streams, settled, snapshot};
use types::{ClientError, Iperf3Run, Iperf3Spec, LocalStream, Progress, Tick};

/// Runs one test as `spec` says, telling `progress` as it goes. A test
/// that fails once running returns what netlab counted up to then, marked
/// `incomplete`; one that fails before returns the error.
pub fn run(
    spec: &Iperf3Spec,
    progress: &mut dyn FnMut(Progress<'_>),
    stop: &Arc<AtomicBool>,
) -> Result<Iperf3Run, ClientError> {
    let addr = spec.server;
    let socket = TcpStream::connect_timeout(&addr, spec.timeout)
        .map_err(|e| ClientError::Connect(addr, e))?;
    socket
        .set_read_timeout(Some(spec.timeout))
        .and_then(|()| socket.set_nodelay(true))
        .map_err(|e| ClientError::Io(addr, e.to_string()))?;
    // The whole exchange: the setup (the parameters, the streams), the
    // test (by time, or at most that long by bytes) with the wait for its
    // end, and the results, each step at most `timeout`.
    let allowance = spec.duration + spec.timeout * 4;
    let mut control = Control {
        socket,
        addr,
        timeout: spec.timeout,
        deadline: Instant::now() + allowance,
        allowance,
        stop: stop.clone(),
    };
    let cookie = Cookie::new().map_err(|e| ClientError::Io(addr, e.to_string()))?;
    control
        .socket
        .write_all(cookie.as_bytes())
        .map_err(control.io("writing the cookie"))?;
    let params = spec.params();
    let usage0 = crate::measure::rusage::ProcessUsage::now();
    let shared = Shared::default();
    let (mut streams, mut connected, mut ticks) = (Vec::new(), Vec::new(), Vec::new());
    let (mut running_since, mut ended_after) = (None, None);
    let mut first = true;
    let mut expect = Expect::FIRST;
    let outcome: Result<_, ClientError> = loop {
        let said = match control.state(first) {
            Ok(state) => state,
            Err(e) => break Err(e),
        };
        first = false;
        // Each state once, in order: a second CREATE_STREAMS opens no
        // more streams, a second TEST_RUNNING runs no second test.
        let state = match expect.step(said) {
            Ok(Step::Act(state, next)) => {
                expect = next.unwrap_or(expect);
                state
            }
            Ok(Step::Refusal(state)) => break Err(control.refused(state)),
            Err(e) => break Err(ClientError::Protocol(addr, e)),
        };
        match state {
            State::ParamExchange => {
                if let Err(e) = control.send_frame(&iperf3::frame(&params), "the parameters") {
                    break Err(e);
                }
            }
            State::CreateStreams => {
                if let Err(e) = open_streams(spec, &cookie, &shared, &mut streams, &mut connected) {
                    break Err(e);
                }
            }
            State::TestStart => progress(Progress::Started {
                connected: &connected,
                cookie: cookie.as_str(),
            }),
            State::TestRunning => {
                let since = Instant::now();
                running_since = Some(since);
                let (ended, early) = run_the_test(
                    spec,
                    &mut control,
                    &streams,
                    &shared,
                    since,
                    stop,
                    progress,
                    &mut ticks,
                );
                ended_after = Some(ended);
                // Ended in time: the client says so.
                if let Err(e) = early.map_or_else(|| control.send_state(State::TestEnd), Err) {
                    break Err(e);
                }
            }
            State::ExchangeResults => {
                break exchange_results(
                    &mut control,
                    &streams,
                    ended_after.unwrap_or(0.0),
                    &usage0,
                    running_since,
                );
            }
            other => break Err(control.refused(other)),
        }
    };
    let outcome = outcome.and_then(|done| control.display_results(expect).map(|()| done));
    // A test that failed once running keeps netlab's counts up to then.
    let partial = match (&outcome, running_since) {
        (Err(_), Some(since)) => {
            let seconds =
                ended_after.unwrap_or_else(|| since.elapsed().as_secs_f64().min(f64::MAX));
            Some((
                settled(&streams, seconds),
                seconds,
                crate::measure::rusage::ProcessUsage::now().since(&usage0),
            ))
        }
        _ => None,
    };
    // Every stream closes now, whatever happened.
    shared.stop.store(true, Ordering::Relaxed);
    shared.finished.store(true, Ordering::Relaxed);
    let joined = join(streams);
    let (counted, client, server, seconds, usage, incomplete) = match (outcome, partial) {
        (Ok((counted, client, server, seconds, usage)), _) => {
            joined.map_err(|e| ClientError::Io(addr, format!("a data stream: {e}")))?;
            let expected = counted.len();
            if server.streams.len() != expected {
                return Err(ClientError::OldServer(
                    addr,
                    format!(
                        "the server reported {} stream(s) for the {expected} of this test: an iperf3 before 3.7 ignores --bidir",
                        server.streams.len()
                    ),
                ));
            }
            (counted, client, Some(server), seconds, usage, None)
        }
        (Err(e), Some((counted, seconds, usage))) => {
            let client = client_results(&counted, &usage, seconds.max(1e-9));
            (counted, client, None, seconds, usage, Some(e.to_string()))
        }
        (Err(e), None) => return Err(e),
    };
    Ok(Iperf3Run {
        params,
        cookie: cookie.as_str().into(),
        connected,
        streams: counted,
        intervals: ticks,
        client,
        server,
        seconds,
        usage,
        incomplete,
    })
}

/// The results' exchange: netlab's counts settled over the `seconds` the
/// test ran and its CPU since `usage0` sent, the server's read.
fn exchange_results(
    control: &mut Control,
    streams: &[Stream],
    seconds: f64,
    usage0: &crate::measure::rusage::ProcessUsage,
    running_since: Option<Instant>,
) -> Result<Exchanged, ClientError> {
    let counted = settled(streams, seconds);
    let usage = crate::measure::rusage::ProcessUsage::now().since(usage0);
    let wall = running_since.map_or(1.0, |s| s.elapsed().as_secs_f64().max(1e-9));
    let client = client_results(&counted, &usage, wall);
    control.send_frame(&iperf3::frame(&client), "netlab's results")?;
    let server = control.read_results()?;
    Ok((counted, client, server, seconds, usage))
}

/// A whole exchange: netlab's streams and results, the server's, the
/// test's seconds and netlab's CPU over it.
type Exchanged = (
    Vec<LocalStream>,
    Results,
    Results,
    f64,
    crate::measure::rusage::ProcessUsage,
);

/// The test while it runs, from `since`: until its time or its bytes (the
/// client ends it), the user's stop, or the server or a stream ending it
/// early; each interval's counts go to `progress` and `ticks`. Every
/// stream is told to stop. Returns the seconds it ran and why it ended
/// early, if it did.
#[allow(clippy::too_many_arguments)]
fn run_the_test(
    spec: &Iperf3Spec,
    control: &mut Control,
    streams: &[Stream],
    shared: &Shared,
    since: Instant,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress<'_>),
    ticks: &mut Vec<Tick>,
) -> (f64, Option<ClientError>) {
    let deadline = since + spec.duration;
    let mut tick_from = 0.0;
    let mut last_poll = since;
    loop {
        let done = match spec.bytes {
            Some(n) => shared.total.load(Ordering::Relaxed) >= n,
            None => Instant::now() >= deadline,
        };
        if done || Instant::now() >= deadline + spec.timeout {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            shared.stop.store(true, Ordering::Relaxed);
            return (
                since.elapsed().as_secs_f64(),
                Some(ClientError::Interrupted(control.addr)),
            );
        }
        // The server may end the test early (a refusal on the control
        // connection), or a data stream may fail: looked at every 100 ms,
        // a system call each time, so netlab's own CPU on the measured
        // end stays small.
        let early = if last_poll.elapsed() >= POLL_EVERY {
            last_poll = Instant::now();
            ended_early(control, streams)
        } else {
            None
        };
        if let Some(e) = early {
            shared.stop.store(true, Ordering::Relaxed);
            return (since.elapsed().as_secs_f64(), Some(e));
        }
        let at = since.elapsed().as_secs_f64();
        if let Some(every) = spec.interval
            && at - tick_from >= every.as_secs_f64()
        {
            let tick = Tick {
                start_s: tick_from,
                end_s: at,
                streams: snapshot(streams, at, true),
            };
            progress(Progress::Interval(&tick));
            ticks.push(tick);
            tick_from = at;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ended = since.elapsed().as_secs_f64();
    // iperf3's last, short interval: shown when it is at least a tenth of one.
    if let Some(every) = spec.interval
        && ended - tick_from >= every.as_secs_f64() / 10.0
    {
        let tick = Tick {
            start_s: tick_from,
            end_s: ended,
            streams: snapshot(streams, ended, true),
        };
        progress(Progress::Interval(&tick));
        ticks.push(tick);
    }
    shared.stop.store(true, Ordering::Relaxed);
    (ended, None)
}

/// Why the test ended before its time, if it did: the server said so on
/// the control connection (a refusal state), closed it, or a data stream
/// failed (the server's word, when it follows within 200 ms, is the
/// reason given).
fn ended_early(control: &mut Control, streams: &[Stream]) -> Option<ClientError> {
    match control.poll_state() {
        Ok(Some(state)) => Some(control.refused(state)),
        Err(e) => Some(e),
        Ok(None) => {
            let id = streams.iter().find(|s| s.thread.is_finished())?.id;
            std::thread::sleep(Duration::from_millis(200));
            Some(match control.poll_state() {
                Ok(Some(state)) => control.refused(state),
                Ok(None) => ClientError::Io(
                    control.addr,
                    format!("data stream {id} ended before the test did"),
                ),
                Err(e) => e,
            })
        }
    }
}

/// netlab's results as iperf3's client reports them: its CPU over the
/// test (percent of one CPU, all threads), and each stream's count.
fn client_results(
    counted: &[LocalStream],
    usage: &crate::measure::rusage::ProcessUsage,
    wall_s: f64,
) -> Results {
    Results {
        cpu_util_total: 100.0 * usage.cpu_s() / wall_s,
        cpu_util_user: 100.0 * usage.user_s / wall_s,
        cpu_util_system: 100.0 * usage.sys_s / wall_s,
        // As iperf3: 1 when the sender read its retransmits (TCP_INFO), 0
        // when it could not, -1 from a receiver.
        sender_has_retransmits: match (
            counted.iter().any(|s| s.sender),
            counted.iter().any(|s| s.sender && s.tcp_info.is_some()),
        ) {
            (false, _) => -1,
            (true, true) => 1,
            (true, false) => 0,
        },
        congestion_used: counted
            .iter()
            .find_map(|s| s.thread.as_ref()?.congestion_control.clone()),
        streams: counted
            .iter()
            .map(|s| StreamResult {
                id: s.id,
                bytes: s.bytes,
                retransmits: match (&s.tcp_info, s.sender) {
                    (Some(info), true) => i64::from(info.total_retrans),
                    _ => -1,
                },
                jitter: s.jitter_s,
                errors: s.lost,
                packets: s.packets as i64,
                start_time: 0.0,
                end_time: s.seconds,
            })
            .collect(),
        server_output_text: None,
    }
}
