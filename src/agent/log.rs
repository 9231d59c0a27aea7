//! The agent's log: one line a message, timestamped, and what a peer
//! sent made fit for a line.

/// One line of the agent's log on stderr, with the time.
pub fn log(line: impl std::fmt::Display) {
    eprintln!("{} netlab agent: {line}", crate::record::now_rfc3339());
}

/// A name a peer sent, fit for one log line: control characters (a newline
/// would forge a line of its own) escaped, at most 64 characters kept.
pub fn printable(name: &str) -> String {
    let mut shown: String = name
        .chars()
        .take(64)
        .flat_map(char::escape_default)
        .collect();
    if name.chars().count() > 64 {
        shown.push_str("...");
    }
    shown
}
