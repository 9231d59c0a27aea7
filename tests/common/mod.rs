//! Helpers shared by the integration tests: running the binary, reading its
//! JSON, and counting a process's children.
// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// The netlab binary under test.
pub fn netlab() -> Command {
    Command::cargo_bin("netlab").expect("binary built")
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
        "{args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
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

/// One measuring test at a time within a test binary: a test that asserts
/// a measured figure or a verdict takes this first, so that the tests
/// beside it in the binary (which cargo runs on parallel threads) are not
/// its CPU contention on a 2-core host. Tests that only check refusals,
/// files or clean-up run beside anything.
pub fn measuring() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}
