//! iperf3 control bytes from a server: a state byte, a frame's length and
//! its JSON must never panic; a length over the limit is refused; every
//! state, cookie, parameters and results read from any bytes must be
//! written again to what reads back the same. The bytes read as a
//! server's states drive the client's state machine: each state it acts
//! on comes once and in order, and it stops at the first out of turn.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::iperf3::{
    COOKIE_SIZE, Cookie, Expect, MAX_JSON, Params, Results, State, Step, frame, frame_length,
    parse_json,
};

fuzz_target!(|data: &[u8]| {
    let mut expect = Some(Expect::FIRST);
    let mut acted: Vec<State> = Vec::new();
    for &byte in data {
        let (Some(waiting), Ok(state)) = (expect, State::from_byte(byte)) else {
            break;
        };
        match waiting.step(state) {
            Ok(Step::Act(state, next)) => {
                assert_eq!(state, waiting.state());
                assert!(!acted.contains(&state), "{state:?} acted on twice");
                acted.push(state);
                expect = next;
            }
            Ok(Step::Refusal(_)) | Err(_) => break,
        }
    }
    assert!(acted.len() <= 6);
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
