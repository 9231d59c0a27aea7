//! rlogin (RFC 1282): the startup handshake, the server's control bytes
//! (sent as TCP urgent data) and the client's window-change escape.
//!
//! Startup: the client sends `\0`, then three NUL-terminated strings, the
//! client user name, the server user name and `terminal-type/speed`; the
//! server answers a single `\0`. [`Startup::parse`] is two-phase like the
//! other parsers here: `Ok(None)` until the fourth NUL has arrived, and an
//! error for a string longer than [`MAX_FIELD`] or a first byte that is not
//! NUL, so a peer cannot make the server buffer without limit.
//!
//! Window change (§ "Client to Server"): `FF FF 's' 's'` then rows, columns,
//! x pixels and y pixels as 16-bit big-endian numbers, 12 bytes in all,
//! embedded in the client's data stream. [`ClientStream`] separates them
//! from the data.

use thiserror::Error;

/// Longest user name or terminal string accepted.
pub const MAX_FIELD: usize = 256;

/// Server control bytes, sent as urgent data.
pub mod control {
    /// Discard buffered output.
    pub const FLUSH_OUTPUT: u8 = 0x02;
    /// Stop interpreting ^S/^Q locally (raw mode).
    pub const RAW: u8 = 0x10;
    /// Resume interpreting ^S/^Q locally (cooked mode).
    pub const COOKED: u8 = 0x20;
    /// Send window-size changes from now on.
    pub const WINDOW_REQUEST: u8 = 0x80;
}

/// The window-change escape's first four bytes.
pub const WINDOW_MAGIC: [u8; 4] = [0xFF, 0xFF, b's', b's'];

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RloginError {
    #[error("rlogin startup must begin with a NUL byte, not 0x{0:02x}")]
    NoLeadingNul(u8),
    #[error("rlogin startup field {0} is longer than {MAX_FIELD} bytes")]
    FieldTooLong(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Startup {
    pub client_user: String,
    pub server_user: String,
    /// e.g. `xterm`.
    pub terminal: String,
    /// e.g. 38400; `None` if the client sent none.
    pub speed: Option<u32>,
}

impl Startup {
    /// The bytes a client sends.
    pub fn emit(&self) -> Vec<u8> {
        let mut out = vec![0];
        for field in [&self.client_user, &self.server_user] {
            out.extend_from_slice(field.as_bytes());
            out.push(0);
        }
        out.extend_from_slice(self.terminal.as_bytes());
        if let Some(speed) = self.speed {
            out.extend_from_slice(format!("/{speed}").as_bytes());
        }
        out.push(0);
        out
    }

    /// `Ok(Some((startup, consumed)))` once the whole handshake is in `buf`.
    pub fn parse(buf: &[u8]) -> Result<Option<(Startup, usize)>, RloginError> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        if first != 0 {
            return Err(RloginError::NoLeadingNul(first));
        }
        let mut fields = Vec::with_capacity(3);
        let mut at = 1;
        while fields.len() < 3 {
            let rest = &buf[at..];
            match rest.iter().position(|&b| b == 0) {
                Some(end) if end > MAX_FIELD => {
                    return Err(RloginError::FieldTooLong(fields.len() + 1));
                }
                Some(end) => {
                    fields.push(String::from_utf8_lossy(&rest[..end]).into_owned());
                    at += end + 1;
                }
                None if rest.len() > MAX_FIELD => {
                    return Err(RloginError::FieldTooLong(fields.len() + 1));
                }
                None => return Ok(None),
            }
        }
        let terminal_speed = fields.pop().expect("three fields");
        let (terminal, speed) = match terminal_speed.split_once('/') {
            Some((t, s)) => (t.to_string(), s.parse().ok()),
            None => (terminal_speed, None),
        };
        let server_user = fields.pop().expect("two fields");
        let client_user = fields.pop().expect("one field");
        Ok(Some((
            Startup {
                client_user,
                server_user,
                terminal,
                speed,
            },
            at,
        )))
    }
}

/// A terminal window size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    pub rows: u16,
    pub cols: u16,
    pub xpixel: u16,
    pub ypixel: u16,
}

impl WindowSize {
    /// The 12-byte window-change escape.
    pub fn emit(&self) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..4].copy_from_slice(&WINDOW_MAGIC);
        for (i, v) in [self.rows, self.cols, self.xpixel, self.ypixel]
            .iter()
            .enumerate()
        {
            out[4 + 2 * i..6 + 2 * i].copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    fn parse(bytes: &[u8; 12]) -> WindowSize {
        let at = |i: usize| u16::from_be_bytes([bytes[4 + 2 * i], bytes[5 + 2 * i]]);
        WindowSize {
            rows: at(0),
            cols: at(1),
            xpixel: at(2),
            ypixel: at(3),
        }
    }
}

/// What the client's data stream carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    Data(Vec<u8>),
    Window(WindowSize),
}

/// Splits the client's stream (after startup) into data and window changes.
/// Window escapes are only recognised after the server asked for them
/// ([`ClientStream::window_requested`]), as RFC 1282 says.
#[derive(Debug, Default)]
pub struct ClientStream {
    pending: Vec<u8>,
    pub window_requested: bool,
}

impl ClientStream {
    pub fn feed(&mut self, bytes: &[u8], events: &mut Vec<ClientEvent>) {
        if !self.window_requested {
            if !bytes.is_empty() {
                events.push(ClientEvent::Data(bytes.to_vec()));
            }
            return;
        }
        self.pending.extend_from_slice(bytes);
        let mut data = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let rest = &self.pending[i..];
            if rest[0] == 0xFF {
                let prefix = rest.len().min(4);
                if rest[..prefix] == WINDOW_MAGIC[..prefix] {
                    if rest.len() < 12 {
                        // Possibly an escape still arriving: keep it for later.
                        break;
                    }
                    if !data.is_empty() {
                        events.push(ClientEvent::Data(std::mem::take(&mut data)));
                    }
                    let escape: [u8; 12] = rest[..12].try_into().expect("12 bytes");
                    events.push(ClientEvent::Window(WindowSize::parse(&escape)));
                    i += 12;
                    continue;
                }
            }
            data.push(rest[0]);
            i += 1;
        }
        self.pending.drain(..i);
        if !data.is_empty() {
            events.push(ClientEvent::Data(data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_round_trips_real_bytes() {
        // What `rlogin -l bob host` sends from user alice on an xterm at 38400 baud.
        let bytes = b"\0alice\0bob\0xterm/38400\0";
        let (s, used) = Startup::parse(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(
            s,
            Startup {
                client_user: "alice".into(),
                server_user: "bob".into(),
                terminal: "xterm".into(),
                speed: Some(38400)
            }
        );
        assert_eq!(s.emit(), bytes.to_vec());
        for cut in 0..bytes.len() {
            assert_eq!(Startup::parse(&bytes[..cut]), Ok(None), "cut {cut}");
        }
    }

    #[test]
    fn bad_startups_are_refused() {
        assert_eq!(
            Startup::parse(b"alice\0"),
            Err(RloginError::NoLeadingNul(b'a'))
        );
        let mut long = vec![0u8];
        long.extend(std::iter::repeat_n(b'x', 1 << 20));
        assert_eq!(Startup::parse(&long), Err(RloginError::FieldTooLong(1)));
    }

    #[test]
    fn window_escapes_are_separated_from_data() {
        let w = WindowSize {
            rows: 24,
            cols: 80,
            xpixel: 0,
            ypixel: 0,
        };
        assert_eq!(w.emit(), [0xFF, 0xFF, b's', b's', 0, 24, 0, 80, 0, 0, 0, 0]);
        let mut stream = b"ls".to_vec();
        stream.extend_from_slice(&w.emit());
        stream.extend_from_slice(b"\r\xFFx");
        let mut s = ClientStream {
            window_requested: true,
            ..Default::default()
        };
        for cut in 0..stream.len() {
            let mut s2 = ClientStream {
                window_requested: true,
                ..Default::default()
            };
            let mut events = Vec::new();
            s2.feed(&stream[..cut], &mut events);
            s2.feed(&stream[cut..], &mut events);
            let data: Vec<u8> = events
                .iter()
                .filter_map(|e| {
                    if let ClientEvent::Data(d) = e {
                        Some(d.clone())
                    } else {
                        None
                    }
                })
                .flatten()
                .collect();
            assert_eq!(data, b"ls\r\xFFx", "cut {cut}");
            assert!(events.contains(&ClientEvent::Window(w)), "cut {cut}");
        }
        // Before the server asks, the bytes are plain data.
        s.window_requested = false;
        let mut events = Vec::new();
        s.feed(&w.emit(), &mut events);
        assert_eq!(events, vec![ClientEvent::Data(w.emit().to_vec())]);
    }
}
