//! The server side of a login session for either protocol, apart from I/O:
//! every relay design feeds it the bytes each side produced and carries out
//! the [`Output`] it returns. TELNET is [`TelnetSession`]; rlogin is
//! [`RloginSession`] (RFC 1282).
//!
//! What a relay may move without looking at the bytes
//! ([`ServerSession::pty_output_transparent`]) is what decides where the
//! `splice` design can keep data out of user space:
//! - rlogin, pty to client: always once the startup is answered. The
//!   server's control bytes travel as TCP urgent data, outside the stream,
//!   so the output needs no escaping.
//! - rlogin, client to pty: never. The window-change escape (`FF FF s s`)
//!   sits inside the client's stream and must be found and removed.
//! - TELNET, either direction: never. Any byte may be IAC (0xFF): on output
//!   it must be doubled and a bare CR followed by NUL (RFC 854), on input
//!   commands and option negotiation must be taken out. Nothing short of
//!   reading every byte can tell. (The 1980s "kernel-assisted" telnetd let
//!   the kernel scan for IAC; Linux offers no such hook.)

use super::session::Output;
use super::session::TelnetSession;
use crate::wire::rlogin::{ClientEvent, ClientStream, Startup, control};

/// Which protocol a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Telnet,
    Rlogin,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Telnet => "telnet",
            Protocol::Rlogin => "rlogin",
        }
    }

    pub fn parse(name: &str) -> Option<Protocol> {
        match name {
            "telnet" => Some(Protocol::Telnet),
            "rlogin" => Some(Protocol::Rlogin),
            _ => None,
        }
    }
}

/// The rlogin server's side of a session.
///
/// Until the startup message is complete nothing reaches the pty, and what
/// the command prints is held back: the first byte the client may see is
/// the server's NUL. Then the server asks for window sizes (urgent 0x80) and
/// from there on scans the client's bytes for the window-change escape.
#[derive(Debug, Default)]
pub struct RloginSession {
    startup: Option<Startup>,
    pending: Vec<u8>,
    held_output: Vec<u8>,
    stream: ClientStream,
    events: Vec<ClientEvent>,
}

impl RloginSession {
    pub fn new() -> RloginSession {
        RloginSession::default()
    }

    pub fn startup(&self) -> Option<&Startup> {
        self.startup.as_ref()
    }

    pub fn from_client(&mut self, bytes: &[u8]) -> Output {
        let mut out = Output::default();
        let data: &[u8] = if self.startup.is_none() {
            self.pending.extend_from_slice(bytes);
            match Startup::parse(&self.pending) {
                Ok(None) => return out,
                Err(e) => {
                    out.close = Some(e.to_string());
                    return out;
                }
                Ok(Some((startup, used))) => {
                    out.to_client.push(0);
                    out.to_client.append(&mut self.held_output);
                    out.urgent = Some(control::WINDOW_REQUEST);
                    out.terminal = Some(startup.terminal.clone());
                    out.speed = startup.speed;
                    self.startup = Some(startup);
                    self.stream.window_requested = true;
                    self.pending.drain(..used);
                    &std::mem::take(&mut self.pending)
                }
            }
        } else {
            bytes
        };
        self.events.clear();
        self.stream.feed(data, &mut self.events);
        for event in self.events.drain(..) {
            match event {
                ClientEvent::Data(d) => out.to_pty.extend_from_slice(&d),
                ClientEvent::Window(w) => out.window = Some((w.rows, w.cols)),
            }
        }
        out
    }

    /// Output of the command: passed through unchanged once the startup is
    /// answered, held back before.
    pub fn from_pty(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        if self.startup.is_none() {
            // Bounded: a command that prints a lot before the client has
            // identified itself loses the excess, as a terminal line would.
            let room = (64 * 1024usize).saturating_sub(self.held_output.len());
            self.held_output
                .extend_from_slice(&bytes[..bytes.len().min(room)]);
        } else {
            out.extend_from_slice(bytes);
        }
    }
}

/// A session of either protocol.
pub enum ServerSession {
    Telnet(Box<TelnetSession>),
    Rlogin(RloginSession),
}

impl ServerSession {
    /// A session and the bytes the server opens it with.
    pub fn new(protocol: Protocol, linemode: bool) -> (ServerSession, Vec<u8>) {
        match protocol {
            Protocol::Telnet => {
                let (s, opening) = TelnetSession::new(linemode);
                (ServerSession::Telnet(Box::new(s)), opening)
            }
            Protocol::Rlogin => (ServerSession::Rlogin(RloginSession::new()), Vec::new()),
        }
    }

    pub fn from_client(&mut self, bytes: &[u8]) -> Output {
        match self {
            ServerSession::Telnet(s) => s.from_client(bytes),
            ServerSession::Rlogin(s) => s.from_client(bytes),
        }
    }

    /// Appends what the client must receive for `bytes` from the pty.
    pub fn from_pty(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        match self {
            ServerSession::Telnet(s) => s.from_pty(bytes, out),
            ServerSession::Rlogin(s) => s.from_pty(bytes, out),
        }
    }

    /// Whether pty output may go to the client byte for byte, unseen (see
    /// the module documentation).
    pub fn pty_output_transparent(&self) -> bool {
        match self {
            ServerSession::Telnet(_) => false,
            ServerSession::Rlogin(s) => s.startup.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::rlogin::WindowSize;

    #[test]
    fn rlogin_startup_then_data_and_window_changes() {
        let mut s = RloginSession::new();
        // Output before the startup is held back.
        let mut to_client = Vec::new();
        s.from_pty(b"early", &mut to_client);
        assert!(to_client.is_empty());
        // The startup arrives in two pieces, data right behind it.
        let out = s.from_client(b"\0alice\0bo");
        assert_eq!(out, Output::default());
        let mut rest = b"b\0xterm/38400\0ls".to_vec();
        rest.extend_from_slice(
            &WindowSize {
                rows: 50,
                cols: 132,
                xpixel: 0,
                ypixel: 0,
            }
            .emit(),
        );
        let out = s.from_client(&rest);
        assert_eq!(out.to_client, b"\0early");
        assert_eq!(out.urgent, Some(control::WINDOW_REQUEST));
        assert_eq!(out.terminal.as_deref(), Some("xterm"));
        assert_eq!(out.speed, Some(38400));
        assert_eq!(out.to_pty, b"ls");
        assert_eq!(out.window, Some((50, 132)));
        assert_eq!(s.startup().unwrap().server_user, "bob");
        // From now on output passes unchanged, 0xFF included.
        let mut to_client = Vec::new();
        s.from_pty(b"a\xff\rb", &mut to_client);
        assert_eq!(to_client, b"a\xff\rb");
        assert_eq!(s.from_client(b"\xffx").to_pty, b"\xffx");
    }

    #[test]
    fn rlogin_bad_startup_closes() {
        let mut s = RloginSession::new();
        assert!(s.from_client(b"root\0").close.is_some());
        let mut s = RloginSession::new();
        let mut long = vec![0u8];
        long.extend(std::iter::repeat_n(b'x', 100_000));
        assert!(s.from_client(&long).close.is_some());
    }

    #[test]
    fn only_rlogin_output_is_transparent() {
        let (t, opening) = ServerSession::new(Protocol::Telnet, false);
        assert!(!opening.is_empty());
        assert!(!t.pty_output_transparent());
        let (mut r, opening) = ServerSession::new(Protocol::Rlogin, false);
        assert!(opening.is_empty());
        assert!(!r.pty_output_transparent());
        r.from_client(b"\0a\0b\0vt100/9600\0");
        assert!(r.pty_output_transparent());
    }
}
