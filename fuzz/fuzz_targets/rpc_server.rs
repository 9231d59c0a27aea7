//! The RPC server's input path: record marking, message parsing and dispatch
//! must never panic or over-allocate on any bytes a TCP or UDP peer sends.
//! Every message that parses is emitted again and must parse to the same
//! header (a round trip through the shared code tables).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::rpc::server::dispatch;
use netlab::wire::recmark::Assembler;
use netlab::wire::rpc::{AuthSys, Message, parse};
use netlab::wire::xdr::Writer;

fuzz_target!(|data: &[u8]| {
    // As a UDP datagram.
    let _ = dispatch(data, 1 << 16);
    if let Ok((message, _)) = parse(data) {
        let mut w = Writer::new();
        match &message {
            Message::Call(call) => call.emit(&mut w),
            Message::Reply(reply) => reply.emit(&mut w),
        }
        let (again, rest) = parse(&w.buf).expect("an emitted header parses");
        assert_eq!(again, message);
        assert!(rest.is_empty());
    }
    if let Ok(auth) = AuthSys::parse(data) {
        assert_eq!(AuthSys::parse(&auth.to_auth().body), Ok(auth));
    }
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
