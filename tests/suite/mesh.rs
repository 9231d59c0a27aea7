//! `netlab mesh` over a fleet made for the test: eight agents' hosts, a
//! controller's and a DNS server's, each a network namespace on one
//! bridge (in an eleventh). The agents are the real binary with labels
//! (two zones of two racks), the DNS server is Debian's dnsmasq serving a
//! name in the style of a Kubernetes headless Service (one A record an
//! agent, and one SRV record an agent under `_control._tcp.`), and the
//! controller finds them by that name from a namespace of its own. Faults are made by construction and each must be read as what
//! it is:
//! - host 1 shaped both ways (tbf on its veth and on its bridge port):
//!   its row and its column;
//! - 3% loss on the path from host 2 to host 3 (an nftables rule in the
//!   switch's bridge): that one cell of the loss matrix;
//! - host 4 shaped sending only: its row, and the asymmetry map;
//! - an agent killed mid-run: its cells failed with the reason, the rest
//!   planned again; the controller killed: `--resume` finishes the run
//!   without measuring again what was measured;
//! - an agent holding another key, and a controller of another release:
//!   named, not hung on.
//!
//! A second fleet, two agents with two equal-cost paths between them (a
//! router hashing each flow onto one, one path shaped), measured over 16
//! passes: the cell of the two paths falls in two groups that alternate
//! from pass to pass, and is read as ECMP; the way back is one path.
//!
//! Root is needed (CAP_NET_ADMIN); without it the tests fail saying so.

use crate::common;
use crate::common::words;
use common::run;

use netlab::endpoint::agent::key::Key;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

const AGENTS: usize = 8;
const CTL: usize = AGENTS;
const DNS: usize = AGENTS + 1;
/// The name the DNS server gives every agent's address.
const SERVICE: &str = "netlab-agents.netlab.svc.cluster.local";
/// Every agent host's own rate, so that the cells are the links' and not
/// the two CPUs' share among four tests at once.
const LINE_RATE: &str = "300mbit";
/// A shaped host's rate: a tenth of it.
const SHAPED_RATE: &str = "30mbit";
/// The ECMP pair's worse path, and its bucket: a sixtieth of the line
/// rate, so that the two paths' repeats stay two groups however far a
/// loaded host's CPU pulls the better path's figures down (a tenth was
/// blurred once under the full suite's load), and a bucket that a half
/// second at that rate cannot hide in.
const ECMP_SLOW_RATE: &str = "5mbit";
const ECMP_SLOW_BURST: &str = "32k";

fn binary() -> PathBuf {
    assert_cmd::cargo::cargo_bin("netlab")
}

/// Ten hosts on one bridge: agents 0-7 (`.1`-`.8`), the controller
/// (`.9`) and the DNS server (`.10`).
struct Fleet {
    /// Namespaces: a host each, then the switch.
    names: Vec<String>,
    subnet: u32,
    dir: tempfile::TempDir,
    key: PathBuf,
    agents: Vec<Option<Child>>,
    dnsmasq: Option<Child>,
    /// `/etc/netns/<controller>`: its resolv.conf, pointing at dnsmasq.
    resolv: PathBuf,
}

impl Fleet {
    /// A fleet whose namespaces are tagged `tag`, so that two fleets of
    /// this file can stand at once.
    fn new(tag: char) -> Fleet {
        common::require(
            "the mesh test",
            &["/usr/sbin/dnsmasq", "/usr/sbin/nft", "/usr/sbin/tc"],
            "scripts/test installs dnsmasq-base, nftables and iproute2",
        );
        let tag = format!("nlt{}m{tag}", std::process::id());
        let mut names: Vec<String> = (0..AGENTS).map(|i| format!("{tag}h{i}")).collect();
        names.extend(["ctl", "dns", "sw"].map(|h| format!("{tag}{h}")));
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("agent.key");
        Key::generate().unwrap().write_new(&key).unwrap();
        let resolv = PathBuf::from("/etc/netns").join(&names[CTL]);
        let fleet = Fleet {
            subnet: 10 + std::process::id() % 200,
            names,
            dir,
            key,
            agents: (0..AGENTS).map(|_| None).collect(),
            dnsmasq: None,
            resolv,
        };
        for name in &fleet.names {
            run("ip", &["netns", "add", name]);
        }
        let hosts: Vec<&str> = fleet.names[..=DNS].iter().map(String::as_str).collect();
        common::bridge(fleet.names[DNS + 1].as_str(), &hosts, |host| {
            fleet.addr(host)
        });
        fleet
    }

    fn addr(&self, host: usize) -> String {
        format!("10.232.{}.{}", self.subnet, host + 1)
    }

    fn agent(&self, host: usize) -> String {
        format!("{}:5310", self.addr(host))
    }

    /// `tc` in `host`'s namespace (or the switch's, for its bridge ports).
    fn tc(&self, ns: usize, args: &[&str]) {
        let mut all = vec!["-n", self.names[ns].as_str()];
        all.extend(args);
        run("tc", &all);
    }

    /// Caps what `device` in namespace `ns` sends at `rate`.
    fn shape(&self, ns: usize, device: &str, rate: &str) {
        self.tc(
            ns,
            &[
                "qdisc", "replace", "dev", device, "root", "tbf", "rate", rate, "burst", "256k",
                "latency", "20ms",
            ],
        );
    }

    fn log(&self, host: usize) -> PathBuf {
        self.dir.path().join(format!("agent-{host}.log"))
    }

    fn log_text(&self, host: usize) -> String {
        std::fs::read_to_string(self.log(host)).unwrap_or_default()
    }

    /// Starts host `host`'s agent with its labels (zone `z0` for hosts
    /// 0-3, `z1` for 4-7; a rack of two), under `key`; waits until it
    /// listens.
    fn start_agent(&mut self, host: usize, key: &Path) {
        let log = File::create(self.log(host)).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[host]])
            .arg(binary())
            .args(["agent", "serve", "--listen", &self.agent(host)])
            .args(["--label", &format!("zone=z{}", host / 4)])
            .args(["--label", &format!("rack=r{}", host / 2)])
            .env("NETLAB_KEY_FILE", key)
            .env("NODE_NAME", format!("node-{host}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.agents[host] = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.log_text(host).contains("listening on") {
            assert!(
                Instant::now() < deadline,
                "agent {host} did not start: {}",
                self.log_text(host)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill_agent(&mut self, host: usize) {
        if let Some(mut agent) = self.agents[host].take() {
            // By PID, through the Child handle: `ip netns exec` runs it by exec.
            let _ = agent.kill();
            let _ = agent.wait();
        }
    }

    /// dnsmasq in its namespace, answering `SERVICE` with every agent's
    /// address, and the controller's namespace pointed at it.
    fn start_dns(&mut self) {
        let hosts = self.dir.path().join("agents.hosts");
        // Each agent under the Service's name (its A records) and its own
        // (the target of its SRV record).
        let lines: String = (0..AGENTS)
            .map(|h| {
                format!(
                    "{addr} {SERVICE}\n{addr} h{h}.fleet.test\n",
                    addr = self.addr(h)
                )
            })
            .collect();
        std::fs::write(&hosts, lines).unwrap();
        let srv: Vec<String> = (0..AGENTS)
            .map(|h| format!("--srv-host=_control._tcp.{SERVICE},h{h}.fleet.test,5310"))
            .collect();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[DNS], "/usr/sbin/dnsmasq"])
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
            ])
            .args(words(
                "--no-hosts --bind-interfaces --user=root --pid-file=",
            ))
            .arg(format!("--addn-hosts={}", hosts.display()))
            .arg(format!("--listen-address={}", self.addr(DNS)))
            .args(&srv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.dnsmasq = Some(child);
        std::fs::create_dir_all(&self.resolv).unwrap();
        std::fs::write(
            self.resolv.join("resolv.conf"),
            format!("nameserver {}\n", self.addr(DNS)),
        )
        .unwrap();
    }

    /// `netlab mesh ARGS --json` from the controller's namespace.
    fn mesh(&self, args: &[&str]) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.names[CTL]])
            .arg(binary())
            .arg("mesh")
            .args(args)
            .arg("--json")
            .env("NETLAB_KEY_FILE", &self.key)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for agent in self.agents.iter_mut().flatten() {
            let _ = agent.kill();
            let _ = agent.wait();
        }
        if let Some(mut dns) = self.dnsmasq.take() {
            let _ = dns.kill();
            let _ = dns.wait();
        }
        let _ = std::fs::remove_dir_all(&self.resolv);
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The lines of a run's results.jsonl (none before it exists).
/// The results' lines that are JSON (a test may have spoiled one).
fn results(dir: &Path) -> Vec<Value> {
    let path = dir.join("results.jsonl");
    let Ok(bytes) = std::fs::read(&path) else {
        return Vec::new();
    };
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

/// Each endpoint's life on an agent, from its log: (start, end) in µs
/// since the epoch, in the order they started.
fn endpoint_lives(log: &str) -> Vec<(u128, u128, String)> {
    let mut started: HashMap<String, (u128, String)> = HashMap::new();
    let mut lives = Vec::new();
    let stamp = |line: &str| {
        let time = line.split_whitespace().next().unwrap();
        humantime::parse_rfc3339_weak(time)
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_micros()
    };
    for line in log.lines() {
        let Some((_, rest)) = line.split_once("netlab agent: endpoint ") else {
            continue;
        };
        let id = rest.split_whitespace().next().unwrap().to_string();
        if rest.contains(" started, pid ") {
            started.insert(id, (stamp(line), rest.to_string()));
        } else if rest.contains(" ended: ") {
            let (from, what) = started.remove(&id).expect("an end after its start");
            lives.push((from, stamp(line), what));
        }
    }
    assert!(
        started.is_empty(),
        "endpoints that never ended: {started:?}"
    );
    lives.sort();
    lives
}

/// The findings the run printed for `metric`.
fn findings<'a>(doc: &'a Value, metric: &str) -> Vec<&'a str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .filter_map(|f| f.strip_prefix(metric)?.strip_prefix(": "))
        .collect()
}

#[test(alone)]
fn a_mesh_of_eight_agents_found_by_dns_reads_each_fault_as_what_it_is() {
    let mut fleet = Fleet::new('f');
    let key = fleet.key.clone();
    for host in 0..AGENTS {
        fleet.start_agent(host, &key);
    }
    fleet.start_dns();
    // Every agent host's line rate, both ways (its veth and its bridge port).
    for host in 0..AGENTS {
        fleet.shape(host, "eth0", LINE_RATE);
        fleet.shape(DNS + 1, &format!("p{host}"), LINE_RATE);
    }
    // Host 1: a tenth of the rate both ways.
    fleet.shape(1, "eth0", SHAPED_RATE);
    fleet.shape(DNS + 1, "p1", SHAPED_RATE);
    // Host 4: a tenth of the rate sending only.
    fleet.shape(4, "eth0", SHAPED_RATE);
    // The path from host 2 to host 3: 3% of its packets dropped by the
    // switch (a bridge-family rule on the forward hook).
    let sw = fleet.names[DNS + 1].clone();
    let (h2, h3) = (fleet.addr(2), fleet.addr(3));
    common::faulty_switch(
        &sw,
        "path",
        &[vec![
            "ip", "saddr", &h2, "ip", "daddr", &h3, "numgen", "random", "mod", "100", "<", "3",
            "drop",
        ]],
    );

    // The agents by their SRV records, as a headless Service's named port
    // gives them: each target and its port.
    let plan = fleet
        .mesh(&["plan", "--agents", &format!("dns:_control._tcp.{SERVICE}")])
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", stderr(&plan));
    let plan = common::json_of(&plan.stdout);
    let named: Vec<&str> = plan["plan"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..AGENTS)
        .map(|h| format!("h{h}.fleet.test:5310"))
        .collect();
    assert_eq!(named, expected);

    // The pass, the agents found by DNS from the controller's namespace.
    let dir = fleet.dir.path().join("run");
    let dir_arg = dir.to_str().unwrap().to_string();
    let spec = format!("dns:{SERVICE}");
    let output = fleet
        .mesh(&[
            "--agents",
            &spec,
            "--tests",
            "stream,loss",
            "--duration",
            "500ms",
            "--out",
            &dir_arg,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let doc = common::json_of(&output.stdout);
    assert_eq!(doc["failed"], 0, "{doc}");
    assert_eq!(doc["measured"], 2 * AGENTS * (AGENTS - 1), "{doc}");

    // The matrix is complete: every ordered pair, each test once, with both
    // hosts' labels.
    let lines = results(&dir);
    let mut seen = HashSet::new();
    for line in &lines {
        assert!(line["failed"].is_null(), "{line}");
        let key = (
            line["from"].as_str().unwrap().to_string(),
            line["to"].as_str().unwrap().to_string(),
            line["test"].as_str().unwrap().to_string(),
        );
        assert!(seen.insert(key), "measured twice: {line}");
        assert!(line["from_labels"]["zone"].is_string(), "{line}");
        assert!(line["to_labels"]["rack"].is_string(), "{line}");
        assert!(line["from_labels"]["node"].is_string(), "{line}");
    }
    assert_eq!(seen.len(), 2 * AGENTS * (AGENTS - 1));
    for name in [
        "manifest.json",
        "throughput_mbit_s.csv",
        "loss_pct.csv",
        "report.html",
    ] {
        assert!(dir.join(name).exists(), "{name} missing");
    }
    let csv = std::fs::read_to_string(dir.join("throughput_mbit_s.csv")).unwrap();
    assert_eq!(csv.lines().count(), AGENTS + 1, "{csv}");
    assert!(!csv.contains("failed"), "{csv}");

    // No agent was in two tests at once: its endpoints' lives never overlap.
    for host in 0..AGENTS {
        let lives = endpoint_lives(&fleet.log_text(host));
        assert_eq!(lives.len(), 2 * 2 * (AGENTS - 1), "agent {host}: {lives:?}");
        for pair in lives.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "agent {host}: {:?} overlaps {:?}",
                pair[0],
                pair[1]
            );
        }
    }

    // Each fault read as what it is.
    let names: Vec<String> = (0..AGENTS).map(|h| fleet.agent(h)).collect();
    let a = |h: usize| names[h].clone();
    let throughput = findings(&doc, "throughput_mbit_s");
    let host_1 = format!(
        "host {}: throughput is worse in its row and its column",
        a(1)
    );
    let host_4 = format!(
        "host {}: throughput is worse in its row (it sends) but not its column",
        a(4)
    );
    assert!(
        throughput.iter().any(|f| f.starts_with(&host_1)),
        "{throughput:#?}"
    );
    assert!(
        throughput.iter().any(|f| f.starts_with(&host_4)),
        "{throughput:#?}"
    );
    // No other host is named; a single path may be only the lossy one.
    for f in &throughput {
        if f.starts_with("host ") {
            assert!(f.starts_with(&host_1) || f.starts_with(&host_4), "{f}");
        }
        if f.starts_with("path ") {
            assert!(
                f.starts_with(&format!("path {} -> {} alone", a(2), a(3))),
                "{f}"
            );
        }
        if f.starts_with(&a(1)) || f.contains("x worse than") {
            // The asymmetry map: host 4 sends slowly to every peer but host 1
            // (shaped both ways), and the lossy path may be one-sided too.
            assert!(
                f.starts_with(&format!("{} -> ", a(4)))
                    || f.starts_with(&format!("{} -> {}", a(2), a(3))),
                "{f}"
            );
        }
    }
    let asymmetric: Vec<&&str> = throughput
        .iter()
        .filter(|f| f.starts_with(&format!("{} -> ", a(4))) && f.contains("x worse than"))
        .collect();
    assert!(asymmetric.len() >= AGENTS - 2, "{throughput:#?}");
    let loss = findings(&doc, "loss_pct");
    assert_eq!(
        loss.iter()
            .filter(|f| !f.contains("x worse than"))
            .collect::<Vec<_>>(),
        [&format!(
            "path {} -> {} alone: loss is worse there and nowhere else in its row or column: that path (a link, a switch port or a rule between the two)",
            a(2),
            a(3)
        )],
        "{loss:#?}"
    );
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        report.contains("limited by"),
        "the verdicts are in the tooltips"
    );
}

/// Faults of the run itself, on a fleet of its own (nothing measured, so
/// it runs beside other tests): an agent killed mid-run, then the
/// controller; an agent that holds another key; a spoiled results line;
/// the run resumed; a controller of another release.
#[test]
fn a_mesh_run_cut_short_by_dead_agents_and_controller_resumes_without_measuring_twice() {
    let mut fleet = Fleet::new('r');
    let key = fleet.key.clone();
    for host in 0..AGENTS - 1 {
        fleet.start_agent(host, &key);
    }
    let other_key = fleet.dir.path().join("other.key");
    Key::generate().unwrap().write_new(&other_key).unwrap();
    fleet.start_agent(7, &other_key);
    // Every link at the line rate: the streams wait on the links, not on
    // the two cores the tests beside this one share.
    for host in 0..AGENTS {
        fleet.shape(host, "eth0", LINE_RATE);
        fleet.shape(DNS + 1, &format!("p{host}"), LINE_RATE);
    }
    let names: Vec<String> = (0..AGENTS).map(|h| fleet.agent(h)).collect();
    let a = |h: usize| names[h].clone();
    let list = names.join(",");
    let dir = fleet.dir.path().join("again");
    let dir_arg = dir.to_str().unwrap().to_string();
    let mut controller = fleet
        .mesh(&[
            "--agents",
            &list,
            "--tests",
            "stream,rtt",
            "--duration",
            "1s",
            "--out",
            &dir_arg,
        ])
        .spawn()
        .unwrap();
    // Agent 6 dies once a few tests are in; the controller a little later.
    let wait_for_lines = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while results(&dir)
            .iter()
            .filter(|l| l["failed"].is_null())
            .count()
            < n
        {
            assert!(Instant::now() < deadline, "the run stalled");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for_lines(4);
    fleet.kill_agent(6);
    wait_for_lines(16);
    controller.kill().unwrap();
    controller.wait().unwrap();
    let before = results(&dir);
    let measured_before: HashSet<(String, String, String)> = before
        .iter()
        .filter(|l| l["failed"].is_null())
        .map(|l| {
            (
                l["from"].as_str().unwrap().into(),
                l["to"].as_str().unwrap().into(),
                l["test"].as_str().unwrap().into(),
            )
        })
        .collect();
    // What agents 6 and 7 took with them, each named with its reason.
    for line in before.iter().filter(|l| !l["failed"].is_null()) {
        let why = line["failed"].as_str().unwrap();
        let (from, to) = (line["from"].as_str().unwrap(), line["to"].as_str().unwrap());
        assert!(
            [a(6), a(7)].iter().any(|h| from == h || to == h),
            "a failure between live agents: {line}"
        );
        if from == a(7) || to == a(7) {
            assert!(why.contains("authentication failed"), "{why}");
        }
    }
    assert!(
        before
            .iter()
            .any(|l| l["failed"].as_str().is_some_and(|w| w.contains(&a(6)))),
        "agent 6's cells are failed naming it"
    );

    // A line an editor spoiled (not UTF-8) costs that line only.
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("results.jsonl"))
            .unwrap();
        file.write_all(b"{\"test\":\"\xff\"}\n").unwrap();
    }
    // Resumed: what was measured is not measured again, the rest is.
    let output = fleet.mesh(&["--resume", &dir_arg]).output().unwrap();
    assert!(
        stderr(&output).contains("not UTF-8"),
        "the spoiled line is named: {}",
        stderr(&output)
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "cells of the dead agents failed: {}",
        stderr(&output)
    );
    // With --json the error is a JSON document on stdout.
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("tests failed"), "{said}");
    let after = results(&dir);
    let mut measured: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for line in after.iter().filter(|l| l["failed"].is_null()) {
        *measured
            .entry((
                line["from"].as_str().unwrap().into(),
                line["to"].as_str().unwrap().into(),
                line["test"].as_str().unwrap().into(),
            ))
            .or_default() += 1;
    }
    assert!(
        measured.values().all(|&n| n == 1),
        "measured twice: {measured:?}"
    );
    assert!(measured_before.iter().all(|k| measured.contains_key(k)));
    // Every pair of the six live agents, both tests.
    assert_eq!(
        measured
            .keys()
            .filter(|(f, t, _)| ![a(6), a(7)].contains(f) && ![a(6), a(7)].contains(t))
            .count(),
        2 * 6 * 5
    );

    // The run's records are a section of `netlab report`: its tests
    // counted, its heat maps, the dead agent's cells named as failed and
    // the spoiled line as skipped.
    let page_dir = fleet.dir.path().join("report");
    let output = Command::new(binary())
        .arg("report")
        .arg(dir.join("results.jsonl"))
        .arg("-o")
        .arg(&page_dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let page = std::fs::read_to_string(page_dir.join("report.html")).unwrap();
    let section = &page[page.find("<section id=\"mesh\">").expect("a mesh section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains("every pair of 8 hosts"), "{section}");
    assert!(section.contains("class=\"heat\""), "{section}");
    assert!(
        section.contains(&format!("mesh {} -&gt; ", a(6))),
        "agent 6's cells are missing by name: {section}"
    );
    assert!(page.contains("not UTF-8"), "the spoiled line is skipped");

    // A controller of another release: every agent refuses it, by name.
    let output = fleet
        .mesh(&[
            "--agents",
            &list,
            "--out",
            fleet.dir.path().join("v").to_str().unwrap(),
        ])
        .env("NETLAB_FAULT", "claim-version:0.0.1")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("of 8 agents answered"), "{said}");
    assert!(said.contains("version mismatch"), "{said}");
}

/// Two agents with two equal-cost paths from the first to the second: a
/// router's multipath route hashing each flow's addresses and ports
/// (`fib_multipath_hash_policy=1`, as an ECMP fabric does), one of its
/// two links shaped to a tenth of the other. The way back is one link.
struct EcmpPair {
    /// a (agent and controller), r (the router), b (agent).
    names: [String; 3],
    subnet: u32,
    agents: Vec<Child>,
    dir: tempfile::TempDir,
    key: PathBuf,
}

impl EcmpPair {
    fn new() -> EcmpPair {
        assert!(
            netlab::testbed::netns::has_net_admin(),
            "the ECMP test needs CAP_NET_ADMIN: run it as root"
        );
        let tag = format!("nlt{}e", std::process::id());
        let names = ["a", "r", "b"].map(|n| format!("{tag}{n}"));
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("agent.key");
        Key::generate().unwrap().write_new(&key).unwrap();
        let pair = EcmpPair {
            names,
            subnet: 10 + std::process::id() % 200,
            agents: Vec::new(),
            dir,
            key,
        };
        let [a, r, b] = pair.names.clone();
        let s = pair.subnet;
        for name in &pair.names {
            run("ip", &["netns", "add", name]);
            run("ip", &["-n", name, "link", "set", "lo", "up"]);
        }
        let link = |left: &str, left_dev: &str, right: &str, right_dev: &str| {
            run(
                "ip",
                &[
                    "-n", left, "link", "add", left_dev, "type", "veth", "peer", "name", right_dev,
                    "netns", right,
                ],
            );
        };
        link(&a, "eth0", &r, "ra");
        link(&r, "p1", &b, "q1");
        link(&r, "p2", &b, "q2");
        let addr = |ns: &str, dev: &str, cidr: String| {
            run("ip", &["-n", ns, "addr", "add", &cidr, "dev", dev]);
            run("ip", &["-n", ns, "link", "set", dev, "up"]);
        };
        addr(&a, "eth0", format!("10.234.{s}.1/24"));
        addr(&r, "ra", format!("10.234.{s}.2/24"));
        addr(&r, "p1", format!("10.235.{s}.1/24"));
        addr(&b, "q1", format!("10.235.{s}.2/24"));
        addr(&r, "p2", format!("10.236.{s}.1/24"));
        addr(&b, "q2", format!("10.236.{s}.2/24"));
        run(
            "ip",
            &[
                "-n",
                &b,
                "addr",
                "add",
                &format!("{}/32", pair.addr_b()),
                "dev",
                "lo",
            ],
        );
        let sysctl = |ns: &str, setting: &str| {
            run("ip", &["netns", "exec", ns, "sysctl", "-qw", setting]);
        };
        sysctl(&r, "net.ipv4.ip_forward=1");
        // Send buffers sized for the worse path: a flow's unsent bytes
        // drain after its test's end at that path's rate, so autotuning's
        // megabytes would stretch a 300 ms test there past a second; 256 KB
        // (about half of it data) drain in a fifth of one, and still cover
        // the better path's rate over its sub-millisecond round trip.
        for ns in [&a, &b] {
            sysctl(ns, "net.ipv4.tcp_wmem=4096 16384 262144");
        }
        // Each flow by its addresses, protocol and ports.
        sysctl(&r, "net.ipv4.fib_multipath_hash_policy=1");
        // b takes a's packets on either link though it answers on one.
        for dev in ["all", "default", "q1", "q2"] {
            sysctl(&b, &format!("net.ipv4.conf.{dev}.rp_filter=0"));
        }
        run(
            "ip",
            &[
                "-n",
                &a,
                "route",
                "add",
                "default",
                "via",
                &format!("10.234.{s}.2"),
            ],
        );
        run(
            "ip",
            &[
                "-n",
                &r,
                "route",
                "add",
                &pair.addr_b(),
                "nexthop",
                "via",
                &format!("10.235.{s}.2"),
                "dev",
                "p1",
                "nexthop",
                "via",
                &format!("10.236.{s}.2"),
                "dev",
                "p2",
            ],
        );
        run(
            "ip",
            &[
                "-n",
                &b,
                "route",
                "add",
                "default",
                "via",
                &format!("10.235.{s}.1"),
                "dev",
                "q1",
                "src",
                &pair.addr_b(),
            ],
        );
        // Every link at a line rate (so the cells are the links', not the
        // CPUs'), the second path of the two far below it.
        let shape = |ns: &str, dev: &str, rate: &str, burst: &str| {
            run(
                "tc",
                &[
                    "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
                    burst, "latency", "20ms",
                ],
            );
        };
        shape(&a, "eth0", LINE_RATE, "256k");
        shape(&r, "ra", LINE_RATE, "256k");
        shape(&r, "p1", LINE_RATE, "256k");
        shape(&r, "p2", ECMP_SLOW_RATE, ECMP_SLOW_BURST);
        shape(&b, "q1", LINE_RATE, "256k");
        pair
    }

    fn addr_a(&self) -> String {
        format!("10.234.{}.1", self.subnet)
    }

    fn addr_b(&self) -> String {
        format!("10.237.{}.1", self.subnet)
    }

    fn start_agent(&mut self, ns: usize, addr: &str) {
        let log = self.dir.path().join(format!("agent-{ns}.log"));
        let agent = agent_in(&self.names[ns], addr, &self.key, &log);
        self.agents.push(agent);
    }

    /// Bytes the router sent on `dev` (its qdisc's count).
    fn sent(&self, dev: &str) -> u64 {
        let out = Command::new("tc")
            .args(["-n", &self.names[1], "-s", "qdisc", "show", "dev", dev])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .skip_while(|w| *w != "Sent")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {text}"))
    }
}

/// An agent in namespace `ns` listening on `addr`:5310 under `key`, its
/// stderr to `log`; returned once it says it listens.
fn agent_in(ns: &str, addr: &str, key: &Path, log: &Path) -> Child {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(binary())
        .args(["agent", "serve", "--listen", &format!("{addr}:5310")])
        .env("NETLAB_KEY_FILE", key)
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("listening on")
    {
        if Instant::now() >= deadline {
            // Ours, by PID through its handle, before the test fails.
            let _ = child.kill();
            let _ = child.wait();
            panic!("agent in {ns} did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

impl Drop for EcmpPair {
    fn drop(&mut self) {
        for agent in &mut self.agents {
            let _ = agent.kill();
            let _ = agent.wait();
        }
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

#[test(alone)]
fn repeats_split_between_two_equal_cost_paths_are_read_as_ecmp() {
    let mut pair = EcmpPair::new();
    let (a, b) = (pair.addr_a(), pair.addr_b());
    pair.start_agent(0, &a);
    pair.start_agent(2, &b);
    let dir = pair.dir.path().join("run");
    // 16 passes: each new connection takes one path or the other by its
    // ports, so fewer than two of the 16 on either path has odds of
    // 2 * 17 / 2^16 (0.05%).
    const PASSES: usize = 16;
    let output = Command::new("ip")
        .args(["netns", "exec", &pair.names[0]])
        .arg(binary())
        .args(["mesh", "--agents", &format!("{a},{b}"), "--tests", "stream"])
        .args([
            "--duration",
            "300ms",
            "--passes",
            &PASSES.to_string(),
            "--json",
        ])
        .arg("--out")
        .arg(&dir)
        .env("NETLAB_KEY_FILE", &pair.key)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let doc = common::json_of(&output.stdout);
    let lines = results(&dir);
    // Every pass's figure and verdict, for any assertion that fails.
    let passes_seen: String = lines
        .iter()
        .map(|l| {
            format!(
                "pass {} {} -> {}: {} Mbit/s, limited by {} ({})\n",
                l["pass"],
                l["from"],
                l["to"],
                l["figures"]["throughput_mbit_s"],
                l["figures"]["limited_by"],
                l["figures"]["verdict"]
            )
        })
        .collect();
    assert_eq!(doc["measured"], 2 * PASSES, "{doc}\n{passes_seen}");
    // Both of the router's paths carried a's flows: at least the two on
    // each side a group needs (0.3 s at the worse path's rate and its
    // burst is about 220 KB a flow).
    let (fast, slow) = (pair.sent("p1"), pair.sent("p2"));
    assert!(
        fast > 350_000 && slow > 350_000,
        "one path carried nearly nothing (p1 {fast} B, p2 {slow} B): the hash put the flows on one\n{passes_seen}"
    );
    // Every line names its pass; each pass has both directions.
    let mut passes: BTreeMap<u64, usize> = BTreeMap::new();
    for line in &lines {
        *passes.entry(line["pass"].as_u64().unwrap()).or_default() += 1;
    }
    assert_eq!(passes.len(), PASSES, "{passes:?}");
    assert!(passes.values().all(|&n| n == 2), "{passes:?}");
    // Agents are named as the list gave them.
    let (name_a, name_b) = (&a, &b);
    let throughput = findings(&doc, "throughput_mbit_s");
    let bimodal: Vec<&&str> = throughput
        .iter()
        .filter(|f| f.contains("falls in two groups"))
        .collect();
    assert_eq!(bimodal.len(), 1, "{throughput:#?}\n{passes_seen}");
    assert!(
        bimodal[0].starts_with(&format!(
            "path {name_a} -> {name_b}: throughput falls in two groups"
        )),
        "{bimodal:#?}\n{passes_seen}"
    );
    assert!(bimodal[0].contains("ECMP"), "{}\n{passes_seen}", bimodal[0]);
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("class=\"modes\""), "the cell is marked");
    assert!(report.contains(&format!("median of {PASSES} passes")));
}

/// Four agents on one bridge, each sending through a tbf: host 0 at
/// 8 Mbit/s behind a deep queue (1 MB, 1 s at that rate), the others at
/// 50 Mbit/s behind a short one (5 ms). With TCP small queues (and BBR,
/// where it is the default) a sender keeps its own qdisc short, so the
/// delay host 0's load adds sits mostly in its sockets' unsent bytes and
/// in what reaches the tbf: the grade reads the sum.
struct BloatFleet {
    /// h0..h3, then the switch.
    names: Vec<String>,
    subnet: u32,
    agents: Vec<Child>,
    dir: tempfile::TempDir,
    key: PathBuf,
}

const BLOAT_HOSTS: usize = 4;

impl BloatFleet {
    fn new() -> BloatFleet {
        assert!(
            netlab::testbed::netns::has_net_admin(),
            "the rpm mesh test needs CAP_NET_ADMIN: run it as root"
        );
        let tag = format!("nlt{}b", std::process::id());
        let mut names: Vec<String> = (0..BLOAT_HOSTS).map(|i| format!("{tag}h{i}")).collect();
        names.push(format!("{tag}sw"));
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("agent.key");
        Key::generate().unwrap().write_new(&key).unwrap();
        let fleet = BloatFleet {
            names,
            subnet: 10 + std::process::id() % 200,
            agents: Vec::new(),
            dir,
            key,
        };
        for name in &fleet.names {
            run("ip", &["netns", "add", name]);
            run("ip", &["-n", name, "link", "set", "lo", "up"]);
        }
        let sw = fleet.names[BLOAT_HOSTS].as_str();
        let hosts: Vec<&str> = fleet.names[..BLOAT_HOSTS]
            .iter()
            .map(String::as_str)
            .collect();
        common::bridge(sw, &hosts, |host| fleet.addr(host));
        for host in 0..BLOAT_HOSTS {
            let ns = fleet.names[host].as_str();
            // A burst above a GSO packet's 64 KB, so that tbf passes them.
            let queue: &[&str] = if host == 0 {
                &["rate", "8mbit", "burst", "100k", "limit", "1m"]
            } else {
                &["rate", "50mbit", "burst", "100k", "latency", "5ms"]
            };
            let mut args = vec!["-n", ns, "qdisc", "replace", "dev", "eth0", "root", "tbf"];
            args.extend(queue);
            run("tc", &args);
        }
        fleet
    }

    fn addr(&self, host: usize) -> String {
        format!("10.238.{}.{}", self.subnet, host + 1)
    }

    fn start_agent(&mut self, host: usize) {
        let log = self.dir.path().join(format!("agent-{host}.log"));
        let agent = agent_in(&self.names[host], &self.addr(host), &self.key, &log);
        self.agents.push(agent);
    }
}

impl Drop for BloatFleet {
    fn drop(&mut self) {
        for agent in &mut self.agents {
            let _ = agent.kill();
            let _ = agent.wait();
        }
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

#[test(alone)]
fn a_mesh_of_rpm_tests_grades_every_pair_and_reads_the_bloated_sender() {
    let mut fleet = BloatFleet::new();
    for host in 0..BLOAT_HOSTS {
        fleet.start_agent(host);
    }
    let agents: Vec<String> = (0..BLOAT_HOSTS)
        .map(|h| format!("{}:5310", fleet.addr(h)))
        .collect();
    let dir = fleet.dir.path().join("run");
    let output = Command::new("ip")
        .args(["netns", "exec", &fleet.names[1]])
        .arg(binary())
        .args(["mesh", "--agents", &agents.join(","), "--tests", "rpm"])
        .args(["--duration", "3s", "--json", "--out"])
        .arg(&dir)
        .env("NETLAB_KEY_FILE", &fleet.key)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let doc = common::json_of(&output.stdout);
    assert_eq!(doc["failed"], 0, "{doc}");
    let lines = results(&dir);
    let pairs = BLOAT_HOSTS * (BLOAT_HOSTS - 1);
    assert_eq!(lines.len(), pairs, "{lines:#?}");
    // Every pair has its RPM, its working and idle round trips and its
    // grade; the pairs host 0 sends on wait behind its deep queue.
    let seen: String = lines
        .iter()
        .map(|l| {
            format!(
                "{} -> {}: {} RPM, grade {}, working {} ms, idle {} ms; {}\n",
                l["from"],
                l["to"],
                l["figures"]["rpm"],
                l["figures"]["grade"],
                l["figures"]["working_ms"],
                l["figures"]["idle_ms"],
                l["figures"]["verdict"]
            )
        })
        .collect();
    let grade_rank = |g: &str| ["A+", "A", "B", "C", "D", "F"].iter().position(|x| *x == g);
    let (mut worst_other, mut best_bloated) = (0, usize::MAX);
    let (mut least_other, mut most_bloated) = (f64::INFINITY, 0.0f64);
    for line in &lines {
        let f = &line["figures"];
        let rpm = f["rpm"]
            .as_f64()
            .unwrap_or_else(|| panic!("no RPM\n{seen}"));
        assert!(f["working_ms"].as_f64().is_some(), "{seen}");
        let rank = grade_rank(f["grade"].as_str().unwrap()).expect("a grade A+ to F");
        if line["from"].as_str() == Some(agents[0].as_str()) {
            best_bloated = best_bloated.min(rank);
            most_bloated = most_bloated.max(rpm);
        } else {
            worst_other = worst_other.max(rank);
            least_other = least_other.min(rpm);
        }
    }
    // Host 0's load waits behind a sixth of the others' rate: C or worse,
    // never better graded than another pair, at under half their RPM.
    assert!(best_bloated >= 3, "host 0 graded better than C\n{seen}");
    assert!(
        best_bloated >= worst_other,
        "the bloated sender is graded better than another pair\n{seen}"
    );
    assert!(
        most_bloated < least_other / 2.0,
        "the bloated sender's RPM is not under half the others'\n{seen}"
    );
    // The heat maps: RPM and the working round trip, each cell tagged
    // with its grade; one CSV each.
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        report.contains("responsiveness under load"),
        "no RPM heat map"
    );
    for name in ["rpm.csv", "working_ms.csv"] {
        let csv = std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(csv.lines().count(), BLOAT_HOSTS + 1, "{name}: {csv}");
    }
    // The findings read host 0's row.
    let rpm_findings = findings(&doc, "rpm");
    assert!(
        rpm_findings.iter().any(|f| f.contains(&agents[0])),
        "{rpm_findings:#?}\n{seen}"
    );
}
