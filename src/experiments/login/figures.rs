//! The login experiment's figures: CPU busy and the 99th-percentile echo
//! against users, per server.

use crate::experiments::login::record::{LoginData, Record};
use crate::report::figures::{Figure, Series, Style, Unit, by_series, caption};

/// A login-load cell: series name, users, result, record.
type LoginPoint<'a> = (
    String,
    f64,
    &'a crate::experiments::login::record::LoginResult,
    &'a Record,
);

/// The login-load cells.
fn login_points(records: &[Record]) -> Vec<LoginPoint<'_>> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            LoginData {
                params,
                result: Some(result),
            } => Some((
                format!(
                    "{} {} {}{}",
                    params.relay.name(),
                    params.protocol.name(),
                    params.placement.name(),
                    if params.host_cpu_pct.is_some() {
                        " (1989-class budget)"
                    } else {
                        ""
                    }
                ),
                params.users as f64,
                result.as_ref(),
                r,
            )),
            _ => None,
        })
        .collect()
}

/// 1989's busy CPU (user + system) for a relay of the 1989 table
/// (`user`: rlogind, a process per session; `kernel`: the kernel-assisted
/// relay) against users, as a model series named `name`.
fn then(relay: &str, name: &str) -> Option<Series> {
    let h = &crate::report::historical::figures().login_relay_load;
    let column = |name: &str| h.columns.iter().position(|c| c == name);
    let (r, u, us, sy) = (
        column("relay")?,
        column("users")?,
        column("cpu_us")?,
        column("cpu_sy")?,
    );
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    Some(Series {
        name: name.into(),
        style: Style::Model,
        points: h
            .rows
            .iter()
            .filter(|row| row.get(r).and_then(|v| v.as_str()) == Some(relay))
            .filter_map(|row| {
                Some((
                    number(row.get(u)?)?,
                    number(row.get(us)?)? + number(row.get(sy)?)?,
                ))
            })
            .collect(),
    })
}

/// 1989 beside now, where the units match: the busy CPU of rlogind (a
/// process per session: today's fork design) and of the kernel-assisted
/// relay (today's splice design) at 16 and 48 users. The series and the
/// y axis' title.
fn then_and_now(points: &[LoginPoint<'_>], cpu: &[Series]) -> (Vec<Series>, &'static str) {
    // Then beside now as shapes: today's CPU is a few percent of a modern
    // machine, 1989's most of a Sun, so one axis of percent hides both
    // curves' shapes. With cells run under a 1989-class budget
    // (`--host-cpu sun3`), their use of that budget is the comparable
    // figure; without them, each curve relative to its own value at its
    // fewest users.
    let budgeted =
        |r: &Record| matches!(&r.data, LoginData { params, .. } if params.host_cpu_pct.is_some());
    let relays = ["fork rlogin loopback", "splice rlogin loopback"];
    let budget_use = by_series(
        points
            .iter()
            .filter(|p| budgeted(p.3))
            .filter_map(|(name, users, r, rec)| {
                let LoginData { params, .. } = &rec.data;
                let budget = params.host_cpu_pct?;
                Some((name.clone(), *users, 100.0 * r.server_cpu_pct / budget))
            })
            .collect(),
    );
    let mut then_series: Vec<Series> = [
        then("user", "1989 rlogind, a process per session (Sun-3/260)"),
        then("kernel", "1989 kernel-assisted relay (Sun-3/260)"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if budget_use
        .iter()
        .any(|s| relays.iter().any(|r| s.name.starts_with(r)))
    {
        let now: Vec<Series> = budget_use
            .into_iter()
            .filter(|s| relays.iter().any(|r| s.name.starts_with(r)))
            .collect();
        (
            now.into_iter().chain(then_series).collect::<Vec<_>>(),
            "CPU busy (% of one 1989-class CPU: today's server under --host-cpu, 1989's Sun-3/260)",
        )
    } else {
        let relative = |s: &Series| -> Series {
            let first = s.points.first().map_or(1.0, |p| p.1).max(1e-9);
            Series {
                points: s.points.iter().map(|&(x, y)| (x, y / first)).collect(),
                ..s.clone()
            }
        };
        let now: Vec<Series> = cpu
            .iter()
            .filter(|s| relays.contains(&s.name.as_str()))
            .map(relative)
            .collect();
        then_series = then_series.iter().map(relative).collect();
        (
            now.into_iter().chain(then_series).collect(),
            "CPU busy (x its own value at the fewest users)",
        )
    }
}

/// CPU busy (user + system, % of all CPUs) and the 99th-percentile echo
/// vs users, per server.
pub fn login_figures(records: &[Record]) -> Vec<Figure> {
    let points = login_points(records);
    if points.is_empty() {
        return Vec::new();
    }
    let used: Vec<&Record> = points.iter().map(|p| p.3).collect();
    let cpu = by_series(
        points
            .iter()
            .map(|(name, users, r, _)| {
                let busy = r.cpu.user_pct + r.cpu.system_pct + r.cpu.irq_pct + r.cpu.softirq_pct;
                (name.clone(), *users, busy)
            })
            .collect(),
    );
    let echo = by_series(
        points
            .iter()
            .map(|(name, users, r, _)| (name.clone(), *users, r.typist.echo_p99_ms.max(1e-3)))
            .collect(),
    );
    let per_key = by_series(
        points
            .iter()
            .map(|(name, users, r, _)| (name.clone(), *users, r.server_cpu_per_keystroke_us))
            .collect(),
    );
    let figure = |id: &str, title: &str, y_label: &str, log_y: bool, y_unit: Unit, series| Figure {
        log_y,
        y_unit,
        ..Figure::plain(
            id,
            title,
            ("users typing 5 chars/s", y_label),
            series,
            caption(&used),
        )
    };
    let (now_then, then_label) = then_and_now(&points, &cpu);
    let mut figures = vec![
        figure(
            "login-cpu",
            "Login load: CPU busy vs users",
            "CPU user + system (% of all CPUs)",
            false,
            Unit::Plain,
            cpu,
        ),
        figure(
            "login-echo",
            "Login load: 99th-percentile echo vs users",
            "echo p99 (s, log; 100 ms = perceptible)",
            true,
            Unit::Seconds { scale: 1e-3 },
            echo,
        ),
        figure(
            "login-cost",
            "Login load: server CPU per keystroke vs users",
            "server CPU time per keystroke (s)",
            false,
            Unit::Seconds { scale: 1e-6 },
            per_key,
        ),
    ];
    if now_then.iter().any(|s| s.style == Style::Measured) {
        figures.push(figure(
            "login-then",
            "Login load over rlogin: CPU busy vs users, 1989 and now",
            then_label,
            false,
            Unit::Plain,
            now_then,
        ));
    }
    figures
}
