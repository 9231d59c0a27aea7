//! The TELNET and rlogin parsers face whatever a remote-login client sends:
//! they must never panic, never buffer without bound, and the Q-method
//! option table must answer any negotiation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::rlogin::{ClientStream, Startup};
use netlab::wire::telnet::{Event, Options, Parser};

fuzz_target!(|data: &[u8]| {
    let mut parser = Parser::new();
    let mut options = Options::new(&[1, 3], &[24, 31, 34]);
    let mut events = Vec::new();
    let (a, b) = data.split_at(data.len() / 2);
    parser.feed(a, &mut events);
    parser.feed(b, &mut events);
    for event in events {
        if let Event::Negotiate { verb, option } = event {
            let _ = options.receive(verb, option);
        }
    }
    let _ = Startup::parse(data);
    let mut stream = ClientStream::default();
    stream.window_requested = true;
    let mut out = Vec::new();
    stream.feed(a, &mut out);
    stream.feed(b, &mut out);
});
