//! netlab's integration tests, one binary: each module was once a test
//! binary of its own. In one binary, tests that wait (on namespaces, peers,
//! links, timers) run beside each other instead of one binary after
//! another, and the library is linked once instead of once a file.
//!
//! Tests that measure (their assertions read a figure or a verdict that
//! another test's load would change) take [`common::measuring`] and run
//! alone; every other test takes [`common::beside_others`], so that none
//! runs beside a measuring one. Run one module's tests with
//! `scripts/test --test suite rpc::`.

mod common;

mod agent;
mod broadcast;
mod cksum;
mod cli;
mod container;
mod iperf3;
mod kubernetes;
mod lab;
mod layers;
mod limits;
mod login;
mod login_interop;
mod login_load;
mod mesh;
mod netns;
mod prometheus;
mod report;
mod rpc;
mod stall;

/// Every test of the suite takes [`common::alone`] or
/// [`common::beside_others`] as its first statement: a test without
/// either would run beside one that measures, or change the host-wide
/// state it reads.
#[test]
fn every_test_takes_a_guard_first() {
    let _beside = common::beside_others();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite");
    let mut unguarded = Vec::new();
    let mut tests = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            if line.trim() != "#[test]" {
                continue;
            }
            tests += 1;
            // The signature ends at the first line ending with `{`; the
            // body's first statement follows its comments.
            let open = (at..lines.len())
                .find(|&i| lines[i].trim_end().ends_with('{'))
                .unwrap();
            let first = lines[open + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("//"))
                .unwrap_or("");
            if first != "let _alone = common::alone();"
                && first != "let _beside = common::beside_others();"
            {
                unguarded.push(format!("{}:{}", path.display(), at + 1));
            }
        }
        // A second guard inside a test would wait for itself.
        let guards = lines
            .iter()
            .filter(|l| {
                let l = l.trim();
                l.starts_with("let _")
                    && l.contains("= common::")
                    && (l.ends_with("alone();") || l.ends_with("beside_others();"))
            })
            .count();
        let file_tests = lines.iter().filter(|l| l.trim() == "#[test]").count();
        assert_eq!(
            guards,
            file_tests,
            "{}: {file_tests} tests but {guards} guards taken",
            path.display()
        );
    }
    assert!(
        tests > 100,
        "only {tests} tests found under {}",
        dir.display()
    );
    assert!(unguarded.is_empty(), "tests without a guard: {unguarded:?}");
    // The tests that start at once are named right.
    for name in common::STARTS_AT_ONCE {
        let (module, test) = name.split_once("::").unwrap();
        let text = std::fs::read_to_string(dir.join(format!("{module}.rs"))).unwrap();
        assert!(text.contains(&format!("\nfn {test}()")), "no test {name}");
    }
}
