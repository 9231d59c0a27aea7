//! UDP test datagrams from the network: the header parser must never panic
//! on any bytes, every header it reads must survive emit then parse
//! unchanged (the payload after it is the receiver's to compare), and a
//! hello or consent read from any bytes must be made again byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::udpstream::{HEADER_LEN, Header, Kind, handshake, handshake_token};

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = Header::parse(data) {
        let mut buffer = [0u8; HEADER_LEN];
        header.emit(&mut buffer);
        assert_eq!(Header::parse(&buffer), Ok(header));
        assert_eq!(&buffer[..], &data[..HEADER_LEN]);
    }
    for kind in [Kind::Hello, Kind::Consent] {
        if let Some(token) = handshake_token(data, kind) {
            assert_eq!(handshake(kind, token), data);
        }
    }
});
