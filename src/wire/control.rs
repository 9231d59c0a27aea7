//! Framing of the control channel between the controller and its endpoints.
//!
//! A frame is
//!
//! ```text
//! +----------------+---------+------------------------------+
//! | length: u32 BE | version | payload: JSON, `length-1` B  |
//! +----------------+---------+------------------------------+
//! ```
//!
//! `length` counts the version byte and the payload. The version is
//! [`VERSION`]; a peer that speaks another version is refused with
//! [`FrameError::Version`] before its payload is interpreted, so a controller
//! and a remote agent of different netlab releases fail loudly rather than
//! misread each other. The payload is the serde JSON form of a message type
//! chosen by the caller (see `endpoint::protocol`): readable in a hex dump and
//! in logs, and cheap at the few messages per run the channel carries (the
//! data path never uses it).
//!
//! Reading is in two phases, as in mini-redis: [`check`] says whether a whole
//! frame is buffered (and how long it is) without allocating; [`parse`] then
//! decodes it. Frames longer than [`MAX_FRAME`] are rejected as soon as their
//! header is seen, so a corrupt or hostile length cannot make a reader
//! allocate gigabytes.

use serde::{Serialize, de::DeserializeOwned};
use thiserror::Error;

/// The control-protocol version this build speaks.
pub const VERSION: u8 = 1;
/// Largest accepted frame (version byte plus payload).
pub const MAX_FRAME: usize = 16 << 20;
/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("control frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLong(usize),
    #[error("control frame is empty (no version byte)")]
    Empty,
    #[error("peer speaks control protocol version {0}, this netlab speaks {VERSION}")]
    Version(u8),
    #[error("control message does not decode: {0}")]
    Payload(#[from] serde_json::Error),
}

/// Appends the frame carrying `message` to `out`.
pub fn emit<T: Serialize>(message: &T, out: &mut Vec<u8>) -> Result<(), FrameError> {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, VERSION]);
    serde_json::to_writer(&mut *out, message)?;
    let length = out.len() - start - HEADER_LEN;
    if length > MAX_FRAME {
        out.truncate(start);
        return Err(FrameError::TooLong(length));
    }
    out[start..start + HEADER_LEN].copy_from_slice(&(length as u32).to_be_bytes());
    Ok(())
}

/// `Ok(Some(n))` when `buf` starts with a whole frame of `n` bytes (header
/// included), `Ok(None)` when more bytes are needed.
pub fn check(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes(header.try_into().expect("4 bytes")) as usize;
    if length > MAX_FRAME {
        return Err(FrameError::TooLong(length));
    }
    if length == 0 {
        return Err(FrameError::Empty);
    }
    let total = HEADER_LEN + length;
    Ok((buf.len() >= total).then_some(total))
}

/// Decodes the whole frame at the start of `buf` (as sized by [`check`]).
pub fn parse<T: DeserializeOwned>(frame: &[u8]) -> Result<T, FrameError> {
    let body = &frame[HEADER_LEN..];
    match body.first() {
        None => Err(FrameError::Empty),
        Some(&VERSION) => Ok(serde_json::from_slice(&body[1..])?),
        Some(&other) => Err(FrameError::Version(other)),
    }
}

/// Blocking reader of frames from any byte stream (a pipe, later TCP).
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R: std::io::Read> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        FrameReader {
            inner,
            buf: Vec::with_capacity(4096),
        }
    }

    /// The next message, or `Ok(None)` at a clean end of stream between frames.
    pub fn next_message<T: DeserializeOwned>(&mut self) -> std::io::Result<Option<T>> {
        loop {
            let to_io = |e: FrameError| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
            if let Some(n) = check(&self.buf).map_err(to_io)? {
                let message = parse(&self.buf[..n]).map_err(to_io)?;
                self.buf.drain(..n);
                return Ok(Some(message));
            }
            let mut chunk = [0u8; 8192];
            let got = self.inner.read(&mut chunk)?;
            if got == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!(
                            "control stream ended inside a frame ({} bytes buffered)",
                            self.buf.len()
                        ),
                    ))
                };
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }
}

/// Writes one message as a frame and flushes it.
pub fn write_frame<W: std::io::Write, T: Serialize>(
    out: &mut W,
    message: &T,
) -> std::io::Result<()> {
    let mut frame = Vec::new();
    emit(message, &mut frame)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    out.write_all(&frame)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Msg {
        Go,
        Listening { port: u16 },
    }

    #[test]
    fn emits_the_documented_bytes() {
        let mut out = Vec::new();
        emit(&Msg::Go, &mut out).unwrap();
        assert_eq!(out, b"\x00\x00\x00\x05\x01\"Go\"");
        out.clear();
        emit(&Msg::Listening { port: 5001 }, &mut out).unwrap();
        let expected = b"\x00\x00\x00\x1c\x01{\"Listening\":{\"port\":5001}}";
        assert_eq!(out, expected);
    }

    #[test]
    fn parses_real_bytes() {
        let bytes = b"\x00\x00\x00\x1c\x01{\"Listening\":{\"port\":5001}}";
        assert_eq!(check(bytes).unwrap(), Some(bytes.len()));
        assert_eq!(parse::<Msg>(bytes).unwrap(), Msg::Listening { port: 5001 });
    }

    #[test]
    fn incomplete_frames_wait_for_more() {
        let bytes = b"\x00\x00\x00\x05\x01\"Go\"";
        for cut in 0..bytes.len() {
            assert_eq!(check(&bytes[..cut]).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn refuses_huge_empty_and_foreign_frames() {
        assert!(matches!(
            check(b"\x7f\xff\xff\xff"),
            Err(FrameError::TooLong(_))
        ));
        assert!(matches!(check(b"\x00\x00\x00\x00"), Err(FrameError::Empty)));
        let v2 = b"\x00\x00\x00\x05\x02\"Go\"";
        assert!(matches!(parse::<Msg>(v2), Err(FrameError::Version(2))));
        let junk = b"\x00\x00\x00\x03\x01{]";
        assert!(matches!(parse::<Msg>(junk), Err(FrameError::Payload(_))));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            if let Ok(Some(n)) = check(&bytes) {
                let _ = parse::<Msg>(&bytes[..n]);
            }
            let mut reader = FrameReader::new(&bytes[..]);
            while let Ok(Some(_)) = reader.next_message::<Msg>() {}
        }

        #[test]
        fn any_port_round_trips(port in proptest::num::u16::ANY) {
            let mut frame = Vec::new();
            emit(&Msg::Listening { port }, &mut frame).unwrap();
            proptest::prop_assert_eq!(check(&frame).unwrap(), Some(frame.len()));
            proptest::prop_assert_eq!(parse::<Msg>(&frame).unwrap(), Msg::Listening { port });
        }
    }

    #[test]
    fn reader_round_trips_a_sequence() {
        let mut stream = Vec::new();
        write_frame(&mut stream, &Msg::Listening { port: 1 }).unwrap();
        write_frame(&mut stream, &Msg::Go).unwrap();
        let mut reader = FrameReader::new(&stream[..]);
        assert_eq!(
            reader.next_message::<Msg>().unwrap(),
            Some(Msg::Listening { port: 1 })
        );
        assert_eq!(reader.next_message::<Msg>().unwrap(), Some(Msg::Go));
        assert_eq!(reader.next_message::<Msg>().unwrap(), None);
        let mut truncated = FrameReader::new(&stream[..stream.len() - 1]);
        truncated.next_message::<Msg>().unwrap();
        assert!(truncated.next_message::<Msg>().is_err());
    }
}
