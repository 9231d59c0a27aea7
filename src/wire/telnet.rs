//! TELNET: the byte stream (RFC 854), option negotiation (RFC 855) kept
//! loop-free with the Q method (RFC 1143), and the subnegotiations netlab
//! uses: NAWS (RFC 1073), TERMINAL-TYPE (RFC 1091), LINEMODE MODE (RFC 1184).
//!
//! [`Parser`] is a byte-at-a-time state machine with no I/O: feed it what
//! arrived, get [`Event`]s back. Data bytes are un-escaped (IAC IAC is one
//! 0xFF data byte; CR NUL is CR, CR LF stays CR LF as NVT end of line), commands
//! and negotiations are separated out, and a subnegotiation is collected up
//! to a bound ([`MAX_SUBNEGOTIATION`]); a longer one is reported as
//! [`Event::SubnegotiationTooLong`] and its remaining bytes discarded up to
//! IAC SE, so a hostile peer cannot make the parser buffer without limit.
//! [`escape`] is the inverse for data going out: every 0xFF doubled.
//!
//! [`Options`] implements RFC 1143's state table for both sides of every
//! option: it answers the peer's WILL/WONT/DO/DONT and our own requests with
//! exactly the replies that never loop, and says when an option takes effect.

/// Interpret As Command.
pub const IAC: u8 = 255;
pub const DONT: u8 = 254;
pub const DO: u8 = 253;
pub const WONT: u8 = 252;
pub const WILL: u8 = 251;
pub const SB: u8 = 250;
pub const GA: u8 = 249;
pub const EL: u8 = 248;
pub const EC: u8 = 247;
pub const AYT: u8 = 246;
pub const AO: u8 = 245;
pub const IP: u8 = 244;
pub const BRK: u8 = 243;
pub const DM: u8 = 242;
pub const NOP: u8 = 241;
pub const SE: u8 = 240;

/// Option codes.
pub mod option {
    pub const ECHO: u8 = 1;
    pub const SUPPRESS_GO_AHEAD: u8 = 3;
    pub const TERMINAL_TYPE: u8 = 24;
    pub const NAWS: u8 = 31;
    pub const LINEMODE: u8 = 34;
}

/// Longest subnegotiation body accepted.
pub const MAX_SUBNEGOTIATION: usize = 1024;

/// What the parser found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Data for the application, un-escaped.
    Data(Vec<u8>),
    /// A one-byte command (IP, AYT, EL, EC, AO, BRK, DM, NOP, GA).
    Command(u8),
    /// WILL, WONT, DO or DONT for an option.
    Negotiate { verb: u8, option: u8 },
    /// IAC SB option ... IAC SE, body un-escaped.
    Subnegotiation { option: u8, body: Vec<u8> },
    /// A subnegotiation over the bound; its bytes were dropped.
    SubnegotiationTooLong { option: u8 },
    /// IAC followed by a byte that is no command.
    UnknownCommand(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Data,
    Cr,
    Iac,
    Verb(u8),
    SbOption,
    /// IAC where an option code belongs: `IAC SE` ends an empty (malformed)
    /// subnegotiation, `IAC IAC` is option 255.
    SbOptionIac,
    SbData,
    SbIac,
    SbDiscard,
    SbDiscardIac,
}

/// The receiving side of a TELNET connection.
#[derive(Debug)]
pub struct Parser {
    state: State,
    data: Vec<u8>,
    sb_option: u8,
    sb_body: Vec<u8>,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser {
            state: State::Data,
            data: Vec::new(),
            sb_option: 0,
            sb_body: Vec::new(),
        }
    }

    fn flush(&mut self, events: &mut Vec<Event>) {
        if !self.data.is_empty() {
            events.push(Event::Data(std::mem::take(&mut self.data)));
        }
    }

    /// Parses `bytes`, appending what they complete to `events`.
    pub fn feed(&mut self, bytes: &[u8], events: &mut Vec<Event>) {
        for &b in bytes {
            self.state = match (self.state, b) {
                (State::Data, IAC) => State::Iac,
                (State::Data, b'\r') => {
                    self.data.push(b'\r');
                    State::Cr
                }
                (State::Data, b) => {
                    self.data.push(b);
                    State::Data
                }
                // CR NUL means a bare CR: the NUL is dropped (RFC 854, NVT).
                (State::Cr, 0) => State::Data,
                (State::Cr, IAC) => State::Iac,
                (State::Cr, b) => {
                    self.data.push(b);
                    if b == b'\r' { State::Cr } else { State::Data }
                }
                (State::Iac, IAC) => {
                    self.data.push(IAC);
                    State::Data
                }
                (State::Iac, verb @ (WILL | WONT | DO | DONT)) => State::Verb(verb),
                (State::Iac, SB) => State::SbOption,
                (State::Iac, cmd @ (GA | EL | EC | AYT | AO | IP | BRK | DM | NOP)) => {
                    self.flush(events);
                    events.push(Event::Command(cmd));
                    State::Data
                }
                (State::Iac, other) => {
                    self.flush(events);
                    events.push(Event::UnknownCommand(other));
                    State::Data
                }
                (State::Verb(verb), option) => {
                    self.flush(events);
                    events.push(Event::Negotiate { verb, option });
                    State::Data
                }
                (State::SbOption, IAC) => State::SbOptionIac,
                // `IAC SB IAC SE`: a subnegotiation with no option ends here,
                // and what follows is data again (not swallowed as its body).
                (State::SbOptionIac, SE) => {
                    self.flush(events);
                    events.push(Event::UnknownCommand(SB));
                    State::Data
                }
                (State::SbOptionIac, IAC) => {
                    self.sb_option = IAC;
                    self.sb_body.clear();
                    State::SbData
                }
                (State::SbOptionIac, other) => {
                    self.flush(events);
                    events.push(Event::UnknownCommand(other));
                    State::Data
                }
                (State::SbOption, option) => {
                    self.sb_option = option;
                    self.sb_body.clear();
                    State::SbData
                }
                (State::SbData, IAC) => State::SbIac,
                (State::SbData, b) => self.sb_push(b, events),
                (State::SbIac, SE) => {
                    self.flush(events);
                    events.push(Event::Subnegotiation {
                        option: self.sb_option,
                        body: std::mem::take(&mut self.sb_body),
                    });
                    State::Data
                }
                (State::SbIac, IAC) => self.sb_push(IAC, events),
                // IAC followed by anything else inside SB: RFC 855 leaves it
                // undefined; keep both bytes as body, as BSD telnetd does.
                (State::SbIac, b) => match self.sb_push(IAC, events) {
                    State::SbData => self.sb_push(b, events),
                    discard => discard,
                },
                (State::SbDiscard, IAC) => State::SbDiscardIac,
                (State::SbDiscard, _) => State::SbDiscard,
                (State::SbDiscardIac, SE) => State::Data,
                (State::SbDiscardIac, _) => State::SbDiscard,
            };
        }
        if matches!(self.state, State::Data | State::Cr) {
            self.flush(events);
        }
    }

    fn sb_push(&mut self, b: u8, events: &mut Vec<Event>) -> State {
        if self.sb_body.len() >= MAX_SUBNEGOTIATION {
            self.flush(events);
            events.push(Event::SubnegotiationTooLong {
                option: self.sb_option,
            });
            self.sb_body.clear();
            State::SbDiscard
        } else {
            self.sb_body.push(b);
            State::SbData
        }
    }

    /// Whether the parser is inside a command or subnegotiation (a peer that
    /// closes now left it unfinished).
    pub fn mid_command(&self) -> bool {
        !matches!(self.state, State::Data | State::Cr)
    }
}

/// Appends `data` to `out` with every 0xFF doubled.
pub fn escape(data: &[u8], out: &mut Vec<u8>) {
    for &b in data {
        out.push(b);
        if b == IAC {
            out.push(IAC);
        }
    }
}

/// IAC verb option.
pub fn negotiation(verb: u8, option: u8) -> [u8; 3] {
    [IAC, verb, option]
}

/// IAC SB option body(escaped) IAC SE.
pub fn subnegotiation(option: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![IAC, SB, option];
    escape(body, &mut out);
    out.extend_from_slice(&[IAC, SE]);
    out
}

/// NAWS body: width and height as 16-bit big-endian (RFC 1073).
pub fn naws_body(width: u16, height: u16) -> [u8; 4] {
    let [w0, w1] = width.to_be_bytes();
    let [h0, h1] = height.to_be_bytes();
    [w0, w1, h0, h1]
}

/// Parses a NAWS body into (width, height).
pub fn parse_naws(body: &[u8]) -> Option<(u16, u16)> {
    match body {
        [w0, w1, h0, h1] => Some((
            u16::from_be_bytes([*w0, *w1]),
            u16::from_be_bytes([*h0, *h1]),
        )),
        _ => None,
    }
}

/// TERMINAL-TYPE: SEND is 1, IS is 0 (RFC 1091).
pub const TTYPE_IS: u8 = 0;
pub const TTYPE_SEND: u8 = 1;

/// Parses `IS <name>` of a TERMINAL-TYPE subnegotiation.
pub fn parse_ttype_is(body: &[u8]) -> Option<String> {
    match body.split_first() {
        Some((&TTYPE_IS, name)) if name.len() <= 40 => {
            Some(String::from_utf8_lossy(name).into_owned())
        }
        _ => None,
    }
}

/// LINEMODE subnegotiation codes (RFC 1184 §2).
pub mod linemode {
    pub const MODE: u8 = 1;
    pub const FORWARDMASK: u8 = 2;
    pub const SLC: u8 = 3;
    pub const MODE_EDIT: u8 = 0x01;
    pub const MODE_TRAPSIG: u8 = 0x02;
    pub const MODE_ACK: u8 = 0x04;

    /// SLC functions (RFC 1184 §4) and the levels and flags of their modifiers.
    pub const SLC_IP: u8 = 3;
    pub const SLC_AO: u8 = 4;
    pub const SLC_AYT: u8 = 5;
    pub const SLC_ABORT: u8 = 7;
    pub const SLC_EOF: u8 = 8;
    pub const SLC_SUSP: u8 = 9;
    pub const SLC_EC: u8 = 10;
    pub const SLC_EL: u8 = 11;
    pub const SLC_EW: u8 = 12;
    pub const SLC_RP: u8 = 13;
    pub const SLC_VALUE: u8 = 2;
    pub const SLC_FLUSHIN: u8 = 0x40;
    pub const SLC_FLUSHOUT: u8 = 0x20;

    /// The server's default special characters, as a Linux terminal has
    /// them (`stty -a`): interrupt ^C, quit ^\, end of file ^D, suspend ^Z,
    /// erase DEL, kill ^U, word erase ^W, reprint ^R. Triplets of function,
    /// modifier, value for `IAC SB LINEMODE SLC ... IAC SE`.
    #[rustfmt::skip]
    pub const DEFAULT_SLC: [u8; 24] = [
        SLC_IP, SLC_VALUE | SLC_FLUSHIN | SLC_FLUSHOUT, 0x03,
        SLC_ABORT, SLC_VALUE | SLC_FLUSHIN | SLC_FLUSHOUT, 0x1c,
        SLC_EOF, SLC_VALUE, 0x04,
        SLC_SUSP, SLC_VALUE | SLC_FLUSHIN, 0x1a,
        SLC_EC, SLC_VALUE, 0x7f,
        SLC_EL, SLC_VALUE, 0x15,
        SLC_EW, SLC_VALUE, 0x17,
        SLC_RP, SLC_VALUE, 0x12,
    ];
}

/// Which side of an option (RFC 1143 calls them "us" and "him").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Whether we perform the option (we say WILL/WONT, the peer DO/DONT).
    Local,
    /// Whether the peer performs it (the peer says WILL/WONT, we DO/DONT).
    Remote,
}

/// RFC 1143 §7 states, with the queue bit folded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Q {
    #[default]
    No,
    Yes,
    WantNo {
        opposite: bool,
    },
    WantYes {
        opposite: bool,
    },
}

/// Negotiation state of every option for both sides, and which options we
/// accept being enabled.
#[derive(Debug, Clone)]
pub struct Options {
    local: [Q; 256],
    remote: [Q; 256],
    accept_local: [bool; 256],
    accept_remote: [bool; 256],
}

/// What an input or request produced: bytes to send, and options whose
/// state changed (side, option, now enabled).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub send: Vec<u8>,
    pub changed: Vec<(Side, u8, bool)>,
}

impl Options {
    /// All options off; `accept_local`/`accept_remote` list the options we
    /// agree to perform, and to have the peer perform.
    pub fn new(accept_local: &[u8], accept_remote: &[u8]) -> Options {
        let mut o = Options {
            local: [Q::No; 256],
            remote: [Q::No; 256],
            accept_local: [false; 256],
            accept_remote: [false; 256],
        };
        for &opt in accept_local {
            o.accept_local[usize::from(opt)] = true;
        }
        for &opt in accept_remote {
            o.accept_remote[usize::from(opt)] = true;
        }
        o
    }

    pub fn enabled(&self, side: Side, option: u8) -> bool {
        let table = match side {
            Side::Local => &self.local,
            Side::Remote => &self.remote,
        };
        table[usize::from(option)] == Q::Yes
    }

    /// The verbs for a side: (positive we send, negative we send).
    fn our_verbs(side: Side) -> (u8, u8) {
        match side {
            Side::Local => (WILL, WONT),
            Side::Remote => (DO, DONT),
        }
    }

    /// Handles the peer's WILL/WONT/DO/DONT (RFC 1143 §7).
    pub fn receive(&mut self, verb: u8, option: u8) -> Outcome {
        let (side, positive) = match verb {
            WILL => (Side::Remote, true),
            WONT => (Side::Remote, false),
            DO => (Side::Local, true),
            DONT => (Side::Local, false),
            _ => return Outcome::default(),
        };
        let accept = match side {
            Side::Local => self.accept_local[usize::from(option)],
            Side::Remote => self.accept_remote[usize::from(option)],
        };
        let (yes_verb, no_verb) = Self::our_verbs(side);
        let mut out = Outcome::default();
        let state = match side {
            Side::Local => &mut self.local[usize::from(option)],
            Side::Remote => &mut self.remote[usize::from(option)],
        };
        let set = |state: &mut Q, new: Q, out: &mut Outcome| {
            let was = *state == Q::Yes;
            *state = new;
            let is = new == Q::Yes;
            if was != is {
                out.changed.push((side, option, is));
            }
        };
        if positive {
            match *state {
                Q::No if accept => {
                    set(state, Q::Yes, &mut out);
                    out.send.extend_from_slice(&negotiation(yes_verb, option));
                }
                Q::No => out.send.extend_from_slice(&negotiation(no_verb, option)),
                Q::Yes => {}
                // Error: DONT answered by WILL. Treat as refusal of our DONT.
                Q::WantNo { opposite: false } => set(state, Q::No, &mut out),
                Q::WantNo { opposite: true } => set(state, Q::Yes, &mut out),
                Q::WantYes { opposite: false } => set(state, Q::Yes, &mut out),
                Q::WantYes { opposite: true } => {
                    set(state, Q::WantNo { opposite: false }, &mut out);
                    out.send.extend_from_slice(&negotiation(no_verb, option));
                }
            }
        } else {
            match *state {
                Q::No => {}
                Q::Yes => {
                    set(state, Q::No, &mut out);
                    out.send.extend_from_slice(&negotiation(no_verb, option));
                }
                Q::WantNo { opposite: false } => set(state, Q::No, &mut out),
                Q::WantNo { opposite: true } => {
                    set(state, Q::WantYes { opposite: false }, &mut out);
                    out.send.extend_from_slice(&negotiation(yes_verb, option));
                }
                Q::WantYes { .. } => set(state, Q::No, &mut out),
            }
        }
        out
    }

    /// Asks for `option` on `side` to be enabled or disabled (RFC 1143 §7,
    /// "we want to enable/disable").
    pub fn request(&mut self, side: Side, option: u8, enable: bool) -> Outcome {
        let (yes_verb, no_verb) = Self::our_verbs(side);
        let state = match side {
            Side::Local => &mut self.local[usize::from(option)],
            Side::Remote => &mut self.remote[usize::from(option)],
        };
        let mut out = Outcome::default();
        match (enable, *state) {
            (true, Q::No) => {
                *state = Q::WantYes { opposite: false };
                out.send.extend_from_slice(&negotiation(yes_verb, option));
            }
            (true, Q::WantNo { .. }) => *state = Q::WantNo { opposite: true },
            (true, Q::WantYes { .. }) => *state = Q::WantYes { opposite: false },
            (false, Q::Yes) => {
                *state = Q::WantNo { opposite: false };
                out.send.extend_from_slice(&negotiation(no_verb, option));
                out.changed.push((side, option, false));
            }
            (false, Q::WantYes { .. }) => *state = Q::WantYes { opposite: true },
            (false, Q::WantNo { .. }) => *state = Q::WantNo { opposite: false },
            (true, Q::Yes) | (false, Q::No) => {}
        }
        match side {
            Side::Local => self.accept_local[usize::from(option)] |= enable,
            Side::Remote => self.accept_remote[usize::from(option)] |= enable,
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Vec<Event> {
        let mut p = Parser::new();
        let mut events = Vec::new();
        p.feed(bytes, &mut events);
        events
    }

    #[test]
    fn data_escapes_and_nvt_line_ends() {
        assert_eq!(parse(b"abc"), vec![Event::Data(b"abc".to_vec())]);
        assert_eq!(
            parse(&[b'a', IAC, IAC, b'b']),
            vec![Event::Data(vec![b'a', 0xFF, b'b'])]
        );
        assert_eq!(parse(b"x\r\0y"), vec![Event::Data(b"x\ry".to_vec())]);
        assert_eq!(parse(b"x\r\ny"), vec![Event::Data(b"x\r\ny".to_vec())]);
        let mut out = Vec::new();
        escape(&[1, 0xFF, 2], &mut out);
        assert_eq!(out, [1, 0xFF, 0xFF, 2]);
    }

    #[test]
    fn commands_and_negotiations_as_sent_by_real_clients() {
        // The Debian telnet client's opening: WILL NAWS, WILL TTYPE, DO SGA, DO ECHO.
        let opening = [IAC, WILL, 31, IAC, WILL, 24, IAC, DO, 3, IAC, DO, 1];
        assert_eq!(
            parse(&opening),
            vec![
                Event::Negotiate {
                    verb: WILL,
                    option: 31
                },
                Event::Negotiate {
                    verb: WILL,
                    option: 24
                },
                Event::Negotiate {
                    verb: DO,
                    option: 3
                },
                Event::Negotiate {
                    verb: DO,
                    option: 1
                },
            ]
        );
        assert_eq!(
            parse(&[b'h', IAC, IP, b'i']),
            vec![
                Event::Data(b"h".to_vec()),
                Event::Command(IP),
                Event::Data(b"i".to_vec())
            ]
        );
        assert_eq!(parse(&[IAC, 17]), vec![Event::UnknownCommand(17)]);
    }

    #[test]
    fn subnegotiations_naws_and_ttype() {
        // NAWS 80x24 with a width byte of 255 doubled: 0x00FF x 0x0018.
        // A subnegotiation with no option is a command, and what follows
        // it is data, not swallowed as a body.
        let mut p = Parser::default();
        let mut events = Vec::new();
        p.feed(&[IAC, SB, IAC, SE, b'h', b'i'], &mut events);
        assert_eq!(
            events,
            vec![Event::UnknownCommand(SB), Event::Data(b"hi".to_vec())]
        );
        assert!(!p.mid_command());
        let bytes = [IAC, SB, 31, 0, IAC, IAC, 0, 24, IAC, SE];
        let events = parse(&bytes);
        assert_eq!(
            events,
            vec![Event::Subnegotiation {
                option: 31,
                body: vec![0, 0xFF, 0, 24]
            }]
        );
        assert_eq!(parse_naws(&[0, 0xFF, 0, 24]), Some((255, 24)));
        assert_eq!(subnegotiation(31, &naws_body(255, 24)), bytes.to_vec());
        let ttype = [IAC, SB, 24, TTYPE_IS, b'X', b'T', b'E', b'R', b'M', IAC, SE];
        let Event::Subnegotiation { body, .. } = &parse(&ttype)[0] else {
            panic!()
        };
        assert_eq!(parse_ttype_is(body).as_deref(), Some("XTERM"));
    }

    #[test]
    fn split_feeds_give_the_same_events() {
        let stream = [
            b'a', IAC, WILL, 1, IAC, SB, 31, 0, 80, 0, 24, IAC, SE, IAC, IAC, b'z',
        ];
        let whole = parse(&stream);
        for cut in 0..stream.len() {
            let mut p = Parser::new();
            let mut events = Vec::new();
            p.feed(&stream[..cut], &mut events);
            p.feed(&stream[cut..], &mut events);
            // Data may arrive in more pieces; compare with the pieces joined.
            let join = |ev: &[Event]| {
                let mut out: Vec<Event> = Vec::new();
                for e in ev {
                    match (out.last_mut(), e) {
                        (Some(Event::Data(a)), Event::Data(b)) => a.extend_from_slice(b),
                        _ => out.push(e.clone()),
                    }
                }
                out
            };
            assert_eq!(join(&events), join(&whole), "cut {cut}");
        }
    }

    #[test]
    fn a_huge_or_unterminated_subnegotiation_is_bounded() {
        let mut bytes = vec![IAC, SB, 24];
        bytes.extend(std::iter::repeat_n(b'x', 1 << 20));
        bytes.extend_from_slice(&[IAC, SE, b'o', b'k']);
        let events = parse(&bytes);
        assert_eq!(
            events,
            vec![
                Event::SubnegotiationTooLong { option: 24 },
                Event::Data(b"ok".to_vec())
            ]
        );
        let mut p = Parser::new();
        let mut events = Vec::new();
        p.feed(&[IAC, SB, 24, 1, 2, 3], &mut events);
        assert!(p.mid_command());
        assert!(events.is_empty());
    }

    #[test]
    fn q_method_answers_and_never_loops() {
        let mut o = Options::new(&[option::ECHO, option::SUPPRESS_GO_AHEAD], &[option::NAWS]);
        // Peer asks us to echo: we agree once.
        let r = o.receive(DO, option::ECHO);
        assert_eq!(r.send, negotiation(WILL, option::ECHO));
        assert_eq!(r.changed, vec![(Side::Local, option::ECHO, true)]);
        // Asked again: silence (this is what stops loops).
        assert_eq!(o.receive(DO, option::ECHO), Outcome::default());
        // Peer offers NAWS: accepted; TTYPE: refused.
        assert_eq!(
            o.receive(WILL, option::NAWS).send,
            negotiation(DO, option::NAWS)
        );
        assert_eq!(
            o.receive(WILL, option::TERMINAL_TYPE).send,
            negotiation(DONT, option::TERMINAL_TYPE)
        );
        // Refusal of something never enabled: silence.
        assert_eq!(o.receive(WONT, option::TERMINAL_TYPE), Outcome::default());
        // We ask for LINEMODE; the peer agrees; no further replies.
        let r = o.request(Side::Remote, option::LINEMODE, true);
        assert_eq!(r.send, negotiation(DO, option::LINEMODE));
        let r = o.receive(WILL, option::LINEMODE);
        assert!(r.send.is_empty());
        assert_eq!(r.changed, vec![(Side::Remote, option::LINEMODE, true)]);
        assert!(o.enabled(Side::Remote, option::LINEMODE));
        // We ask to stop echoing, then change our mind before the answer.
        o.request(Side::Local, option::ECHO, false);
        o.request(Side::Local, option::ECHO, true);
        let r = o.receive(DONT, option::ECHO);
        assert_eq!(r.send, negotiation(WILL, option::ECHO));
        let r = o.receive(DO, option::ECHO);
        assert!(r.send.is_empty());
        assert!(o.enabled(Side::Local, option::ECHO));
    }

    #[test]
    fn two_q_method_ends_settle_whatever_they_ask() {
        // Two ends exchanging all their replies must reach silence.
        let mut a = Options::new(&[1, 3], &[31, 24]);
        let mut b = Options::new(&[31, 24], &[1, 3]);
        let mut to_b = Vec::new();
        for opt in [1u8, 3, 24, 31, 34] {
            to_b.extend(a.request(Side::Remote, opt, true).send);
            to_b.extend(a.request(Side::Local, opt, true).send);
        }
        let mut to_a = Vec::new();
        for _ in 0..20 {
            let mut parser = Parser::new();
            let mut events = Vec::new();
            parser.feed(&to_b, &mut events);
            to_b.clear();
            for e in events {
                if let Event::Negotiate { verb, option } = e {
                    to_a.extend(b.receive(verb, option).send);
                }
            }
            let mut events = Vec::new();
            Parser::new().feed(&to_a, &mut events);
            to_a.clear();
            for e in events {
                if let Event::Negotiate { verb, option } = e {
                    to_b.extend(a.receive(verb, option).send);
                }
            }
            if to_b.is_empty() {
                break;
            }
        }
        assert!(to_b.is_empty(), "negotiation did not settle");
        assert!(a.enabled(Side::Remote, 24) && b.enabled(Side::Local, 24));
        assert!(a.enabled(Side::Local, 1) && b.enabled(Side::Remote, 1));
        assert!(!a.enabled(Side::Remote, 34));
    }
}
