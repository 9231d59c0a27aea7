//! The server side of one TELNET session, apart from I/O: what to send the
//! client, what to write to the pty, and what to change on the pty, for the
//! bytes each side produced. Every relay design drives the same logic.
//!
//! The server offers to echo and to suppress go-ahead (character-at-a-time
//! with server echo, as telnetd does), asks for the window size (NAWS) and
//! the terminal type, and, when `linemode` is set, asks the client to do
//! LINEMODE with EDIT and TRAPSIG (RFC 1184 §2): the client then edits and
//! echoes lines itself, so the server stops echoing (the pty's ECHO goes off).
//!
//! Line ends: the client's Enter arrives as CR LF or CR NUL (RFC 854); the
//! pty, whose ICRNL turns CR into NL, gets a single CR. Output to the client
//! has every 0xFF doubled and a CR not followed by LF sent as CR NUL.

use crate::wire::telnet::{
    self, AO, AYT, EC, EL, Event, IP, Options, Parser, Side, TTYPE_SEND, linemode, option,
};

/// What to do after one side produced bytes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub to_client: Vec<u8>,
    /// One byte to send as TCP urgent data after `to_client` (rlogin control).
    pub urgent: Option<u8>,
    pub to_pty: Vec<u8>,
    /// New window size (rows, cols).
    pub window: Option<(u16, u16)>,
    /// The client's terminal type.
    pub terminal: Option<String>,
    /// The client's terminal speed in bits per second (rlogin).
    pub speed: Option<u32>,
    /// Turn the pty's echo on (true) or off (false).
    pub echo: Option<bool>,
    /// Why the session must end (a malformed peer), if it must.
    pub close: Option<String>,
}

pub struct TelnetSession {
    parser: Parser,
    options: Options,
    linemode: bool,
    /// The last byte sent to the pty was CR (an LF or NUL after it is dropped).
    after_cr: bool,
    /// The last byte sent to the client was a CR not yet known to precede LF.
    pending_cr: bool,
    events: Vec<Event>,
}

impl TelnetSession {
    /// A session and the negotiation the server opens it with.
    pub fn new(linemode: bool) -> (TelnetSession, Vec<u8>) {
        let mut options = Options::new(
            &[option::ECHO, option::SUPPRESS_GO_AHEAD],
            &[
                option::NAWS,
                option::TERMINAL_TYPE,
                option::SUPPRESS_GO_AHEAD,
                option::LINEMODE,
            ],
        );
        let mut opening = Vec::new();
        opening.extend(
            options
                .request(Side::Local, option::SUPPRESS_GO_AHEAD, true)
                .send,
        );
        if linemode {
            opening.extend(options.request(Side::Remote, option::LINEMODE, true).send);
        } else {
            opening.extend(options.request(Side::Local, option::ECHO, true).send);
        }
        opening.extend(options.request(Side::Remote, option::NAWS, true).send);
        opening.extend(
            options
                .request(Side::Remote, option::TERMINAL_TYPE, true)
                .send,
        );
        (
            TelnetSession {
                parser: Parser::new(),
                options,
                linemode,
                after_cr: false,
                pending_cr: false,
                events: Vec::new(),
            },
            opening,
        )
    }

    /// Whether LINEMODE is in force (the client edits and echoes).
    pub fn linemode_active(&self) -> bool {
        self.options.enabled(Side::Remote, option::LINEMODE)
    }

    /// Handles bytes from the client.
    pub fn from_client(&mut self, bytes: &[u8]) -> Output {
        let mut out = Output::default();
        self.events.clear();
        self.parser.feed(bytes, &mut self.events);
        for event in std::mem::take(&mut self.events) {
            match event {
                Event::Data(data) => {
                    for b in data {
                        if self.after_cr && (b == b'\n' || b == 0) {
                            self.after_cr = false;
                            continue;
                        }
                        self.after_cr = b == b'\r';
                        out.to_pty.push(b);
                    }
                }
                Event::Command(IP) => out.to_pty.push(0x03),
                Event::Command(EC) => out.to_pty.push(0x7f),
                Event::Command(EL) => out.to_pty.push(0x15),
                Event::Command(AO) => {}
                Event::Command(AYT) => out.to_client.extend_from_slice(b"\r\n[netlab: yes]\r\n"),
                Event::Command(_) | Event::UnknownCommand(_) => {}
                Event::Negotiate { verb, option } => {
                    let r = self.options.receive(verb, option);
                    out.to_client.extend(r.send);
                    for (side, opt, on) in r.changed {
                        self.option_changed(side, opt, on, &mut out);
                    }
                    // A refused request changes no state (it never became
                    // enabled), so the LINEMODE refusal is caught here.
                    if verb == telnet::WONT && option == option::LINEMODE && self.linemode {
                        self.linemode = false;
                        out.to_client
                            .extend(self.options.request(Side::Local, option::ECHO, true).send);
                        out.echo = Some(true);
                    }
                }
                Event::Subnegotiation { option, body } => match option {
                    option::NAWS => match telnet::parse_naws(&body) {
                        Some((cols, rows)) => out.window = Some((rows, cols)),
                        None => out.close = Some(format!("malformed NAWS of {} bytes", body.len())),
                    },
                    option::TERMINAL_TYPE => out.terminal = telnet::parse_ttype_is(&body),
                    // A client offering FORWARDMASK (RFC 1184 §3) is refused:
                    // the pty's line discipline decides when input is complete.
                    option::LINEMODE
                        if body.starts_with(&[telnet::WILL, linemode::FORWARDMASK]) =>
                    {
                        out.to_client.extend(telnet::subnegotiation(
                            option::LINEMODE,
                            &[telnet::DONT, linemode::FORWARDMASK],
                        ));
                    }
                    // MODE acknowledgements and the client's SLC answers
                    // (agreement needs no reply, RFC 1184 §4): nothing to do.
                    _ => {}
                },
                Event::SubnegotiationTooLong { option } => {
                    out.close = Some(format!(
                        "subnegotiation of option {option} longer than {} bytes",
                        telnet::MAX_SUBNEGOTIATION
                    ));
                }
            }
        }
        out
    }

    fn option_changed(&mut self, side: Side, opt: u8, on: bool, out: &mut Output) {
        match (side, opt, on) {
            (Side::Remote, option::TERMINAL_TYPE, true) => {
                out.to_client
                    .extend(telnet::subnegotiation(option::TERMINAL_TYPE, &[TTYPE_SEND]));
            }
            (Side::Remote, option::LINEMODE, true) if self.linemode => {
                out.to_client.extend(telnet::subnegotiation(
                    option::LINEMODE,
                    &[linemode::MODE, linemode::MODE_EDIT | linemode::MODE_TRAPSIG],
                ));
                let mut slc = vec![linemode::SLC];
                slc.extend_from_slice(&linemode::DEFAULT_SLC);
                out.to_client
                    .extend(telnet::subnegotiation(option::LINEMODE, &slc));
                out.echo = Some(false);
            }
            _ => {}
        }
    }

    /// Handles bytes from the pty: appends them to `out` escaped for the network.
    pub fn from_pty(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        out.reserve(bytes.len() + 8);
        for &b in bytes {
            if self.pending_cr && b != b'\n' {
                out.push(0);
            }
            self.pending_cr = b == b'\r';
            out.push(b);
            if b == telnet::IAC {
                out.push(telnet::IAC);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::telnet::{DO, DONT, IAC, SB, SE, WILL, WONT, negotiation};

    #[test]
    fn opening_and_a_typical_client_reply() {
        let (mut s, opening) = TelnetSession::new(false);
        let mut want = Vec::new();
        want.extend(negotiation(WILL, option::SUPPRESS_GO_AHEAD));
        want.extend(negotiation(WILL, option::ECHO));
        want.extend(negotiation(DO, option::NAWS));
        want.extend(negotiation(DO, option::TERMINAL_TYPE));
        assert_eq!(opening, want);
        // The client agrees to everything and sends its window and type.
        let mut reply = Vec::new();
        reply.extend(negotiation(DO, option::SUPPRESS_GO_AHEAD));
        reply.extend(negotiation(DO, option::ECHO));
        reply.extend(negotiation(WILL, option::NAWS));
        reply.extend([IAC, SB, option::NAWS, 0, 80, 0, 24, IAC, SE]);
        reply.extend(negotiation(WILL, option::TERMINAL_TYPE));
        let out = s.from_client(&reply);
        assert_eq!(out.window, Some((24, 80)));
        // TTYPE accepted: the server asks for it, and says nothing else.
        assert_eq!(
            out.to_client,
            telnet::subnegotiation(option::TERMINAL_TYPE, &[TTYPE_SEND])
        );
        let out = s.from_client(&[
            IAC,
            SB,
            option::TERMINAL_TYPE,
            0,
            b'V',
            b'T',
            b'1',
            b'0',
            b'0',
            IAC,
            SE,
        ]);
        assert_eq!(out.terminal.as_deref(), Some("VT100"));
    }

    #[test]
    fn data_line_ends_and_commands() {
        let (mut s, _) = TelnetSession::new(false);
        assert_eq!(s.from_client(b"ls\r\n").to_pty, b"ls\r");
        assert_eq!(s.from_client(b"ls\r\0").to_pty, b"ls\r");
        // CR LF split across reads.
        assert_eq!(s.from_client(b"a\r").to_pty, b"a\r");
        assert_eq!(s.from_client(b"\nb").to_pty, b"b");
        assert_eq!(s.from_client(&[IAC, IP]).to_pty, [0x03]);
        assert_eq!(s.from_client(&[IAC, IAC]).to_pty, [0xFF]);
        assert!(
            s.from_client(&[IAC, telnet::AYT])
                .to_client
                .starts_with(b"\r\n[netlab")
        );
        let mut out = Vec::new();
        s.from_pty(b"a\xFFb\r\nc\rd", &mut out);
        assert_eq!(out, b"a\xFF\xFFb\r\nc\r\0d");
    }

    #[test]
    fn linemode_turns_server_echo_off_or_falls_back() {
        let (mut s, opening) = TelnetSession::new(true);
        assert!(
            opening
                .windows(3)
                .any(|w| w == negotiation(DO, option::LINEMODE))
        );
        let out = s.from_client(&negotiation(WILL, option::LINEMODE));
        assert_eq!(out.echo, Some(false));
        // MODE EDIT|TRAPSIG, then the default special characters, as bytes.
        let mut want = vec![IAC, SB, option::LINEMODE, 1, 0x03, IAC, SE];
        want.extend([IAC, SB, option::LINEMODE, 3]);
        want.extend([3, 0x62, 3, 7, 0x62, 0x1c, 8, 2, 4, 9, 0x42, 0x1a]);
        want.extend([10, 2, 0x7f, 11, 2, 0x15, 12, 2, 0x17, 13, 2, 0x12, IAC, SE]);
        assert_eq!(out.to_client, want);
        assert!(s.linemode_active());
        // FORWARDMASK offered by the client is refused.
        let out = s.from_client(&[IAC, SB, option::LINEMODE, WILL, 2, IAC, SE]);
        assert_eq!(out.to_client, [IAC, SB, option::LINEMODE, DONT, 2, IAC, SE]);
        let (mut s, _) = TelnetSession::new(true);
        let out = s.from_client(&negotiation(WONT, option::LINEMODE));
        assert_eq!(out.echo, Some(true));
        assert_eq!(out.to_client, negotiation(WILL, option::ECHO));
    }

    #[test]
    fn malformed_peers_are_told_to_close() {
        let (mut s, _) = TelnetSession::new(false);
        assert!(
            s.from_client(&[IAC, SB, option::NAWS, 1, 2, IAC, SE])
                .close
                .is_some()
        );
        let mut huge = vec![IAC, SB, option::TERMINAL_TYPE];
        huge.extend(std::iter::repeat_n(b'x', 1 << 20));
        let out = s.from_client(&huge);
        assert!(out.close.unwrap().contains("longer than"));
    }
}
