//! The command-line options every experiment shares, as clap groups an
//! experiment's own options flatten in: where records go and how a run
//! prints (`run.rs`), where its ends run and over which link
//! (`placement.rs`), a server's bind address; the parsers of sizes and
//! durations as users type them; what an experiment is to the rest of
//! netlab (`experiment.rs`, the trait the registry's entries implement);
//! and [`Output`], standard output that
//! treats a closed pipe as the reader's wish to stop. Each experiment's
//! options live in its folder (`experiments/<name>/options.rs`); `cli`
//! holds the top-level command.

pub mod experiment;
pub mod placement;
pub mod run;

use std::io::Write;

/// A size (`parse_size`) as a `usize`, for clap.
pub fn usize_size_arg(text: &str) -> Result<usize, String> {
    let size = crate::units::parse_size(text).map_err(|e| e.to_string())?;
    usize::try_from(size).map_err(|_| format!("size \"{text}\" is too large"))
}

/// A count of at least one (users, sessions), for clap.
pub fn positive_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("\"{text}\" is not a count: {e}")),
    }
}

/// A size (`parse_size`) as a `u32`, for clap.
pub fn u32_size_arg(text: &str) -> Result<u32, String> {
    let size = crate::units::parse_size(text).map_err(|e| e.to_string())?;
    u32::try_from(size).map_err(|_| format!("size \"{text}\" is too large"))
}

/// A duration (`parse_duration`) in seconds, for clap.
pub fn seconds_arg(text: &str) -> Result<f64, crate::units::UnitError> {
    crate::units::parse_duration(text).map(|d| d.as_secs_f64())
}

/// Where a server started from the command line listens.
#[derive(Debug, clap::Args)]
pub struct BindArgs {
    /// Port; 0 picks a free one and prints it.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to bind; anything but loopback needs --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Allow a non-loopback bind (the server has no authentication).
    #[arg(long)]
    pub allow_remote: bool,
}

impl BindArgs {
    /// The address, refused when not loopback without --allow-remote, with a
    /// warning when allowed: `what` serves `why` to anyone who reaches it.
    pub fn checked(&self, what: &str, why: &str) -> anyhow::Result<std::net::SocketAddr> {
        let bind = self.bind;
        if !bind.is_loopback() {
            if !self.allow_remote {
                anyhow::bail!(
                    "refusing to bind {bind} (not loopback) without --allow-remote: {why}"
                );
            }
            eprintln!(
                "netlab {what}: warning: serving on {bind}, reachable from other hosts: {why}"
            );
        }
        Ok(std::net::SocketAddr::new(bind, self.port))
    }
}

/// Standard output that treats a closed pipe as the reader's wish to stop.
#[derive(Debug, Default)]
pub struct Output {
    closed: bool,
}

impl Output {
    /// Standard output, open.
    pub fn new() -> Output {
        Output { closed: false }
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        match stdout.write_all(bytes).and_then(|_| stdout.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }

    pub fn text(&mut self, text: &str) -> std::io::Result<()> {
        self.write(text.as_bytes())
    }

    /// One JSON document, pretty-printed, with a final newline.
    pub fn json(&mut self, value: &serde_json::Value) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        self.write(&bytes)
    }
}

/// An error and its causes on one line, as `{:#}` prints them but without
/// a cause the message before it already quotes: most of netlab's errors
/// say their cause in their own words, and `{:#}` would say it twice
/// ("...: Connection refused (os error 111): Connection refused ...").
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

#[cfg(test)]
mod describe_tests {
    use super::describe;
    use anyhow::Context;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot connect: {0}")]
    struct Quoting(#[from] std::io::Error);

    #[test]
    fn a_cause_the_message_quotes_is_said_once_and_one_it_does_not_is_kept() {
        let refused = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let quoted = anyhow::Error::new(Quoting(refused())).context("agent a");
        assert_eq!(
            describe(&quoted),
            "agent a: cannot connect: connection refused"
        );
        let plain: anyhow::Result<()> = Err(refused()).context("agent b");
        assert_eq!(describe(&plain.unwrap_err()), "agent b: connection refused");
    }
}
