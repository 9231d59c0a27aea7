//! Frames off a TAP device: the Ethernet/ARP/IPv4/UDP parser must never
//! panic on any bytes, every frame it reads must survive emit then parse
//! unchanged, and a 1990 host's model must take any frame in without
//! panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::experiments::broadcast::model::{Host, HostConfig, Kind};
use netlab::wire::ether::{Frame, Payload};
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::parse(data) {
        let bytes = frame.to_bytes();
        let again = Frame::parse(&bytes).expect("what was emitted parses");
        // A frame of another type is padded to Ethernet's minimum on the
        // way out, so its bytes grow once; after that, emit is a fixed point.
        if !matches!(frame.payload, Payload::Other(..)) {
            assert_eq!(again, frame);
        }
        assert_eq!(again.to_bytes(), bytes);
    }
    for kind in [Kind::Sun, Kind::Vax] {
        let mut host = Host::new(
            HostConfig {
                name: "fuzz".into(),
                kind,
                mac: [2, 0, 0, 0, 0, 1],
                addr: Ipv4Addr::new(10, 90, 0, 1),
                prefix: 24,
                broadcast: Ipv4Addr::new(10, 90, 0, 0),
                forwarding: true,
                refuse_link_broadcasts: false,
            },
            10,
            30,
        );
        host.arrive(data.to_vec());
        host.run(0);
        host.run(10);
    }
});
