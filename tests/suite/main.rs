//! netlab's integration tests, one binary: each module was once a test
//! binary of its own. In one binary, tests that wait (on namespaces, peers,
//! links, timers) run beside each other instead of one binary after
//! another, and the library is linked once instead of once a file.
//!
//! Tests that measure (their assertions read a figure or a verdict that
//! another test's load would change) are `#[test(alone)]` and run alone
//! ([`common::alone`]); every other test is a plain `#[test]` and runs
//! beside others ([`common::beside_others`]), so that none runs beside a
//! measuring one. The guard is given by construction: `#[test]` here is
//! `tests/macros`'s attribute (brought in with `#[macro_use]`, before the
//! standard library's prelude), which makes the guard each test's first
//! statement and refuses a test that takes one of its own. Run one
//! module's tests with `scripts/test --test suite rpc::`.

#[macro_use]
extern crate netlab_suite_macros;

mod common;

mod agent;
mod broadcast;
mod cksum;
mod cli;
mod container;
mod fleet;
mod iperf3;
mod kubernetes;
mod lab;
mod layers;
mod limits;
mod login;
mod login_interop;
mod login_load;
mod mesh;
mod models;
mod mptcp;
mod netns;
mod prometheus;
mod quic;
mod report;
mod rpc;
mod stall;
mod tls;

/// The suite's `#[test]` is `tests/macros`'s: the test holds the suite
/// beside others as it runs, without a word of its own.
#[test]
fn the_suite_s_test_attribute_gives_each_test_its_guard() {
    assert_eq!(common::held(), Some(common::Hold::Beside));
    // The tests that start at once are named right.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite");
    for name in common::STARTS_AT_ONCE {
        let (module, test) = name.split_once("::").unwrap();
        let text = std::fs::read_to_string(dir.join(format!("{module}.rs"))).unwrap();
        assert!(text.contains(&format!("\nfn {test}()")), "no test {name}");
    }
}

/// And `#[test(alone)]` runs it alone.
#[test(alone)]
fn a_test_marked_alone_holds_the_suite_alone() {
    assert_eq!(common::held(), Some(common::Hold::Alone));
}
