//! What an agent reads from a peer before authentication must never panic
//! or over-allocate: the agent's side of the Noise handshake fed any bytes,
//! which it must refuse (no bytes forge a handshake without the key). The
//! agent protocol's frames, read after it, are round-tripped by the
//! `control_frame` target.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::agent::channel;
use netlab::endpoint::agent::key::Key;
use netlab::endpoint::waiting::Link;
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

fuzz_target!(|data: &[u8]| {
    let key = Key::from_bytes([7; 32]);
    assert!(
        channel::accept(Peer { input: data }, &key).is_err(),
        "bytes without the key passed the handshake"
    );
});
