//! `netlab login`, the typing-load experiment: a short real run, and the
//! bad input it must refuse.

use assert_cmd::Command;
use serde_json::Value;

fn netlab() -> Command {
    Command::cargo_bin("netlab").unwrap()
}

#[test]
fn a_short_run_measures_every_cell() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let run = netlab()
        .args([
            "login",
            "--users",
            "4",
            "--relay",
            "fork,uring,telnetd",
            "--protocol",
            "rlogin,telnet",
        ])
        .args(["--duration", "1s", "--warmup", "500ms", "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 6);
    for record in records {
        // telnetd speaks no rlogin: that cell is recorded as failed, with
        // the reason, and the others run.
        if record["params"]["relay"] == "telnetd" && record["params"]["protocol"] == "rlogin" {
            assert!(record["result"].is_null());
            assert!(
                record["error"].as_str().unwrap().contains("TELNET only"),
                "{record}"
            );
            continue;
        }
        let r = &record["result"];
        let cell = format!("{} {}", r["params"]["relay"], r["params"]["protocol"]);
        let keys = r["typist"]["keystrokes"].as_u64().unwrap();
        // 4 users x 5 chars/s x 1 s, give or take the window's edges.
        assert!((15..=25).contains(&keys), "{cell}: {keys} keystrokes");
        let echoes = r["typist"]["echoes"].as_u64().unwrap();
        assert!(echoes + 4 >= keys, "{cell}: {echoes} echoes of {keys}");
        assert!(r["typist"]["echo_p50_ms"].as_f64().unwrap() > 0.0, "{cell}");
        assert!(r["segments_in_per_s"].as_f64().unwrap() > 0.0, "{cell}");
        assert!(
            r["syscalls_per_s"].as_f64().is_some(),
            "{cell}: no system-call count: {}",
            r["syscalls_source"]
        );
        assert_eq!(r["verdict"], "normal", "{cell}: {r}");
        assert!(
            r["server_cpu_per_keystroke_us"].as_f64().unwrap() > 0.0,
            "{cell}"
        );
    }
    // The records are on disk as well.
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 6);
}

#[test]
fn find_limit_doubles_up_to_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let run = netlab()
        .args([
            "login",
            "--find-limit",
            "--relay",
            "epoll",
            "--users",
            "2",
            "--max-users",
            "4",
        ])
        .args([
            "--duration",
            "500ms",
            "--warmup",
            "200ms",
            "--json",
            "--out",
        ])
        .arg(dir.path().join("r.jsonl"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    let limit = &doc["find_limit"][0];
    assert_eq!(limit["relay"], "epoll");
    assert_eq!(limit["sustains"], 4, "{doc}");
    assert!(
        limit["why"].as_str().unwrap().contains("cap of 4"),
        "{limit}"
    );
    // Each probe is a record: 2 users, then 4.
    let users: Vec<u64> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["params"]["users"].as_u64().unwrap())
        .collect();
    assert_eq!(users, [2, 4]);
}

#[test]
fn output_is_typed_through_each_design_and_paced_by_baud() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let run = netlab()
        .args([
            "output",
            "--size",
            "64K",
            "--relay",
            "epoll,splice",
            "--protocol",
            "rlogin,telnet",
            "--json",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 4, "{doc}");
    for record in records {
        let r = &record["result"];
        // The terminal turns each LF into CR LF, so more arrives than was written.
        assert!(r["bytes_received"].as_u64().unwrap() >= 65536, "{r}");
        assert!(r["server_cpu_us_per_kb"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["mean_segment_bytes"].as_f64().unwrap() > 0.0, "{r}");
    }
    // 1200 bytes at 9600 baud (960 characters a second) take about 1.25 s.
    let run = netlab()
        .args([
            "output",
            "--size",
            "1200",
            "--baud",
            "9600",
            "--relay",
            "epoll",
            "--protocol",
            "rlogin",
            "--json",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    let kbs = doc["records"][0]["result"]["kbytes_per_s"]
        .as_f64()
        .unwrap();
    assert!((0.7..1.3).contains(&kbs), "paced at {kbs} KB/s");
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let cases: [(&[&str], &str); 5] = [
        (&["--users", "0"], "zero users"),
        (&["--rate", "-1"], "--rate"),
        (&["--rate", "2000"], "at most 1000"),
        (&["--corpus", "/nonexistent/corpus.txt"], "cannot read"),
        (&["--protocol", "ssh"], "expected telnet or rlogin"),
    ];
    for (args, why) in cases {
        let run = netlab().arg("login").args(args).output().unwrap();
        assert!(!run.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
}
