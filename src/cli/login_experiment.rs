//! `netlab login [options]`: the 1989 login-load experiment. For every relay
//! design, protocol and user count, N simulated users type into
//! `cat > /dev/null` through netlab's server while the machine is watched in
//! vmstat's terms; the table prints the 1989 rows beside today's.

use super::{Interrupted, Output};
use crate::experiment::endpoints::interrupt_flag;
use crate::experiment::login::{
    DEFAULT_CORPUS, Dialect, LoginParams, LoginResult, Target, run_cell,
};
use crate::measure::host::HostFacts;
use crate::record::{Record, RecordData, RecordWriter, now_rfc3339};
use crate::report::{historical, progress::Progress, tables};
use crate::testbed::{LinkVia, Placement, link::LinkProfile, netns::has_net_admin};
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

#[derive(Debug, Clone, Args)]
pub struct LoginExperimentArgs {
    /// Simulated users per cell (a list).
    #[arg(long, default_value = "16,32,48", value_delimiter = ',')]
    pub users: Vec<usize>,
    /// Servers (a list): netlab's relay designs, and as real servers beside
    /// them `telnetd` (inetutils, via socat; TELNET only) and `sshd`
    /// (OpenSSH with a throwaway key and test user; its cells always speak
    /// SSH, through real `ssh` clients; needs root).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fork,epoll,splice,uring"
    )]
    pub relay: Vec<Target>,
    /// Protocols (a list): rlogin as in the 1989 test, telnet, telnet-linemode
    /// (the client edits lines; latency is per line), ssh (sshd only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rlogin")]
    pub protocol: Vec<Dialect>,
    /// Placements (a list): loopback, netns (server and users in two
    /// namespaces over --link; needs root).
    #[arg(long, value_delimiter = ',', default_value = "loopback")]
    pub placement: Vec<String>,
    /// Link profile of the netns placement.
    #[arg(long, default_value = "ether10")]
    pub link: String,
    /// Characters per second per user (the source: 5).
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub rate: f64,
    /// Exponential gaps between keystrokes instead of even spacing.
    #[arg(long)]
    pub poisson: bool,
    /// Measured window per cell, e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: std::time::Duration,
    /// Typing before the window, not counted.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub warmup: std::time::Duration,
    /// A text file to type instead of the built-in paragraph.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[arg(long, default_value = "netlab-results.jsonl")]
    pub out: PathBuf,
    #[arg(long)]
    pub json: bool,
    /// Find, per server and protocol, the most users it serves with a
    /// "normal" verdict: doubling from the first --users value, then bisecting.
    #[arg(long)]
    pub find_limit: bool,
    /// Upper bound for --find-limit (each session holds a pty; the kernel's
    /// limit is /proc/sys/kernel/pty/max).
    #[arg(long, default_value_t = 3000)]
    pub max_users: usize,
}

impl LoginExperimentArgs {
    fn cells(&self) -> anyhow::Result<Vec<LoginParams>> {
        if self.users.contains(&0) {
            bail!("--users: zero users is not an experiment");
        }
        if !(self.rate > 0.0 && self.rate <= 1000.0) {
            bail!(
                "--rate {}: must be above 0 and at most 1000 characters per second per user",
                self.rate
            );
        }
        if self.duration.is_zero() {
            bail!("--duration must be above zero");
        }
        let placements = placements(&self.placement, &self.link)?;
        let mut cells = Vec::new();
        for placement in &placements {
            for &protocol in &self.protocol {
                for &users in &self.users {
                    for &relay in &self.relay {
                        // sshd's cells speak SSH whatever else is asked, once
                        // per user count.
                        let protocol = if relay == Target::Sshd {
                            Dialect::Ssh
                        } else {
                            protocol
                        };
                        let cell = LoginParams {
                            relay,
                            protocol,
                            placement: placement.clone(),
                            users,
                            rate: self.rate,
                            poisson: self.poisson,
                            warmup_s: self.warmup.as_secs_f64(),
                            duration_s: self.duration.as_secs_f64(),
                        };
                        if !cells.contains(&cell) {
                            cells.push(cell);
                        }
                    }
                }
            }
        }
        Ok(cells)
    }
}

/// The placements a `--placement` list names, refused up front when a
/// netns one cannot be made (no root) or the link profile is unknown.
pub fn placements(names: &[String], link: &str) -> anyhow::Result<Vec<Placement>> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "loopback" => Ok(Placement::Loopback),
            "netns" => {
                if !has_net_admin() {
                    bail!("--placement netns needs CAP_NET_ADMIN (run as root)");
                }
                Ok(Placement::Netns {
                    link: LinkProfile::named(link)?,
                    via: LinkVia::Auto,
                    capture: false,
                    pcap: None,
                    verbose: false,
                })
            }
            other => bail!("--placement {other}: expected loopback or netns"),
        })
        .collect()
}

fn results(records: &[Record]) -> Vec<&LoginResult> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Login {
                result: Some(result),
                ..
            } => Some(result.as_ref()),
            _ => None,
        })
        .collect()
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
    let mut rows = Vec::new();
    for record in records {
        let RecordData::Login { params, result } = &record.data else {
            continue;
        };
        let mut row = vec![
            params.relay.name().to_string(),
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
                tables::num(r.typist.echo_p50_ms),
                tables::num(r.typist.echo_p99_ms),
                tables::num(r.typist.echo_max_ms),
                tables::num(r.server_cpu_per_keystroke_us),
                tables::num(r.host_cpu_per_keystroke_us),
                typist_cpu(&r.typist),
                r.verdict.clone(),
            ]),
            None => {
                row.extend(std::iter::repeat_n(String::new(), 15));
                row.push(format!(
                    "failed: {}",
                    record.error.as_deref().unwrap_or("?")
                ));
            }
        }
        rows.push(row);
    }
    let mut text = tables::markdown(&header, &rows);
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
    let old_rows: Vec<Vec<String>> = then
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    toml::Value::String(s) if s == "user" => "normal rlogind".to_string(),
                    toml::Value::String(s) if s == "kernel" => "kernel-assisted".to_string(),
                    toml::Value::Integer(-1) => "400-1400".to_string(),
                    other => other.to_string().trim_matches('"').to_string(),
                })
                .collect()
        })
        .collect();
    text.push_str(&tables::markdown(&old_header, &old_rows));
    text.push_str(&format!(
        "1989 responsiveness: normal: {}; kernel-assisted: {}.\n",
        then.responsiveness.user, then.responsiveness.kernel
    ));
    text.push_str(
        "r, b: runnable and blocked tasks (means of 100 ms samples; the sampler not counted). \
         syscalls/s: every process (perf raw_syscalls:sys_enter), the load generator's included. \
         us/sy/id: % of all CPUs (sy includes irq and softirq). server µs/key: CPU time of the server's \
         processes (server, sessions, commands) per keystroke, from the scheduler's own \
         accounting (exact); host µs/key: busy CPU minus an \
         idle baseline and the load generator's (and its ssh clients'), per keystroke. typist cpu %: \
         the generator's thread (+ its ssh clients'). pkts: TCP segments on loopback (in = out), \
         the server side's interface on netns. The uring design's waiting \
         thread counts as blocked (b) and its wait as iowait, not idle. telnet-linemode rows time lines (Enter sent to `cat`'s copy received). Verdict by echo p99: normal ≤ 100 ms, degraded ≤ 1 s, \
         else (or >1% echoes lost, or a session failed) unusable.\n",
    );
    text
}

/// The generator's share of a core, and its client programs' (ssh) after a '+'.
fn typist_cpu(t: &crate::endpoint::login::typist::TypistReport) -> String {
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

/// Runs every cell, saving each record as it is made; a failed cell is
/// recorded with its reason and the rest go on. Ctrl-C stops between cells
/// (the window in progress ends early and is not recorded).
pub fn measure_all(
    cells: &[LoginParams],
    corpus: &[u8],
    host: &HostFacts,
    writer: &mut RecordWriter,
    show_progress: bool,
) -> anyhow::Result<Vec<Record>> {
    let stop = interrupt_flag();
    // One idle baseline for the sweep, before any cell starts anything.
    let baseline = crate::experiment::login::idle_baseline()?;
    let mut bar = Progress::new(cells.len() as u64, false, show_progress);
    let mut records = Vec::new();
    for params in cells {
        bar.set_message(format!(
            "{} {} x{}",
            params.relay.name(),
            params.protocol.name(),
            params.users
        ));
        let started = now_rfc3339();
        let outcome = run_cell(params, corpus, &stop, Some(baseline));
        if stop.load(Ordering::Relaxed) {
            bar.finish();
            return Err(Interrupted {
                saved: records.len(),
            }
            .into());
        }
        let (result, error) = match outcome {
            Ok(result) => (Some(Box::new(result)), None),
            // A failed cell is recorded with its reason; the sweep goes on.
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let data = RecordData::Login {
            params: params.clone(),
            result,
        };
        let record = Record::new(started, params.placement.name(), host, data, error);
        writer
            .write(&record)
            .with_context(|| format!("cannot save to {}", writer.path().display()))?;
        records.push(record);
        bar.inc(1);
    }
    bar.finish();
    Ok(records)
}

/// What `--find-limit` found for one server and protocol.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Limit {
    pub relay: Target,
    pub protocol: Dialect,
    pub placement: String,
    /// The most users served with a "normal" verdict (0: not even the first count).
    pub sustains: usize,
    /// The fewest users seen degraded, if any.
    pub degraded_at: Option<usize>,
    /// Why the search stopped there.
    pub why: String,
}

/// The load generator is the bottleneck rather than the server: it used
/// most of a core, or sent keystrokes late.
fn generator_limited(result: &LoginResult) -> Option<String> {
    let t = &result.typist;
    if t.own_cpu_pct() > 80.0 {
        Some(format!(
            "the load generator used {:.0}% of a core",
            t.own_cpu_pct()
        ))
    } else if t.send_lag_p99_ms > 20.0 {
        Some(format!(
            "the load generator sent keystrokes late (p99 {:.1} ms)",
            t.send_lag_p99_ms
        ))
    } else {
        None
    }
}

/// The next user count to probe, or None when the search is over: double
/// while every probe was normal (up to `max`), then bisect between the last
/// normal count `good` and the first degraded one until they are within an
/// eighth of `good` (or 1) of each other.
pub fn next_users(good: usize, bad: Option<usize>, last: usize, max: usize) -> Option<usize> {
    match bad {
        None if last >= max => None,
        None => Some((last * 2).min(max)),
        Some(bad) if bad - good <= (good / 8).max(1) => None,
        Some(bad) => Some((good + bad) / 2),
    }
}

/// Doubles the user count from `start` while the verdict stays normal, then
/// bisects between the last normal and the first degraded count to within
/// an eighth. Each probe is a recorded cell.
fn find_limit(
    args: &LoginExperimentArgs,
    template: &LoginParams,
    corpus: &[u8],
    host: &HostFacts,
    writer: &mut RecordWriter,
    records: &mut Vec<Record>,
) -> anyhow::Result<Limit> {
    let start = args.users.first().copied().unwrap_or(16);
    let (mut good, mut bad): (usize, Option<(usize, String)>) = (0, None);
    let mut n = start.min(args.max_users);
    let why = loop {
        let params = LoginParams {
            users: n,
            ..template.clone()
        };
        eprintln!(
            "find-limit: {} {} with {n} users",
            params.relay.name(),
            params.protocol.name()
        );
        let record = measure_all(&[params], corpus, host, writer, false)?
            .pop()
            .expect("one cell");
        let verdict = match &record.data {
            RecordData::Login {
                result: Some(r), ..
            } => {
                if let Some(limit) = generator_limited(r) {
                    records.push(record);
                    break format!(
                        "stopped at {n} users: {limit}; the machine is saturated, so {good} is a lower bound for the server"
                    );
                }
                (r.verdict == "normal").then_some(()).ok_or_else(|| {
                    format!(
                        "{} (echo p99 {} ms)",
                        r.verdict,
                        tables::num(r.typist.echo_p99_ms)
                    )
                })
            }
            _ => Err(format!(
                "failed: {}",
                record.error.as_deref().unwrap_or("no result")
            )),
        };
        records.push(record);
        match verdict {
            Ok(()) => good = n,
            Err(why) => bad = Some((n, why)),
        }
        match next_users(good, bad.as_ref().map(|b| b.0), n, args.max_users) {
            Some(next) => n = next,
            None => {
                break match &bad {
                    None => format!("normal up to the cap of {} users", args.max_users),
                    Some((b, why)) => format!("degraded at {b}: {why}"),
                };
            }
        }
    };
    Ok(Limit {
        relay: template.relay,
        protocol: template.protocol,
        placement: template.placement.name().to_string(),
        sustains: good,
        degraded_at: bad.map(|(b, _)| b),
        why,
    })
}

fn run_find_limit(
    args: &LoginExperimentArgs,
    corpus: &[u8],
    out: &mut Output,
) -> anyhow::Result<()> {
    let mut writer = RecordWriter::append(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let host = HostFacts::gather();
    let mut records = Vec::new();
    let mut limits = Vec::new();
    let mut seen = Vec::new();
    for template in args.cells()? {
        let key = (
            template.relay,
            template.protocol,
            template.placement.clone(),
        );
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        limits.push(find_limit(
            args,
            &template,
            corpus,
            &host,
            &mut writer,
            &mut records,
        )?);
    }
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "login",
            "find_limit": limits,
            "records_file": args.out,
            "records": records,
        }))?;
    } else {
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
        out.text(&format!(
            "netlab login --find-limit: the most users typing {} chars/s each server serves with a normal verdict (echo p99 <= 100 ms)\n",
            args.rate
        ))?;
        out.text(&tables::markdown(
            &[
                "server",
                "proto",
                "place",
                "sustains users",
                "degraded at",
                "why the search stopped",
            ],
            &rows,
        ))?;
        eprintln!("records appended to {}", writer.path().display());
    }
    Ok(())
}

pub fn run(args: LoginExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    let cells = args.cells()?;
    let corpus = match &args.corpus {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("--corpus {}: cannot read it", path.display()))?,
        None => DEFAULT_CORPUS.as_bytes().to_vec(),
    };
    if crate::endpoint::login::typist::keystrokes_of(&corpus).is_empty() {
        bail!("the corpus has no typeable characters");
    }
    if args.find_limit {
        return run_find_limit(&args, &corpus, out);
    }
    let mut writer = RecordWriter::append(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let host = HostFacts::gather();
    let records = measure_all(&cells, &corpus, &host, &mut writer, !args.json)?;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "login",
            "records_file": args.out,
            "records": records,
        }))?;
    } else {
        out.text(&format!(
            "netlab login: users typing {} chars/s into `cat > /dev/null` (LINEMODE: into `cat`, latency per line), {} s window after {} s warm-up\n",
            args.rate,
            args.duration.as_secs_f64(),
            args.warmup.as_secs_f64()
        ))?;
        out.text(&table(&records))?;
        eprintln!("records appended to {}", writer.path().display());
    }
    if results(&records).is_empty() {
        bail!(
            "every cell failed; see the records in {}",
            writer.path().display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::next_users;

    #[test]
    fn the_limit_search_doubles_then_bisects() {
        assert_eq!(next_users(16, None, 16, 3000), Some(32));
        assert_eq!(next_users(2048, None, 2048, 3000), Some(3000));
        assert_eq!(next_users(3000, None, 3000, 3000), None);
        // 512 was normal, 1024 degraded: bisect to within 64.
        assert_eq!(next_users(512, Some(1024), 1024, 3000), Some(768));
        assert_eq!(next_users(768, Some(1024), 768, 3000), Some(896));
        assert_eq!(next_users(896, Some(1024), 896, 3000), Some(960));
        assert_eq!(next_users(960, Some(1024), 960, 3000), None);
        // Degraded from the first probe: search below it.
        assert_eq!(next_users(0, Some(16), 16, 3000), Some(8));
        assert_eq!(next_users(0, Some(1), 1, 3000), None);
    }
}
