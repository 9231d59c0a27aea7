//! What `netlab testbed up` tells the person who keeps a testbed up: the
//! two hosts, the link and how it was built, and the emulator's account.

use crate::record::testbed::{EmulatorReport, LinkFacts};
use crate::report::table::num;
use crate::testbed::netns::CleanReport;

/// The hosts, their addresses and interfaces, the link, and how to use it.
pub fn up_text(facts: &LinkFacts) -> String {
    format!(
        "up: {} ({}, {}) <-> {} ({}, {})\nlink: {}; built with {}\nrun tools with `ip netns exec {} ...`; Ctrl-C tears it down\n",
        facts.namespaces[0],
        facts.addresses[0],
        facts.interfaces[0],
        facts.namespaces[1],
        facts.addresses[1],
        facts.interfaces[1],
        facts.profile.describe(),
        facts.detail,
        facts.namespaces[0],
    )
}

/// The emulator's packets each way, its own delay and its CPU.
pub fn emulator_line(e: &EmulatorReport) -> String {
    format!(
        "emulator: forwarded {}/{} packets, its own delay p50 {} µs p99 {} µs, CPU {} s over {} s\n",
        e.forwarded_packets[0],
        e.forwarded_packets[1],
        num(e.overhead_us_p50),
        num(e.overhead_us_p99),
        num(e.usage.cpu_s()),
        num(e.wall_s)
    )
}

/// What `netlab testbed clean` removed (cgroups, namespaces and links, test
/// users) and the namespaces it kept because their run is still going.
pub fn clean_text(netns: &CleanReport, users: &[String], cgroups: &[String]) -> String {
    let mut text = String::new();
    if netns.removed.is_empty() && users.is_empty() && cgroups.is_empty() {
        text.push_str("nothing to clean\n");
    }
    for path in cgroups {
        text.push_str(&format!("removed cgroup {path}\n"));
    }
    for name in &netns.removed {
        text.push_str(&format!("removed {name}\n"));
    }
    for done in users {
        text.push_str(&format!("{done}\n"));
    }
    for name in &netns.kept_live {
        text.push_str(&format!(
            "kept {name}: its netlab run is still going (--all removes it)\n"
        ));
    }
    text
}
