//! The bounds of a login cell, the same whoever asks for it: the command
//! line (through `LoginPlan::validate`) and a controller's request to an
//! agent (the login role's check), so an agent never types, serves or
//! budgets what the command line would refuse.
//!
//! Two kinds of bound: values (users, rate, window, stall, CPU budget, an
//! interface's name), checked the same everywhere; and what a count of
//! sessions holds at once on the host it runs on (ptys, descriptors,
//! processes, ephemeral ports), checked against that host's own limits by
//! whichever process starts the work there.

use crate::endpoint::login::host::Target;
use crate::measure::limits::Needs;
use thiserror::Error;

/// The fastest typist: characters a second per user (the source's is 5).
pub const MAX_RATE: f64 = 1000.0;

/// The most users a cell types with: each is a connection from the typing
/// host's one address to one server port, so an ephemeral port each, and
/// there are 64 Ki ports at most.
pub const MAX_USERS: usize = 65_536;

/// The longest window or warm-up: a day, as for a stream.
pub const MAX_SECONDS: f64 = 86_400.0;

/// Sessions a server is asked to hold beyond its users (the plan's slack
/// for reconnects).
pub const SESSION_SLACK: usize = 16;

#[derive(Debug, Clone, Error, PartialEq)]
pub enum BoundsError {
    #[error("--users: zero users is not an experiment")]
    ZeroUsers,
    #[error("--users {0}: at most {MAX_USERS} users a cell (an ephemeral port each)")]
    TooManyUsers(usize),
    #[error("--rate {0}: must be above 0 and at most 1000 characters per second per user")]
    Rate(String),
    #[error("--duration must be above zero")]
    Duration,
    #[error(
        "{what} {seconds} s is longer than a day ({MAX_SECONDS} s), the longest run netlab makes"
    )]
    TooLong { what: &'static str, seconds: String },
    #[error("--warmup {0} s is not a number of seconds from 0")]
    Warmup(String),
    #[error("a server of {0} sessions: at most {max} sessions a server", max = MAX_USERS + SESSION_SLACK)]
    Sessions(usize),
    #[error("{0}")]
    Stall(String),
    #[error("{0}")]
    HostCpu(String),
    #[error(
        "interface name {0:?}: 1 to 15 bytes, none of them '/', a space or a control character"
    )]
    Interface(String),
}

/// One typing end: `users` each typing `rate` characters a second, for a
/// warm-up and a window of these many seconds.
pub fn check_typing(
    users: usize,
    rate: f64,
    warmup_s: f64,
    duration_s: f64,
) -> Result<(), BoundsError> {
    check_users(users)?;
    if !(rate > 0.0 && rate <= MAX_RATE) {
        return Err(BoundsError::Rate(rate.to_string()));
    }
    check_window(warmup_s, duration_s)
}

/// A user count of one cell.
pub fn check_users(users: usize) -> Result<(), BoundsError> {
    match users {
        0 => Err(BoundsError::ZeroUsers),
        n if n > MAX_USERS => Err(BoundsError::TooManyUsers(n)),
        _ => Ok(()),
    }
}

/// A warm-up from 0 and a window above 0, each a day at most.
pub fn check_window(warmup_s: f64, duration_s: f64) -> Result<(), BoundsError> {
    if duration_s.is_nan() || duration_s <= 0.0 {
        return Err(BoundsError::Duration);
    }
    if duration_s > MAX_SECONDS {
        return Err(BoundsError::TooLong {
            what: "--duration",
            seconds: duration_s.to_string(),
        });
    }
    if warmup_s.is_nan() || warmup_s < 0.0 {
        return Err(BoundsError::Warmup(warmup_s.to_string()));
    }
    if warmup_s > MAX_SECONDS {
        return Err(BoundsError::TooLong {
            what: "--warmup",
            seconds: warmup_s.to_string(),
        });
    }
    Ok(())
}

/// A progress bound in milliseconds, as `--stall-timeout` takes it.
pub fn check_stall(ms: u64) -> Result<(), BoundsError> {
    crate::endpoint::stall::StallBound::new(std::time::Duration::from_millis(ms))
        .map(|_| ())
        .map_err(BoundsError::Stall)
}

/// A CPU budget in percent of one CPU, as `--host-cpu` takes it.
pub fn check_budget(percent: f64) -> Result<(), BoundsError> {
    crate::testbed::cgroup::check(percent).map_err(|e| BoundsError::HostCpu(e.to_string()))
}

/// The serving end: how many sessions it holds, and the interface whose
/// packets its window counts (a name as the kernel takes one: IFNAMSIZ).
pub fn check_serving(max_sessions: usize, interface: Option<&str>) -> Result<(), BoundsError> {
    if max_sessions == 0 || max_sessions > MAX_USERS + SESSION_SLACK {
        return Err(BoundsError::Sessions(max_sessions));
    }
    if let Some(name) = interface
        && (name.is_empty()
            || name.len() > 15
            || name
                .bytes()
                .any(|b| b == b'/' || b.is_ascii_whitespace() || b.is_ascii_control()))
    {
        return Err(BoundsError::Interface(name.to_string()));
    }
    Ok(())
}

/// What one session of `target` holds on the serving host: descriptors
/// in its busiest process (a single-process relay holds each session's
/// socket and pty, splice also two pipes) and processes (a command each;
/// fork a relay too; telnetd socat and telnetd; sshd its two and the
/// `ssh` client).
pub fn per_session(target: Target) -> (u64, u64) {
    match target {
        Target::Splice => (6, 1),
        Target::Epoll | Target::Uring | Target::Batch => (2, 1),
        Target::Fork => (1, 2),
        Target::Telnetd => (1, 3),
        Target::Sshd => (1, 4),
    }
}

/// What a server of `target` holding `sessions` holds at once on its host.
pub fn serving_needs(target: Target, sessions: usize) -> Needs {
    let n = sessions as u64;
    let (descriptors, processes) = per_session(target);
    Needs {
        what: format!("a {} server of {sessions} sessions", target.name()),
        ptys: n,
        descriptors_per_process: descriptors * n + 64,
        processes: processes * n,
        ephemeral_ports: 0,
    }
}

/// What a typing end of `users` holds at once on its host: a socket and an
/// ephemeral port a user, and for SSH an `ssh` client process a user.
pub fn typing_needs(users: usize, through_ssh: bool) -> Needs {
    let n = users as u64;
    Needs {
        what: format!("a typist of {users} users"),
        ptys: 0,
        descriptors_per_process: if through_ssh { 3 * n } else { n } + 64,
        processes: if through_ssh { n } else { 0 },
        ephemeral_ports: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_values_the_command_line_refuses_are_refused() {
        assert!(check_typing(16, 5.0, 1.0, 5.0).is_ok());
        assert_eq!(check_typing(0, 5.0, 1.0, 5.0), Err(BoundsError::ZeroUsers));
        assert_eq!(
            check_typing(MAX_USERS + 1, 5.0, 1.0, 5.0),
            Err(BoundsError::TooManyUsers(MAX_USERS + 1))
        );
        for rate in [0.0, -5.0, f64::NAN, f64::INFINITY, 1000.5] {
            assert!(
                matches!(check_typing(1, rate, 1.0, 5.0), Err(BoundsError::Rate(_))),
                "{rate}"
            );
        }
        for duration in [0.0, -1.0, f64::NAN] {
            assert_eq!(
                check_typing(1, 5.0, 1.0, duration),
                Err(BoundsError::Duration)
            );
        }
        // A negative warm-up would panic Duration::from_secs_f64 in the endpoint.
        for warmup in [-1.0, f64::NAN, f64::NEG_INFINITY] {
            assert!(matches!(
                check_typing(1, 5.0, warmup, 5.0),
                Err(BoundsError::Warmup(_))
            ));
        }
        assert!(matches!(
            check_typing(1, 5.0, 1.0, 1e300),
            Err(BoundsError::TooLong { .. })
        ));
        assert!(matches!(
            check_typing(1, 5.0, f64::INFINITY, 5.0),
            Err(BoundsError::TooLong { .. })
        ));
    }

    #[test]
    fn a_server_names_a_real_interface_and_a_bounded_count() {
        assert!(check_serving(32, Some("veth-a0")).is_ok());
        assert!(check_serving(32, None).is_ok());
        for name in ["", "../../etc", "a b", "sixteen-bytes-xx", "tab\t"] {
            assert!(
                matches!(
                    check_serving(32, Some(name)),
                    Err(BoundsError::Interface(_))
                ),
                "{name:?}"
            );
        }
        assert!(matches!(
            check_serving(0, None),
            Err(BoundsError::Sessions(0))
        ));
        assert!(check_serving(MAX_USERS + SESSION_SLACK, None).is_ok());
        assert!(check_serving(MAX_USERS + SESSION_SLACK + 1, None).is_err());
    }

    #[test]
    fn stalls_and_budgets_are_the_command_lines() {
        assert!(check_stall(1000).is_ok());
        assert!(check_stall(0).is_err());
        assert!(check_stall(u64::MAX).is_err());
        assert!(check_budget(10.0).is_ok());
        for bad in [0.0, -3.0, f64::NAN, 1e9] {
            assert!(check_budget(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn needs_grow_with_sessions() {
        let fork = serving_needs(Target::Fork, 100);
        assert_eq!((fork.ptys, fork.processes), (100, 200));
        let splice = serving_needs(Target::Splice, 100);
        assert_eq!(splice.descriptors_per_process, 664);
        let ssh = typing_needs(10, true);
        assert_eq!((ssh.processes, ssh.ephemeral_ports), (10, 10));
        assert_eq!(typing_needs(10, false).processes, 0);
    }
}
