//! The TELNET and rlogin parsers face whatever a peer sends: they must
//! never panic, never buffer without bound, and the Q-method option table
//! must answer any negotiation. Covered: the wire parsers, the servers'
//! session logic for both protocols (what every relay design runs on client
//! bytes), and the clients' logic (what they run on server bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::endpoint::login::client::{RloginClient, TelnetClient};
use netlab::endpoint::login::protocol::{Protocol, ServerSession};
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

    for (protocol, linemode) in [
        (Protocol::Telnet, false),
        (Protocol::Telnet, true),
        (Protocol::Rlogin, false),
    ] {
        let (mut session, _) = ServerSession::new(protocol, linemode);
        let _ = session.from_client(a);
        let _ = session.from_client(b);
        let mut to_client = Vec::new();
        session.from_pty(data, &mut to_client);
    }
    let mut telnet = TelnetClient::new(true, 24, 80);
    let (mut got, mut reply) = (Vec::new(), Vec::new());
    telnet.from_server(a, &mut got, &mut reply);
    telnet.from_server(b, &mut got, &mut reply);
    let (mut rlogin, _) = RloginClient::new("u", "xterm", 9600, 24, 80);
    rlogin.from_server(data, &mut got);
    if let Some(&byte) = data.first() {
        let _ = rlogin.urgent(byte);
    }
});
