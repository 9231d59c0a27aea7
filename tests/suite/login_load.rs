//! `netlab login`, the typing-load experiment: a short real run, and the
//! bad input it must refuse.

use crate::common;
use crate::common::words;
use common::{descendants, netlab, run_json};
use serde_json::Value;

#[test(alone)]
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
    // One cell cannot run (below): the others' results are printed, and the
    // run says part of it is missing (exit 3), not success.
    assert_eq!(
        run.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["failed_cells"], 1);
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
        assert!(r["packets_in_per_s"].as_f64().unwrap() > 0.0, "{cell}");
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
        // The server's own work a keystroke, the 1989 model's input: perf
        // on its tasks, and (netlab's relays only) its pty transfers, a
        // write of the keystroke and a read of its echo.
        let k = &r["per_keystroke"];
        assert!(k["syscalls"].as_f64().unwrap() > 1.0, "{cell}: {k}");
        assert!(k["context_switches"].as_f64().unwrap() > 0.0, "{cell}: {k}");
        assert!(k["packets_in"].as_f64().unwrap() > 0.5, "{cell}: {k}");
        // The run's own segments, not the host's: other tests' loopback
        // traffic beside this one must not count (it once made 376
        // packets a keystroke).
        assert!(
            r["packets_source"].as_str().unwrap().contains("sessions"),
            "{cell}: {}",
            r["packets_source"]
        );
        assert!(k["packets_in"].as_f64().unwrap() < 4.0, "{cell}: {k}");
        match r["params"]["relay"].as_str().unwrap() {
            "telnetd" => assert!(k["pty_transfers"].is_null(), "{cell}: {k}"),
            _ => {
                let t = k["pty_transfers"].as_f64().unwrap();
                assert!((1.0..=3.0).contains(&t), "{cell}: {k}");
            }
        }
    }
    // The records are on disk as well.
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 6);
    // Fed into the 1989 model: today's relays on a Sun-3/260.
    let model = model_json(
        netlab()
            .args(["login", "--stack", "sunos35", "--json", "--counts-from"])
            .arg(&out),
    );
    let today = model["today"].as_array().unwrap();
    let servers: Vec<&str> = today
        .iter()
        .map(|m| m["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["fork", "uring"], "{model}");
    for m in today {
        let users = m["prediction"]["melting_users"].as_f64().unwrap();
        assert!(users > 1.0 && users.is_finite(), "{m}");
    }
    // The same records through a pipe (`-`) give the same model.
    let piped = model_json(
        netlab()
            .args(words("login --stack sunos35 --json --counts-from -"))
            .pipe_stdin(&out)
            .unwrap(),
    );
    assert_eq!(piped["today"], model["today"]);
}

/// The JSON a model run prints (it writes no records).
fn model_json(command: &mut assert_cmd::Command) -> Value {
    let run = command.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout).unwrap()
}

/// `--stack sunos35`: the 1989 login host's predicted rows and melting
/// points, and what it refuses.
#[test]
fn the_1989_model_predicts_both_designs_and_refuses_what_it_does_not_describe() {
    let doc = model_json(netlab().args(["login", "--stack", "sunos35", "--json"]));
    let predictions = doc["predictions"].as_array().unwrap();
    assert_eq!(predictions.len(), 2);
    let melts = |i: usize| predictions[i]["melting_users"].as_f64().unwrap();
    // The kernel linkage outlasts rlogind; both between 000's 16 and 100.
    assert!(
        melts(1) > melts(0) && melts(0) > 16.0 && melts(1) < 100.0,
        "{doc}"
    );
    let rows = predictions[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    // At 16 users the counts are 000's own row.
    assert_eq!(rows[0]["syscalls_per_s"].as_f64().unwrap().round(), 1126.0);
    assert_eq!(doc["cost_derivations"].as_array().unwrap().len(), 4);
    for (args, why) in [
        (
            &["--placement", "netns"][..],
            "--placement, --from and --to do not apply",
        ),
        (
            &["--to", "127.0.0.1"][..],
            "--placement, --from and --to do not apply",
        ),
        (&["--protocol", "telnet"][..], "the model describes rlogin"),
        (&["--host-cpu", "sun3"][..], "--host-cpu"),
        (&["--find-limit"][..], "--find-limit"),
        (&["--users", "0"][..], "--users"),
        (
            &["--counts-from", "/nonexistent.jsonl"][..],
            "--counts-from",
        ),
    ] {
        let run = netlab()
            .args(["login", "--stack", "sunos35"])
            .args(args)
            .output()
            .unwrap();
        assert!(!run.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    let run = netlab()
        .args(["login", "--counts-from", "x.jsonl"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&run.stderr).contains("add --stack sunos35"));
}

#[test(alone)]
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
            // Fast typists: each probe's window stretches to hold 400
            // keystrokes, 40 s at 2 users of 5 chars/s, 4 s at 50.
            "--rate",
            "50",
        ])
        .args(words("--duration 500ms --warmup 200ms --json --out"))
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

#[test(alone)]
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
    // TCP_NODELAY on the server: output leaves in the pty's chunks instead
    // of being held by Nagle into near-MSS segments (loopback's MSS is 64 KB).
    let mean_segment = |nodelay: bool| {
        let mut args = words("output --size 1M --relay epoll --protocol rlogin");
        if nodelay {
            args.push("--nodelay");
        }
        let doc = run_json(&args, &out);
        let r = &doc["records"][0]["result"];
        assert_eq!(r["params"]["nodelay"], nodelay, "{r}");
        r["mean_segment_bytes"].as_f64().unwrap()
    };
    // Medians of three runs each: a busy machine (the other tests) lets the
    // pty gather larger chunks, which narrows the gap.
    let median = |nodelay: bool| {
        let mut v: Vec<f64> = (0..3).map(|_| mean_segment(nodelay)).collect();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let (nagle, nodelay) = (median(false), median(true));
    assert!(
        nodelay < 0.8 * nagle,
        "mean segment {nodelay} B with TCP_NODELAY vs {nagle} B with Nagle"
    );
    // 1200 bytes at 9600 baud (960 characters a second) take about 1.25 s.
    let run = netlab()
        .args(words(
            "output --size 1200 --baud 9600 --relay epoll --protocol rlogin --json",
        ))
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
    let cases: [(&[&str], &str); 19] = [
        (
            &["--host-cpu", "0.5", "--rate", "1000"],
            "is below what one session typing 1000 chars/s needs here",
        ),
        (&["--load", "udp:4"], "--load udp:4: the load is `stream`"),
        (&["--load", "stream:17"], "from 1 to 16 streams"),
        (&["--load", "stream:0"], "from 1 to 16 streams"),
        (&["--load-fix", "fq_codel"], "give --load stream[:N]"),
        (
            &["--load", "stream", "--load-fix", "cake"],
            "--load-fix cake: not one of",
        ),
        (
            &["--load", "stream", "--load-fix", "fq_codel"],
            "--load-fix fq_codel: the discipline is the emulated link's",
        ),
        (
            &["--load", "stream", "--find-limit"],
            "--find-limit with --load",
        ),
        (
            &["--queue-discipline", "fq_codel"],
            "shape the netns placement's link: add netns to --placement",
        ),
        (&["--users", "0"], "zero users"),
        (
            &["--users", "16,70000"],
            "--users 70000: at most 65536 users",
        ),
        (
            &["--find-limit", "--max-users", "100000"],
            "--max-users 100000: at most 65536",
        ),
        (&["--duration", "2days"], "longer than a day"),
        (&["--rate", "-1"], "--rate"),
        (&["--rate", "2000"], "at most 1000"),
        (&["--corpus", "/nonexistent/corpus.txt"], "cannot read"),
        (&["--protocol", "x25"], "invalid value 'x25'"),
        (&["--placement", "mars"], "expected loopback or netns"),
        (
            &["--placement", "netns", "--link", "carrier-pigeon"],
            "carrier-pigeon",
        ),
    ];
    for (args, why) in cases {
        let run = netlab().arg("login").args(args).output().unwrap();
        assert!(!run.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
}

/// No test user, and no sshd of netlab's, is left once a run is over.
fn assert_sshd_cleaned_up() {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let me = std::process::id();
    for line in passwd.lines().filter(|l| l.starts_with("netlab-ssh-")) {
        // Another test binary's run may be in progress; ours are children of
        // netlab processes that have exited, whose PIDs no longer run.
        let pid: u32 = line["netlab-ssh-".len()..]
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            pid == me || std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "test user left behind: {line}"
        );
    }
}

#[test(alone)]
fn real_servers_and_linemode_run_beside_netlabs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = run_json(
        &[
            "login",
            "--users",
            "4",
            "--relay",
            "sshd,telnetd,epoll",
            "--protocol",
            "telnet,telnet-linemode",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
        ],
        &out,
    );
    let records = doc["records"].as_array().unwrap();
    // sshd runs once, over SSH, whatever protocols are asked.
    let cells: Vec<String> = records
        .iter()
        .map(|r| format!("{} {}", r["params"]["relay"], r["params"]["protocol"]))
        .collect();
    assert_eq!(
        cells,
        [
            r#""sshd" "ssh""#,
            r#""telnetd" "telnet""#,
            r#""epoll" "telnet""#,
            r#""telnetd" "telnet-linemode""#,
            r#""epoll" "telnet-linemode""#,
        ]
    );
    for record in records {
        let r = &record["result"];
        assert!(r.is_object(), "{record}");
        let cell = format!("{} {}", r["params"]["relay"], r["params"]["protocol"]);
        let t = &r["typist"];
        let keys = t["keystrokes"].as_u64().unwrap();
        assert!((30..=50).contains(&keys), "{cell}: {keys} keystrokes");
        let awaited = t["awaited"].as_u64().unwrap();
        let echoes = t["echoes"].as_u64().unwrap();
        assert!(
            echoes + 4 >= awaited && echoes > 0,
            "{cell}: {echoes} of {awaited}"
        );
        assert_eq!(r["verdict"], "normal", "{cell}: {r}");
        assert!(
            r["server_cpu_per_keystroke_us"].as_f64().unwrap() > 0.0,
            "{cell}"
        );
        if r["params"]["protocol"] == "telnet-linemode" {
            // Whole lines: one echo (cat's copy) per line, far fewer than keys.
            assert_eq!(t["per_line"], true, "{cell}");
            assert!(
                awaited * 5 < keys,
                "{cell}: {awaited} lines for {keys} keys"
            );
        } else {
            assert_eq!(awaited, keys, "{cell}");
        }
        // The ssh clients' own CPU is measured apart from the generator's.
        let programs = t["client_programs_cpu_s"].as_f64().unwrap();
        assert_eq!(
            programs > 0.0,
            r["params"]["relay"] == "sshd",
            "{cell}: {programs}"
        );
    }
    let doc = run_json(
        &[
            "output",
            "--size",
            "256K",
            "--relay",
            "sshd,telnetd",
            "--protocol",
            "telnet",
        ],
        &out,
    );
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{doc}");
    for record in records {
        let r = &record["result"];
        assert!(r.is_object(), "{record}");
        assert!(r["bytes_received"].as_u64().unwrap() >= 256 * 1024, "{r}");
        assert!(r["server_cpu_us_per_kb"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["client_cpu_us_per_kb"].as_f64().unwrap() > 0.0, "{r}");
        // ssh's socket is read through pidfd_getfd: its segments are counted.
        assert!(r["segments_per_kb"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_sshd_cleaned_up();
}

/// 000's typists on 003's queues: four cubic streams fill a 50 Mbit/s
/// link's 1000-packet drop-tail queue, and the typists' echoes wait in it;
/// FQ-CoDel on the same link gives their flow its own queue.
#[test(alone)]
fn typists_under_a_bulk_load_wait_in_the_drop_tail_queue_and_fq_codel_frees_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = run_json(
        &[
            "login",
            "--users",
            "8",
            "--relay",
            "epoll",
            "--placement",
            "netns",
            "--link-rate",
            "50mbit",
            "--delay",
            "5ms",
            "--queue",
            "1000p",
            // Cubic overfills the 1000-packet queue within its first
            // few hundred milliseconds; the windows then hold some 120
            // keystrokes each.
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--load",
            "stream:4",
            "--load-congestion",
            "cubic",
            "--load-fix",
            "none,fq_codel",
        ],
        &out,
    );
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{doc}");
    let cell = |fix: &str| {
        records
            .iter()
            .find(|r| r["params"]["load"]["fix"] == fix)
            .unwrap_or_else(|| panic!("no {fix} cell: {doc}"))
    };
    let (tail, fair) = (&cell("none")["result"], &cell("fq_codel")["result"]);
    for r in [tail, fair] {
        // The load ran at the link's rate beside the typing.
        let goodput = r["load"]["down_bytes"].as_f64().unwrap() * 8.0
            / r["load"]["seconds"].as_f64().unwrap();
        assert!(goodput > 30e6, "the load carried {goodput} bit/s: {r}");
        assert_eq!(r["typist"]["unechoed"], 0, "{r}");
    }
    // The emulator's queue from the server's end to the users' held the
    // drop-tail cell's packets far longer than the fair queue's.
    let sojourn = |r: &Value| {
        r["emulator"]["bottleneck"][1]["sojourn_ms_p99"]
            .as_f64()
            .unwrap()
    };
    assert!(sojourn(tail) > 50.0, "{}", sojourn(tail));
    let p99 = |r: &Value| r["typist"]["echo_p99_ms"].as_f64().unwrap();
    assert!(p99(tail) > 100.0, "drop-tail's echo p99 {} ms", p99(tail));
    // Degraded, or unusable where a dropped echo waited a retransmission
    // past 1 s (the queue overflows once cubic fills it).
    assert_ne!(tail["verdict"], "normal", "{tail}");
    // The fair queue's cell is judged by its queue only when the machine
    // had a CPU for the emulator and the ends: on a machine other work
    // saturated, the experiment says so and sets the verdict aside.
    let result: netlab::experiments::login::record::LoginResult =
        serde_json::from_value(fair.clone()).unwrap();
    if let Some(why) = netlab::experiments::login::analysis::contended(&result) {
        eprintln!(
            "fq_codel's cell was contended ({why}): echo p99 {} ms against drop-tail's {} ms",
            p99(fair),
            p99(tail)
        );
        return;
    }
    assert!(
        p99(fair) < p99(tail) / 3.0 && p99(fair) < 100.0,
        "fq_codel's echo p99 {} ms against drop-tail's {} ms",
        p99(fair),
        p99(tail)
    );
    assert_eq!(fair["verdict"], "normal", "{fair}");
}

#[test(alone)]
fn both_experiments_run_across_a_netns_link() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = run_json(
        &words(
            "login --users 4 --relay epoll --protocol rlogin --placement netns --duration 1s --warmup 500ms",
        ),
        &out,
    );
    let record = &doc["records"][0];
    assert_eq!(record["placement"], "netns", "{record}");
    let r = &record["result"];
    assert!(
        r["packets_source"].as_str().unwrap().contains("interface"),
        "{r}"
    );
    // The server receives each keystroke and sends each echo over the link.
    assert!(r["packets_in_per_s"].as_f64().unwrap() >= 15.0, "{r}");
    assert!(r["packets_out_per_s"].as_f64().unwrap() >= 15.0, "{r}");
    assert_eq!(r["link"]["profile"]["name"], "ether10", "{r}");
    assert_eq!(r["verdict"], "normal", "{r}");
    let doc = run_json(
        &words("output --size 64K --relay splice --protocol rlogin --placement netns"),
        &out,
    );
    let r = &doc["records"][0]["result"];
    // A 10 Mbit/s link carries at most ~1.2 MB/s.
    let kbs = r["kbytes_per_s"].as_f64().unwrap();
    assert!(kbs > 100.0 && kbs < 1300.0, "{kbs} KB/s over ether10: {r}");
}

#[test(alone)]
fn after_sigkill_testbed_clean_removes_sshds_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let test_users = || -> Vec<String> {
        std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("netlab-ssh-"))
            .map(|l| format!("{}:", l.split(':').next().unwrap()))
            .collect()
    };
    let before = test_users();
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(["login", "--relay", "sshd", "--users", "2"])
        .args(["--duration", "60s", "--out"])
        .arg(dir.path().join("r.jsonl"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The serving endpoint, a child of the run, names the user after itself.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let user = loop {
        if let Some(user) = test_users().into_iter().find(|u| !before.contains(u)) {
            break user;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sshd cell never created its test user"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let has_user = || {
        std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .any(|l| l.starts_with(&user))
    };
    // Let sshd start (wait for it: a loaded machine can take longer than a
    // fixed pause, and then there is no sshd to orphan) and the sessions
    // log in, then kill netlab outright.
    let endpoint = user.trim_start_matches("netlab-ssh-").trim_end_matches(':');
    let sshd_of_endpoint = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            status.lines().any(|l| l == format!("PPid:\t{endpoint}"))
                && String::from_utf8_lossy(&cmdline).contains("sshd")
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !sshd_of_endpoint() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sshd cell never started sshd"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(has_user(), "SIGKILL leaves the test user behind");
    // Its serving endpoint dies with it (PR_SET_PDEATHSIG), a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::path::Path::new(&format!("/proc/{endpoint}/cmdline")).exists()
        && std::fs::read_to_string(format!("/proc/{endpoint}/cmdline")).is_ok_and(|c| !c.is_empty())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The run's sshd, by its config in the test user's home: still there
    // (orphaned), unless it ended on its own.
    let home = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find(|l| l.starts_with(&user))
        .and_then(|l| l.split(':').nth(5).map(String::from))
        .expect("the test user's home");
    let sshds_of_run = || -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| {
                let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
                let parent = status.lines().find(|l| l.starts_with("PPid:"))?.to_string();
                (cmdline.contains("sshd") && cmdline.contains(&home))
                    .then(|| format!("{cmdline} ({parent})"))
            })
            .collect()
    };
    let left = sshds_of_run();
    let clean = netlab().args(["testbed", "clean"]).output().unwrap();
    assert!(clean.status.success());
    let said = String::from_utf8_lossy(&clean.stdout);
    assert!(
        said.contains(&format!("removed test user {}", user.trim_end_matches(':'))),
        "{said}\nleft before it: {left:?}"
    );
    assert!(!has_user(), "the test user is gone");
    if left.is_empty() {
        eprintln!("the run's sshd had ended before the clean-up: nothing to stop");
    } else {
        assert!(
            said.contains("stopped orphaned sshd "),
            "{said}\nleft before it: {left:?}"
        );
    }
    // No sshd of that run is left.
    let still = sshds_of_run();
    assert!(still.is_empty(), "{still:?}");
}

/// The netlab cgroups of this host's CPU hierarchies.
fn netlab_cgroups() -> Vec<String> {
    [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/unified",
    ]
    .iter()
    .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
    .map(|e| e.path().display().to_string())
    .filter(|p| {
        p.rsplit('/')
            .next()
            .is_some_and(|n| n.starts_with("netlab-"))
    })
    .collect()
}

#[test(alone)]
fn a_small_cpu_budget_makes_the_server_melt_and_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let before = netlab_cgroups();
    let cell = |budget: Option<&str>| {
        let mut args = words("login --relay epoll --users 48 --duration 1s --warmup 300ms");
        if let Some(b) = budget {
            args.extend(["--host-cpu", b]);
        }
        let doc = run_json(&args, &out);
        doc["records"][0]["result"].clone()
    };
    let free = cell(None);
    // 48 users at 5 keystrokes a second need 2-3% of a CPU here; 0.3% of
    // one CPU (1 ms every 333 ms) cannot serve them. (At 1% the kernel's
    // bandwidth slack, up to about a millisecond a CPU a period on top of
    // the quota, let a 2.5% server run nearly unthrottled on 2 CPUs.)
    let starved = cell(Some("0.3"));
    assert!(
        starved["host_cpu"]
            .as_str()
            .unwrap()
            .starts_with("0.3% of one CPU, cgroup "),
        "{starved}"
    );
    assert!(
        starved["server_throttled_s"].as_f64().unwrap() > 0.1,
        "{starved}"
    );
    let free_p99 = free["typist"]["echo_p99_ms"].as_f64().unwrap();
    let starved_p99 = starved["typist"]["echo_p99_ms"].as_f64().unwrap();
    // Worse under the budget: a worse verdict, or echoes ten times slower
    // (none at all counts: the sessions could not even be served).
    let rank = |v: &Value| match v["verdict"].as_str() {
        Some("normal") => 0,
        Some("degraded") => 1,
        _ => 2,
    };
    assert!(
        rank(&starved) > rank(&free) || starved_p99 > 10.0 * free_p99,
        "echo p99 {free_p99} ms free, {starved_p99} ms under 0.3%: {starved}"
    );
    // A preset: the budget derived from this host's packet cost, recorded
    // with its derivation, applied as a percent like any other.
    let doc = run_json(
        &words("login --relay epoll --users 2 --duration 300ms --warmup 100ms --host-cpu sun3"),
        &out,
    );
    let params = &doc["records"][0]["params"];
    let percent = params["host_cpu_pct"].as_f64().unwrap();
    assert!(percent >= 0.1, "{params}");
    let preset = &params["host_cpu_preset"];
    assert_eq!(preset["name"], "sun3");
    let (here, then) = (
        preset["packet_us_here"].as_f64().unwrap(),
        preset["packet_us_then"].as_f64().unwrap(),
    );
    assert!((percent - 100.0 * here / then).abs() < 0.01, "{params}");
    let derivation = preset["derivation"].as_str().unwrap();
    assert!(
        derivation.starts_with("sun3: ") && derivation.contains("Sun-3/260"),
        "{derivation}"
    );
    let applied = doc["records"][0]["result"]["host_cpu"].as_str().unwrap();
    assert!(
        applied.starts_with(&format!("{percent}% of one CPU")),
        "{applied}"
    );
    // The calibration's interval and where it came from are kept.
    let [lo, hi] = [0, 1].map(|i| preset["packet_us_interval"][i].as_f64().unwrap());
    assert!(lo <= here && here <= hi, "{preset}");
    let [b_lo, b_hi] = [0, 1].map(|i| preset["budget_interval_pct"][i].as_f64().unwrap());
    assert!(b_lo <= percent + 0.01 && percent - 0.01 <= b_hi, "{preset}");
    assert!(
        preset["calibration"]
            .as_str()
            .unwrap()
            .starts_with("measured before the run"),
        "{preset}"
    );
    // A stored calibration: `netlab calibrate --out`, then reused as is.
    let stored = dir.path().join("calibration.json");
    let said = netlab()
        .args(["calibrate", "--batches", "12", "--json", "--out"])
        .arg(&stored)
        .output()
        .unwrap();
    assert!(
        said.status.success(),
        "{}",
        String::from_utf8_lossy(&said.stderr)
    );
    let calibrated: Value = serde_json::from_slice(&said.stdout).unwrap();
    let us = calibrated["calibration"]["cost"]["us_per_packet"]
        .as_f64()
        .unwrap();
    assert_eq!(
        calibrated["calibration"]["cost"]["batches_us"]
            .as_array()
            .unwrap()
            .len(),
        12
    );
    let reused = |file: &std::path::Path| {
        netlab()
            .args(words("login --relay epoll --users 2 --duration 300ms --warmup 100ms --host-cpu sun3 --json --calibration"))
            .arg(file)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let run = reused(&stored);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    let params = &doc["records"][0]["params"];
    assert_eq!(
        params["host_cpu_preset"]["packet_us_here"].as_f64(),
        Some(us)
    );
    let source = params["host_cpu_preset"]["calibration"].as_str().unwrap();
    assert!(
        source.starts_with(&format!("stored in {}, measured ", stored.display())),
        "{source}"
    );
    // Another host's calibration, or none at all, is refused by name.
    let mut elsewhere = calibrated["calibration"].clone();
    elsewhere["host"]["cpu_model"] = "a VAX-11/750".into();
    let other = dir.path().join("elsewhere.json");
    std::fs::write(&other, elsewhere.to_string()).unwrap();
    for (file, message) in [
        (other.as_path(), "not on this host"),
        (
            dir.path().join("none.json").as_path(),
            "reading the calibration",
        ),
    ] {
        let run = reused(file);
        assert!(!run.status.success());
        let said = String::from_utf8_lossy(&run.stdout).to_string()
            + &String::from_utf8_lossy(&run.stderr);
        assert!(said.contains(message), "{said}");
    }
    // None of this test's budgets remain. (Compared as a subset: a
    // concurrent test's `netlab testbed clean` may remove a leftover of
    // an earlier run that was there before.)
    let left: Vec<String> = netlab_cgroups()
        .into_iter()
        .filter(|c| !before.contains(c))
        .collect();
    assert!(
        left.is_empty(),
        "the budget's cgroup is removed: {left:?} remain"
    );
    // Out of range or unknown: refused before anything runs.
    for bad in ["0", "-5", "0.05", "100000", "sun4"] {
        let run = netlab()
            .args([
                "login",
                "--relay",
                "epoll",
                "--users",
                "2",
                "--host-cpu",
                bad,
            ])
            .output()
            .unwrap();
        assert!(!run.status.success());
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(said.contains("--host-cpu"), "{said}");
    }
}

/// SIGTERM to the run's whole process group (as `timeout` sends it) in the
/// middle of a budgeted cell: the ends outlive it until their controller
/// stops them, so no cgroup, process or pty is left behind.
#[test(alone)]
fn sigterm_to_the_process_group_mid_budgeted_cell_leaves_nothing() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let before = netlab_cgroups();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(words(
            "login --relay epoll --users 8 --duration 30s --warmup 1s --host-cpu 20 --out",
        ))
        .arg(dir.path().join("r.jsonl"))
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while netlab_cgroups().len() <= before.len() {
        assert!(std::time::Instant::now() < deadline, "no cgroup appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let started = descendants(pid);
    assert!(started.len() >= 2, "the cell's processes: {started:?}");
    // SAFETY: signalling the process group this test made.
    assert_eq!(unsafe { libc::kill(-(pid as i32), libc::SIGTERM) }, 0);
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(netlab_cgroups(), before, "a cgroup was left behind");
    for p in started {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty() || stat.contains(") Z "),
            "process {p} outlived the run: {stat}"
        );
    }
}
