//! The lab end to end, beside the suite's other tests that do not measure:
//! it is the suite's longest test, so it runs at a higher priority than
//! they do (they finish in its shadow either way).

use crate::common;

use common::lines_of;
use std::os::unix::process::CommandExt;

#[test]
fn lab_runs_the_landed_experiments_and_writes_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut lab = std::process::Command::new(assert_cmd::cargo::cargo_bin("netlab"));
    lab.args(["lab", "--smoke", "--out-dir"]).arg(dir.path());
    // Nice -10 (its endpoints inherit it): the tests beside it, which
    // mostly wait, take the cores' spare time. Beside four of them the lab
    // took 108 s and they all ended by 78 s. A host that refuses the
    // priority runs it at the default one.
    // SAFETY: setpriority is async-signal-safe and touches only the child.
    unsafe {
        lab.pre_exec(|| {
            libc::setpriority(libc::PRIO_PROCESS, 0, -10);
            Ok(())
        });
    }
    let done = assert_cmd::Command::from_std(lab).assert().success();
    let text = String::from_utf8(done.get_output().stdout.clone()).unwrap();
    // Figures not drawn are said on stderr: shown when a figure is missing.
    let stderr = String::from_utf8_lossy(&done.get_output().stderr).to_string();
    let figure_errors: Vec<&str> = stderr.lines().filter(|l| l.contains("figure")).collect();
    // Joy's 4 MB, 64 times over per loopback run, reported per 4 MB.
    // The smoke profile: every cell of the quick one (whose counts the
    // parts' unit tests check) with fewer repetitions and shorter windows.
    assert!(text.contains("netlab stream: 256M in 1K records"), "{text}");
    assert!(
        text.contains("(each run moved it 64 times over, timed whole)"),
        "{text}"
    );
    assert!(text.contains("netlab sweep stream"));
    assert!(text.contains("knee (measured):"));
    assert!(text.contains("check, per call:"));
    assert!(text.contains("lab results: "));
    let runs: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(runs.len(), 1);
    let run_dir = runs[0].path();
    let records = lines_of(&run_dir.join("results.jsonl"));
    let count = |experiment: &str, placement: &str| {
        records
            .iter()
            .filter(|r| r["experiment"] == experiment && r["placement"] == placement)
            .count()
    };
    let root = netlab::testbed::netns::has_net_admin();
    // Stream: 2 Joy runs on loopback, 1 over netns ether10 and 3 of 1988's
    // sound barrier when root, a TLS run and its plain twin, then the
    // sweep's 1-byte check, 15 sizes x 2 runs and its lever series (4
    // settings x 2 runs).
    assert_eq!(count("stream", "loopback"), 2 + 2 + 1 + 15 * 2 + 4 * 2);
    assert!(
        text.contains("TLS beside plain TCP (same run, alternating, 1 pair)"),
        "{text}"
    );
    assert_eq!(count("stream", "netns"), if root { 1 + 3 } else { 0 });
    // RPC: 8 sizes x TCP and UDP per placement, plus the diagnosis runs of each cliff.
    assert!(count("rpc", "loopback") >= 16);
    assert_eq!(count("rpc", "netns") >= 16, root);
    assert!(text.contains("netlab rpc: 10 calls x 2 reps"));
    assert!(text.contains("cliff: TCP local"), "{text}");
    if root {
        assert!(text.contains("over an emulated 10 Mbit/s Ethernet"));
        assert!(text.contains("wire A->B"));
        assert!(text.contains("1988's sound barrier (003)"), "{text}");
        assert!(text.contains("queued one packet to the LANCE"));
    } else {
        assert!(text.contains("skipped: stream over netns"));
    }
    // Login: 16 and 48 users through each of the four relay designs and,
    // as root with the packages .ci/run installs, telnetd and sshd beside them.
    let telnetd = std::path::Path::new("/usr/sbin/telnetd").exists();
    let sshd = root && std::path::Path::new("/usr/sbin/sshd").exists();
    let real_servers = usize::from(telnetd) + usize::from(sshd);
    let on_1989_host = |r: &&serde_json::Value| {
        r["experiment"] == "login" && !r["params"]["host_cpu_preset"].is_null()
    };
    let probes: Vec<&serde_json::Value> = records.iter().filter(on_1989_host).collect();
    assert_eq!(
        count("login", "loopback") - probes.len(),
        2 * (4 + real_servers)
    );
    // As root, each of fork's and splice's limit on a 1989-class host (a
    // search of a few probes each), beside 1989's.
    if root {
        for relay in ["fork", "splice"] {
            assert!(
                probes.iter().any(|r| r["params"]["relay"] == relay),
                "{relay}: {probes:?}"
            );
        }
        assert!(
            probes
                .iter()
                .all(|r| r["params"]["host_cpu_preset"]["name"] == "sun3")
        );
        assert!(
            text.contains("netlab login on a 1989-class host: server CPU budget sun3: "),
            "{text}"
        );
        assert!(
            text.contains("1989 (000_2144c0e834c30e0c.txt): normal rlogind"),
            "{text}"
        );
    } else {
        assert!(probes.is_empty());
        assert!(text.contains("skipped: each design's limit on a 1989-class host"));
    }
    for (server, present) in [("telnetd", telnetd), ("sshd", sshd)] {
        let served = records
            .iter()
            .filter(|r| r["experiment"] == "login" && r["params"]["relay"] == server)
            .count();
        assert_eq!(served, if present { 2 } else { 0 }, "{server}");
    }
    assert!(
        text.contains("netlab login: users typing 5 chars/s"),
        "{text}"
    );
    // Output: 256 KB through each of the four designs, TELNET and rlogin, and
    // through telnetd and sshd.
    assert_eq!(count("output", "loopback"), 8 + real_servers);
    // One cell of each over a netns ether10 link, as root.
    assert_eq!(count("login", "netns"), usize::from(root));
    assert_eq!(count("output", "netns"), usize::from(root));
    // The 1990 broadcast storm and its four fixes, as root: five runs.
    assert_eq!(count("broadcast", "netns"), if root { 5 } else { 0 });
    if root {
        assert!(
            text.contains("netlab broadcast: one RIP supply to the all-1's broadcast"),
            "{text}"
        );
        assert!(
            text.contains("| no forwarding of link broadcasts |"),
            "{text}"
        );
    } else {
        assert!(
            text.contains("skipped: broadcast: the storm needs root"),
            "{text}"
        );
    }
    // Responsiveness on the emulated 50 Mbit/s link, drop-tail and
    // FQ-CoDel, as root.
    assert_eq!(count("rpm", "netns"), if root { 2 } else { 0 });
    if root {
        assert!(
            text.contains("netlab rpm: responsiveness under working conditions"),
            "{text}"
        );
        assert!(
            text.contains("[droptail]") && text.contains("[fq_codel]"),
            "{text}"
        );
    } else {
        assert!(text.contains("skipped: rpm: the emulated 50 Mbit/s link needs root"));
    }
    // The mesh: three loopback agents, every ordered pair's rtt test, on
    // the lab's runner into its records, and its section on the page.
    assert_eq!(count("mesh", "agents"), 3 * 2);
    assert!(text.contains("mesh: every pair of 3 hosts"), "{text}");
    // The report, its figures and the notable findings.
    let report = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        report.contains("<section id=\"mesh\">") && report.contains("class=\"heat\""),
        "the mesh's section and heat maps"
    );
    for figure in [
        "stream-throughput",
        "rpc-time",
        "cksum-speed",
        "login-cpu",
        "output-cpu",
    ]
    .into_iter()
    .chain(root.then_some("broadcast-storm"))
    .chain(root.then_some("rpm-latency-over-time"))
    .chain(root.then_some("rpm-goodput-over-time"))
    {
        let experiment = figure.split('-').next().unwrap();
        let failed: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["experiment"] == experiment && !r["error"].is_null())
            .map(|r| &r["error"])
            .collect();
        assert!(
            report.contains(&format!("<figure id=\"{figure}\"><svg")),
            "{figure}: figure errors {figure_errors:?}; failed {experiment} cells {failed:?}"
        );
        assert!(
            run_dir.join(format!("{figure}.png")).exists(),
            "{figure}.png"
        );
    }
    if root {
        // rpm's first-screen row: each fix's RPM with its interval, and grade.
        assert!(
            report.contains("droptail: ")
                && report.contains("fq_codel: ")
                && report.contains(" RPM (95% ")
                && report.contains(" probes), grade "),
            "rpm's first-screen row"
        );
    }
    assert!(
        text.contains("most notable:\n1. RPC over TCP local stalls"),
        "{text}"
    );
    assert!(text.contains("netlab output: 256K of text"), "{text}");
    let failed: Vec<String> = records
        .iter()
        .filter(|r| !r["error"].is_null())
        .map(|r| format!("{}: {}", r["experiment"], r["error"]))
        .collect();
    assert!(failed.is_empty(), "failed cells: {failed:#?}");
    let tables = std::fs::read_to_string(run_dir.join("tables.txt")).unwrap();
    assert!(tables.contains("then (1981"));
    assert!(tables.contains("kernel-assisted"));
}
