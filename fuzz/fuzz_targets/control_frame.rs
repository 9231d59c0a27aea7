//! The control-channel reader must never panic or over-allocate on any bytes:
//! it will face a TCP peer when remote agents arrive.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::protocol::{Command, Reply};
use netlab::wire::control::{FrameReader, check, parse};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(n)) = check(data) {
        let _ = parse::<Command>(&data[..n]);
        let _ = parse::<Reply>(&data[..n]);
    }
    let mut reader = FrameReader::new(data);
    while let Ok(Some(_)) = reader.next_message::<Reply>() {}
});
