//! The one seam a run's events leave the runner by: a [`Sink`] is told
//! each [`RunEvent`] (a grid began, a cell is being measured, a record
//! was kept or reused, a line for the person watching, the grid ended),
//! in the order they happen, on the runner's thread.
//!
//! The runner's own sinks are the records file ([`RecordWriter`], which
//! keeps each record line the moment its cell ends) and the display
//! ([`Display`]: the progress bar, the search's spinner and the lines
//! said above them); [`super::runner::Runner::sink`] adds others:
//! [`JsonLines`] (`--json-stream`: each sample a line on stdout as it is
//! seen), the continuous mesh's Prometheus metrics (each kept test into
//! the cycle the next scrape shows), a test's log.
//!
//! Invariants: a record's line is made once and every sink is given the
//! same bytes, the records file first, so a sink that reads it sees what
//! is on disk; an error from a sink ends the run as a failed save does
//! (nothing measured before it is lost: the file holds every line it took).

use super::progress::Progress;
use crate::record::RecordWriter;

/// What happened in a run, as its sinks are told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEvent<'a> {
    /// A grid of `cells` began.
    Began { cells: usize },
    /// A cell is being measured (a grid's or a search's step).
    Measuring { label: &'a str },
    /// A cell's record was made (measured, failed or decided without
    /// measuring): its JSON line, without the line break.
    Kept { line: &'a str },
    /// A cell was given its record from the resumed run (not measured,
    /// and not written again).
    Reused,
    /// A figure seen inside a cell before its record (an interval of
    /// `--interval`), as its JSON line, told through a
    /// [`super::runner::Tap`].
    Sample { line: &'a str },
    /// A line for the person watching.
    Said(&'a str),
    /// The grid begun last ended (done, failed or stopped).
    Ended,
}

/// Why a sink could not take an event.
#[derive(Debug, thiserror::Error)]
#[error("cannot save to {to}: {source}")]
pub struct SinkError {
    /// Where the sink sends what it is told (a file's path).
    pub to: String,
    #[source]
    pub source: std::io::Error,
}

/// Where a run's events go.
pub trait Sink {
    fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError>;
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError> {
        (**self).event(event)
    }
}

/// The records file keeps each record's line, flushed before the event
/// returns.
impl Sink for RecordWriter {
    fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError> {
        match event {
            RunEvent::Kept { line } => self.write_str(line).map_err(|source| SinkError {
                to: self.path().display().to_string(),
                source,
            }),
            _ => Ok(()),
        }
    }
}

/// The person watching: a bar over a grid's cells, a spinner counting a
/// search's, and the lines said above them (on stderr). The bar and
/// spinner show only on a terminal and when `enabled`; said lines always.
pub struct Display {
    enabled: bool,
    bar: Option<Progress>,
    spinner: Option<Progress>,
}

impl Display {
    pub fn new(enabled: bool) -> Display {
        Display {
            enabled,
            bar: None,
            spinner: None,
        }
    }

    pub fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
    }

    /// What counts the cells now: a grid's bar, else a search's spinner.
    fn counter(&mut self) -> Option<&mut Progress> {
        self.bar.as_mut().or(self.spinner.as_mut())
    }
}

impl Sink for Display {
    fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError> {
        match *event {
            RunEvent::Began { cells } => {
                self.bar = Some(Progress::new(cells as u64, false, self.enabled));
            }
            RunEvent::Measuring { label } => {
                if self.bar.is_none() && self.spinner.is_none() {
                    self.spinner = Some(Progress::spinner(self.enabled));
                }
                if let Some(counter) = self.counter() {
                    counter.set_message(label.to_string());
                    counter.tick();
                }
            }
            RunEvent::Sample { .. } => {}
            RunEvent::Kept { .. } | RunEvent::Reused => {
                if let Some(counter) = self.counter() {
                    counter.inc(1);
                }
            }
            RunEvent::Said(line) => match self.counter() {
                Some(counter) => counter.println(line),
                None => eprintln!("{line}"),
            },
            RunEvent::Ended => {
                if let Some(bar) = self.bar.take() {
                    bar.finish();
                }
            }
        }
        Ok(())
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        for progress in [&self.bar, &self.spinner].into_iter().flatten() {
            progress.finish();
        }
    }
}

/// JSON Lines to another program (`--json-stream`): each sample's line
/// the moment it is told, flushed; nothing else (the run's last line is
/// its summary, printed when it ends).
pub struct JsonLines<W: std::io::Write> {
    out: W,
    /// What `out` is, for an error (`stdout`).
    to: String,
}

impl<W: std::io::Write> JsonLines<W> {
    pub fn new(out: W, to: &str) -> JsonLines<W> {
        JsonLines {
            out,
            to: to.to_string(),
        }
    }
}

impl<W: std::io::Write> Sink for JsonLines<W> {
    fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError> {
        let RunEvent::Sample { line } = event else {
            return Ok(());
        };
        writeln!(self.out, "{line}")
            .and_then(|()| self.out.flush())
            .map_err(|source| SinkError {
                to: self.to.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_file_keeps_each_kept_line_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        for event in [
            RunEvent::Began { cells: 2 },
            RunEvent::Measuring { label: "one" },
            RunEvent::Kept { line: r#"{"a":1}"# },
            RunEvent::Reused,
            RunEvent::Said("a line"),
            RunEvent::Kept { line: r#"{"a":2}"# },
            RunEvent::Ended,
        ] {
            writer.event(&event).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
    }

    #[test]
    fn a_sink_that_cannot_save_names_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.jsonl");
        let mut writer = RecordWriter::append(&path).unwrap();
        // A line break inside a record would make two lines of one.
        let e = writer
            .event(&RunEvent::Kept { line: "{}\n{}" })
            .unwrap_err();
        assert!(e.to_string().contains("records.jsonl"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn json_lines_carry_each_sample_and_nothing_else() {
        let mut lines = JsonLines::new(Vec::new(), "a buffer");
        for event in [
            RunEvent::Began { cells: 1 },
            RunEvent::Sample {
                line: r#"{"event":"interval","n":1}"#,
            },
            RunEvent::Said("said"),
            RunEvent::Sample {
                line: r#"{"event":"interval","n":2}"#,
            },
            RunEvent::Kept {
                line: r#"{"record":1}"#,
            },
            RunEvent::Ended,
        ] {
            lines.event(&event).unwrap();
        }
        assert_eq!(
            String::from_utf8(lines.out).unwrap(),
            "{\"event\":\"interval\",\"n\":1}\n{\"event\":\"interval\",\"n\":2}\n"
        );
    }

    #[test]
    fn the_display_counts_a_grid_on_its_bar_and_a_search_on_its_spinner() {
        let mut display = Display::new(false);
        display.event(&RunEvent::Began { cells: 3 }).unwrap();
        display.event(&RunEvent::Measuring { label: "a" }).unwrap();
        display.event(&RunEvent::Kept { line: "{}" }).unwrap();
        display.event(&RunEvent::Reused).unwrap();
        assert_eq!(display.bar.as_ref().map(Progress::position), Some(2));
        assert!(display.spinner.is_none());
        display.event(&RunEvent::Ended).unwrap();
        assert!(display.bar.is_none());
        display
            .event(&RunEvent::Measuring { label: "step" })
            .unwrap();
        display.event(&RunEvent::Kept { line: "{}" }).unwrap();
        assert_eq!(display.spinner.as_ref().map(Progress::position), Some(1));
    }
}
