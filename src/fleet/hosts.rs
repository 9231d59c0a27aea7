//! A file of hosts, one a line: `HOST[:PORT] [label=value ...]`, with
//! `#` comments and blank lines. The mesh's inventory (`--agents FILE`)
//! and an agent's peer list (`--probe-peers FILE`) are such files; this
//! reads them without resolving anything (what a fuzzer takes).
//!
//! Invariant: [`entry_line`] of an entry reads back as the same entry.

use std::collections::BTreeMap;

/// One inventory line's agent name and labels.
pub type Entry = (String, BTreeMap<String, String>);

/// The entries of a file of hosts, each with its line number, at most
/// `most` of them.
pub fn entries_up_to(text: &str, most: usize) -> Result<Vec<(usize, Entry)>, String> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else {
            continue;
        };
        if found.len() >= most {
            return Err(format!("more than {most} agents"));
        }
        let mut labels = BTreeMap::new();
        for w in words {
            let (k, v) = w
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("line {}: {w:?} is not label=value", i + 1))?;
            check_label(k, v).map_err(|e| format!("line {}: {e}", i + 1))?;
            if labels.insert(k.to_string(), v.to_string()).is_some() {
                return Err(format!("line {}: label {k:?} given twice", i + 1));
            }
        }
        found.push((i + 1, (name.to_string(), labels)));
    }
    Ok(found)
}

/// Longest label name: a Kubernetes label key's (a 253-byte prefix, `/`,
/// a 63-byte name).
pub const MAX_LABEL_NAME: usize = 317;
/// Longest label value (Prometheus and reports show it whole).
pub const MAX_LABEL_VALUE: usize = 256;

/// A label as the reports, the Prometheus exposition and Kubernetes take
/// it: a name of letters, digits, `_`, `.`, `-` and `/` that starts with a
/// letter or `_`; a value without control characters; each bounded.
fn check_label(name: &str, value: &str) -> Result<(), String> {
    let name_ok = name.len() <= MAX_LABEL_NAME
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if !name_ok {
        return Err(format!(
            "label name {name:?}: letters, digits, '_', '.', '-' and '/', starting with a letter or '_', at most {MAX_LABEL_NAME} bytes"
        ));
    }
    if value.len() > MAX_LABEL_VALUE || value.chars().any(char::is_control) {
        return Err(format!(
            "label {name}: its value is longer than {MAX_LABEL_VALUE} bytes or holds control characters"
        ));
    }
    Ok(())
}

/// An entry as a line ([`entries_up_to`] reads it back the same).
pub fn entry_line((name, labels): &Entry) -> String {
    let mut line = name.clone();
    for (k, v) in labels {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(v);
    }
    line
}
