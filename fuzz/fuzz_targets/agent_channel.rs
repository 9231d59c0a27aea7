//! What an agent reads from a peer before and after authentication must
//! never panic or over-allocate: the Noise handshake fed any bytes (the
//! agent's side, which must refuse them: no bytes forge a handshake without
//! the key), and the agent protocol's frames, which round trip (parse, emit,
//! parse again, equal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::agent::channel::{self, Link};
use netlab::endpoint::agent::key::Key;
use netlab::endpoint::agent::{FromAgent, ToAgent};
use netlab::wire::control::{check, emit, parse};
use std::io::{Read, Write};
use std::time::Instant;

/// A peer that says `input` and swallows what it is told.
struct Peer<'a> {
    input: &'a [u8],
}

impl Read for Peer<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Peer<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Link for Peer<'_> {
    fn read_deadline(&mut self, _: Option<Instant>) -> std::io::Result<()> {
        Ok(())
    }
}

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
    let key = Key::from_bytes([7; 32]);
    assert!(
        channel::accept(Peer { input: data }, &key).is_err(),
        "bytes without the key passed the handshake"
    );
    if let Ok(Some(n)) = check(data) {
        round_trip::<ToAgent>(&data[..n]);
        round_trip::<FromAgent>(&data[..n]);
    }
});
