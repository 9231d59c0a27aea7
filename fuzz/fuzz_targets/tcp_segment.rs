//! Captured frames: the IPv4/TCP header parser must never panic on any
//! bytes, and every segment it reads must survive emit then parse unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::tcpseg::Segment;

fuzz_target!(|data: &[u8]| {
    for link_header in [0, 14, 16] {
        if let Ok(segment) = Segment::parse(data, link_header) {
            let mut buffer = vec![0u8; segment.buffer_len()];
            if segment.emit(&mut buffer).is_ok() {
                assert_eq!(Segment::parse(&buffer, 0), Ok(segment));
            }
        }
    }
});
