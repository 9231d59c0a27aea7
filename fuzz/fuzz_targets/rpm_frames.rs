//! rpm's framing on the load connections (`experiments::rpm::framing`), as
//! a server and a measuring end decode what a peer sends: any bytes, cut
//! anywhere, are decoded or refused without a panic, and decoding is the
//! same however the bytes are cut; a run of frames encoded from the
//! input's own events round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::rpm::framing::{Decoder, Event, encode, joined};

fn decode(bytes: &[u8], cut: usize) -> (Vec<Event>, bool) {
    let mut decoder = Decoder::default();
    let mut events = Vec::new();
    let cut = cut.min(bytes.len());
    let ok = decoder
        .feed(&bytes[..cut], &mut |e| events.push(e))
        .and_then(|()| decoder.feed(&bytes[cut..], &mut |e| events.push(e)))
        .is_ok();
    (events, ok)
}

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |&b| usize::from(b));
    let (whole, whole_ok) = decode(data, 0);
    let (pieces, pieces_ok) = decode(data, cut);
    assert_eq!(whole_ok, pieces_ok);
    if whole_ok {
        assert_eq!(joined(&whole), joined(&pieces));
    }
    // The input as a script of events: each byte a probe (odd) or data of
    // up to 127 * 64 bytes (even).
    let script: Vec<Event> = data
        .iter()
        .map(|&b| {
            if b & 1 == 1 {
                Event::Probe
            } else {
                Event::Data(usize::from(b >> 1) * 64)
            }
        })
        .collect();
    let bytes = encode(&script);
    let (back, ok) = decode(&bytes, cut * 97);
    assert!(ok);
    assert_eq!(joined(&back), joined(&script));
});
