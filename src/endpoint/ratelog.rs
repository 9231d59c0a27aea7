//! Log lines about peers, rate-limited per cause: a stranger who sends bad
//! input a thousand times a second must not fill a disk or a terminal, nor
//! hide another cause's lines behind its own. At most [`LOG_BURST`] lines
//! of one cause a [`LOG_WINDOW`] are written; the rest are counted, and the
//! count is written when that cause's next window begins. Causes are
//! static strings (the code's, never a peer's), so their number is bounded.

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
    windows: Mutex<Vec<(&'static str, Window)>>,
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
            windows: Mutex::new(Vec::new()),
        }
    }

    /// Writes `line`, or counts it when this window's burst is spent.
    /// Returns whether it was written.
    pub fn line(&self, line: std::fmt::Arguments<'_>) -> bool {
        self.line_about("", line)
    }

    /// [`RateLog::line`] with its own window for `cause`.
    pub fn line_about(&self, cause: &'static str, line: std::fmt::Arguments<'_>) -> bool {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let i = match windows.iter().position(|(c, _)| *c == cause) {
            Some(i) => i,
            None => {
                let fresh = Window {
                    start: now,
                    shown: 0,
                    hidden: 0,
                };
                windows.push((cause, fresh));
                windows.len() - 1
            }
        };
        let window = &mut windows[i].1;
        if now.duration_since(window.start) >= LOG_WINDOW {
            if window.hidden > 0 {
                let about = if cause.is_empty() {
                    String::new()
                } else {
                    format!(" ({cause})")
                };
                (self.print)(format_args!(
                    "{} more {}{about} in the last {} s not shown",
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

    #[test]
    fn one_cause_s_flood_does_not_hide_another_s_lines() {
        let log = RateLog::new("refused peers", quiet);
        for i in 0..1000 {
            log.line_about("garbage", format_args!("{i}"));
        }
        assert!(log.line_about("wrong key", format_args!("a key holder's mistake")));
        assert!(!log.line_about("garbage", format_args!("more")));
    }
}
