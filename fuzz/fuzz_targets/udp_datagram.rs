//! UDP test datagrams from the network: the header parser must never panic
//! on any bytes, and every header it reads must survive emit then parse
//! unchanged (the payload after it is the receiver's to compare).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::udpstream::{HEADER_LEN, Header};

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = Header::parse(data) {
        let mut buffer = [0u8; HEADER_LEN];
        header.emit(&mut buffer);
        assert_eq!(Header::parse(&buffer), Ok(header));
        assert_eq!(&buffer[..], &data[..HEADER_LEN]);
    }
});
