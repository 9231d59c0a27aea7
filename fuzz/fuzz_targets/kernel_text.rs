//! Parsers of kernel-provided bytes (/proc files, TCP_INFO) must not panic on
//! anything a kernel of another version might produce.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::measure::{netstat::Counters, procstat::StatSnapshot, tcpinfo::TcpInfo};

fuzz_target!(|data: &[u8]| {
    let _ = TcpInfo::parse(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Counters::parse(text);
        let _ = StatSnapshot::parse(text);
    }
});
