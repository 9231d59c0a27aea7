//! A progress bar on stderr, only for a person watching: hidden when stderr
//! is not a terminal, and shown only once a run has lasted a second, so
//! short runs and scripted runs print nothing extra.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

const SHOW_AFTER: Duration = Duration::from_secs(1);

pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    terminal: bool,
    shown: bool,
}

impl Progress {
    /// A bar of `len` units; `bytes` selects byte formatting.
    pub fn new(len: u64, bytes: bool, enabled: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template = if bytes {
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
        Progress {
            bar,
            start: Instant::now(),
            terminal: enabled && std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// A spinner for work of unknown length (a search), counting cells.
    pub fn spinner(enabled: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos} cells {msg}")
                .expect("valid template"),
        );
        Progress {
            bar,
            start: Instant::now(),
            terminal: enabled && std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn maybe_show(&mut self) {
        if self.terminal && !self.shown && self.start.elapsed() >= SHOW_AFTER {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }

    pub fn set_position(&mut self, position: u64) {
        self.bar.set_position(position);
        self.maybe_show();
    }

    pub fn inc(&mut self, delta: u64) {
        self.bar.inc(delta);
        self.maybe_show();
    }

    /// The units counted so far.
    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    pub fn set_message(&mut self, message: String) {
        self.bar.set_message(message);
    }

    pub fn tick(&mut self) {
        self.maybe_show();
        self.bar.tick();
    }

    /// A line for the person watching, on stderr above the bar (which
    /// stays), or alone when no bar shows.
    pub fn println(&self, line: &str) {
        if self.shown {
            self.bar.suspend(|| eprintln!("{line}"));
        } else {
            eprintln!("{line}");
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
