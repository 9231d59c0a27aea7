//! iperf3 control bytes from a server: a state byte, a frame's length and
//! its JSON must never panic; a length over the limit is refused; every
//! state, cookie, parameters and results read from any bytes must be
//! written again to what reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::iperf3::{
    COOKIE_SIZE, Cookie, MAX_JSON, Params, Results, State, frame, frame_length, parse_json,
};

fuzz_target!(|data: &[u8]| {
    if let Some(&first) = data.first()
        && let Ok(state) = State::from_byte(first)
    {
        assert_eq!(state.byte(), first);
    }
    if data.len() >= 4 {
        let header: [u8; 4] = data[..4].try_into().unwrap();
        match frame_length(header) {
            Ok(len) => assert!(len <= MAX_JSON),
            Err(_) => assert!(u32::from_be_bytes(header) as usize > MAX_JSON),
        }
    }
    if data.len() >= COOKIE_SIZE
        && let Ok(cookie) = Cookie::parse(&data[..COOKIE_SIZE])
    {
        assert_eq!(&cookie.as_bytes()[..], &data[..COOKIE_SIZE]);
    }
    if let Ok(params) = parse_json::<Params>(data, "parameters") {
        let again = frame(&params);
        assert_eq!(parse_json::<Params>(&again[4..], "parameters"), Ok(params));
    }
    if let Ok(results) = parse_json::<Results>(data, "results") {
        let again = frame(&results);
        let back: Results = parse_json(&again[4..], "results").unwrap();
        // NaN never comes out of JSON, so the round trip is exact.
        assert_eq!(back, results);
    }
});
