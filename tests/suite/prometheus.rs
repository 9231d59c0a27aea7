//! The continuous mesh under a real Prometheus (Debian's `prometheus`
//! package): four agents in namespaces on one bridge, one of them lossy
//! (the switch drops 10% of the UDP to and from it), a controller probing
//! every pair every cycle and serving `/metrics`, agents serving their
//! own, and Prometheus scraping them all with netlab's alert rules loaded,
//! in the controller's namespace. Through Prometheus' HTTP API: the lossy
//! host is returned as bad (its row or column) within two probe cycles,
//! and no other host ever is; a killed agent is returned as down within
//! two cycles; the alert rules are loaded and the host's alert is raised.
//! `promtool check metrics` passes on the controller's and an agent's
//! exposition, `promtool check rules` on the rules.
//!
//! Root is needed (CAP_NET_ADMIN); without it, or without prometheus,
//! promtool or nft, the test fails saying so.

use crate::common;
use common::run;

use netlab::endpoint::agent::key::Key;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const AGENTS: usize = 4;
const CTL: usize = AGENTS;
const SW: usize = AGENTS + 1;
/// The probe cycle.
const EVERY_S: u64 = 10;
const LOSSY: usize = 1;

struct Fleet {
    names: Vec<String>,
    subnet: u32,
    dir: tempfile::TempDir,
    key: PathBuf,
    children: Vec<(String, Child)>,
}

impl Fleet {
    fn new() -> Fleet {
        common::require(
            "the Prometheus test",
            &["/usr/bin/prometheus", "/usr/bin/promtool", "/usr/sbin/nft"],
            "scripts/test installs prometheus and nftables",
        );
        let tag = format!("nlp{}", std::process::id());
        let mut names: Vec<String> = (0..AGENTS).map(|i| format!("{tag}h{i}")).collect();
        names.extend(["ctl", "sw"].map(|h| format!("{tag}{h}")));
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("agent.key");
        Key::generate().unwrap().write_new(&key).unwrap();
        let fleet = Fleet {
            subnet: 100 + std::process::id() % 100,
            names,
            dir,
            key,
            children: Vec::new(),
        };
        for name in &fleet.names {
            run("ip", &["netns", "add", name]);
        }
        let hosts: Vec<&str> = fleet.names[..=CTL].iter().map(String::as_str).collect();
        common::bridge(fleet.names[SW].as_str(), &hosts, |host| fleet.addr(host));
        fleet
    }

    fn addr(&self, host: usize) -> String {
        format!("10.233.{}.{}", self.subnet, host + 1)
    }

    fn agent(&self, host: usize) -> String {
        format!("{}:5310", self.addr(host))
    }

    /// Starts a program in `host`'s namespace, logging to a file.
    fn spawn(&mut self, what: &str, host: usize, program: &Path, args: &[&str]) {
        let log = std::fs::File::create(self.dir.path().join(format!("{what}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[host]])
            .arg(program)
            .args(args)
            .env("NETLAB_KEY_FILE", &self.key)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push((what.to_string(), child));
    }

    fn log(&self, what: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{what}.log"))).unwrap_or_default()
    }

    fn wait_for_log(&self, what: &str, says: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.log(what).contains(says) {
            assert!(
                Instant::now() < deadline,
                "{what} never said {says:?}: {}",
                self.log(what)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends `what` by its PID (`ip netns exec` execs the program).
    fn stop(&mut self, what: &str, signal: nix::sys::signal::Signal) -> Option<i32> {
        let i = self.children.iter().position(|(w, _)| w == what)?;
        let (_, mut child) = self.children.remove(i);
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// `GET path` on `address` from inside namespace `ns` (a thread of its
/// own joins it): the status line's code and the body.
fn get_in(ns: &str, address: &str, path: &str, accept: Option<&str>) -> (u16, String) {
    let (ns, address, path) = (ns.to_string(), address.to_string(), path.to_string());
    let accept = accept.map(str::to_string);
    std::thread::spawn(move || {
        let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let Ok(mut socket) = std::net::TcpStream::connect(&address) else {
            return (0, String::new());
        };
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
        write!(
            socket,
            "GET {path} HTTP/1.0\r\nHost: {address}\r\n{accept}\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        let _ = socket.read_to_string(&mut reply);
        let code = reply
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = reply
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_string());
        (code, body)
    })
    .join()
    .unwrap()
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A PromQL query through Prometheus' HTTP API: each result's labels.
fn query(fleet: &Fleet, promql: &str) -> Vec<Value> {
    let (code, body) = get_in(
        &fleet.names[CTL],
        "127.0.0.1:9090",
        &format!("/api/v1/query?query={}", url_encode(promql)),
        None,
    );
    if code != 200 {
        return Vec::new();
    }
    let doc: Value = serde_json::from_str(&body).unwrap_or_default();
    doc["data"]["result"]
        .as_array()
        .map(|r| r.iter().map(|s| s["metric"].clone()).collect())
        .unwrap_or_default()
}

fn promtool_metrics(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test(alone)]
fn prometheus_reads_the_lossy_host_as_bad_within_two_probe_cycles() {
    let mut fleet = Fleet::new();
    let binary = assert_cmd::cargo::cargo_bin("netlab");
    // The lossy host: the switch drops 10% of the UDP to and from it (the
    // probes' datagrams; the agents' control connections are TCP).
    let sw = fleet.names[SW].clone();
    let lossy = fleet.addr(LOSSY);
    let rules: Vec<Vec<&str>> = ["saddr", "daddr"]
        .map(|side| {
            vec![
                "ip", side, &lossy, "ip", "protocol", "udp", "numgen", "random", "mod", "100", "<",
                "10", "drop",
            ]
        })
        .to_vec();
    common::faulty_switch(&sw, "host", &rules);
    for host in 0..AGENTS {
        let listen = fleet.agent(host);
        let metrics = format!("{}:9465", fleet.addr(host));
        let zone = format!("zone=z{}", host / 2);
        let rack = format!("rack=r{host}");
        fleet.spawn(
            &format!("agent{host}"),
            host,
            &binary,
            &[
                "agent",
                "serve",
                "--listen",
                &listen,
                "--metrics",
                &metrics,
                "--label",
                &zone,
                "--label",
                &rack,
            ],
        );
    }
    for host in 0..AGENTS {
        fleet.wait_for_log(&format!("agent{host}"), "listening on");
    }
    // The rules as `netlab mesh rules` prints them, checked by promtool,
    // and Prometheus scraping the controller and the agents with them.
    let every = format!("{EVERY_S}s");
    let rules_text = run(
        binary.to_str().unwrap(),
        &["mesh", "rules", "--every", &every, "--loss-slo", "5%"],
    );
    let rules = fleet.dir.path().join("rules.yml");
    std::fs::write(&rules, &rules_text).unwrap();
    let checked = run("promtool", &["check", "rules", rules.to_str().unwrap()]);
    assert!(checked.contains("SUCCESS: 6 rules found"), "{checked}");
    let agents_targets: Vec<String> = (0..AGENTS)
        .map(|h| format!("'{}:9465'", fleet.addr(h)))
        .collect();
    let config = fleet.dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: netlab-mesh\n    static_configs:\n      - targets: ['127.0.0.1:9464']\n  - job_name: netlab-agents\n    static_configs:\n      - targets: [{}]\n",
            rules.display(),
            agents_targets.join(", ")
        ),
    )
    .unwrap();
    let tsdb = fleet.dir.path().join("tsdb");
    let prometheus = PathBuf::from("/usr/bin/prometheus");
    fleet.spawn(
        "prometheus",
        CTL,
        &prometheus,
        &[
            &format!("--config.file={}", config.display()),
            &format!("--storage.tsdb.path={}", tsdb.display()),
            "--web.listen-address=127.0.0.1:9090",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_in(&fleet.names[CTL], "127.0.0.1:9090", "/-/ready", None).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "prometheus never ready: {}",
            fleet.log("prometheus")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The controller, probing every pair every cycle.
    let agents: Vec<String> = (0..AGENTS).map(|h| fleet.agent(h)).collect();
    let out = fleet.dir.path().join("mesh");
    let written_rules = fleet.dir.path().join("written-rules.yml");
    let started = Instant::now();
    fleet.spawn(
        "controller",
        CTL,
        &binary,
        &[
            "mesh",
            "--agents",
            &agents.join(","),
            "--every",
            &every,
            "--probe-calls",
            "10",
            "--loss-slo",
            "5%",
            "--metrics",
            "127.0.0.1:9464",
            "--rules",
            written_rules.to_str().unwrap(),
            "--keep",
            "3",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let bad = "(netlab_mesh_row_bad_ratio >= 0.5) or (netlab_mesh_column_bad_ratio >= 0.5)";
    let host_of = |labels: &Value| {
        labels["from"]
            .as_str()
            .or(labels["to"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let lossy_name = fleet.agent(LOSSY);
    let within = Duration::from_secs(2 * EVERY_S + 6);
    let found = loop {
        let hosts: Vec<String> = query(&fleet, bad).iter().map(host_of).collect();
        assert!(
            hosts.iter().all(|h| *h == lossy_name),
            "only {lossy_name} may be bad: {hosts:?}\n{}",
            fleet.log("controller")
        );
        if !hosts.is_empty() {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{lossy_name} not returned as bad within two cycles ({within:?}):\n{}",
            fleet.log("controller")
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "the lossy host was returned as bad {:.1} s after the controller started",
        found.as_secs_f64()
    );
    // The controller wrote the same rules, and Prometheus loaded them.
    assert_eq!(std::fs::read_to_string(&written_rules).unwrap(), rules_text);
    let (_, rules_api) = get_in(&fleet.names[CTL], "127.0.0.1:9090", "/api/v1/rules", None);
    for alert in [
        "NetlabHostRowBad",
        "NetlabPathLossAboveSLO",
        "NetlabAgentUnreachable",
    ] {
        assert!(rules_api.contains(alert), "{rules_api}");
    }
    // promtool on both expositions, as curl (no Accept) gets them.
    for (what, address) in [
        ("controller", "127.0.0.1:9464".to_string()),
        ("agent", format!("{}:9465", fleet.addr(0))),
    ] {
        let (code, text) = get_in(&fleet.names[CTL], &address, "/metrics", None);
        assert_eq!(code, 200, "{what}: {text}");
        let (ok, said) = promtool_metrics(&text);
        assert!(ok, "promtool check metrics on the {what}'s: {said}\n{text}");
    }
    // The agents' own metrics, through Prometheus: runs served, bytes
    // (each agent's first run counted by its next scrape).
    let deadline = Instant::now() + Duration::from_secs(2 * EVERY_S);
    loop {
        let served = query(&fleet, "netlab_agent_runs_total > 0");
        let moved = query(&fleet, "netlab_agent_endpoint_io_bytes_total > 0");
        if served.len() == AGENTS && !moved.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "agents' runs {served:?}, bytes {moved:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The host's alert is raised (pending, then firing after two cycles).
    let deadline = Instant::now() + Duration::from_secs(2 * EVERY_S + 6);
    while query(&fleet, "ALERTS{alertname=~\"NetlabHost(Row|Column)Bad\"}").is_empty() {
        assert!(Instant::now() < deadline, "no host alert raised");
        std::thread::sleep(Duration::from_millis(500));
    }
    // An agent killed: down within two cycles.
    let gone = fleet.agent(3);
    fleet.stop("agent3", nix::sys::signal::Signal::SIGKILL);
    let killed = Instant::now();
    let down = format!("netlab_mesh_agent_up{{agent=\"{gone}\"}} == 0");
    while query(&fleet, &down).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(2 * EVERY_S + 6),
            "{gone} not returned as down:\n{}",
            fleet.log("controller")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Stopped by SIGTERM, the controller ends cleanly, cycles rotated.
    let code = fleet.stop("controller", nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, Some(0), "{}", fleet.log("controller"));
    let kept = std::fs::read_dir(out.join("cycles")).unwrap().count();
    assert!((1..=3).contains(&kept), "{kept} cycle directories kept");
}

#[test]
fn a_metrics_port_in_use_and_an_unwritable_rule_file_are_refused_before_any_cycle() {
    let binary = assert_cmd::cargo::cargo_bin("netlab");
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    Key::generate().unwrap().write_new(&key).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    let base = [
        "mesh",
        "--agents",
        "127.0.0.1:1,127.0.0.1:2",
        "--every",
        "30s",
        "--key",
        key.to_str().unwrap(),
    ];
    let out = dir.path().join("out");
    let run = Command::new(&binary)
        .args(base)
        .args(["--metrics", &port, "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(stderr.contains("the port is in use"), "{stderr}");
    assert!(!out.exists(), "nothing written before the refusal");
    let run = Command::new(&binary)
        .args(base)
        .args(["--rules", "/nonexistent/dir/rules.yml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("--rules /nonexistent/dir/rules.yml"),
        "{stderr}"
    );
    // A cycle shorter than the plan's probes.
    let run = Command::new(&binary)
        .args([
            "mesh",
            "--agents",
            "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4",
            "--every",
            "1s",
            "--probe-rate",
            "100",
            "--key",
            key.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("one probe cycle over 4 agents takes up to"),
        "{stderr}"
    );
}

#[test]
fn the_shipped_rules_are_netlab_s_defaults_and_promtool_accepts_them() {
    let binary = assert_cmd::cargo::cargo_bin("netlab");
    let printed = run(binary.to_str().unwrap(), &["mesh", "rules"]);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/netlab-rules.yml");
    assert_eq!(
        std::fs::read_to_string(&shipped).unwrap(),
        printed,
        "deploy/prometheus/netlab-rules.yml differs from `netlab mesh rules`: regenerate it (netlab mesh rules > deploy/prometheus/netlab-rules.yml) and review the change"
    );
    let checked = run("promtool", &["check", "rules", shipped.to_str().unwrap()]);
    assert!(checked.contains("SUCCESS"), "{checked}");
}
