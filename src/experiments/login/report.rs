//! The login-load table (the 1989 vmstat rows beside today's), the limit
//! search's table, and the 1987 terminal-output table.

use crate::endpoint::login::host::Target;
use crate::endpoint::login::typist::TypistReport;
use crate::experiments::login::analysis::limits;
use crate::experiments::login::cell::{LoginPlan, NOTICEABLE_MS};
use crate::experiments::login::record::Limit;
use crate::experiments::login::record::LoginData;
use crate::experiments::login::record::Record;
use crate::report::historical;
use crate::report::html::{Parts, ReportSection};
use crate::report::table::{markdown, num};

/// `netlab login`'s text: what the users did, the server's budget, then
/// [`table`].
pub fn grid_text(plan: &LoginPlan, records: &[Record]) -> String {
    format!(
        "netlab login: users typing {} chars/s into `cat > /dev/null` (LINEMODE: into `cat`, latency per line), {} s window after {} s warm-up\n{}{}",
        plan.rate,
        plan.duration_s,
        plan.warmup_s,
        plan.host_cpu_preset
            .as_ref()
            .map_or(String::new(), |p| format!(
                "server CPU budget {}\n",
                p.derivation
            )),
        {
            let (loaded, quiet): (Vec<Record>, Vec<Record>) =
                records.iter().cloned().partition(is_loaded);
            let mut text = if quiet.is_empty() {
                String::new()
            } else {
                table(&quiet)
            };
            if let Some(load) = load_table(&loaded) {
                text.push_str(&load);
            }
            text
        }
    )
}

/// A verdict with what decided it ("unusable: 2 sessions failed ...").
pub fn said(r: &crate::experiments::login::record::LoginResult) -> String {
    if r.criterion.is_empty() {
        r.verdict.clone()
    } else {
        format!("{}: {}", r.verdict, r.criterion)
    }
}

/// Whether a cell ran beside a bulk load (`--load`).
pub fn is_loaded(record: &Record) -> bool {
    record.data.params.load.is_some()
}

/// The typists under load: each fix's echo p50 and p99 beside the 100 ms
/// at which a delay stops feeling instantaneous, with what the load
/// carried and the link's queue (None: no loaded cell).
pub fn load_table(records: &[Record]) -> Option<String> {
    let loaded: Vec<&Record> = records.iter().filter(|r| is_loaded(r)).collect();
    if loaded.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    for record in &loaded {
        let params = &record.data.params;
        let load = params.load.as_ref()?;
        let congestion = load
            .sockets
            .congestion
            .clone()
            .unwrap_or_else(|| format!("{} (default)", record.host.default_congestion_control));
        let mut row = vec![
            load.fix.clone(),
            params.relay.name().to_string(),
            params.placement.name().to_string(),
            params.users.to_string(),
            format!("{} ({congestion})", load.streams),
        ];
        match &record.data.result {
            Some(r) => {
                // The load runs from the server's end (B) to the users' (A).
                let queue = r
                    .emulator
                    .as_ref()
                    .and_then(|e| e.bottleneck.as_ref())
                    .map(|b| &b[1])
                    .filter(|q| q.sent > 0);
                row.extend([
                    r.load
                        .as_ref()
                        .map_or("-".into(), |l| num(l.goodput_bps() / 1e6)),
                    queue.map_or("-".into(), |q| {
                        format!("{} ({})", num(q.sojourn_ms_p99), q.discipline)
                    }),
                    num(r.typist.echo_p50_ms),
                    num(r.typist.echo_p99_ms),
                    format!("{:.2}", r.typist.echo_p99_ms / NOTICEABLE_MS),
                    said(r),
                ]);
            }
            None => {
                crate::report::table::failed_row(&mut row, 5, record.error.as_deref());
            }
        }
        rows.push(row);
    }
    let mut text = String::from(
        "\nThe typists under load (000 × 003): bulk TCP streams from the server's end to the users' beside the typing, each fix its own cells on the same link\n",
    );
    text.push_str(&markdown(
        &[
            "fix",
            "server",
            "place",
            "users",
            "load streams (cc)",
            "load Mbit/s",
            "link queue p99 ms",
            "echo p50 ms",
            "echo p99 ms",
            "p99 / 100 ms",
            "verdict",
        ],
        &rows,
    ));
    text.push_str(&format!(
        "{NOTICEABLE_MS:.0} ms is where a delay between a keystroke and its echo stops feeling instantaneous (Card, Moran and Newell, 1983; Miller, 1968): the verdict's line. 1989's relay melted under CPU (\"slightly degraded at 16 users\"); today's echo waits in the queues the load fills: the link's bottleneck (its sojourn p99 above, where netlab's emulator carries the link) and the sockets. A fix on the load's own sockets (notsent-lowat, bbr, small-buffers) acts on the echo only through the queue the load builds at the link; a fair queue (fq_codel) gives the echo's flow its own.\n"
    ));
    Some(text)
}

/// One record's row of [`table`], in the source's shape.
fn row_of(record: &Record) -> Vec<String> {
    let LoginData { params, result } = &record.data;
    // A server under a CPU budget says so, and whether it was applied.
    let preset = params
        .host_cpu_preset
        .as_ref()
        .map_or(String::new(), |p| format!("{} ", p.name));
    let budget = match (params.host_cpu_pct, result) {
        (None, _) => String::new(),
        (Some(p), Some(r)) if r.host_cpu.as_deref().is_some_and(|n| n.starts_with("not")) => {
            format!(" ({preset}{p}% CPU: not applied)")
        }
        (Some(p), _) => format!(" ({preset}{p}% CPU)"),
    };
    let mut row = vec![
        format!("{}{budget}", params.relay.name()),
        params.protocol.name().to_string(),
        params.placement.name().to_string(),
        params.users.to_string(),
    ];
    match result {
        Some(r) => row.extend([
            format!("{:.1}", r.procs_running_mean),
            format!("{:.1}", r.procs_blocked_mean),
            r.syscalls_per_s.map_or("n/a".into(), |v| format!("{v:.0}")),
            format!("{:.0}", r.cpu.context_switches_per_s),
            format!("{:.0}", r.cpu.user_pct),
            format!(
                "{:.0}",
                r.cpu.system_pct + r.cpu.irq_pct + r.cpu.softirq_pct
            ),
            format!("{:.0}", r.cpu.idle_pct),
            format!("{:.0}", r.packets_in_per_s),
            format!("{:.0}", r.packets_out_per_s),
            num(r.typist.echo_p50_ms),
            num(r.typist.echo_p99_ms),
            num(r.typist.echo_max_ms),
            num(r.server_cpu_per_keystroke_us),
            num(r.host_cpu_per_keystroke_us),
            typist_cpu(&r.typist),
            said(r),
        ]),
        None => {
            crate::report::table::failed_row(&mut row, 15, record.error.as_deref());
        }
    }
    row
}

/// Today's rows in the source's shape, then the 1989 rows.
pub fn table(records: &[Record]) -> String {
    let header = [
        "server",
        "proto",
        "place",
        "users",
        "r",
        "b",
        "syscalls/s",
        "cs/s",
        "us",
        "sy",
        "id",
        "pkts in/s",
        "pkts out/s",
        "echo p50 ms",
        "p99 ms",
        "max ms",
        "server µs/key",
        "host µs/key",
        "typist cpu %",
        "verdict",
    ];
    let rows: Vec<Vec<String>> = records.iter().map(row_of).collect();
    let mut text = markdown(&header, &rows);
    let then = &historical::figures().login_relay_load;
    text.push_str(&format!("\n1989 ({}): {}\n", then.source, then.what));
    let old_header = [
        "relay",
        "users",
        "r",
        "b",
        "sys faults/s",
        "cs/s",
        "us",
        "sy",
        "id",
        "pkts in",
        "pkts out",
    ];
    let old_rows = crate::experiments::login::model::measured_1989_rows();
    text.push_str(&markdown(&old_header, &old_rows));
    text.push_str(&format!(
        "1989 responsiveness: normal: {}; kernel-assisted: {}.\n",
        then.responsiveness.user, then.responsiveness.kernel
    ));
    text.push_str(&crate::experiments::login::model::beside_table(records));
    text.push_str(
        "r, b: runnable and blocked tasks (means of 100 ms samples; the sampler not counted). \
         syscalls/s: every process of the serving host (perf raw_syscalls:sys_enter), the load generator's included when it runs there. \
         us/sy/id: % of all CPUs (sy includes irq and softirq). server µs/key: CPU time of the server's \
         processes (server, sessions, commands) per keystroke, from the scheduler's own \
         accounting (exact); host µs/key: busy CPU minus an \
         idle baseline and the load generator's (and its ssh clients'), per keystroke. typist cpu %: \
         the generator's thread (+ its ssh clients'), subtracted only when it runs on the serving host. \
         pkts: the server side's interface on netns; elsewhere the sessions' own TCP segments \
         (TCP_INFO of the typists' sockets, server in = typed), or for sessions through ssh the \
         host's TCP segments (on loopback in = out). The uring design's waiting \
         thread counts as blocked (b) and its wait as iowait, not idle. telnet-linemode rows time lines (Enter sent to `cat`'s copy received). Verdict by echo p99: normal ≤ 100 ms, degraded ≤ 1 s, \
         else (or >1% of keystrokes never echoed 2 s after the window, or a session failed) unusable; each verdict names what decided it.\n",
    );
    text
}

/// The generator's share of a core, and its client programs' (ssh) after a '+'.
fn typist_cpu(t: &TypistReport) -> String {
    if t.client_programs_cpu_s > 0.0 {
        format!(
            "{:.1}+{:.0}",
            t.own_cpu_pct(),
            100.0 * t.client_programs_cpu_s / t.window_s.max(1e-9)
        )
    } else {
        format!("{:.1}", t.own_cpu_pct())
    }
}

/// What `--find-limit` found, one row per server, protocol and placement.
pub fn limits_table(rate: f64, limits: &[Limit]) -> String {
    let rows: Vec<Vec<String>> = limits
        .iter()
        .map(|l| {
            vec![
                l.relay.name().to_string(),
                l.protocol.name().to_string(),
                l.placement.clone(),
                l.sustains.to_string(),
                l.degraded_at.map_or("-".into(), |d| d.to_string()),
                l.why.clone(),
            ]
        })
        .collect();
    let mut text = format!(
        "netlab login --find-limit: the most users typing {rate} chars/s each server serves with a normal verdict (echo p99 <= 100 ms)\n"
    );
    text.push_str(&markdown(
        &[
            "server",
            "proto",
            "place",
            "sustains users",
            "first not normal",
            "why the search stopped",
        ],
        &rows,
    ));
    text
}

/// The 1989 typing rate, characters a second per user (000: "an even 5cps").
const TYPED_CPS_1989: f64 = 5.0;

/// 1989's CPU per keystroke of each design in packets of the preset's
/// cost: (us + sy) of the machine over users x 5 keystrokes a second, at
/// the smallest user count the table gives (16), for "user" and "kernel".
fn packets_per_keystroke_1989(packet_us: f64) -> Vec<(String, usize, f64)> {
    let h = &historical::figures().login_relay_load;
    let col = |name: &str| h.columns.iter().position(|c| c == name);
    let (Some(relay), Some(users), Some(us), Some(sy)) =
        (col("relay"), col("users"), col("cpu_us"), col("cpu_sy"))
    else {
        return Vec::new();
    };
    let mut seen = Vec::new();
    for row in &h.rows {
        let (Some(r), Some(n), Some(u), Some(y)) = (
            row[relay].as_str(),
            row[users].as_integer(),
            row[us].as_integer(),
            row[sy].as_integer(),
        ) else {
            continue;
        };
        if seen
            .iter()
            .any(|(seen_relay, _, _): &(String, usize, f64)| seen_relay == r)
        {
            continue;
        }
        let cpu_us_per_key = (u + y) as f64 / 100.0 * 1e6 / (n as f64 * TYPED_CPS_1989);
        seen.push((r.to_string(), n as usize, cpu_us_per_key / packet_us));
    }
    seen
}

/// Each design's limit on a 1989-class host (the probes of a limit search
/// under one budget), beside 1989's, with each design's CPU per keystroke
/// in packets of its host's own cost, then and now. Empty without
/// budgeted records.
pub fn design_limits(records: &[Record]) -> String {
    let Some((params, preset)) = records.iter().find_map(|r| {
        let params = &r.data.params;
        params
            .host_cpu_preset
            .as_ref()
            .map(|preset| (params, preset))
    }) else {
        return String::new();
    };
    let found = limits(records, params.host_cpu_pct);
    // The server's CPU per keystroke, and its share of one CPU, at the most
    // users it served normally.
    let at_limit = |limit: &Limit| {
        records.iter().find_map(|r| match &r.data {
            LoginData {
                params: p,
                result: Some(result),
            } if p.relay == limit.relay
                && p.users == limit.sustains
                && p.host_cpu_pct == params.host_cpu_pct =>
            {
                Some((result.server_cpu_per_keystroke_us, result.server_cpu_pct))
            }
            _ => None,
        })
    };
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|l| {
            let seen = at_limit(l);
            vec![
                l.relay.name().to_string(),
                l.sustains.to_string(),
                l.degraded_at.map_or("-".into(), |d| d.to_string()),
                seen.map_or("-".into(), |(us, _)| num(us)),
                seen.map_or("-".into(), |(us, _)| {
                    format!("{:.1}", us / preset.packet_us_here)
                }),
                seen.map_or("-".into(), |(_, pct)| format!("{pct:.1}")),
                l.why.clone(),
            ]
        })
        .collect();
    let mut text = format!(
        "netlab login on a 1989-class host: server CPU budget {}; users typing {} chars/s over rlogin, {} s windows; a design's limit is the most users it serves with echo p99 <= 100 ms\n",
        preset.derivation, params.rate, params.duration_s
    );
    text.push_str(&markdown(
        &[
            "server",
            "sustains users",
            "first not normal",
            "server µs/key at the limit",
            "in packets here",
            "server CPU % there",
            "why the search stopped",
        ],
        &rows,
    ));
    text.push_str(&format!(
        "server CPU %: the server's process tree's exact CPU over the window, % of one CPU, beside the {}% budget (a small group can run past its quota: docs/EXPERIMENTS.md).\n",
        params.host_cpu_pct.unwrap_or(0.0)
    ));
    text.push_str(&then_and_now(preset, &found));
    text
}

/// The 1989 limits and CPU a keystroke (in packets of its host's cost)
/// beside today's, and the best design against fork, then and here.
fn then_and_now(preset: &crate::testbed::cgroup::PresetBudget, found: &[Limit]) -> String {
    let mut text = String::new();
    let h = &historical::figures().login_relay_load;
    text.push_str(&format!(
        "1989 ({}): normal rlogind: {}; kernel-assisted: {} (limits under 16 and over 40 users: a ratio above 2.5).\n",
        h.source, h.responsiveness.user, h.responsiveness.kernel
    ));
    let then: Vec<String> = packets_per_keystroke_1989(preset.packet_us_then)
        .iter()
        .map(|(relay, users, packets)| {
            let name = if relay == "user" {
                "normal"
            } else {
                "kernel-assisted"
            };
            format!("{name} {packets:.1} (at {users} users)")
        })
        .collect();
    text.push_str(&format!(
        "CPU per keystroke in packets of the host's own cost ({:.0} µs then, {:.1} µs here): 1989 {}; here the column above.\n",
        preset.packet_us_then,
        preset.packet_us_here,
        then.join(", ")
    ));
    let fork = found.iter().find(|l| l.relay == Target::Fork);
    let best = found
        .iter()
        .filter(|l| l.relay != Target::Fork)
        .max_by_key(|l| l.sustains);
    if let (Some(fork), Some(best)) = (fork, best) {
        text.push_str(&if fork.sustains == 0 {
            format!(
                "Here fork served no count normally; the best design ({}) {} users.\n",
                best.relay.name(),
                best.sustains
            )
        } else {
            format!(
                "Here the best design ({}, {} users) serves {:.1}x fork's {}; in 1989 the kernel-assisted daemon served more than 2.5x the normal one's.\n",
                best.relay.name(),
                best.sustains,
                best.sustains as f64 / fork.sustains as f64,
                fork.sustains
            )
        });
    }
    text
}

/// The login section of the report page.
pub struct LoginSection;

impl ReportSection for LoginSection {
    type Data = LoginData;
    const EXPERIMENT: &'static str = "login";

    fn parts(all: &[Record]) -> Parts {
        // Cells on a preset 1989-class host (a limit search) are their own table.
        let (budgeted, free): (Vec<Record>, Vec<Record>) = all.iter().cloned().partition(
            |r| matches!(&r.data, LoginData { params, .. } if params.host_cpu_preset.is_some()),
        );
        let (loaded, free): (Vec<Record>, Vec<Record>) = free.into_iter().partition(is_loaded);
        let records = &free[..];
        let mut text = if records.is_empty() && !loaded.is_empty() {
            String::new()
        } else {
            crate::experiments::login::report::table(records)
        };
        if let Some(load) = load_table(&loaded) {
            text.push_str(&load);
        }
        let limits = crate::experiments::login::report::design_limits(&budgeted);
        if !limits.is_empty() {
            text.push('\n');
            text.push_str(&limits);
        }
        let mut reading = String::new();
        let mut counts: Vec<usize> = records
            .iter()
            .filter_map(|r| match &r.data {
                LoginData {
                    params,
                    result: Some(_),
                } => Some(params.users),
                _ => None,
            })
            .collect();
        counts.sort_unstable();
        counts.dedup();
        for users in counts {
            let cells: Vec<(&str, &str, f64, &str)> = records
                .iter()
                .filter_map(|r| match &r.data {
                    LoginData {
                        params,
                        result: Some(res),
                    } if params.users == users => Some((
                        params.relay.name(),
                        params.protocol.name(),
                        res.server_cpu_per_keystroke_us,
                        res.verdict.as_str(),
                    )),
                    _ => None,
                })
                .collect();
            let cheapest = cells.iter().min_by(|a, b| a.2.total_cmp(&b.2));
            let dearest = cells.iter().max_by(|a, b| a.2.total_cmp(&b.2));
            let all_normal = cells.iter().all(|c| c.3 == "normal");
            if let (Some(c), Some(d)) = (cheapest, dearest) {
                reading.push_str(&format!(
                    "At {users} users the cheapest server per keystroke is {} ({}, {:.0} µs) and the dearest {} ({}, {:.0} µs, {:.1}x); {}. ",
                    c.0,
                    c.1,
                    c.2,
                    d.0,
                    d.1,
                    d.2,
                    d.2 / c.2.max(1e-9),
                    if all_normal {
                        "every cell's echo stayed normal (p99 at most 100 ms)".to_string()
                    } else {
                        let bad: Vec<String> = cells
                            .iter()
                            .filter(|c| c.3 != "normal")
                            .map(|c| format!("{} {} {}", c.0, c.1, c.3))
                            .collect();
                        format!("not normal: {}", bad.join(", "))
                    }
                ));
            }
        }
        reading.push_str("In 1989 the normal rlogind was unusable at 48 users on a Sun-3; today the echo path costs tens to hundreds of microseconds, mostly kernel work every design pays alike.");
        if let Some(line) = limits.lines().rev().find(|l| l.starts_with("Here ")) {
            reading.push_str(&format!(" On a 1989-class host (a CPU budget): {line}"));
        }
        (
            "login: users typing through each relay design (1989)".into(),
            text,
            reading,
            crate::experiments::login::figures::login_figures(records),
        )
    }

    fn cell(data: &LoginData) -> String {
        format!(
            "login {} {} {} users",
            data.params.relay.name(),
            data.params.protocol.name(),
            data.params.users
        )
    }

    /// The 1989-class budget each record ran under, with the interval its
    /// calibration gave it: records of one file under budgets that
    /// disagree did not run on the same 1989-class host. And the server's
    /// CPU per keystroke over the normal probes of one count (a search
    /// repeats the counts beside its boundary): probes of one count that
    /// cost the server different CPU a keystroke ran on a host whose speed
    /// changed during the search, which moves the limit it finds.
    fn estimates(records: &[Record]) -> Vec<crate::report::caveats::Estimated> {
        let mut counts: Vec<(String, Vec<f64>)> = Vec::new();
        for r in records {
            let Some(result) = r.data.result.as_deref() else {
                continue;
            };
            if result.verdict != "normal" {
                continue;
            }
            let p = &r.data.params;
            let cell = format!(
                "{} {} at {} users ({}{})",
                p.relay.name(),
                p.protocol.name(),
                p.users,
                r.placement,
                p.host_cpu_pct.map_or(String::new(), |b| format!(
                    ", a budget of {b:.2}% of one CPU"
                ))
            );
            let us = result.server_cpu_per_keystroke_us;
            match counts.iter_mut().find(|c| c.0 == cell) {
                Some(c) => c.1.push(us),
                None => counts.push((cell, vec![us])),
            }
        }
        let costs = counts.into_iter().filter_map(|(cell, runs)| {
            Some(crate::report::caveats::Estimated {
                cell,
                figure: "the server's µs a keystroke".into(),
                spread: crate::record::stats::Spread::of(&runs)?,
            })
        });
        records
            .iter()
            .filter_map(|r| {
                let p = &r.data.params;
                let preset = p.host_cpu_preset.as_ref()?;
                let [lo, hi] = preset.budget_interval_pct?;
                Some(crate::report::caveats::Estimated {
                    cell: format!("the {}-class host", preset.name),
                    figure: "budget, % of one CPU".into(),
                    spread: crate::record::stats::Spread {
                        min: lo,
                        median: p.host_cpu_pct?,
                        max: hi,
                        n: preset.batches.unwrap_or(0),
                        interval: Some([lo, hi]),
                    },
                })
            })
            .chain(costs)
            .collect()
    }

    fn links(records: &[Record]) -> Vec<String> {
        crate::report::html::link_details(records, |d| d.result.as_ref()?.link.as_ref())
    }

    /// The most users served, their worst echo and the server's CPU,
    /// beside 1989's rlogind on a Sun-3/260; and what bounded them.
    fn headline(records: &[Record]) -> Option<crate::report::html::Headline> {
        let most = records
            .iter()
            .filter(|r| r.data.result.is_some())
            .map(|r| r.data.params.users)
            .max()?;
        let h = &crate::report::historical::figures().login_relay_load;
        let budgeted = budgeted(records).map(|(_, preset)| preset.name.clone());
        Some(crate::report::html::Headline {
            now: searched_limits(records).unwrap_or_else(|| {
                let at_most: Vec<_> = records
                    .iter()
                    .filter(|r| r.data.params.users == most)
                    .filter_map(|r| r.data.result.as_ref())
                    .collect();
                let echo = at_most
                    .iter()
                    .map(|r| r.typist.echo_p99_ms)
                    .fold(0.0, f64::max);
                let cpu = at_most.iter().map(|r| r.server_cpu_pct).fold(0.0, f64::max);
                format!(
                    "{most} users: echo p99 at most {echo:.1} ms, a server at most {cpu:.1}% of one CPU"
                )
            }),
            then: Some(format!(
                "1989, Sun-3/260 at 48 users: rlogind {}; the kernel relay {}",
                h.responsiveness.user, h.responsiveness.kernel
            )),
            limit: match budgeted {
                Some(preset) => format!("the server's CPU per keystroke, on a {preset}-class budget"),
                None => "nothing yet: today's CPU is not the limit (run as root for the 1989-class budget)".into(),
            },
        })
    }

    /// On a 1989-class host (a CPU budget from a preset): how many users
    /// each relay design sustains and why it stopped; without one, the
    /// worst keystroke echo seen.
    fn limited(records: &[Record]) -> Option<String> {
        let budgeted = budgeted(records).map(|(host_cpu_pct, preset)| {
            let of_cpu = match (host_cpu_pct, preset.budget_interval_pct) {
                (Some(pct), Some([lo, hi])) => {
                    format!(" ({pct:.2}% of one CPU, 95% {lo:.2}-{hi:.2}%)")
                }
                (Some(pct), None) => format!(" ({pct:.2}% of one CPU)"),
                _ => String::new(),
            };
            (
                host_cpu_pct,
                format!("{}-class CPU budget{of_cpu}", preset.name),
            )
        });
        if let Some((budget, preset)) = budgeted {
            let found = limits(records, budget);
            if !found.is_empty() {
                let each: Vec<String> = found
                    .iter()
                    .map(|l| {
                        format!(
                            "{} sustains {} users ({})",
                            l.relay.name(),
                            l.sustains,
                            l.why
                        )
                    })
                    .collect();
                return Some(format!(
                    "on a {preset}, the server's CPU per keystroke bounds the users: {}",
                    each.join("; ")
                ));
            }
        }
        let worst = records
            .iter()
            .filter_map(|r| {
                let result = r.data.result.as_ref()?;
                Some((
                    r.data.params.users,
                    r.data.params.relay,
                    result.typist.echo_p99_ms,
                    result.server_cpu_pct,
                ))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2))?;
        Some(format!(
            "no CPU budget (today's CPU): the worst echo p99 was {:.1} ms, at {} users on the {} relay, its server using {:.1}% of one CPU",
            worst.2,
            worst.0,
            worst.1.name(),
            worst.3
        ))
    }
}

/// The first 1989-class budget among `records` (a preset's), with the
/// share of one CPU it came to: the one budget a run's search used.
fn budgeted(records: &[Record]) -> Option<(Option<f64>, &crate::testbed::cgroup::PresetBudget)> {
    records.iter().find_map(|r| {
        let p = &r.data.params;
        Some((p.host_cpu_pct, p.host_cpu_preset.as_ref()?))
    })
}

/// The limits a search found on a 1989-class budget, each with its
/// bracket, for the first screen: "fork sustains 32 users, not 48; splice
/// sustains 96 users, not 128 (a sun3-class budget, 1.72% of one CPU)".
/// None without a budgeted search. The largest count any record holds is
/// not a result on a budget: it is usually the probe that failed.
fn searched_limits(records: &[Record]) -> Option<String> {
    let (budget, preset) = budgeted(records)?;
    let (budget, preset) = (budget?, &preset.name);
    let found = limits(records, Some(budget));
    if found.is_empty() {
        return None;
    }
    let each: Vec<String> = found
        .iter()
        .map(|l| match l.degraded_at {
            Some(first) => format!(
                "{} sustains {} users, not {first}",
                l.relay.name(),
                l.sustains
            ),
            None => format!(
                "{} sustains {} users (none failed)",
                l.relay.name(),
                l.sustains
            ),
        })
        .collect();
    Some(format!(
        "{} (a {preset}-class budget, {budget:.2}% of one CPU)",
        each.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::login::host::Target;
    use crate::experiments::login::analysis::tests::record;

    #[test]
    fn the_first_screen_quotes_a_budgeted_search_s_limits_not_its_largest_probe() {
        let budget = Some(1.72);
        let mut records = vec![
            record(Target::Fork, 16, None, 1.0, 0.0),
            record(Target::Fork, 48, None, 2.0, 0.0),
            record(Target::Fork, 64, budget, 900.0, 0.0),
            record(Target::Fork, 32, budget, 1.0, 0.0),
            record(Target::Fork, 48, budget, 700.0, 0.0),
            record(Target::Splice, 64, budget, 1.0, 0.0),
            record(Target::Splice, 128, budget, 260.0, 0.0),
            record(Target::Splice, 96, budget, 1.0, 0.0),
        ];
        for r in &mut records {
            if r.data.params.host_cpu_pct.is_some() {
                r.data.params.host_cpu_preset = Some(crate::testbed::cgroup::PresetBudget {
                    name: "sun3".into(),
                    ..Default::default()
                });
            }
        }
        let headline = <LoginSection as ReportSection>::headline(&records).unwrap();
        assert_eq!(
            headline.now,
            "fork sustains 32 users, not 48; splice sustains 96 users, not 128 (a sun3-class budget, 1.72% of one CPU)"
        );
        // Without a budget the grid's largest count is the figure.
        records.retain(|r| r.data.params.host_cpu_pct.is_none());
        let headline = <LoginSection as ReportSection>::headline(&records).unwrap();
        assert!(
            headline
                .now
                .starts_with("48 users: echo p99 at most 2.0 ms"),
            "{}",
            headline.now
        );
    }

    /// A search whose probes of one count cost the server a third more
    /// CPU a keystroke in one than in another ran on a host that changed
    /// speed: the report says so by the count; probes that agree, and
    /// counts probed once, say nothing.
    #[test]
    fn probes_of_one_count_whose_cost_moved_are_read_with_care() {
        let budget = Some(2.54);
        let probe = |users, us| {
            let mut r = record(Target::Fork, users, budget, 5.0, 0.0);
            r.data.result.as_mut().unwrap().server_cpu_per_keystroke_us = us;
            r
        };
        let records = vec![
            probe(32, 182.0),
            probe(32, 178.6),
            probe(36, 112.5),
            probe(36, 162.1),
            probe(40, 120.0),
            // Not normal: a saturated server's cost is its share spread
            // over what was typed, not a cost.
            record(Target::Fork, 44, budget, 400.0, 0.0),
        ];
        let estimates = <LoginSection as ReportSection>::estimates(&records);
        let lines = crate::report::caveats::caveats("login", &estimates);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with(
                "login fork rlogin at 36 users (loopback, a budget of 2.54% of one CPU): the server's µs a keystroke 137 (range 112-162 of 2 runs)"
            ),
            "{}",
            lines[0]
        );
    }
}
