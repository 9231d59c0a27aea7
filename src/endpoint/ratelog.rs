//! Log lines about peers, rate-limited: a stranger who sends bad input a
//! thousand times a second must not fill a disk or a terminal. At most
//! `burst` lines a `window` are written; the rest are counted, and the
//! count is written when the next window begins.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines written per window before they are only counted.
pub const LOG_BURST: u32 = 10;
pub const LOG_WINDOW: Duration = Duration::from_secs(10);

/// A rate-limited log that writes through `print`.
pub struct RateLog {
    print: fn(std::fmt::Arguments<'_>),
    /// What the counted lines were, for the count's line ("refused peers").
    what: &'static str,
    state: Mutex<Option<Window>>,
}

struct Window {
    start: Instant,
    shown: u32,
    hidden: u32,
}

impl RateLog {
    pub const fn new(what: &'static str, print: fn(std::fmt::Arguments<'_>)) -> RateLog {
        RateLog {
            print,
            what,
            state: Mutex::new(None),
        }
    }

    /// Writes `line`, or counts it when this window's burst is spent.
    /// Returns whether it was written.
    pub fn line(&self, line: std::fmt::Arguments<'_>) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let window = state.get_or_insert(Window {
            start: now,
            shown: 0,
            hidden: 0,
        });
        if now.duration_since(window.start) >= LOG_WINDOW {
            if window.hidden > 0 {
                (self.print)(format_args!(
                    "{} more {} in the last {} s not shown",
                    window.hidden,
                    self.what,
                    LOG_WINDOW.as_secs()
                ));
            }
            *window = Window {
                start: now,
                shown: 0,
                hidden: 0,
            };
        }
        if window.shown < LOG_BURST {
            window.shown += 1;
            (self.print)(line);
            true
        } else {
            window.hidden += 1;
            false
        }
    }
}

/// Prints an endpoint's line on its stderr.
pub fn endpoint_line(line: std::fmt::Arguments<'_>) {
    eprintln!("netlab endpoint: {line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(_: std::fmt::Arguments<'_>) {}

    #[test]
    fn a_burst_is_written_and_the_rest_counted() {
        let log = RateLog::new("refused peers", quiet);
        let written = (0..1000).filter(|i| log.line(format_args!("{i}"))).count();
        assert_eq!(written, LOG_BURST as usize);
    }
}
