//! The control-channel reader must never panic or over-allocate on any bytes:
//! its frames carry the endpoint messages and, inside the Noise channel, the
//! agent protocol's. Every frame that parses is emitted again and must parse
//! to the same message (a round trip). A role's request inside a command is
//! parsed again by the agent's check of that role (through the registry's
//! table), which must refuse or pass it without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::agent::policy::Policy;
use netlab::endpoint::agent::{FromAgent, ToAgent};
use netlab::endpoint::protocol::{Command, Reply};
use netlab::wire::control::{FrameReader, check, emit, parse};

fn round_trip<T>(frame: &[u8])
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    if let Ok(message) = parse::<T>(frame) {
        let mut again = Vec::new();
        emit(&message, &mut again).expect("a parsed message emits");
        let reparsed: T = parse(&again).expect("an emitted frame parses");
        assert_eq!(reparsed, message);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(n)) = check(data) {
        round_trip::<Command>(&data[..n]);
        round_trip::<Reply>(&data[..n]);
        round_trip::<ToAgent>(&data[..n]);
        round_trip::<FromAgent>(&data[..n]);
        if let Ok(mut command) = parse::<Command>(&data[..n]) {
            let policy = Policy {
                served: netlab::experiments::SERVED,
                ..Policy::default()
            };
            for run in ["lab", "stream", "rpc", "login", "output", "cksum"] {
                let _ = policy.check(run, &mut command.clone());
            }
            let _ = policy.check("lab", &mut command);
        }
    }
    let mut reader = FrameReader::new(data);
    while let Ok(Some(_)) = reader.next_message::<Reply>() {}
});
