//! The login experiment's figures: CPU busy and the 99th-percentile echo
//! against users, per server.

use crate::experiments::login::record::{LoginData, Record};
use crate::report::figures::{Figure, Series, Style, by_series, caption};

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
                    "{} {} {}",
                    params.relay.name(),
                    params.protocol.name(),
                    params.placement.name()
                ),
                params.users as f64,
                result.as_ref(),
                r,
            )),
            _ => None,
        })
        .collect()
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
    let figure = |id: &str, title: &str, y_label: &str, log_y: bool, series| Figure {
        id: id.into(),
        title: title.into(),
        x_label: "users typing 5 chars/s".into(),
        y_label: y_label.into(),
        log_x: false,
        log_y,
        categories: Vec::new(),
        series,
        marks: Vec::new(),
        caption: caption(&used),
    };
    // 1989 beside now, where the units match: the busy CPU of rlogind (a
    // process per session: today's fork design) and of the kernel-assisted
    // relay (today's splice design) at 16 and 48 users.
    let h = &crate::report::historical::figures().login_relay_load;
    let column = |name: &str| h.columns.iter().position(|c| c == name);
    let then = |relay: &str, name: &str| -> Option<Series> {
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
    };
    let now_then: Vec<Series> = cpu
        .iter()
        .filter(|s| s.name == "fork rlogin loopback" || s.name == "splice rlogin loopback")
        .cloned()
        .chain(then(
            "user",
            "1989 rlogind, a process per session (Sun-3/260)",
        ))
        .chain(then("kernel", "1989 kernel-assisted relay (Sun-3/260)"))
        .collect();
    let mut figures = vec![
        figure(
            "login-cpu",
            "Login load: CPU busy vs users",
            "CPU user + system (% of all CPUs)",
            false,
            cpu,
        ),
        figure(
            "login-echo",
            "Login load: 99th-percentile echo vs users",
            "echo p99 (ms, log; 100 ms = perceptible)",
            true,
            echo,
        ),
        figure(
            "login-cost",
            "Login load: server CPU per keystroke vs users",
            "server CPU per keystroke (µs)",
            false,
            per_key,
        ),
    ];
    if now_then.iter().any(|s| s.style == Style::Measured) {
        figures.push(figure(
            "login-then",
            "Login load over rlogin: CPU busy vs users, 1989 and now",
            "CPU user + system (% of all CPUs; 1989: the one CPU of a Sun-3/260)",
            false,
            now_then,
        ));
    }
    figures
}
