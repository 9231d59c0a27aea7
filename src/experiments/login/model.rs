//! The 1989 login host as a model (`netlab login --stack sunos35`,
//! [`crate::model::sunos35`]) as the login experiment shows it: the
//! predicted vmstat rows of 1989's two designs beside 000's, and today's
//! relays' measured per-keystroke work on 1989's machine, which separates
//! the code from the hardware.

use crate::experiments::login::record::{LoginData, LoginResult};
use crate::model::sunos35::{self, Costs, Design1989, PerKeystroke, Prediction};
use crate::report::historical;
use crate::report::table::markdown;

type Record = crate::record::Record<LoginData>;

/// One of today's servers on 1989's machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Measured {
    pub server: String,
    /// Cells whose counts went into the medians.
    pub cells: usize,
    pub prediction: Prediction,
}

/// The median of `values` (`values` not empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A cell's counts as the model takes them, if it has all of them.
fn counts_of(result: &LoginResult) -> Option<[f64; 5]> {
    let c = result.per_keystroke.as_ref()?;
    Some([
        c.syscalls?,
        c.context_switches?,
        c.packets_in,
        c.packets_out,
        c.pty_transfers?,
    ])
}

/// The most of any one count a keystroke can take: a relay that made a
/// thousand system calls, switches, packets or pty transfers for each
/// character is a record no netlab run writes.
pub const MAX_PER_KEYSTROKE: f64 = 1000.0;

/// Why `counts` (system calls, context switches, packets in and out, pty
/// transfers, each a keystroke) cannot be fed to the model, if they
/// cannot: the same bounds as a measurement has (never negative, never
/// past [`MAX_PER_KEYSTROKE`], and a keystroke arrives in a packet and
/// is read by a system call), so a hand-edited file cannot make the
/// model print negative CPU or a melting point of inf users.
pub fn implausible(counts: &[f64; 5]) -> Option<String> {
    const NAMES: [&str; 5] = [
        "system calls",
        "context switches",
        "packets in",
        "packets out",
        "pty transfers",
    ];
    for (value, name) in counts.iter().zip(NAMES) {
        if !(value.is_finite() && (0.0..=MAX_PER_KEYSTROKE).contains(value)) {
            return Some(format!(
                "{value} {name} a keystroke: a count is 0 to {MAX_PER_KEYSTROKE}"
            ));
        }
    }
    if counts[0] == 0.0 || counts[2] == 0.0 {
        return Some(
            "no system call or no packet in a keystroke: a keystroke arrives in a packet and is read by a system call".into(),
        );
    }
    None
}

/// Today's servers whose records carry every count, each with the
/// median of its cells' counts fed into the model at `users`; and each
/// cell left out for counts no measurement gives ([`implausible`]).
pub fn today(records: &[Record], users: &[u32], rate: f64) -> (Vec<Measured>, Vec<String>) {
    let mut servers: Vec<(String, Vec<[f64; 5]>)> = Vec::new();
    let mut left_out = Vec::new();
    for record in records {
        let Some(result) = record.data.result.as_deref() else {
            continue;
        };
        let Some(counts) = counts_of(result) else {
            continue;
        };
        if let Some(why) = implausible(&counts) {
            left_out.push(format!(
                "the {} cell at {} users: {why}",
                result.params.relay.name(),
                result.params.users
            ));
            continue;
        }
        let name = result.params.relay.name().to_string();
        match servers.iter_mut().find(|(n, _)| *n == name) {
            Some((_, cells)) => cells.push(counts),
            None => servers.push((name, vec![counts])),
        }
    }
    let costs = Costs::sun3_260();
    let measured = servers
        .into_iter()
        .map(|(server, cells)| {
            let m = |i: usize| median(cells.iter().map(|c| c[i]).collect());
            let counts = PerKeystroke {
                syscalls: m(0),
                context_switches: m(1),
                packets_in: m(2),
                packets_out: m(3),
                pty_transfers: m(4),
                // Every netlab relay does its work in a process.
                in_processes: true,
                derivation: vec![format!(
                    "measured: the median of {} cell(s) of netlab's {server} relay (perf on the server's tasks, its packets, its own pty count)",
                    cells.len()
                )],
            };
            Measured {
                cells: cells.len(),
                prediction: sunos35::predict(&server, counts, &costs, users, rate),
                server,
            }
        })
        .collect();
    (measured, left_out)
}

/// Why today's relays send fewer packets a keystroke than 1989's.
pub const PACKETS_THEN_AND_NOW: &str = "Packets: a keystroke through rlogin is its segment in, the echo out (carrying the keystroke's ACK when the echo leaves at once) and the echo's ACK in: 3. 000's rows show 1.8 in and 1.9 out a keystroke (normal rlogind): the terminal servers' in (the keystroke and the echo's ACK, at times carried by the next keystroke), and beside each echo a second segment out: BSD acknowledges by a 200 ms sweep (tcp_fasttimo), so a keystroke whose echo is still queued behind a busy CPU when the sweep passes is ACKed alone. Linux acknowledges data it answers at once on the answer, and the typing end's delayed ACK of the echo (40 ms) leaves long before the next keystroke (200 ms at 5 chars/s): 3.0 a keystroke on loopback. Nagle's rule never holds a keystroke (nothing is unacknowledged 200 ms apart); LINEMODE would send a line instead of each character and echo locally, but rlogin has no LINEMODE.";

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A predicted row in 000's columns.
fn row_cells(design: &str, row: &sunos35::VmstatRow) -> Vec<String> {
    vec![
        design.to_string(),
        row.users.to_string(),
        row.procs_r.map_or("grows".into(), num),
        num(row.procs_b),
        num(row.syscalls_per_s),
        num(row.cs_per_s),
        format!("{:.0}", row.cpu_us),
        format!("{:.0}", row.cpu_sy),
        format!("{:.0}", row.cpu_id),
        num(row.pkts_in_per_s),
        num(row.pkts_out_per_s),
    ]
}

const VMSTAT_HEADER: [&str; 11] = [
    "design", "users", "r", "b", "sys/s", "cs/s", "us", "sy", "id", "pkts in", "pkts out",
];

/// 000's measured rows as the tables print them (the ranges 000 gives
/// instead of a figure, as written).
pub fn measured_1989_rows() -> Vec<Vec<String>> {
    historical::figures()
        .login_relay_load
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
        .collect()
}

/// The model's rows of 1989's two designs, in 000's columns, with the
/// melting points beside 000's words.
pub fn rows_1989_text(users: &[u32], rate: f64) -> String {
    let predictions = sunos35::predict_1989(users, rate);
    let rows: Vec<Vec<String>> = predictions
        .iter()
        .flat_map(|p| p.rows.iter().map(|r| row_cells(&p.design, r)))
        .collect();
    let then = &historical::figures().login_relay_load.responsiveness;
    let mut text = format!(
        "1989 model (netlab login --stack sunos35: a Sun-3/260 under SunOS 3.5, {rate} chars/s a user; costs cited, counts from 000's 16-user rows)\n"
    );
    text.push_str(&markdown(&VMSTAT_HEADER, &rows));
    for p in &predictions {
        let said = if p.design == Design1989::Rlogind.name() {
            &then.user
        } else {
            &then.kernel
        };
        text.push_str(&format!(
            "{}: {:.0} µs of CPU a keystroke; the CPU saturates at {:.1} users (1989: {said})\n",
            p.design,
            p.system_us_per_keystroke + p.user_us_per_keystroke,
            p.melting_users
        ));
    }
    text
}

/// Today's relays on 1989's machine, one row each, below 1989's designs.
pub fn today_text(today: &[Measured], rate: f64) -> String {
    if today.is_empty() {
        return String::new();
    }
    let then = sunos35::predict_1989(&[], rate);
    let mut all: Vec<(String, &Prediction, String)> = then
        .iter()
        .map(|p| {
            (
                format!("1989 {}", p.design),
                p,
                "000's 16-user row".to_string(),
            )
        })
        .collect();
    for m in today {
        all.push((
            format!("today's {}", m.server),
            &m.prediction,
            format!("{} cell(s) measured", m.cells),
        ));
    }
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|(name, p, source)| {
            let c = &p.per_keystroke;
            vec![
                name.clone(),
                format!("{:.2}", c.syscalls),
                format!("{:.2}", c.context_switches),
                format!("{:.2}", c.packets_in + c.packets_out),
                format!("{:.2}", c.pty_transfers),
                format!("{:.0}", p.system_us_per_keystroke + p.user_us_per_keystroke),
                format!("{:.1}", p.melting_users),
                source.clone(),
            ]
        })
        .collect();
    let mut text = format!(
        "Today's relays on 1989's machine: each design's measured work a keystroke at the Sun-3/260's costs, {rate} chars/s a user\n",
    );
    text.push_str(&markdown(
        &[
            "code",
            "syscalls/key",
            "cs/key",
            "packets/key",
            "pty transfers/key",
            "Sun-3 µs/key",
            "melts at users",
            "counts from",
        ],
        &rows,
    ));
    text
}

/// What the login table prints below 1989's rows: the model's rows and,
/// where `records` carry their counts, today's relays on 1989's machine.
pub fn beside_table(records: &[Record]) -> String {
    let rate = sunos35::CHARS_PER_USER_S;
    let mut text = format!("\n{}", rows_1989_text(&sunos35::TABLE_USER_COUNTS, rate));
    // A cell left out here is left out silently: the table is the
    // records' own, and `--counts-from` names each.
    let (today, _) = today(records, &[], rate);
    if !today.is_empty() {
        text.push_str(&today_text(&today, rate));
        text.push_str(PACKETS_THEN_AND_NOW);
        text.push('\n');
    }
    text
}

/// `netlab login --stack sunos35` as text.
pub fn model_text(users: &[u32], rate: f64, today: &[Measured]) -> String {
    let costs = Costs::sun3_260();
    let mut text = String::from(
        "netlab login --stack sunos35: the 1989 login host as a CPU model (no sockets), users typing into cat > /dev/null through rlogind\n\ncosts on a Sun-3/260:\n",
    );
    for line in costs.derivations() {
        text.push_str(&format!("  {line}\n"));
    }
    for design in Design1989::ALL {
        text.push_str(&format!("{} per keystroke:\n", design.name()));
        for line in design.per_keystroke().derivation {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text.push('\n');
    text.push_str(&rows_1989_text(users, rate));
    let then = &historical::figures().login_relay_load;
    text.push_str(&format!("\n1989 measured ({}):\n", then.source));
    let old = measured_1989_rows();
    text.push_str(&markdown(&VMSTAT_HEADER, &old));
    if !today.is_empty() {
        text.push('\n');
        text.push_str(&today_text(today, rate));
        text.push_str(PACKETS_THEN_AND_NOW);
        text.push('\n');
    }
    text.push_str(&format!("\nr: M/M/1 mean for work done by processes (none at interrupt level); 'grows' past saturation, where the row is the CPU's capacity. Left out: {}\n", sunos35::CAVEATS));
    text
}

/// `netlab login --stack sunos35 --json`.
pub fn model_doc(users: &[u32], rate: f64, today: &[Measured]) -> serde_json::Value {
    let costs = Costs::sun3_260();
    let then = &historical::figures().login_relay_load;
    serde_json::json!({
        "experiment": "login-model",
        "stack": "sunos35",
        "rate_chars_per_s": rate,
        "costs": costs,
        "cost_derivations": costs.derivations(),
        "predictions": sunos35::predict_1989(users, rate),
        "today": today,
        "historical": {
            "source": then.source,
            "columns": then.columns,
            "rows": then.rows,
            "responsiveness": {"user": then.responsiveness.user, "kernel": then.responsiveness.kernel},
        },
        "packets_then_and_now": PACKETS_THEN_AND_NOW,
        "caveats": sunos35::CAVEATS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::login::record::{KeystrokeCounts, LoginParams};

    fn record(relay: crate::endpoint::login::host::Target, syscalls: f64) -> Record {
        let result = LoginResult {
            params: LoginParams {
                relay,
                ..LoginParams::default()
            },
            per_keystroke: Some(KeystrokeCounts {
                syscalls: Some(syscalls),
                context_switches: Some(2.0),
                packets_in: 1.5,
                packets_out: 1.5,
                pty_transfers: Some(2.0),
                source: String::new(),
            }),
            ..LoginResult::default()
        };
        crate::record::Record::new(
            String::new(),
            "loopback",
            &Default::default(),
            LoginData {
                params: result.params.clone(),
                result: Some(Box::new(result)),
            },
            None,
        )
    }

    #[test]
    fn today_s_counts_are_each_relay_s_median_fed_into_the_model() {
        use crate::endpoint::login::host::Target;
        let records = vec![
            record(Target::Fork, 8.0),
            record(Target::Fork, 10.0),
            record(Target::Fork, 30.0),
            record(Target::Epoll, 6.0),
        ];
        let (today, left_out) = today(&records, &[16], 5.0);
        assert!(left_out.is_empty());
        assert_eq!(today.len(), 2);
        let fork = &today[0];
        assert_eq!((fork.server.as_str(), fork.cells), ("fork", 3));
        assert_eq!(fork.prediction.per_keystroke.syscalls, 10.0);
        let costs = Costs::sun3_260();
        let expected = 10.0 * (costs.syscall_system_us + costs.syscall_user_us)
            + 2.0 * costs.context_switch_us
            + 3.0 * costs.packet_us
            + 2.0 * costs.pty_transfer_us;
        let got = fork.prediction.system_us_per_keystroke + fork.prediction.user_us_per_keystroke;
        assert!((got - expected).abs() < 1e-9);
        assert!((fork.prediction.melting_users - 1e6 / (5.0 * expected)).abs() < 1e-9);
        // Fewer system calls a keystroke: more users before it melts.
        assert!(today[1].prediction.melting_users > fork.prediction.melting_users);
    }

    #[test]
    fn a_cell_without_every_count_is_left_out() {
        use crate::endpoint::login::host::Target;
        let mut r = record(Target::Telnetd, 8.0);
        if let Some(result) = r.data.result.as_mut() {
            result.per_keystroke.as_mut().unwrap().pty_transfers = None;
        }
        assert!(today(&[r], &[16], 5.0).0.is_empty());
    }

    #[test]
    fn counts_no_measurement_gives_are_left_out_by_name() {
        use crate::endpoint::login::host::Target;
        for (syscalls, says) in [
            (-3.0, "-3 system calls a keystroke"),
            (0.0, "no system call or no packet"),
            (1e300, "a count is 0 to 1000"),
            (f64::INFINITY, "inf system calls"),
        ] {
            let (today, left_out) = today(&[record(Target::Fork, syscalls)], &[16], 5.0);
            assert!(today.is_empty(), "{syscalls}");
            assert!(left_out[0].contains(says), "{left_out:?}");
            assert!(left_out[0].contains("fork cell"), "{left_out:?}");
        }
    }
}
