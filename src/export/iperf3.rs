//! iperf3's JSON document (`-J`) and event lines (`--json-stream`) for a
//! test netlab ran against an iperf3 server: `start`, `intervals[]` (each
//! with `streams` and `sum`) and `end` (`streams`, `sum_sent`,
//! `sum_received`, `cpu_utilization_percent`), the fields and units of
//! iperf 3.12's `iperf_api.c` (bytes, bits a second, seconds, RTT in µs,
//! congestion window in bytes, UDP jitter in ms). A reader of iperf3's
//! output (iperf3_exporter, k8s-netperf, dashboards) reads netlab's the
//! same way; netlab's own figures (the limits verdict, the host's facts)
//! go under one key of their own, `netlab`.
//!
//! Invariant: a figure the server did not report (a test that ended
//! early) is left out, never written as zero.

use crate::endpoint::iperf3::types::{Connected, Iperf3Run, Iperf3Spec, LocalStream, Tick};

/// The test as iperf3's document describes it: against an iperf3 server
/// ([`Test::of`]), or netlab's own run between its endpoints
/// ([`super::iperf3_native`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    /// UDP at this rate a stream, else TCP.
    pub udp_bps: Option<u64>,
    /// Streams each way.
    pub parallel: u32,
    /// The far end sends.
    pub reverse: bool,
    pub bidir: bool,
    /// Bytes a write (TCP) or a datagram (UDP).
    pub len: usize,
    /// By time (seconds; 0 by bytes), or by bytes (0 by time).
    pub duration_s: u64,
    pub bytes: u64,
    /// What the client connected to.
    pub host: String,
    pub port: u16,
}

impl Test {
    /// A test against an iperf3 server.
    pub fn of(spec: &Iperf3Spec) -> Test {
        let params = spec.params();
        Test {
            udp_bps: spec.udp_bps,
            parallel: spec.parallel,
            reverse: spec.reverse,
            bidir: spec.bidir,
            len: spec.len,
            duration_s: params.time,
            bytes: params.num,
            host: spec.server.ip().to_string(),
            port: spec.server.port(),
        }
    }
}
use super::{Export, ExportError};
use crate::wire::iperf3::{Results, StreamResult};
use serde_json::{Map, Value, json};

fn bps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

fn percent(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}

/// `uname -a`'s first fields, as iperf3's `system_info`.
fn system_info() -> String {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "Linux {} {} {} {}",
        read("hostname"),
        read("osrelease"),
        read("version"),
        std::env::consts::ARCH
    )
}

/// The descriptor iperf3 would name a stream by.
fn socket_of(connected: &[Connected], id: i64) -> i64 {
    connected
        .iter()
        .find(|c| c.id == id)
        .map_or(-1, |c| i64::from(c.socket))
}

/// `start`: the connections, the test's parameters and when it began.
pub fn start(spec: &Test, connected: &[Connected], cookie: &str) -> Value {
    let now = std::time::SystemTime::now();
    let udp = spec.udp_bps.is_some();
    let first = connected.first();
    let mut start = json!({
        "connected": connected.iter().map(|c| json!({
            "socket": c.socket,
            "local_host": c.local.map_or(String::new(), |a| a.ip().to_string()),
            "local_port": c.local.map_or(0, |a| a.port()),
            "remote_host": spec.host,
            "remote_port": spec.port,
        })).collect::<Vec<_>>(),
        "version": format!("netlab {} (iperf3's protocol, as iperf 3.12)", env!("CARGO_PKG_VERSION")),
        "system_info": system_info(),
        "timestamp": {
            "time": httpdate::fmt_http_date(now),
            "timesecs": now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        },
        "connecting_to": {"host": spec.host, "port": spec.port},
        "cookie": cookie,
        "target_bitrate": spec.udp_bps.unwrap_or(0),
        "sock_bufsize": 0,
        "sndbuf_actual": first.and_then(|c| c.sndbuf).unwrap_or(0),
        "rcvbuf_actual": first.and_then(|c| c.rcvbuf).unwrap_or(0),
        "test_start": {
            "protocol": if udp { "UDP" } else { "TCP" },
            "num_streams": spec.parallel,
            "blksize": spec.len,
            "omit": 0,
            "duration": spec.duration_s,
            "bytes": spec.bytes,
            "blocks": 0,
            "reverse": i32::from(spec.reverse),
            "tos": 0,
            "target_bitrate": spec.udp_bps.unwrap_or(0),
        },
    });
    if !udp {
        start["tcp_mss_default"] = json!(first.and_then(|c| c.mss).unwrap_or(0));
    }
    start
}

/// A stream's TCP figures at an interval's end, in iperf3's units: the
/// congestion window and the peer's window in bytes, RTT and its
/// variation in µs.
fn tcp_interval(entry: &mut Map<String, Value>, now: &LocalStream, before: Option<&LocalStream>) {
    let Some(info) = &now.tcp_info else { return };
    let retrans_before = before
        .and_then(|b| b.tcp_info.as_ref())
        .map_or(0, |i| i.total_retrans);
    entry.insert(
        "retransmits".into(),
        json!(info.total_retrans.saturating_sub(retrans_before)),
    );
    entry.insert(
        "snd_cwnd".into(),
        json!(u64::from(info.snd_cwnd) * u64::from(info.snd_mss)),
    );
    entry.insert("snd_wnd".into(), json!(info.snd_wnd.unwrap_or(0)));
    entry.insert("rtt".into(), json!(info.rtt_us));
    entry.insert("rttvar".into(), json!(info.rttvar_us));
    entry.insert("pmtu".into(), json!(info.pmtu));
}

/// The figures of a UDP receiver over an interval (or the whole test).
fn udp_received(entry: &mut Map<String, Value>, jitter_s: f64, lost: i64, packets: i64) {
    entry.insert("jitter_ms".into(), json!(jitter_s * 1e3));
    entry.insert("lost_packets".into(), json!(lost));
    entry.insert("packets".into(), json!(packets));
    entry.insert("lost_percent".into(), json!(percent(lost, packets)));
}

/// One interval: each stream's bytes and rate over it (differences of
/// `tick` and the tick before), the sender's TCP_INFO at its end, and the
/// sums, one each way under `--bidir` (`sum_bidir_reverse`: the server's
/// direction).
pub fn interval(spec: &Test, connected: &[Connected], before: Option<&Tick>, tick: &Tick) -> Value {
    let udp = spec.udp_bps.is_some();
    let seconds = tick.end_s - tick.start_s;
    let mut streams = Vec::new();
    // Sums by direction: netlab sending, then receiving.
    let mut sums: [Option<Map<String, Value>>; 2] = [None, None];
    let mut totals = [(0u64, 0u32, 0i64, 0i64, 0.0f64, 0u32); 2];
    for now in &tick.streams {
        let previous = before.and_then(|b| b.streams.iter().find(|s| s.id == now.id));
        let bytes = now.bytes - previous.map_or(0, |p| p.bytes.min(now.bytes));
        let packets = now.packets as i64 - previous.map_or(0, |p| p.packets as i64);
        let lost = now.lost - previous.map_or(0, |p| p.lost);
        let mut entry = Map::new();
        entry.insert("socket".into(), json!(socket_of(connected, now.id)));
        entry.insert("start".into(), json!(tick.start_s));
        entry.insert("end".into(), json!(tick.end_s));
        entry.insert("seconds".into(), json!(seconds));
        entry.insert("bytes".into(), json!(bytes));
        entry.insert("bits_per_second".into(), json!(bps(bytes, seconds)));
        let way = usize::from(!now.sender);
        let total = &mut totals[way];
        total.0 += bytes;
        total.5 += 1;
        if udp {
            if now.sender {
                entry.insert("packets".into(), json!(packets));
            } else {
                udp_received(&mut entry, now.jitter_s, lost, packets);
            }
            total.2 += packets;
            total.3 += lost;
            total.4 += now.jitter_s;
        } else if now.sender {
            tcp_interval(&mut entry, now, previous);
            total.1 += entry["retransmits"].as_u64().unwrap_or(0) as u32;
        }
        entry.insert("omitted".into(), json!(false));
        entry.insert("sender".into(), json!(now.sender));
        streams.push(Value::Object(entry));
    }
    for (way, sum) in sums.iter_mut().enumerate() {
        let (bytes, retransmits, packets, lost, jitter, n) = totals[way];
        if n == 0 {
            continue;
        }
        let sender = way == 0;
        let mut entry = Map::new();
        entry.insert("start".into(), json!(tick.start_s));
        entry.insert("end".into(), json!(tick.end_s));
        entry.insert("seconds".into(), json!(seconds));
        entry.insert("bytes".into(), json!(bytes));
        entry.insert("bits_per_second".into(), json!(bps(bytes, seconds)));
        if udp {
            if sender {
                entry.insert("packets".into(), json!(packets));
            } else {
                udp_received(&mut entry, jitter / f64::from(n), lost, packets);
            }
        } else if sender {
            entry.insert("retransmits".into(), json!(retransmits));
        }
        entry.insert("omitted".into(), json!(false));
        entry.insert("sender".into(), json!(sender));
        *sum = Some(entry);
    }
    let mut doc = json!({ "streams": streams });
    // The test's own direction is `sum`; under --bidir the server's is
    // `sum_bidir_reverse`.
    let [sent, received] = sums;
    match (spec.bidir, sent, received) {
        (true, sent, received) => {
            if let Some(s) = sent {
                doc["sum"] = Value::Object(s);
            }
            if let Some(r) = received {
                doc["sum_bidir_reverse"] = Value::Object(r);
            }
        }
        (false, Some(s), _) | (false, None, Some(s)) => doc["sum"] = Value::Object(s),
        (false, None, None) => {}
    }
    doc
}

/// RTT (µs) and congestion window (bytes) over a sending stream's
/// intervals, as iperf3 keeps them: max, min and mean RTT, the largest
/// windows.
#[derive(Default)]
struct TcpExtremes {
    max_snd_cwnd: u64,
    max_snd_wnd: u32,
    max_rtt: u32,
    min_rtt: u32,
    rtt_sum: u64,
    samples: u64,
}

impl TcpExtremes {
    fn of(id: i64, ticks: &[Tick], last: Option<&crate::measure::tcpinfo::TcpInfo>) -> Self {
        let mut x = TcpExtremes::default();
        let infos = ticks
            .iter()
            .filter_map(|t| t.streams.iter().find(|s| s.id == id)?.tcp_info.as_ref())
            .chain(last);
        for info in infos {
            x.max_snd_cwnd = x
                .max_snd_cwnd
                .max(u64::from(info.snd_cwnd) * u64::from(info.snd_mss));
            x.max_snd_wnd = x.max_snd_wnd.max(info.snd_wnd.unwrap_or(0));
            x.max_rtt = x.max_rtt.max(info.rtt_us);
            x.min_rtt = if x.samples == 0 {
                info.rtt_us
            } else {
                x.min_rtt.min(info.rtt_us)
            };
            x.rtt_sum += u64::from(info.rtt_us);
            x.samples += 1;
        }
        x
    }

    fn insert(&self, entry: &mut Map<String, Value>) {
        entry.insert("max_snd_cwnd".into(), json!(self.max_snd_cwnd));
        entry.insert("max_snd_wnd".into(), json!(self.max_snd_wnd));
        entry.insert("max_rtt".into(), json!(self.max_rtt));
        entry.insert("min_rtt".into(), json!(self.min_rtt));
        entry.insert(
            "mean_rtt".into(),
            json!(self.rtt_sum.checked_div(self.samples).unwrap_or(0)),
        );
    }
}

/// One end's account of a stream over the test, the fields common to
/// every entry of `end`.
fn account(socket: i64, end: f64, seconds: f64, bytes: u64, sender: bool) -> Map<String, Value> {
    let mut entry = Map::new();
    entry.insert("socket".into(), json!(socket));
    entry.insert("start".into(), json!(0));
    entry.insert("end".into(), json!(end));
    entry.insert("seconds".into(), json!(seconds));
    entry.insert("bytes".into(), json!(bytes));
    entry.insert("bits_per_second".into(), json!(bps(bytes, seconds)));
    entry.insert("sender".into(), json!(sender));
    entry
}

/// A direction's sums: what its sender sent and its receiver received.
#[derive(Default)]
struct Sums {
    streams: u32,
    sent: u64,
    sent_s: f64,
    received: u64,
    received_s: f64,
    retransmits: Option<i64>,
    packets: i64,
    lost: i64,
    jitter_s: f64,
    peer_missing: bool,
}

/// One UDP stream's entry of `end` (the receiver's account of loss and
/// jitter, the sender's of datagrams sent), added to its direction's sums.
fn udp_stream(
    local: &LocalStream,
    peer: Option<&StreamResult>,
    socket: i64,
    sums: &mut Sums,
) -> Value {
    // The receiver's account of loss and jitter; the sender's of
    // datagrams sent.
    let (jitter_s, lost, packets) = match (local.sender, peer) {
        (true, Some(p)) => (p.jitter, p.errors, local.packets as i64),
        (true, None) => (0.0, 0, local.packets as i64),
        (false, _) => (local.jitter_s, local.lost, local.packets as i64),
    };
    sums.packets += packets;
    sums.lost += lost;
    sums.jitter_s += jitter_s;
    let mut entry = account(
        socket,
        local.seconds,
        local.seconds,
        local.bytes,
        local.sender,
    );
    udp_received(&mut entry, jitter_s, lost, packets);
    entry.insert("out_of_order".into(), json!(0));
    json!({ "udp": entry })
}

/// `end`: each stream's sender and receiver, the sums each way, the CPU
/// at both ends, and the congestion controls.
pub fn end(spec: &Test, run: &Iperf3Run) -> Value {
    let udp = spec.udp_bps.is_some();
    let server = run.server.as_ref();
    let mut streams = Vec::new();
    // Client to server, then server to client.
    let mut sums = [Sums::default(), Sums::default()];
    for local in &run.streams {
        // The server's account of the stream (none when the test ended
        // early).
        let peer: Option<&StreamResult> =
            server.and_then(|s| s.streams.iter().find(|p| p.id == local.id));
        let socket = socket_of(&run.connected, local.id);
        let sums = &mut sums[usize::from(!local.sender)];
        sums.streams += 1;
        if sums.streams == 1 && !udp {
            sums.retransmits = Some(0);
        }
        let peer_end = peer.map_or(local.seconds, |p| p.end_time);
        // The sender's and the receiver's bytes, whichever end each is.
        let (sent, received) = if local.sender {
            (Some(local.bytes), peer.map(|p| p.bytes))
        } else {
            (peer.map(|p| p.bytes), Some(local.bytes))
        };
        sums.sent += sent.unwrap_or(0);
        sums.received += received.unwrap_or(0);
        sums.sent_s = sums.sent_s.max(local.seconds);
        sums.received_s = sums.received_s.max(if local.sender {
            peer_end
        } else {
            local.seconds
        });
        sums.peer_missing |= peer.is_none();
        if udp {
            streams.push(udp_stream(local, peer, socket, sums));
            continue;
        }
        let retransmits = if local.sender {
            local.tcp_info.as_ref().map(|i| i64::from(i.total_retrans))
        } else {
            peer.map(|p| p.retransmits).filter(|&r| r >= 0)
        };
        if let (Some(sum), Some(r)) = (sums.retransmits.as_mut(), retransmits) {
            *sum += r;
        }
        let mut stream = Map::new();
        if let Some(sent) = sent {
            let mut entry = account(socket, local.seconds, local.seconds, sent, local.sender);
            entry.insert("retransmits".into(), json!(retransmits.unwrap_or(0)));
            // iperf3's client keeps RTT and windows only for the streams
            // it sends on (a receiving stream's are 0, as iperf3's).
            if local.sender {
                TcpExtremes::of(local.id, &run.intervals, local.tcp_info.as_ref())
                    .insert(&mut entry);
            } else {
                TcpExtremes::default().insert(&mut entry);
            }
            stream.insert("sender".into(), Value::Object(entry));
        }
        if let Some(received) = received {
            let mut entry = account(
                socket,
                if local.sender {
                    peer_end
                } else {
                    local.seconds
                },
                local.seconds,
                received,
                local.sender,
            );
            // iperf3 rates the receiver over its own time.
            let over = if local.sender {
                peer_end
            } else {
                local.seconds
            };
            entry.insert("bits_per_second".into(), json!(bps(received, over)));
            stream.insert("receiver".into(), Value::Object(entry));
        }
        streams.push(Value::Object(stream));
    }
    let mut end = Map::new();
    end.insert("streams".into(), Value::Array(streams));
    write_sums(&mut end, spec, &sums);
    write_cpu_and_congestion(&mut end, spec, run);
    Value::Object(end)
}

/// `end`'s sums each way (`sum_sent`, `sum_received`, and with `--bidir`
/// the reverse pair; UDP's `sum` too), client to server first. A sum the
/// server's results were needed for and did not give is left out.
fn write_sums(end: &mut Map<String, Value>, spec: &Test, sums: &[Sums; 2]) {
    let udp = spec.udp_bps.is_some();
    let names = [
        ("sum_sent", "sum_received"),
        ("sum_sent_bidir_reverse", "sum_received_bidir_reverse"),
    ];
    for (way, sums) in sums.iter().enumerate() {
        if sums.streams == 0 {
            continue;
        }
        // Without --bidir the test has one direction, named `sum_sent`
        // and `sum_received` whichever end sends.
        let (sent_name, received_name) = if spec.bidir { names[way] } else { names[0] };
        let client_sends = way == 0;
        let mut sent = account(-1, sums.sent_s, sums.sent_s, sums.sent, client_sends);
        sent.remove("socket");
        let mut received = account(
            -1,
            sums.received_s,
            sums.received_s,
            sums.received,
            client_sends,
        );
        received.remove("socket");
        if udp {
            let jitter = sums.jitter_s / f64::from(sums.streams);
            udp_received(&mut sent, 0.0, sums.lost, sums.packets);
            udp_received(&mut received, jitter, sums.lost, sums.packets);
            // iperf3's UDP sums say which end counted (`sender`: netlab's
            // datagrams, counted at the server).
            received.insert("sender".into(), json!(false));
            sent.insert("sender".into(), json!(true));
            if !spec.bidir && way == usize::from(spec.reverse) {
                let mut sum = received.clone();
                sum.insert("sender".into(), json!(client_sends));
                end.insert("sum".into(), Value::Object(sum));
            }
        } else if let Some(r) = sums.retransmits {
            sent.insert("retransmits".into(), json!(r));
        }
        if !sums.peer_missing || client_sends {
            end.insert(sent_name.into(), Value::Object(sent));
        }
        if !sums.peer_missing || !client_sends {
            end.insert(received_name.into(), Value::Object(received));
        }
    }
}

/// `end`'s CPU at both ends (the server's only when it reported) and, for
/// TCP, the congestion control each end used.
fn write_cpu_and_congestion(end: &mut Map<String, Value>, spec: &Test, run: &Iperf3Run) {
    let udp = spec.udp_bps.is_some();
    let server = run.server.as_ref();
    let zero = Results::default();
    let remote = server.unwrap_or(&zero);
    let mut cpu = json!({
        "host_total": run.client.cpu_util_total,
        "host_user": run.client.cpu_util_user,
        "host_system": run.client.cpu_util_system,
    });
    if server.is_some() {
        cpu["remote_total"] = json!(remote.cpu_util_total);
        cpu["remote_user"] = json!(remote.cpu_util_user);
        cpu["remote_system"] = json!(remote.cpu_util_system);
    }
    end.insert("cpu_utilization_percent".into(), cpu);
    if !udp {
        let ours = run.client.congestion_used.clone();
        let theirs = server.and_then(|s| s.congestion_used.clone());
        let (sender, receiver) = if spec.reverse {
            (theirs, ours)
        } else {
            (ours, theirs)
        };
        if let Some(cc) = sender {
            end.insert("sender_tcp_congestion".into(), json!(cc));
        }
        if let Some(cc) = receiver {
            end.insert("receiver_tcp_congestion".into(), json!(cc));
        }
    }
}

/// The whole document: iperf3's three parts, `error` as iperf3 writes it
/// when the test did not finish, and netlab's own figures under `netlab`.
pub fn document(
    start: Value,
    intervals: Vec<Value>,
    end: Value,
    run: &Iperf3Run,
    netlab: Value,
) -> Value {
    let mut doc = json!({
        "start": start,
        "intervals": intervals,
        "end": end,
        "netlab": netlab,
    });
    if let Some(why) = &run.incomplete {
        doc["error"] = json!(format!("{why} (incomplete: netlab's figures up to then)"));
    }
    doc
}

/// iperf3's `-J` document as it goes out: pretty JSON and a line break,
/// as iperf3 prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Document(pub Value);

impl Export for Document {
    const FORMAT: &'static str = "iperf3 JSON";
    const MEDIA_TYPE: &'static str = "application/json";

    fn render(&self) -> Result<String, ExportError> {
        let text = serde_json::to_string_pretty(&self.0).map_err(|e| ExportError::Render {
            format: Self::FORMAT,
            reason: e.to_string(),
        })?;
        Ok(text + "\n")
    }
}

/// One of iperf3's `--json-stream` lines: `{"event":NAME,"data":DATA}`.
pub fn event(name: &str, data: &Value) -> String {
    // iperf3's order: the event's name, then its data.
    format!("{{\"event\":{},\"data\":{data}}}", json!(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::tcpinfo::TcpInfo;
    use std::collections::BTreeSet;
    use std::time::Duration;

    /// Every key path in `value` (array elements as `[]`).
    fn paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let path = format!("{prefix}.{k}");
                    out.insert(path.clone());
                    paths(v, &path, out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    paths(item, &format!("{prefix}[]"), out);
                }
            }
            _ => {}
        }
    }

    fn spec(udp: bool, reverse: bool, bidir: bool) -> Iperf3Spec {
        Iperf3Spec {
            server: "10.0.0.2:5201".parse().unwrap(),
            parallel: 1,
            reverse,
            bidir,
            duration: Duration::from_secs(2),
            bytes: None,
            len: if udp { 1460 } else { 131_072 },
            udp_bps: udp.then_some(10_000_000),
            timeout: Duration::from_secs(1),
            interval: Some(Duration::from_secs(1)),
        }
    }

    fn local(id: i64, sender: bool, udp: bool, bytes: u64, seconds: f64) -> LocalStream {
        LocalStream {
            id,
            sender,
            bytes,
            seconds,
            packets: if udp { bytes / 1460 } else { 0 },
            lost: 0,
            jitter_s: 0.0,
            tcp_info: (!udp && sender).then(|| TcpInfo {
                rtt_us: 2000,
                rttvar_us: 500,
                snd_cwnd: 40,
                snd_mss: 1448,
                total_retrans: 3,
                ..Default::default()
            }),
            thread: None,
        }
    }

    /// A run of `streams` (id, netlab sends) as the endpoint returns it.
    fn run(spec: &Iperf3Spec, streams: &[(i64, bool)], server: bool) -> Iperf3Run {
        let udp = spec.udp_bps.is_some();
        let at = |s: f64| -> Vec<LocalStream> {
            streams
                .iter()
                .map(|&(id, sender)| local(id, sender, udp, (s * 1e6) as u64, s))
                .collect()
        };
        let results = |sender: bool| Results {
            cpu_util_total: 10.0,
            cpu_util_user: 1.0,
            cpu_util_system: 9.0,
            sender_has_retransmits: if sender { 1 } else { -1 },
            congestion_used: (!udp).then(|| "cubic".into()),
            streams: streams
                .iter()
                .map(|&(id, netlab_sends)| StreamResult {
                    id,
                    bytes: 1_900_000,
                    retransmits: if netlab_sends { -1 } else { 5 },
                    jitter: 0.0001,
                    errors: 2,
                    packets: 1300,
                    start_time: 0.0,
                    end_time: 2.0,
                })
                .collect(),
            server_output_text: None,
        };
        Iperf3Run {
            params: spec.params(),
            cookie: "abc".into(),
            connected: streams
                .iter()
                .map(|&(id, sender)| Connected {
                    id,
                    socket: 5 + id as i32,
                    local: Some("10.0.0.1:40000".parse().unwrap()),
                    sender,
                    mss: Some(1448),
                    sndbuf: Some(16384),
                    rcvbuf: Some(131072),
                })
                .collect(),
            streams: at(2.0),
            intervals: vec![
                Tick {
                    start_s: 0.0,
                    end_s: 1.0,
                    streams: at(1.0),
                },
                Tick {
                    start_s: 1.0,
                    end_s: 2.0,
                    streams: at(2.0),
                },
            ],
            client: results(true),
            server: server.then(|| results(false)),
            seconds: 2.0,
            usage: Default::default(),
            incomplete: (!server).then(|| "the server closed the control connection".into()),
        }
    }

    fn netlab_doc(spec: &Iperf3Spec, run: &Iperf3Run) -> Value {
        let spec = &Test::of(spec);
        let intervals = run
            .intervals
            .iter()
            .enumerate()
            .map(|(i, t)| {
                interval(
                    spec,
                    &run.connected,
                    i.checked_sub(1).map(|j| &run.intervals[j]),
                    t,
                )
            })
            .collect();
        document(
            start(spec, &run.connected, &run.cookie),
            intervals,
            end(spec, run),
            run,
            json!({}),
        )
    }

    /// iperf 3.12's own client on loopback (`iperf3 -c ... --json`),
    /// kept as it printed them.
    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/iperf3-3.12/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).expect("a fixture")).expect("JSON")
    }

    #[test]
    fn every_field_iperf3_writes_is_in_netlab_s_document() {
        for (name, spec, streams) in [
            ("tcp", spec(false, false, false), vec![(1, true), (3, true)]),
            ("tcp-reverse", spec(false, true, false), vec![(1, false)]),
            (
                "tcp-bidir",
                spec(false, false, true),
                vec![(1, true), (3, false)],
            ),
            ("udp", spec(true, false, false), vec![(1, true)]),
            ("udp-reverse", spec(true, true, false), vec![(1, false)]),
        ] {
            let mut theirs = BTreeSet::new();
            paths(&fixture(name), "", &mut theirs);
            assert!(theirs.len() > 60, "{name}: {theirs:?}");
            let mut ours = BTreeSet::new();
            paths(
                &netlab_doc(&spec, &run(&spec, &streams, true)),
                "",
                &mut ours,
            );
            let missing: Vec<_> = theirs.difference(&ours).collect();
            assert!(missing.is_empty(), "{name}: netlab lacks {missing:?}");
            let extra: Vec<_> = ours
                .difference(&theirs)
                .filter(|p| !p.starts_with(".netlab"))
                .collect();
            assert!(
                extra.is_empty(),
                "{name}: netlab adds {extra:?} outside `netlab`"
            );
        }
    }

    #[test]
    fn the_sums_hold_each_end_s_own_count_in_iperf3_s_units() {
        let spec = spec(false, false, false);
        let doc = netlab_doc(&spec, &run(&spec, &[(1, true), (3, true)], true));
        let end = &doc["end"];
        // netlab sent 2 MB a stream, the server received 1.9 MB a stream.
        assert_eq!(end["sum_sent"]["bytes"], 4_000_000);
        assert_eq!(end["sum_received"]["bytes"], 3_800_000);
        assert_eq!(end["sum_sent"]["bits_per_second"], 16e6);
        assert_eq!(end["sum_sent"]["retransmits"], 6);
        assert_eq!(end["cpu_utilization_percent"]["remote_total"], 10.0);
        // The congestion window in bytes, RTT in µs.
        let first = &doc["intervals"][0]["streams"][0];
        assert_eq!(first["snd_cwnd"], 40 * 1448);
        assert_eq!(first["rtt"], 2000);
        assert_eq!(end["streams"][0]["sender"]["max_rtt"], 2000);
        // The second interval's bytes are its own, not the running total.
        assert_eq!(doc["intervals"][1]["sum"]["bytes"], 2_000_000);
    }

    #[test]
    fn a_test_that_ended_early_keeps_netlab_s_figures_and_says_so() {
        let spec = spec(false, false, false);
        let doc = netlab_doc(&spec, &run(&spec, &[(1, true)], false));
        assert!(
            doc["error"].as_str().unwrap().contains("incomplete"),
            "{doc}"
        );
        assert_eq!(doc["end"]["sum_sent"]["bytes"], 2_000_000);
        // What only the server could say is absent, not zero.
        assert!(doc["end"].get("sum_received").is_none(), "{doc}");
        assert!(
            doc["end"]["cpu_utilization_percent"]
                .get("remote_total")
                .is_none()
        );
        assert!(doc["end"]["streams"][0].get("receiver").is_none());
    }

    #[test]
    fn udp_loss_is_the_receiver_s_count() {
        let spec = spec(true, false, false);
        let doc = netlab_doc(&spec, &run(&spec, &[(1, true)], true));
        let received = &doc["end"]["sum_received"];
        assert_eq!(received["lost_packets"], 2);
        assert_eq!(received["jitter_ms"], 0.1);
        let reverse = self::spec(true, true, false);
        let doc = netlab_doc(&reverse, &run(&reverse, &[(1, false)], true));
        // netlab received: its own count (no loss in the fixture run).
        assert_eq!(doc["end"]["sum_received"]["lost_packets"], 0);
    }

    #[test]
    fn an_event_line_is_iperf3_s() {
        let line = event("interval", &json!({"sum": {"bytes": 1}}));
        assert_eq!(line, r#"{"event":"interval","data":{"sum":{"bytes":1}}}"#);
    }
}
