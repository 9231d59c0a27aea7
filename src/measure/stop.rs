//! Whether the user asked this process to stop (SIGINT, SIGTERM): one
//! process-wide flag that every long wait looks at, whatever layer it is
//! in, so that a stop signal ends a command within a [`POLL`] or two of
//! its arrival instead of when the wait would have ended.
//!
//! Invariant: the flag is only ever set (by the signal handlers the
//! controller and the agent install), never cleared, so a wait that saw it
//! may give up for good. An endpoint process never installs it (its
//! controller stops it), so its waits are unaffected.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use thiserror::Error;

static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The longest a wait may go without looking at the flag.
pub const POLL: Duration = Duration::from_millis(200);

/// The flag itself, for signal handlers and threads of their own.
pub fn flag() -> Arc<AtomicBool> {
    REQUESTED
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone()
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// Makes `command` start with SIGINT at its default action. An endpoint
/// ignores SIGINT (a terminal's Ctrl-C is its controller's), and exec
/// keeps an ignored signal ignored: without this, the command of a session
/// of netlab's own relays would ignore the Ctrl-C its user types, which a
/// real login never does. (telnetd and sshd, daemons in the endpoint's
/// process group, keep ignoring it so that a terminal's Ctrl-C is still
/// the controller's alone; their sessions inherit that.)
pub fn default_sigint(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

/// A wait given up because a stop was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("stopped (SIGTERM or Ctrl-C)")]
pub struct Stopped;

impl From<Stopped> for std::io::Error {
    /// An error no retry loop takes for a spurious wake-up (not
    /// `ErrorKind::Interrupted`, which `read_exact` and `write_all` retry).
    fn from(stopped: Stopped) -> Self {
        std::io::Error::other(stopped)
    }
}

/// `Err(Stopped)` once a stop was asked for.
pub fn check() -> Result<(), Stopped> {
    if requested() { Err(Stopped) } else { Ok(()) }
}

/// The next slice of a wait that should end at `deadline` (`None`: no
/// end): at most [`POLL`], so the caller looks at the flag again soon.
pub fn slice(deadline: Option<std::time::Instant>) -> Duration {
    match deadline {
        Some(d) => d
            .saturating_duration_since(std::time::Instant::now())
            .min(POLL),
        None => POLL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_an_io_error_no_retry_loop_swallows() {
        let e: std::io::Error = Stopped.into();
        assert_ne!(e.kind(), std::io::ErrorKind::Interrupted);
        assert!(e.get_ref().is_some_and(|inner| inner.is::<Stopped>()));
        assert_eq!(e.to_string(), "stopped (SIGTERM or Ctrl-C)");
    }

    #[test]
    fn a_slice_is_never_longer_than_the_poll_nor_than_the_wait() {
        assert_eq!(slice(None), POLL);
        let soon = std::time::Instant::now() + Duration::from_millis(20);
        assert!(slice(Some(soon)) <= Duration::from_millis(20));
        let later = std::time::Instant::now() + Duration::from_secs(5);
        assert_eq!(slice(Some(later)), POLL);
    }
}
