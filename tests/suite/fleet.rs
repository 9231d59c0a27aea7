//! A sampled fleet (#64) on loopback addresses: 16 agents in 2 zones of 4
//! racks of 2, each probing its own peer list every second (`netlab agent
//! serve --probe-peers`), and one more host in the list whose agent holds
//! another key. `netlab mesh watch` reads every summary each cycle; the
//! stranger is neither answered nor readable, so it is named as losing
//! every call, and no healthy host is named. With the controller gone,
//! the agents go on probing. (`scripts/bench-fleet` runs 500 with faults.)

use crate::common::netlab;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HOSTS: usize = 16;

fn addr(i: usize) -> String {
    format!("127.2.{}.{}", i / 8, 10 + i % 8)
}

struct Agents(Vec<Child>);

impl Drop for Agents {
    fn drop(&mut self) {
        for a in &mut self.0 {
            let _ = a.kill();
            let _ = a.wait();
        }
    }
}

fn agent(i: usize, key: &Path, hosts: &Path, log: &Path) -> Child {
    let labels = [format!("zone=z{}", i / 8), format!("rack=r{}", i / 2)];
    let mut c = Command::new(env!("CARGO_BIN_EXE_netlab"));
    c.args(["agent", "serve", "--key"])
        .arg(key)
        .args(["--listen", &format!("{}:5310", addr(i))])
        .args(["--label", &labels[0], "--label", &labels[1]])
        .arg("--probe-peers")
        .arg(hosts)
        .args([
            "--probe-every",
            "1s",
            "--probe-rate",
            "170",
            "--probe-calls",
            "5",
        ])
        .args(["--probe-timeout", "300ms"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    c.spawn().unwrap()
}

fn watch(hosts: &Path, key: &Path, cycles: &str, more: &[&str]) -> Vec<serde_json::Value> {
    let out = netlab()
        .args(["mesh", "watch", "--agents"])
        .arg(hosts)
        .arg("--key")
        .arg(key)
        .args(["--every", "1s", "--cycles", cycles, "--json"])
        .args(more)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test(alone)]
fn a_sampled_fleet_probes_on_its_own_and_names_the_host_without_the_key_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (key, other_key) = (dir.path().join("key"), dir.path().join("other.key"));
    for k in [&key, &other_key] {
        netlab()
            .args(["agent", "keygen", "--out"])
            .arg(k)
            .assert()
            .success();
    }
    let hosts = dir.path().join("hosts");
    let stranger = 127; // its own rack, in zone 1
    let mut lines: String = (0..HOSTS)
        .map(|i| format!("{}:5310 zone=z{} rack=r{}\n", addr(i), i / 8, i / 2))
        .collect();
    lines.push_str(&format!("127.2.1.{stranger}:5310 zone=z1 rack=lone\n"));
    std::fs::write(&hosts, lines).unwrap();
    let mut agents = Agents(Vec::new());
    for i in 0..HOSTS {
        let log = dir.path().join(format!("agent-{i}.log"));
        agents.0.push(agent(i, &key, &hosts, &log));
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_netlab"));
    c.args(["agent", "serve", "--key"])
        .arg(&other_key)
        .args(["--listen", &format!("127.2.1.{stranger}:5310")])
        .args([
            "--label",
            "zone=z1",
            "--label",
            "rack=lone",
            "--probe-peers",
        ])
        .arg(&hosts)
        .args([
            "--probe-every",
            "1s",
            "--probe-rate",
            "170",
            "--probe-calls",
            "5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    agents.0.push(c.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..HOSTS {
        let log = dir.path().join(format!("agent-{i}.log"));
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("probes: 17 hosts")
        {
            assert!(
                Instant::now() < deadline,
                "agent {i} never planned its probes"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    let cycles = watch(&hosts, &key, "4", &[]);
    assert_eq!(cycles.len(), 4);
    let last = &cycles[3];
    assert_eq!(last["agents"], 17);
    assert_eq!(last["answered"], 16, "{last}");
    let unanswered = last["unanswered"].as_array().unwrap();
    assert_eq!(unanswered.len(), 1);
    assert_eq!(unanswered[0][0], format!("127.2.1.{stranger}:5310"));
    // Every ordered pair of the 16 keyed agents seen, and some of the
    // calls to the stranger (all lost).
    let covered = last["covered"][0].as_u64().unwrap();
    assert!(covered >= (HOSTS * (HOSTS - 1)) as u64, "{last}");
    let findings = last["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{last}");
    assert_eq!(
        findings[0]["subject"]["host"]["host"],
        format!("127.2.1.{stranger}:5310"),
        "{last}"
    );
    let loss = &findings[0]["trouble"]["loss"];
    assert_eq!(loss["calls"], loss["lost"], "{last}");
    // The racks' lines: 8 racks of 2 and the stranger's of 1 (not a rack line).
    assert_eq!(last["racks"].as_array().unwrap().len(), 8);

    // No controller for two seconds: the agents kept probing.
    let before = cycles[3]["calls"].as_u64().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    // Again, with a throughput pass over 2 sampled agents beside the
    // cycles: a run directory `netlab mesh report` reads.
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let out_s = out.to_str().unwrap();
    let again = watch(
        &hosts,
        &key,
        "3",
        &[
            "--out",
            out_s,
            "--stream-every",
            "1s",
            "--stream-sample",
            "2",
            "--stream-duration",
            "1s",
        ],
    );
    let report_cycle = |line: &serde_json::Value| line["cycle"].as_u64().unwrap();
    assert!(report_cycle(&again[0]) >= report_cycle(last) + 2);
    assert!(again[0]["calls"].as_u64().unwrap() > 0 && before > 0);
    assert_eq!(again[0]["answered"], 16);
    let passes = std::fs::read_to_string(out.join("throughput.jsonl")).unwrap();
    let pass: serde_json::Value = serde_json::from_str(passes.lines().next().unwrap()).unwrap();
    // The two sampled agents, both directions (the stranger may be drawn:
    // then its tests failed, named).
    assert_eq!(pass["agents"].as_array().unwrap().len(), 2, "{pass}");
    if pass["lost"].as_array().unwrap().is_empty() {
        assert_eq!(pass["measured"], 2, "{pass}");
    }
    let run_dir = pass["dir"].as_str().unwrap();
    netlab()
        .args(["mesh", "report", run_dir])
        .assert()
        .success();
}

#[test]
fn bad_probe_settings_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    netlab()
        .args(["agent", "keygen", "--out"])
        .arg(&key)
        .assert()
        .success();
    for (flags, says) in [
        (vec!["--probe-peers", "dns:"], "no name after dns:"),
        (
            vec!["--probe-peers", "/dev/null", "--probe-rate", "0"],
            "--probe-rate 0",
        ),
        (
            vec!["--probe-peers", "/dev/null", "--probe-every", "500ms"],
            "at least 1 s",
        ),
        (
            vec![
                "--probe-peers",
                "/dev/null",
                "--probe-rate",
                "0.1",
                "--probe-every",
                "1s",
            ],
            "no room for one probe",
        ),
    ] {
        let out = netlab()
            .args(["agent", "serve", "--key"])
            .arg(&key)
            .args(["--listen", "127.2.3.1:5310"])
            .args(&flags)
            .timeout(Duration::from_secs(10))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{flags:?}: {err}"
        );
    }
    let out = netlab()
        .args(["agent", "serve", "--key"])
        .arg(&key)
        .args(["--listen", "0.0.0.0:5399", "--probe-peers", "/dev/null"])
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--probe-as"));
    let out = netlab()
        .args(["mesh", "watch", "--agents", "127.2.3.1,127.2.3.2", "--key"])
        .arg(&key)
        .args(["--every", "100ms"])
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1 s"));
}
