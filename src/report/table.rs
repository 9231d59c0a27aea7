//! The text toolkit every report section uses: Markdown tables (comfy-table's
//! Markdown preset, so a table pastes into the docs unchanged), numbers as a
//! person reads them, and the lines that say which hosts a table came from.

use crate::measure::host::HostFacts;
use crate::record::Record;
use crate::record::stats::Spread;
use comfy_table::{CellAlignment, Table, presets};
use std::fmt::Write;

/// A table whose first and last columns are text and the rest numbers.
pub fn new_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_style(presets::ASCII_MARKDOWN)
        .set_header(header.to_vec());
    for i in 1..header.len().saturating_sub(1) {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// A Markdown table of strings (first column text, the rest numbers).
pub fn markdown(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut table = Table::new();
    table
        .load_style(presets::ASCII_MARKDOWN)
        .set_header(header.to_vec());
    for i in 1..header.len() {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    for row in rows {
        table.add_row(row.clone());
    }
    format!("{table}\n")
}

/// Formats with a sensible number of significant digits for a table cell.
/// A failed cell's row: `blanks` empty columns after what `row` holds,
/// then why it failed (the record's error).
pub fn failed_row(row: &mut Vec<String>, blanks: usize, error: Option<&str>) {
    row.extend(std::iter::repeat_n(String::new(), blanks));
    row.push(format!("failed: {}", error.unwrap_or("?")));
}

pub fn num(value: f64) -> String {
    let a = value.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{value:.0}")
    } else if a >= 10.0 {
        format!("{value:.1}")
    } else if a >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

pub fn spread_cell(s: &Spread) -> String {
    if s.n > 1 {
        format!("{} ({}–{})", num(s.median), num(s.min), num(s.max))
    } else {
        num(s.median)
    }
}

/// One line naming the machine, so no table is read apart from its host.
pub fn host_line(host: &HostFacts, placement: &str) -> String {
    format!(
        "host: {}, lo MTU {}; placement {}",
        machine(host),
        host.loopback_mtu.map_or("?".into(), |m| m.to_string()),
        placement,
    )
}

/// A machine in one phrase: cores, CPU, kernel, default congestion control.
pub fn machine(host: &HostFacts) -> String {
    format!(
        "{} cores, {}, Linux {}{}, {} default",
        host.cores,
        host.cpu_model,
        host.kernel,
        if host.virtualized {
            " (virtual machine: the host's interrupt and device time is invisible)"
        } else {
            ""
        },
        host.default_congestion_control,
    )
}

/// The controller's host line, then one line per agent the record's run
/// went through (its host, its clock against the controller's).
pub fn hosts_text<D>(record: &Record<D>, placement: &str) -> String {
    let mut out = host_line(&record.host, placement);
    if !record.agents.is_empty() {
        out.push_str(" (this line: the controller's host)");
    }
    for agent in &record.agents {
        let _ = write!(out, "\n{}", agent_line(agent));
    }
    out
}

/// An agent in one line: its name and address, its host, its clock
/// against the controller's.
pub fn agent_line(agent: &crate::record::testbed::AgentFacts) -> String {
    let interface = agent
        .address
        .parse::<std::net::SocketAddr>()
        .ok()
        .and_then(|a| agent.host.interface_with(a.ip()))
        .map_or(String::new(), |i| {
            format!(
                ", {} MTU {}",
                i.name,
                i.mtu.map_or("?".into(), |m| m.to_string())
            )
        });
    format!(
        "agent {} ({}{interface}): {}, {}; clock {:+} µs from the controller's (± {} µs)",
        agent.agent,
        agent.address,
        agent.host.hostname,
        machine(&agent.host),
        agent.clock_offset_us,
        agent.control_rtt_us / 2
    )
}

/// The controller's host in one line.
pub fn controller_line(host: &HostFacts) -> String {
    format!("controller: {}, {}", host.hostname, machine(host))
}

/// A size in bytes with a binary prefix when it is a whole number of
/// them (64 B, 4 KiB, 1 MiB, 4000 B).
pub fn bytes(n: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if n >= unit && n.is_multiple_of(unit) {
            return format!("{} {name}", n / unit);
        }
    }
    format!("{n} B")
}
