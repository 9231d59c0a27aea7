//! The head of an HTTP request from anyone who can reach a metrics port:
//! the reader must never panic, never take more than its bound, and every
//! head it reads must be written and read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::http::{MAX_HEAD, Reading, emit_head, read_head};

fuzz_target!(|data: &[u8]| {
    match read_head(data) {
        Ok(Reading::Whole(head, taken)) => {
            assert!(taken <= MAX_HEAD.min(data.len()));
            let written = emit_head(&head);
            assert_eq!(read_head(&written), Ok(Reading::Whole(head, written.len())));
        }
        Ok(Reading::Partial) => assert!(data.len() < MAX_HEAD),
        Err(_) => {}
    }
});
