//! DNS responses from the network (a mesh's `dns:_service._tcp.NAME`):
//! the parser must never panic or loop on any bytes, and every response
//! it reads must be written and read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::dns::{emit_response, parse_response};

fuzz_target!(|data: &[u8]| {
    if let Ok(response) = parse_response(data) {
        let written = emit_response(&response).expect("a parsed response writes");
        assert_eq!(parse_response(&written), Ok(response));
    }
});
