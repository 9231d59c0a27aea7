//! irtt (Debian's `irtt`, isochronous UDP round trips) as a peer beside
//! netlab's own probes: its server and client run in the namespaces (or on
//! loopback) netlab made, and its JSON (format version 1) is read back:
//! every round trip with its client send time, so that the packets of a
//! window netlab chose can be picked out, and what irtt measures that
//! netlab's TCP probes do not (one-way delays, IPDV, loss each way).
//!
//! Processes are netlab's children, killed with it (PR_SET_PDEATHSIG), and
//! stopped by PID.

use serde::{Deserialize, Serialize};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The interval between irtt's packets: the least its server allows by
/// default (`--min-interval`), a hundred a second like rpm's probes.
pub const INTERVAL: &str = "10ms";

/// Why irtt could not be run or read.
#[derive(Debug, thiserror::Error)]
pub enum IrttError {
    #[error("irtt is not installed (Debian's package `irtt`): {0}")]
    Missing(io::Error),
    #[error("irtt {what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
    #[error("irtt's server on {0} did not start: {1}")]
    Server(SocketAddr, String),
    #[error("irtt's client failed: {0}")]
    Client(String),
    #[error("irtt's JSON: {0}")]
    Output(String),
}

/// Starts `irtt ARGS` inside the network namespace at `netns` (None: this
/// one), its stderr piped, killed when netlab dies.
fn spawn_in(netns: Option<&Path>, args: &[String]) -> Result<Child, IrttError> {
    let namespace = netns
        .map(std::fs::File::open)
        .transpose()
        .map_err(|source| IrttError::Io {
            what: "namespace",
            source,
        })?;
    let mut command = Command::new("irtt");
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let fd = namespace.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: between fork and exec only async-signal-safe calls; the
    // namespace's file stays open until the spawn has returned.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = fd
                && libc::setns(fd, libc::CLONE_NEWNET) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // [`Client::interrupt`] ends a run with SIGINT, which an
            // inherited SIG_IGN (an endpoint's) would lose.
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = command.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => IrttError::Missing(e),
        _ => IrttError::Io {
            what: "spawn",
            source: e,
        },
    });
    drop(namespace);
    child
}

/// Whether irtt is installed.
pub fn available() -> Result<(), IrttError> {
    let status = Command::new("irtt")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(IrttError::Missing)?;
    if status.success() {
        Ok(())
    } else {
        Err(IrttError::Missing(io::Error::other(format!(
            "`irtt version` exited {status}"
        ))))
    }
}

/// irtt's server, listening on `bind`.
pub struct Server {
    child: Child,
}

impl Server {
    pub fn start(netns: Option<&Path>, bind: SocketAddr) -> Result<Server, IrttError> {
        let args = vec!["server".to_string(), "-b".into(), bind.to_string()];
        let mut child = spawn_in(netns, &args)?;
        // irtt says nothing when it listens: give it a moment, and report
        // its words if it exited (a port in use, an address not here).
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            if let Ok(Some(status)) = child.try_wait() {
                let mut words = String::new();
                if let Some(mut err) = child.stderr.take() {
                    let _ = io::Read::read_to_string(&mut err, &mut words);
                }
                return Err(IrttError::Server(
                    bind,
                    format!("exited {status}: {}", words.trim()),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server { child })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Our own child, by PID, through its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client run: started, then waited for or interrupted.
pub struct Client {
    child: Child,
    json: tempfile::NamedTempFile,
}

impl Client {
    /// Sends a packet every [`INTERVAL`] to `server` for at most
    /// `duration`, writing its JSON on exit.
    pub fn start(
        netns: Option<&Path>,
        server: SocketAddr,
        duration: Duration,
    ) -> Result<Client, IrttError> {
        // irtt adds ".json" to a name without it.
        let json = tempfile::Builder::new()
            .suffix(".json")
            .tempfile()
            .map_err(|source| IrttError::Io {
                what: "JSON file",
                source,
            })?;
        let args = vec![
            "client".to_string(),
            "-i".into(),
            INTERVAL.into(),
            "-d".into(),
            format!("{}ms", duration.as_millis().max(10)),
            "--wait=1s".into(),
            "-Q".into(),
            "-o".into(),
            json.path().display().to_string(),
            server.to_string(),
        ];
        Ok(Client {
            child: spawn_in(netns, &args)?,
            json,
        })
    }

    /// Waits for the run to end by itself.
    pub fn wait(mut self) -> Result<IrttRun, IrttError> {
        let status = self.child.wait().map_err(|source| IrttError::Io {
            what: "wait",
            source,
        })?;
        self.finish(status)
    }

    /// Ends the run now (SIGINT: irtt writes what it has).
    pub fn interrupt(mut self) -> Result<IrttRun, IrttError> {
        // SAFETY: a signal to our own child's PID, which we have not yet
        // waited for (so the PID is still ours).
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let status = self.child.wait().map_err(|source| IrttError::Io {
            what: "wait",
            source,
        })?;
        self.finish(status)
    }

    fn finish(mut self, status: std::process::ExitStatus) -> Result<IrttRun, IrttError> {
        let mut words = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = io::Read::read_to_string(&mut err, &mut words);
        }
        if !status.success() {
            return Err(IrttError::Client(format!(
                "exited {status}: {}",
                words.trim()
            )));
        }
        let text = std::fs::read_to_string(self.json.path()).map_err(|source| IrttError::Io {
            what: "JSON",
            source,
        })?;
        parse(&text)
    }
}

/// One round trip as irtt saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundTrip {
    /// The client's send time, ns since the Unix epoch.
    pub sent_unix_ns: u64,
    /// None: lost.
    pub rtt_ms: Option<f64>,
    /// Which way a lost packet was lost, as irtt tells from its server's
    /// received-packets window: `true_up`, `true_down`, or `true` (not
    /// known); None when it came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// One-way delays from the two hosts' wall clocks (meaningful within
    /// one machine's clock, as in netlab's namespaces).
    pub send_ms: Option<f64>,
    pub receive_ms: Option<f64>,
}

/// What one irtt client run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IrttRun {
    pub round_trips: Vec<RoundTrip>,
    pub upstream_loss_percent: f64,
    pub downstream_loss_percent: f64,
}

#[derive(Deserialize)]
struct Doc {
    stats: Stats,
    #[serde(default)]
    round_trips: Vec<RawTrip>,
}

#[derive(Deserialize)]
struct Stats {
    #[serde(default)]
    upstream_loss_percent: f64,
    #[serde(default)]
    downstream_loss_percent: f64,
}

#[derive(Deserialize)]
struct RawTrip {
    lost: String,
    timestamps: Timestamps,
    #[serde(default)]
    delay: Delay,
}

#[derive(Deserialize)]
struct Timestamps {
    client: ClientStamps,
}

#[derive(Deserialize)]
struct ClientStamps {
    send: Stamp,
}

#[derive(Deserialize)]
struct Stamp {
    wall: u64,
}

#[derive(Default, Deserialize)]
struct Delay {
    rtt: Option<i64>,
    send: Option<i64>,
    receive: Option<i64>,
}

/// irtt's JSON (format version 1) as netlab keeps it.
pub fn parse(text: &str) -> Result<IrttRun, IrttError> {
    let doc: Doc = serde_json::from_str(text).map_err(|e| IrttError::Output(e.to_string()))?;
    let ms = |ns: Option<i64>| ns.map(|n| n as f64 / 1e6);
    Ok(IrttRun {
        round_trips: doc
            .round_trips
            .into_iter()
            .map(|t| RoundTrip {
                sent_unix_ns: t.timestamps.client.send.wall,
                lost: (t.lost != "false").then(|| t.lost.clone()),
                rtt_ms: if t.lost == "false" {
                    ms(t.delay.rtt)
                } else {
                    None
                },
                send_ms: ms(t.delay.send),
                receive_ms: ms(t.delay.receive),
            })
            .collect(),
        upstream_loss_percent: doc.stats.upstream_loss_percent,
        downstream_loss_percent: doc.stats.downstream_loss_percent,
    })
}

impl IrttRun {
    /// The round trips (ms) of packets sent in `[from_ns, to_ns)`, and how
    /// many of them were lost.
    pub fn between(&self, from_ns: u64, to_ns: u64) -> (Vec<f64>, usize) {
        let inside = self
            .round_trips
            .iter()
            .filter(|t| t.sent_unix_ns >= from_ns && t.sent_unix_ns < to_ns);
        let mut lost = 0;
        let mut rtts = Vec::new();
        for t in inside {
            match t.rtt_ms {
                Some(ms) => rtts.push(ms),
                None => lost += 1,
            }
        }
        (rtts, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two round trips of irtt 0.9.0's output (abridged to what is read):
    /// one answered, one lost.
    const OUTPUT: &str = r#"{
        "version": {"irtt": "0.9.0", "protocol": 1, "json_format": 1},
        "stats": {"upstream_loss_percent": 0, "downstream_loss_percent": 50,
                  "rtt": {"median": 259200}},
        "round_trips": [
            {"seqno": 0, "lost": "false",
             "timestamps": {"client": {"send": {"wall": 1000000000, "monotonic": 1},
                                       "receive": {"wall": 1000271318, "monotonic": 2}},
                            "server": {"receive": {"wall": 1, "monotonic": 1},
                                       "send": {"wall": 1, "monotonic": 1}}},
             "delay": {"receive": 109084, "rtt": 271318, "send": 162214}, "ipdv": {}},
            {"seqno": 1, "lost": "true_down",
             "timestamps": {"client": {"send": {"wall": 1010000000, "monotonic": 3},
                                       "receive": {}},
                            "server": {}},
             "delay": {}, "ipdv": {}}
        ]
    }"#;

    #[test]
    fn irtts_output_gives_each_round_trip_with_its_send_time() {
        let run = parse(OUTPUT).unwrap();
        assert_eq!(run.round_trips.len(), 2);
        assert_eq!(run.round_trips[0].sent_unix_ns, 1_000_000_000);
        assert_eq!(run.round_trips[0].rtt_ms, Some(0.271318));
        assert_eq!(run.round_trips[1].rtt_ms, None);
        assert_eq!(run.round_trips[1].lost.as_deref(), Some("true_down"));
        assert_eq!(run.round_trips[0].lost, None);
        assert_eq!(run.downstream_loss_percent, 50.0);
        assert_eq!(
            run.between(1_000_000_000, 1_010_000_000),
            (vec![0.271318], 0)
        );
        assert_eq!(run.between(1_000_000_001, 2_000_000_000), (vec![], 1));
    }

    #[test]
    fn output_that_is_not_irtts_is_an_error() {
        for bad in [
            "",
            "{}",
            "[1]",
            r#"{"stats": {}, "round_trips": [{"lost": 1}]}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
