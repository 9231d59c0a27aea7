//! The files a mesh run reads back (its manifest, its inventory, its
//! `results.jsonl` on `--resume` and `mesh report`), as a user's editor,
//! a full disk or an attacker may leave them: no bytes may panic or abort
//! a reader, and what each reader accepts writes back and reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::experiments::mesh::inventory::entries;
use netlab::experiments::mesh::record::{Manifest, results_from};
use netlab::fleet::hosts::entry_line;
use netlab::record::files::lines;

fuzz_target!(|data: &[u8]| {
    // The manifest: parsed, then checked; one that passes round-trips.
    if let Ok(manifest) = serde_json::from_slice::<Manifest>(data)
        && manifest.check().is_ok()
    {
        let written = serde_json::to_string(&manifest).expect("a manifest writes");
        let read: Manifest = serde_json::from_str(&written).expect("and reads back");
        assert_eq!(read, manifest);
    }
    // The inventory's lines, unresolved.
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(found) = entries(text)
    {
        let written: Vec<String> = found.iter().map(|(_, e)| entry_line(e)).collect();
        let again = entries(&written.join("\n")).expect("written entries parse");
        let again: Vec<_> = again.into_iter().map(|(_, e)| e).collect();
        let found: Vec<_> = found.into_iter().map(|(_, e)| e).collect();
        assert_eq!(again, found);
    }
    // The results: every line that parses writes back the same.
    let (tests, _skipped) = results_from(lines(data));
    for test in tests {
        let line = serde_json::to_string(&test).expect("a test writes");
        let (again, skipped) = results_from(lines(line.as_bytes()));
        assert!(skipped.is_empty());
        assert_eq!(again, vec![test]);
    }
});
