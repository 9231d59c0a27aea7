//! Scratch directories of endpoints (a typist's client sockets, a login
//! session's command files), named `netlab-KIND-PID-XXXXXX` after the
//! process that made them and removed when dropped. An endpoint stopped
//! by a signal never drops its own, so each new one of a kind first
//! removes those of its kind whose process is gone, as `netlab testbed
//! clean` removes every kind's ([`remove_stale`]). Directories of the
//! names before 2026-12-03 (`netlab-typistXXXXXX`, no PID) are not
//! touched: nothing tells whose they are.

use std::io;
use std::path::Path;

/// A fresh scratch directory of `kind` (`typist`, `session`), after
/// removing stale ones of that kind.
pub fn scratch_dir(kind: &str) -> io::Result<tempfile::TempDir> {
    remove_stale_in(&std::env::temp_dir(), Some(kind));
    tempfile::Builder::new()
        .prefix(&format!("netlab-{kind}-{}-", std::process::id()))
        .tempdir()
}

/// Removes every kind's scratch directories whose process is gone;
/// returns their paths.
pub fn remove_stale() -> Vec<String> {
    remove_stale_in(&std::env::temp_dir(), None)
}

/// The PID a scratch directory's name holds, if it is one (of `kind`).
fn owner(name: &str, kind: Option<&str>) -> Option<u32> {
    let rest = name.strip_prefix("netlab-")?;
    let (named_kind, rest) = rest.split_once('-')?;
    if kind.is_some_and(|k| k != named_kind) || !KINDS.contains(&named_kind) {
        return None;
    }
    rest.split_once('-')?.0.parse().ok()
}

/// The kinds netlab makes.
const KINDS: [&str; 2] = ["typist", "session"];

fn remove_stale_in(dir: &Path, kind: Option<&str>) -> Vec<String> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner(&name, kind) else {
            continue;
        };
        if pid == std::process::id() || super::netlab_runs(pid) {
            continue;
        }
        // Not a symlink followed elsewhere: only a directory of ours.
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed.push(entry.path().display().to_string());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_their_kind_and_process() {
        assert_eq!(owner("netlab-typist-4242-AbC123", None), Some(4242));
        assert_eq!(owner("netlab-session-7-x", Some("session")), Some(7));
        assert_eq!(owner("netlab-session-7-x", Some("typist")), None);
        // Older names hold no PID; other programs' names are not ours.
        assert_eq!(owner("netlab-typistAbC123", None), None);
        assert_eq!(owner("netlab-results.jsonl", None), None);
        assert_eq!(owner("netlab-other-12-x", None), None);
    }

    #[test]
    fn a_gone_process_loses_its_directories_and_a_live_one_keeps_them() {
        let tmp = tempfile::tempdir().unwrap();
        // A PID that cannot be running (above pid_max's ceiling).
        let gone = tmp.path().join("netlab-typist-4194305-old");
        std::fs::create_dir(&gone).unwrap();
        std::fs::write(gone.join("sock"), b"").unwrap();
        let live = tmp
            .path()
            .join(format!("netlab-typist-{}-mine", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let unnamed = tmp.path().join("netlab-typistXYZ");
        std::fs::create_dir(&unnamed).unwrap();
        let removed = remove_stale_in(tmp.path(), Some("typist"));
        assert_eq!(removed, [gone.display().to_string()]);
        assert!(!gone.exists() && live.exists() && unnamed.exists());
    }
}
