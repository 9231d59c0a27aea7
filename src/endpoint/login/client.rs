//! Login clients: the protocol logic apart from I/O ([`TelnetClient`],
//! [`RloginClient`], used as-is by event-driven load generators) and a
//! blocking session over a real socket ([`Session`], used by tests and
//! one-off interop checks).
//!
//! TELNET (RFC 854/855, Q method of RFC 1143): the client lets the server
//! echo and suppress go-ahead, reports its window (NAWS, RFC 1073) and
//! terminal type (RFC 1091), and, when asked for LINEMODE (RFC 1184) and
//! allowed to, edits and echoes lines itself and sends whole lines,
//! acknowledging the server's MODE. Received data has IAC IAC undone and the
//! NUL of CR NUL removed; sent data has IAC doubled.
//!
//! rlogin (RFC 1282): the startup message, the server's NUL, and the window
//! size sent (and re-sent on every change) once the server asks with the
//! urgent byte 0x80.

use crate::wire::rlogin::{Startup, WindowSize, control};
use crate::wire::telnet::{
    self, Event, Options, Parser, Side, TTYPE_IS, TTYPE_SEND, linemode, option,
};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The TELNET client's protocol state.
pub struct TelnetClient {
    parser: Parser,
    options: Options,
    allow_linemode: bool,
    /// The server set MODE EDIT: lines are edited and echoed here.
    edit_locally: bool,
    rows: u16,
    cols: u16,
    terminal: String,
    after_cr: bool,
    events: Vec<Event>,
}

impl TelnetClient {
    pub fn new(allow_linemode: bool, rows: u16, cols: u16) -> TelnetClient {
        let mut local = vec![
            option::NAWS,
            option::TERMINAL_TYPE,
            option::SUPPRESS_GO_AHEAD,
        ];
        if allow_linemode {
            local.push(option::LINEMODE);
        }
        TelnetClient {
            parser: Parser::new(),
            options: Options::new(&local, &[option::ECHO, option::SUPPRESS_GO_AHEAD]),
            allow_linemode,
            edit_locally: false,
            rows,
            cols,
            terminal: "XTERM".into(),
            after_cr: false,
            events: Vec::new(),
        }
    }

    /// Whether the server echoes what is typed.
    pub fn server_echoes(&self) -> bool {
        self.options.enabled(Side::Remote, option::ECHO)
    }

    /// Whether LINEMODE with local editing is in force: type whole lines.
    pub fn linemode(&self) -> bool {
        self.edit_locally && self.options.enabled(Side::Local, option::LINEMODE)
    }

    /// Handles bytes from the server: terminal data is appended to `data`,
    /// protocol replies to `reply`.
    pub fn from_server(&mut self, bytes: &[u8], data: &mut Vec<u8>, reply: &mut Vec<u8>) {
        self.events.clear();
        self.parser.feed(bytes, &mut self.events);
        for event in std::mem::take(&mut self.events) {
            match event {
                Event::Data(d) => {
                    for b in d {
                        // CR NUL is a bare CR (RFC 854).
                        if self.after_cr && b == 0 {
                            self.after_cr = false;
                            continue;
                        }
                        self.after_cr = b == b'\r';
                        data.push(b);
                    }
                }
                Event::Negotiate { verb, option } => {
                    let r = self.options.receive(verb, option);
                    reply.extend(r.send);
                    for (side, opt, on) in r.changed {
                        if (side, opt, on) == (Side::Local, option::NAWS, true) {
                            reply.extend(telnet::subnegotiation(
                                option::NAWS,
                                &telnet::naws_body(self.cols, self.rows),
                            ));
                        }
                        if (side, opt) == (Side::Local, option::LINEMODE) && !on {
                            self.edit_locally = false;
                        }
                    }
                }
                Event::Subnegotiation { option, body } => match option {
                    option::TERMINAL_TYPE if body.first() == Some(&TTYPE_SEND) => {
                        let mut is = vec![TTYPE_IS];
                        is.extend_from_slice(self.terminal.as_bytes());
                        reply.extend(telnet::subnegotiation(option::TERMINAL_TYPE, &is));
                    }
                    option::LINEMODE if self.allow_linemode => {
                        if let [linemode::MODE, mask] = body[..]
                            && mask & linemode::MODE_ACK == 0
                        {
                            self.edit_locally = mask & linemode::MODE_EDIT != 0;
                            reply.extend(telnet::subnegotiation(
                                option::LINEMODE,
                                &[linemode::MODE, mask | linemode::MODE_ACK],
                            ));
                        }
                    }
                    _ => {}
                },
                Event::Command(_)
                | Event::UnknownCommand(_)
                | Event::SubnegotiationTooLong { .. } => {}
            }
        }
    }

    /// Encodes typed bytes for the wire: IAC doubled, Enter (CR) as CR LF.
    pub fn keystrokes(&self, typed: &[u8], out: &mut Vec<u8>) {
        for &b in typed {
            match b {
                b'\r' => out.extend_from_slice(b"\r\n"),
                telnet::IAC => out.extend_from_slice(&[telnet::IAC, telnet::IAC]),
                _ => out.push(b),
            }
        }
    }

    /// The NAWS report of a new window size, if the server agreed to NAWS.
    pub fn resize(&mut self, rows: u16, cols: u16) -> Option<Vec<u8>> {
        self.rows = rows;
        self.cols = cols;
        self.options
            .enabled(Side::Local, option::NAWS)
            .then(|| telnet::subnegotiation(option::NAWS, &telnet::naws_body(cols, rows)))
    }
}

/// The rlogin client's protocol state.
#[derive(Debug)]
pub struct RloginClient {
    /// The server's NUL has arrived.
    pub accepted: bool,
    /// The server asked for window sizes.
    pub window_requested: bool,
    window: WindowSize,
}

impl RloginClient {
    /// The client and the startup message to send first.
    pub fn new(
        user: &str,
        terminal: &str,
        speed: u32,
        rows: u16,
        cols: u16,
    ) -> (RloginClient, Vec<u8>) {
        let startup = Startup {
            client_user: user.into(),
            server_user: user.into(),
            terminal: terminal.into(),
            speed: Some(speed),
        };
        let client = RloginClient {
            accepted: false,
            window_requested: false,
            window: WindowSize {
                rows,
                cols,
                xpixel: 0,
                ypixel: 0,
            },
        };
        (client, startup.emit())
    }

    /// Handles bytes from the server: everything after its first NUL is data.
    pub fn from_server(&mut self, bytes: &[u8], data: &mut Vec<u8>) {
        let mut bytes = bytes;
        if !self.accepted {
            let Some((&first, rest)) = bytes.split_first() else {
                return;
            };
            // A server that refuses sends an error text instead of the NUL;
            // it is shown as data.
            self.accepted = true;
            if first == 0 {
                bytes = rest;
            }
        }
        data.extend_from_slice(bytes);
    }

    /// Handles an urgent byte; returns what to send (the window size when asked).
    pub fn urgent(&mut self, byte: u8) -> Option<[u8; 12]> {
        if byte & control::WINDOW_REQUEST != 0 {
            self.window_requested = true;
            return Some(self.window.emit());
        }
        None
    }

    /// A window change: the escape to send if the server asked for them.
    pub fn resize(&mut self, rows: u16, cols: u16) -> Option<[u8; 12]> {
        self.window.rows = rows;
        self.window.cols = cols;
        self.window_requested.then(|| self.window.emit())
    }
}

enum Protocol {
    Telnet(Box<TelnetClient>),
    Rlogin(RloginClient),
}

/// A blocking client session over a real socket.
pub struct Session {
    stream: TcpStream,
    protocol: Protocol,
    /// Terminal data received and not yet taken.
    pub received: Vec<u8>,
    buf: Vec<u8>,
}

impl Session {
    /// Connects and opens a TELNET session (LINEMODE if the server asks and `linemode`).
    pub fn telnet(addr: SocketAddr, linemode: bool) -> io::Result<Session> {
        Session::telnet_on(TcpStream::connect(addr)?, linemode)
    }

    /// Opens a TELNET session on a connected stream.
    pub fn telnet_on(stream: TcpStream, linemode: bool) -> io::Result<Session> {
        Ok(Session {
            stream,
            protocol: Protocol::Telnet(Box::new(TelnetClient::new(linemode, 24, 80))),
            received: Vec::new(),
            buf: vec![0u8; 64 * 1024],
        })
    }

    /// Connects and sends the rlogin startup (user, terminal `xterm/38400`).
    pub fn rlogin(addr: SocketAddr, user: &str) -> io::Result<Session> {
        Session::rlogin_on(TcpStream::connect(addr)?, user)
    }

    /// Sends the rlogin startup on a connected stream.
    pub fn rlogin_on(mut stream: TcpStream, user: &str) -> io::Result<Session> {
        let (client, startup) = RloginClient::new(user, "xterm", 38400, 24, 80);
        stream.write_all(&startup)?;
        Ok(Session {
            stream,
            protocol: Protocol::Rlogin(client),
            received: Vec::new(),
            buf: vec![0u8; 64 * 1024],
        })
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn telnet_state(&self) -> Option<&TelnetClient> {
        match &self.protocol {
            Protocol::Telnet(t) => Some(t),
            Protocol::Rlogin(_) => None,
        }
    }

    /// Sends typed bytes (encoded for the protocol).
    pub fn type_bytes(&mut self, typed: &[u8]) -> io::Result<()> {
        let mut out = Vec::with_capacity(typed.len() + 2);
        match &self.protocol {
            Protocol::Telnet(t) => t.keystrokes(typed, &mut out),
            Protocol::Rlogin(_) => out.extend_from_slice(typed),
        }
        self.stream.write_all(&out)
    }

    /// Reports a new window size to the server (when it takes them).
    pub fn resize(&mut self, rows: u16, cols: u16) -> io::Result<bool> {
        let msg = match &mut self.protocol {
            Protocol::Telnet(t) => t.resize(rows, cols),
            Protocol::Rlogin(r) => r.resize(rows, cols).map(|w| w.to_vec()),
        };
        match msg {
            Some(bytes) => self.stream.write_all(&bytes).map(|()| true),
            None => Ok(false),
        }
    }

    /// Waits up to `timeout` for input; handles protocol bytes and urgent
    /// data. `Ok(false)` when the server closed.
    pub fn pump(&mut self, timeout: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLIN | libc::POLLPRI,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(true)
            } else {
                Err(e)
            };
        }
        if ready == 0 {
            return Ok(true);
        }
        if pfd.revents & libc::POLLPRI != 0 {
            let mut byte = 0u8;
            // SAFETY: one byte into a valid buffer.
            let n = unsafe {
                libc::recv(
                    self.stream.as_raw_fd(),
                    (&mut byte as *mut u8).cast(),
                    1,
                    libc::MSG_OOB,
                )
            };
            if n == 1
                && let Protocol::Rlogin(r) = &mut self.protocol
                && let Some(window) = r.urgent(byte)
            {
                self.stream.write_all(&window)?;
            }
        }
        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            let n = match self.stream.read(&mut self.buf) {
                Ok(n) => n,
                // Reading at the urgent mark before taking the byte: retry.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok(false);
            }
            let mut reply = Vec::new();
            match &mut self.protocol {
                Protocol::Telnet(t) => {
                    t.from_server(&self.buf[..n], &mut self.received, &mut reply)
                }
                Protocol::Rlogin(r) => r.from_server(&self.buf[..n], &mut self.received),
            }
            if !reply.is_empty() {
                self.stream.write_all(&reply)?;
            }
        }
        Ok(true)
    }

    /// Receives until `needle` is among the received data or `timeout`
    /// passes; returns whether it was found.
    pub fn wait_for(&mut self, needle: &[u8], timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.received.windows(needle.len()).any(|w| w == needle) {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.pump(left.min(Duration::from_millis(100)))? {
                return Ok(self.received.windows(needle.len()).any(|w| w == needle));
            }
        }
    }

    /// Receives for `period`, handling negotiation (to let it settle).
    pub fn settle(&mut self, period: Duration) -> io::Result<()> {
        let deadline = Instant::now() + period;
        while Instant::now() < deadline {
            if !self.pump(deadline.saturating_duration_since(Instant::now()))? {
                break;
            }
        }
        Ok(())
    }

    /// Receives until the server closes or `timeout` passes; returns whether it closed.
    pub fn read_to_close(&mut self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.pump(Duration::from_millis(100))? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::login::protocol::{Protocol as P, ServerSession};

    /// Runs server and client logic against each other until quiet.
    fn converse(
        server: &mut ServerSession,
        opening: Vec<u8>,
        client: &mut TelnetClient,
    ) -> Vec<u8> {
        let mut to_client = opening;
        let mut data = Vec::new();
        for _ in 0..10 {
            let mut reply = Vec::new();
            client.from_server(&to_client, &mut data, &mut reply);
            if reply.is_empty() {
                break;
            }
            to_client = server.from_client(&reply).to_client;
        }
        data
    }

    #[test]
    fn telnet_client_and_server_logic_agree() {
        let (mut server, opening) = ServerSession::new(P::Telnet, false);
        let mut client = TelnetClient::new(false, 40, 100);
        converse(&mut server, opening, &mut client);
        assert!(client.server_echoes());
        assert!(!client.linemode());
        // The window size reached the server's side.
        let out = server.from_client(&client.resize(50, 132).unwrap());
        assert_eq!(out.window, Some((50, 132)));
        let mut wire = Vec::new();
        client.keystrokes(b"a\xffb\r", &mut wire);
        assert_eq!(wire, b"a\xff\xffb\r\n");
        assert_eq!(server.from_client(&wire).to_pty, b"a\xffb\r");
    }

    #[test]
    fn telnet_linemode_is_agreed_and_acknowledged() {
        let (mut server, opening) = ServerSession::new(P::Telnet, true);
        let mut client = TelnetClient::new(true, 24, 80);
        converse(&mut server, opening, &mut client);
        assert!(client.linemode());
        assert!(!client.server_echoes());
        // A client that refuses LINEMODE gets server echo instead.
        let (mut server, opening) = ServerSession::new(P::Telnet, true);
        let mut client = TelnetClient::new(false, 24, 80);
        converse(&mut server, opening, &mut client);
        assert!(!client.linemode());
        assert!(client.server_echoes());
    }

    #[test]
    fn telnet_client_undoes_nvt_escapes() {
        let mut client = TelnetClient::new(false, 24, 80);
        let (mut data, mut reply) = (Vec::new(), Vec::new());
        client.from_server(b"a\xff\xffb\r\0c\r\nd", &mut data, &mut reply);
        assert_eq!(data, b"a\xffb\rc\r\nd");
        assert!(reply.is_empty());
    }

    #[test]
    fn rlogin_client_answers_the_window_request() {
        let (mut c, startup) = RloginClient::new("alice", "xterm", 38400, 24, 80);
        assert_eq!(startup, b"\0alice\0alice\0xterm/38400\0");
        assert_eq!(c.resize(30, 90), None, "not asked yet");
        let mut data = Vec::new();
        c.from_server(b"\0hello", &mut data);
        assert_eq!(data, b"hello");
        let w = c.urgent(control::WINDOW_REQUEST).unwrap();
        assert_eq!(&w[4..8], &[0, 30, 0, 90]);
        assert!(c.resize(31, 91).is_some());
    }
}
