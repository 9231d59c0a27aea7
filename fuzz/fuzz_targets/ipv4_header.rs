//! IPv4 headers as the wire emulator's bottleneck reads them: the checked
//! view must never panic on any bytes; its flow key is stable; marking
//! Congestion Experienced keeps the header checksum valid, changes only
//! the ECN bits, and is idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::ipv4::{Ecn, Ipv4Packet};

fuzz_target!(|data: &[u8]| {
    let mut buffer = data.to_vec();
    let Ok(mut ip) = Ipv4Packet::new_checked(&mut buffer[..]) else {
        return;
    };
    let key = ip.flow_key();
    assert_eq!(key, ip.flow_key());
    let (tos, ecn) = (ip.tos(), ip.ecn());
    let marked = ip.mark_ce();
    assert_eq!(marked, ecn != Ecn::NotEct);
    assert_eq!(ip.tos() & 0xfc, tos & 0xfc);
    if ecn == Ecn::Ect0 || ecn == Ecn::Ect1 {
        assert!(ip.verify_checksum());
        assert_eq!(ip.ecn(), Ecn::Ce);
    }
    let after = buffer.clone();
    let mut again = Ipv4Packet::new_checked(&mut buffer[..]).expect("still a header");
    assert_eq!(again.mark_ce(), marked);
    assert_eq!(buffer, after);
    // The flow key does not read the TOS byte: marking leaves it.
    assert_eq!(
        Ipv4Packet::new_checked(&buffer[..]).unwrap().flow_key(),
        key
    );
});
