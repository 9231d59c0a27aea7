//! netlab's own framing on rpm's load-generating connections, in place of
//! the draft's HTTP/2 over TLS: the bulk data goes in frames, and a self
//! probe's 1-byte request or response is a frame of its own between them,
//! so that it waits behind the data already queued on the connection,
//! as a request on a loaded HTTP/2 connection does.
//!
//! ```text
//! frame = kind (1 byte: 0 data, 1 probe) | length (4 bytes, big-endian) | payload
//! ```
//!
//! A probe frame carries one byte. The decoder is incremental (bytes come
//! as the socket gives them) and pure; it refuses an unknown kind, a probe
//! of another length and a data frame over [`MAX_DATA`].

use thiserror::Error;

pub const HEADER_LEN: usize = 5;
/// The largest data frame a peer may send.
pub const MAX_DATA: u32 = 1 << 20;
/// The data frames netlab writes: small enough that a probe frame waits
/// for at most one of them beyond what the socket already holds.
pub const DATA_FRAME: usize = 16 << 10;

const KIND_DATA: u8 = 0;
const KIND_PROBE: u8 = 1;

/// A frame's header.
pub fn data_header(len: u32) -> [u8; HEADER_LEN] {
    header(KIND_DATA, len)
}

/// A whole probe frame (request or response).
pub fn probe_frame() -> [u8; HEADER_LEN + 1] {
    let mut frame = [0u8; HEADER_LEN + 1];
    frame[..HEADER_LEN].copy_from_slice(&header(KIND_PROBE, 1));
    frame[HEADER_LEN] = b'?';
    frame
}

fn header(kind: u8, len: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = kind;
    h[1..].copy_from_slice(&len.to_be_bytes());
    h
}

/// What the decoder found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// This many payload bytes of data.
    Data(usize),
    /// A whole probe frame.
    Probe,
}

/// Adjacent data joined, empty data left out: what a reader counts, the
/// same however a peer cut its frames.
pub fn joined(events: &[Event]) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for e in events {
        match (out.last_mut(), e) {
            (_, Event::Data(0)) => {}
            (Some(Event::Data(n)), Event::Data(m)) => *n += m,
            _ => out.push(*e),
        }
    }
    out
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame kind {0} is neither data (0) nor probe (1)")]
    Kind(u8),
    #[error("a probe frame of {0} bytes (probes carry 1)")]
    ProbeLength(u32),
    #[error("a data frame of {0} bytes, over the {MAX_DATA}-byte limit")]
    TooLong(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header { got: usize, bytes: [u8; HEADER_LEN] },
    Data { left: u32 },
    Probe,
}

/// The incremental decoder of one direction of a connection.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            state: State::Header {
                got: 0,
                bytes: [0; HEADER_LEN],
            },
        }
    }
}

impl Decoder {
    /// Consumes `input`, calling `on` for each event; an error leaves the
    /// connection unusable (the peer does not speak this framing).
    pub fn feed(&mut self, mut input: &[u8], on: &mut impl FnMut(Event)) -> Result<(), FrameError> {
        while !input.is_empty() {
            match &mut self.state {
                State::Header { got, bytes } => {
                    let take = (HEADER_LEN - *got).min(input.len());
                    bytes[*got..*got + take].copy_from_slice(&input[..take]);
                    *got += take;
                    input = &input[take..];
                    if *got == HEADER_LEN {
                        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
                        self.state = match bytes[0] {
                            KIND_DATA if len > MAX_DATA => return Err(FrameError::TooLong(len)),
                            KIND_DATA if len == 0 => Self::default().state,
                            KIND_DATA => State::Data { left: len },
                            KIND_PROBE if len == 1 => State::Probe,
                            KIND_PROBE => return Err(FrameError::ProbeLength(len)),
                            other => return Err(FrameError::Kind(other)),
                        };
                    }
                }
                State::Data { left } => {
                    let take = (*left as usize).min(input.len());
                    *left -= take as u32;
                    input = &input[take..];
                    on(Event::Data(take));
                    if *left == 0 {
                        *self = Self::default();
                    }
                }
                State::Probe => {
                    input = &input[1..];
                    on(Event::Probe);
                    *self = Self::default();
                }
            }
        }
        Ok(())
    }
}

/// Encodes `events` (data lengths up to [`MAX_DATA`], probes) as frames.
pub fn encode(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        match *event {
            Event::Data(len) => {
                out.extend_from_slice(&data_header(len as u32));
                out.resize(out.len() + len, 0x5a);
            }
            Event::Probe => out.extend_from_slice(&probe_frame()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decodes `bytes` fed in pieces at `cuts`, joining adjacent data.
    pub fn decode(bytes: &[u8], cuts: &[usize]) -> Result<Vec<Event>, FrameError> {
        let mut decoder = Decoder::default();
        let mut events: Vec<Event> = Vec::new();
        let mut at = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        ends.push(bytes.len());
        ends.sort_unstable();
        for end in ends {
            decoder.feed(&bytes[at..end.max(at)], &mut |e| events.push(e))?;
            at = end.max(at);
        }
        Ok(events)
    }

    #[test]
    fn refusals_name_the_problem() {
        assert_eq!(decode(&[7, 0, 0, 0, 1, 0], &[]), Err(FrameError::Kind(7)));
        assert_eq!(
            decode(&[1, 0, 0, 0, 2, 0, 0], &[]),
            Err(FrameError::ProbeLength(2))
        );
        assert_eq!(
            decode(&[0, 0, 0x10, 0, 1], &[]),
            Err(FrameError::TooLong(0x100001))
        );
    }

    proptest! {
        #[test]
        fn frames_round_trip_however_they_are_cut(
            events in proptest::collection::vec(
                prop_oneof![(0usize..40_000).prop_map(Event::Data), Just(Event::Probe)], 0..20),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let bytes = encode(&events);
            let decoded = decode(&bytes, &cuts).unwrap();
            prop_assert_eq!(joined(&decoded), joined(&events));
        }

        #[test]
        fn any_bytes_decode_or_are_refused_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            cuts in proptest::collection::vec(any::<usize>(), 0..5),
        ) {
            let _ = decode(&bytes, &cuts);
        }
    }
}
