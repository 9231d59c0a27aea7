//! Helpers shared by the integration tests: running the binary, reading its
//! JSON, and counting a process's children.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// The netlab binary under test.
pub fn netlab() -> Command {
    Command::cargo_bin("netlab").expect("binary built")
}

/// A command line as typed, split at its spaces: each argument one word
/// (an argument with a space in it is written as an array instead).
/// Runs `command`, asserts it exits 0 (showing its standard error if
/// not), and returns what it printed.
pub fn succeeds(command: &mut Command) -> std::process::Output {
    let run = command.output().expect("the command starts");
    assert!(
        run.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    run
}

pub fn words(line: &'static str) -> Vec<&'static str> {
    line.split_whitespace().collect()
}

/// The port a server just started as `child` prints as its first line of
/// output (its stdout piped), once it listens.
pub fn port_it_printed(child: &mut std::process::Child) -> u16 {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .expect("the server says its port");
    line.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a port: {line:?}"))
}

/// Asserts this host can run a test of namespaces (CAP_NET_ADMIN) and has
/// `tools`, which `installs` says how to get.
pub fn require(test: &str, tools: &[&str], installs: &str) {
    assert!(
        netlab::testbed::netns::has_net_admin(),
        "{test} needs CAP_NET_ADMIN: run it as root"
    );
    for tool in tools {
        assert!(Path::new(tool).exists(), "{test} needs {tool} ({installs})");
    }
}

/// A switch that drops: in namespace `switch` (a bridge), an nftables
/// chain `chain` of table `fault` on the bridge's forward hook, each of
/// `rules` (nft's words after `add rule bridge fault CHAIN`) added to it.
pub fn faulty_switch(switch: &str, chain: &str, rules: &[Vec<&str>]) {
    let nft = |args: &[&str]| {
        let mut all = vec!["netns", "exec", switch, "nft"];
        all.extend(args);
        run("ip", &all);
    };
    nft(&["add", "table", "bridge", "fault"]);
    nft(&[
        "add",
        "chain",
        "bridge",
        "fault",
        chain,
        "{ type filter hook forward priority 0; }",
    ]);
    for rule in rules {
        nft(&[&["add", "rule", "bridge", "fault", chain][..], rule].concat());
    }
}

/// The one JSON document `output` holds, or a panic showing what it held.
pub fn json_of(output: &[u8]) -> Value {
    serde_json::from_slice(output).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(output)
        )
    })
}

/// Runs `netlab ARGS --json --out OUT`, asserts it succeeded, and returns
/// the document it printed.
pub fn run_json(args: &[&str], out: &Path) -> Value {
    let run = netlab()
        .args(args)
        .arg("--json")
        .arg("--out")
        .arg(out)
        .output()
        .expect("netlab runs");
    assert!(
        run.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&run.stderr),
        // With --json the error is in the document on stdout.
        String::from_utf8_lossy(&run.stdout)
    );
    json_of(&run.stdout)
}

/// Every line of a JSON Lines file, parsed.
pub fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("records file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// The PIDs of `pid`'s children (all its threads'), from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                children.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    children
}

/// Every process below `pid`, now.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for c in children_of(p) {
            all.push(c);
            next.push(c);
        }
    }
    all
}

/// The processes still in process group `pgid` (a leader that has
/// exited leaves its group's other members behind in it), after letting
/// them be reaped for up to two seconds (a child killed when its parent
/// died takes a moment to go).
pub fn processes_in_group(pgid: u32) -> Vec<u32> {
    let in_group = || -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    // After the command's ")": state, ppid, pgrp.
                    stat.rsplit_once(") ")
                        .and_then(|(_, rest)| rest.split(' ').nth(2)?.parse::<u32>().ok())
                        == Some(pgid)
                })
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let left = in_group();
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Records that `test` could not run on this host and why, in
/// `target/not-run.txt`, which `scripts/test` prints after the tests: a
/// test that cannot run here is reported, never silently passed over.
pub fn report_not_run(test: &str, why: &str) {
    use std::io::Write;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/not-run.txt");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{test}: NOT RUN: {why}");
    }
    eprintln!("{test}: NOT RUN: {why}");
}

/// The network namespaces netlab process `pid` made (`netlab-PID-...`).
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("netlab-{pid}-")))
        .map(String::from)
        .collect()
}

/// How many tests that run beside others run at once: they mostly wait
/// (on namespaces, peers, links and timers), so four share two cores.
pub const BESIDE_AT_ONCE: usize = 4;

/// Tests beside others that start at once, beyond [`BESIDE_AT_ONCE`]: the
/// lab's run of every experiment is the suite's longest (about 75 s at its
/// raised priority), and the container test the next (about 20 s, mostly
/// waiting on podman); the others fit around them instead of them waiting
/// for the others (the container test, started by chance after 66 s of
/// waiting for a turn, once ended the phase 9 s after the lab).
pub const STARTS_AT_ONCE: &[&str] = &[
    "lab::lab_runs_the_landed_experiments_and_writes_its_directory",
    "container::the_image_runs_agents_and_a_controller_that_finds_them_by_dns",
];

/// Who holds the suite now. Every test takes one of two guards first,
/// [`alone`] or [`beside_others`]: the suite's `#[test]` (and
/// `#[test(alone)]`) gives it (`tests/macros`). Tests that run beside others go first: each that is
/// alone waits until none of them runs or waits, then runs by itself, one
/// after another. libtest's own threads (`--test-threads`, which
/// `scripts/test` sets high for this binary) only start the tests; this
/// decides which of them run.
struct Holders {
    beside: usize,
    beside_waiting: usize,
    alone: bool,
}

static SUITE: std::sync::Mutex<Holders> = std::sync::Mutex::new(Holders {
    beside: 0,
    beside_waiting: 0,
    alone: false,
});
static TURN: std::sync::Condvar = std::sync::Condvar::new();

fn holders() -> std::sync::MutexGuard<'static, Holders> {
    SUITE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's hold on the suite, let go when the test ends (a panic
/// included). When `NETLAB_TEST_TIMES` names a file, each hold appends a
/// line to it as it is let go: the test's name, how it held the suite,
/// how long it waited and how long it held it. That is each test's own
/// time, which libtest's `--report-time` cannot say (it counts the wait).
pub struct Guard {
    alone: bool,
    asked: std::time::Instant,
    got: std::time::Instant,
}

impl Guard {
    fn take(alone: bool) -> Self {
        let asked = std::time::Instant::now();
        let mut now = holders();
        if alone {
            while now.alone || now.beside > 0 || now.beside_waiting > 0 {
                now = TURN.wait(now).unwrap_or_else(|e| e.into_inner());
            }
            now.alone = true;
        } else {
            let at_once = std::thread::current()
                .name()
                .is_some_and(|name| STARTS_AT_ONCE.contains(&name));
            now.beside_waiting += 1;
            while now.alone || (now.beside >= BESIDE_AT_ONCE && !at_once) {
                now = TURN.wait(now).unwrap_or_else(|e| e.into_inner());
            }
            now.beside_waiting -= 1;
            now.beside += 1;
        }
        HELD.set(Some(if alone { Hold::Alone } else { Hold::Beside }));
        Guard {
            alone,
            asked,
            got: std::time::Instant::now(),
        }
    }
}

/// How a test holds the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Alone,
    Beside,
}

thread_local! {
    /// The hold of the test running on this thread (libtest runs each
    /// test on a thread of its own).
    static HELD: std::cell::Cell<Option<Hold>> = const { std::cell::Cell::new(None) };
}

/// How the test running on this thread holds the suite, if it does.
pub fn held() -> Option<Hold> {
    HELD.get()
}

impl Drop for Guard {
    fn drop(&mut self) {
        HELD.set(None);
        {
            let mut now = holders();
            if self.alone {
                now.alone = false;
            } else {
                now.beside -= 1;
            }
        }
        TURN.notify_all();
        let Some(path) = std::env::var_os("NETLAB_TEST_TIMES") else {
            return;
        };
        use std::io::Write;
        let line = format!(
            "{} {} waited {:.3} held {:.3}\n",
            std::thread::current().name().unwrap_or("?"),
            if self.alone { "alone" } else { "beside" },
            (self.got - self.asked).as_secs_f64(),
            self.got.elapsed().as_secs_f64()
        );
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// For a test that measures (asserts a figure or a verdict that another
/// test's load would change: on a 2-core host, two such runs side by side
/// are each other's CPU contention, which the verdicts then rightly name)
/// or that reads host-wide state other tests change (every `netlab
/// endpoint` process, the test users, the netlab cgroups): no other test
/// runs while it holds this.
pub fn alone() -> Guard {
    Guard::take(true)
}

/// For every other test (refusals, files, clean-up, functional runs): it
/// runs beside up to [`BESIDE_AT_ONCE`] - 1 other such tests, never
/// beside one that is [`alone`].
pub fn beside_others() -> Guard {
    Guard::take(false)
}

/// Runs `program ARGS` to its end and returns what it printed; a failure
/// panics with its stderr.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Hosts on one switch: namespace `switch` gets a bridge `br0`, and each
/// of `hosts` (namespaces already made) a veth `eth0` with `addr(i)`/24
/// whose peer `p{i}` is a bridge port; every link up, loopback too.
pub fn bridge(switch: &str, hosts: &[&str], addr: impl Fn(usize) -> String) {
    run(
        "ip",
        &["-n", switch, "link", "add", "br0", "type", "bridge"],
    );
    run("ip", &["-n", switch, "link", "set", "br0", "up"]);
    for (i, ns) in hosts.iter().enumerate() {
        let port = format!("p{i}");
        run(
            "ip",
            &[
                "-n", switch, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", ns,
            ],
        );
        run(
            "ip",
            &["-n", switch, "link", "set", &port, "master", "br0", "up"],
        );
        let addr = format!("{}/24", addr(i));
        run("ip", &["-n", ns, "addr", "add", &addr, "dev", "eth0"]);
        run("ip", &["-n", ns, "link", "set", "eth0", "up"]);
        run("ip", &["-n", ns, "link", "set", "lo", "up"]);
    }
}

/// Runs `netlab stream ARGS --bytes 1M` for each case and asserts it fails
/// saying `says` at once: in its error's first two lines (clap names a
/// missing option on the line after its own).
pub fn stream_refuses(cases: &[(&str, &str)]) {
    for (args, says) in cases {
        let run = netlab()
            .arg("stream")
            .args(args.split(' '))
            .args(["--bytes", "1M"])
            .output()
            .unwrap();
        assert!(!run.status.success(), "{args}");
        let err = String::from_utf8_lossy(&run.stderr);
        let head: String = err.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(head.contains(says), "{args}: {err}");
    }
}
