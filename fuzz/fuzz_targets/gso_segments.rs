//! Super-packets through the wire emulator: cutting any bytes the TUN
//! device could hand over must never panic, and whatever can be cut must
//! join again into the same payload, segment by segment and in runs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::testbed::gso::{Plan, VNET_HDR_LEN, VnetHeader, finalize_checksum};

fuzz_target!(|data: &[u8]| {
    let Ok(vnet) = VnetHeader::parse(data) else {
        return;
    };
    let packet = &data[VNET_HDR_LEN..];
    let mut copy = packet.to_vec();
    finalize_checksum(&vnet, &mut copy);
    let Ok(plan) = Plan::of(&vnet, packet) else {
        return;
    };
    let headers = plan.wire_len(0) - plan.payload_of(0);
    let mut out = Vec::new();
    for run in [1, 2, 7] {
        let mut joined = Vec::new();
        let mut first = 0;
        while first < plan.segments() {
            plan.emit_run(packet, first, run, &mut out);
            assert_eq!(VnetHeader::parse(&out).map(|_| ()), Ok(()));
            joined.extend_from_slice(&out[VNET_HDR_LEN + headers..]);
            first += run;
        }
        assert_eq!(&joined[..], &packet[headers..]);
    }
});
