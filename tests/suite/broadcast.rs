//! `netlab broadcast` for real: the emulated Ethernet (a bridge in a
//! namespace), 1990 hosts on TAP devices, Linux hosts in namespaces.
//!
//! - Among Suns that take the 0's broadcast for theirs, one datagram to the
//!   all-1's broadcast grows hop by hop, and the run's own cap on frames
//!   bounds it (the TTL of 255 that 4.2BSD's UDP used would not, soon);
//!   with routed's TTL of 30, the TTL does.
//! - Today's Linux hosts, forwarding on and given the same wrong broadcast
//!   address, forward none of it and send nothing; the datagram sent to
//!   an unused address as a link-level broadcast is dropped by ip_forward,
//!   by the kernel's own account.
//! - Each of the document's fixes stops the storm (or, the longer
//!   timeout, keeps the heartbeat).
//! - Nothing is left behind: namespaces, TAP devices, bridges, processes,
//!   the tracefs instance.
//!
//! Root is needed (CAP_NET_ADMIN); without it the storm test fails saying so.

use crate::common;
use crate::common::words;

use serde_json::Value;
use std::process::{Command, Stdio};

fn require_root() {
    assert!(
        netlab::testbed::netns::has_net_admin(),
        "the broadcast test needs CAP_NET_ADMIN: run it as root"
    );
}

/// The PIDs of every `netlab endpoint` process on the host (the model's
/// among them while a storm runs).
fn endpoints() -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-f", "netlab endpoint"])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// Runs `netlab broadcast ARGS` to its end; its records, and what it left.
fn storm(args: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let before = endpoints();
    let child = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .arg("broadcast")
        .args(args)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let done = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{args:?}: {}{stdout}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        common::namespaces_of(pid).is_empty(),
        "left behind: {:?}",
        common::namespaces_of(pid)
    );
    assert!(
        !std::path::Path::new(&format!("/tmp/netlab-tracefs-{pid}")).exists(),
        "the private tracefs mount was left"
    );
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(
        !links.contains(": tap"),
        "a TAP device in the host's namespace: {links}"
    );
    let after = endpoints();
    assert!(
        after.iter().all(|p| before.contains(p)),
        "an endpoint process was left running: {after:?} (before: {before:?})"
    );
    let records = common::lines_of(&out);
    assert!(records.iter().all(|r| r["error"].is_null()), "{records:#?}");
    println!("{stdout}");
    if args.contains(&"--json") {
        // The document holds every record as the file does, and each
        // run's reading beside it.
        let doc = common::json_of(&done.stdout);
        assert_eq!(doc["experiment"], "broadcast");
        assert_eq!(doc["records"].as_array().unwrap(), &records, "{doc:#}");
        let readings = doc["readings"].as_array().unwrap();
        assert_eq!(readings.len(), records.len());
        for (reading, record) in readings.iter().zip(&records) {
            assert_eq!(
                reading["reading"]["copies"], record["result"]["model"]["copies"],
                "{reading:#}"
            );
        }
    }
    records
}

fn by_fix<'a>(records: &'a [Value], fix: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["params"]["fix"] == fix)
        .unwrap_or_else(|| panic!("no record for {fix}"))
}

fn hops(record: &Value) -> Vec<u64> {
    record["result"]["model"]["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_u64().unwrap())
        .collect()
}

#[test(alone)]
fn the_storm_grows_is_bounded_and_each_fix_stops_it_while_linux_forwards_none() {
    require_root();

    // TTL 255: only the run's own cap stops it.
    let capped = storm(&["--fixes", "none", "--ttl", "255", "--max-frames", "3000"]);
    let run = &capped[0]["result"];
    assert_eq!(run["model"]["stopped_by"], "FrameCap", "{run:#}");
    assert!(run["model"]["frames"].as_u64().unwrap() >= 3000);
    let h = hops(&capped[0]);
    assert!(
        h.len() >= 3 && h[0] >= 2 && h[1] > h[0] && h[2] > h[1],
        "each hop multiplies the copies: {h:?}"
    );

    // Nor would it stop by itself within a second: the time cap does.
    let timed = storm(&words("--fixes none --ttl 255 --max-time 1s --json"));
    assert_eq!(timed[0]["result"]["model"]["stopped_by"], "TimeCap");
    let elapsed = timed[0]["result"]["model"]["elapsed_ms"].as_f64().unwrap();
    assert!(
        (1000.0..3000.0).contains(&elapsed),
        "stopped at {elapsed} ms"
    );

    // routed's TTL of 30: the TTL stops it; then each fix.
    let records = storm(&[]);
    let none = &by_fix(&records, "none")["result"];
    assert_eq!(none["model"]["stopped_by"], "Ttl", "{none:#}");
    let copies = none["model"]["copies"].as_u64().unwrap();
    let suns = by_fix(&records, "none")["params"]["suns"].as_u64().unwrap();
    assert!(
        copies > 10 * suns,
        "a storm, not a handful of copies: {copies}"
    );
    for fix in ["one-broadcast", "router", "no-link-broadcast-forwarding"] {
        let model = &by_fix(&records, fix)["result"]["model"];
        assert_eq!(model["copies"], 0, "{fix}: {model:#}");
        assert_eq!(model["stopped_by"], "NoStorm", "{fix}");
    }
    let longer = by_fix(&records, "longer-timeout");
    let gaps = &longer["result"]["model"]["longest_gap_ms"];
    let longest = gaps[0].as_f64().unwrap().max(gaps[1].as_f64().unwrap());
    assert!(
        longest <= longer["params"]["longer_timeout_ms"].as_f64().unwrap(),
        "the longer timeout outlasts the storm's gap: {longest} ms"
    );
    assert!(
        longer["result"]["model"]["copies"].as_u64().unwrap() > 0,
        "the storm itself goes on"
    );

    // Today's Linux hosts, in every run: nothing forwarded, nothing sent.
    for record in capped.iter().chain(&timed).chain(&records) {
        let linux = record["result"]["linux"].as_array().unwrap();
        assert!(!linux.is_empty());
        for host in linux {
            assert_eq!(host["forwarded"], 0, "{host}");
            assert_eq!(host["frames_sent"], 0, "{host}");
        }
    }
    let linux = none["linux"].as_array().unwrap();
    assert!(
        linux.iter().all(|h| h["in_bcast"].as_u64().unwrap() > 0),
        "they took the storm in: {linux:?}"
    );
    let drops = none["kernel_drops"]
        .as_array()
        .expect("tracefs works on this machine");
    let at_forward: u64 = drops
        .iter()
        .filter(|d| d["function"] == "ip_forward")
        .map(|d| d["count"].as_u64().unwrap())
        .sum();
    assert!(
        at_forward >= linux.len() as u64,
        "each Linux host's ip_forward dropped the stray link-level broadcast: {drops:?}"
    );
    let router = &by_fix(&records, "router")["result"]["router"];
    assert_eq!(
        router["forwarded"], 0,
        "the router kept the broadcast on its segment"
    );
}

#[test(alone)]
fn bad_plans_are_refused_before_anything_is_built() {
    for (args, says) in [
        (vec!["--hosts", "2"], "at least 3 hosts"),
        (vec!["--max-frames", "0"], "--max-frames of 0"),
        (vec!["--max-time", "0s"], "greater than zero"),
        (
            vec!["--sun-broadcast", "10.91.0.0"],
            "outside the hosts' network",
        ),
        (vec!["--sun-broadcast", "10.90.0.9"], "not a broadcast"),
    ] {
        let out = common::netlab()
            .arg("broadcast")
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
