//! The RPC server's input path: record marking, message parsing and dispatch
//! must never panic or over-allocate on any bytes a TCP or UDP peer sends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::rpc::server::dispatch;
use netlab::wire::recmark::Assembler;
use netlab::wire::rpc::{AuthSys, parse};

fuzz_target!(|data: &[u8]| {
    // As a UDP datagram.
    let _ = dispatch(data, 1 << 16);
    let _ = parse(data);
    let _ = AuthSys::parse(data);
    // As a TCP byte stream, in two pieces.
    let mut assembler = Assembler::new(1 << 16);
    let (a, b) = data.split_at(data.len() / 2);
    for piece in [a, b] {
        assembler.push(piece);
        while let Ok(Some(record)) = assembler.next_record() {
            let _ = dispatch(&record, 1 << 16);
        }
    }
});
