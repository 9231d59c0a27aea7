//! The encrypted, mutually authenticated control channel between a
//! controller and an agent: the Noise protocol framework (through the `snow`
//! crate) with the pattern [`PATTERN`], the pre-shared key as its PSK.
//!
//! On the wire, every Noise message (handshake or transport) is
//!
//! ```text
//! +----------------+------------------------------------+
//! | length: u16 BE | Noise message, at most 65535 bytes |
//! +----------------+------------------------------------+
//! ```
//!
//! Handshake (NNpsk0, two messages): `-> psk, e`, `<- e, ee`. The PSK is
//! mixed in before the first message's (empty) payload is sealed, so the
//! first message carries an AEAD tag only a key holder can make: the agent
//! knows whether a peer holds the key from the peer's first message, which
//! a controller sends in the same flight as its connection's last ACK, not
//! a round trip later. A stranger therefore holds nothing the agent must
//! keep for a round trip: until a first message verifies, a connection is
//! the cheapest kind the agent has (see [`crate::agent`]'s admission). The
//! controller knows the agent holds the key when the reply verifies. A
//! replayed first message verifies too, but the replayer cannot read the
//! reply (it lacks the ephemeral key behind `ee`), so its first transport
//! message fails; the agent also refuses a first message whose ephemeral
//! key it has seen before ([`ReplayCache`]). Transport messages carry a
//! counter nonce checked by `snow`, so a replayed, dropped or reordered
//! message fails to decrypt and ends the channel.
//!
//! An agent that will not go on with a handshake says why before closing,
//! in plaintext (unauthenticated: a diagnosis, never a decision), as a
//! length no handshake message has followed by one code byte:
//!
//! ```text
//! +--------------+-----------------------+
//! | 0xFFFF: u16  | [`Refusal`] code: u8  |
//! +--------------+-----------------------+
//! ```
//!
//! Before authentication the agent reads at most one message of at most
//! [`HANDSHAKE_MESSAGE_MAX`] bytes into a fixed buffer, under one deadline
//! ([`HANDSHAKE_TIME`]), and parses no control message. After it, the
//! plaintext is a sequence of [`crate::wire::control`] frames (at most
//! [`MAX_FRAME`] bytes), each split over as many Noise messages as it needs
//! and starting a new one; once a frame's first bytes have arrived, the
//! rest must follow within [`FRAME_TIME`], so a peer sending a byte a
//! minute is dropped.

use super::key::Key;
use crate::wire::control;
use serde::{Serialize, de::DeserializeOwned};
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;

/// The Noise protocol name.
pub const PATTERN: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";
/// The version of what controller and agent say to each other, bound into
/// the handshake ([`PROLOGUE`]), so a peer of another fails the handshake's
/// first message before anything of a run is said. 3: a role's request
/// travels by its name with its body (`Command::Role`'s `request` and
/// `params`) and its reply as that request's own reply type. 2: each
/// role's request and reply enums. An agent of protocol 2 answers a
/// controller of 3 as it answers a wrong key ([`Refusal::KeyDiffers`], whose
/// text names both causes), and so does one of 3 a controller of 2.
pub const PROTOCOL: u32 = 3;
/// Bound into the handshake: "netlab agent protocol {PROTOCOL}".
const PROLOGUE: &[u8] = b"netlab agent protocol 3";
/// Largest Noise message.
pub const NOISE_MAX: usize = 65535;
/// Bytes a Noise transport message adds to its plaintext (the AEAD tag).
const TAG_LEN: usize = 16;
/// Largest handshake message either side accepts (NNpsk0 needs 48 bytes
/// with empty payloads).
pub const HANDSHAKE_MESSAGE_MAX: usize = 256;
/// The first message's length: the ephemeral key and the empty payload's tag.
pub const FIRST_MESSAGE_LEN: usize = 32 + TAG_LEN;
/// The length field of a [`Refusal`] (no handshake message is this long).
pub const REFUSAL_MARK: u16 = 0xFFFF;
/// The whole handshake must be done within this time.
pub const HANDSHAKE_TIME: Duration = Duration::from_secs(5);
/// Once a frame has begun, its end must arrive within this time.
pub const FRAME_TIME: Duration = Duration::from_secs(10);
/// Largest control frame on an agent channel (header included).
pub const MAX_FRAME: usize = 4 << 20;

#[derive(Debug, Error)]
pub enum ChannelError {
    #[error("authentication failed ({0})")]
    Authentication(&'static str),
    #[error("the peer closed the connection")]
    Closed,
    #[error("timed out {0}")]
    Timeout(&'static str),
    #[error("handshake message of {0} bytes (at most {HANDSHAKE_MESSAGE_MAX})")]
    HandshakeTooLong(usize),
    #[error("control frame of {0} bytes exceeds the agent channel's {MAX_FRAME}-byte limit")]
    TooLong(usize),
    #[error("a message does not decrypt (replayed, reordered or altered)")]
    Decrypt,
    #[error(transparent)]
    Frame(#[from] control::FrameError),
    #[error("Noise: {0}")]
    Noise(String),
    #[error("{0}")]
    Refused(Refusal),
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for ChannelError {
    /// A peer that resets or aborts the connection (or is gone when we
    /// write) has closed it as surely as one that sent FIN: one variant
    /// for both, so no caller has to tell them apart.
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => ChannelError::Closed,
            _ => ChannelError::Io(e),
        }
    }
}

/// Why an agent ended a handshake, said to the peer before it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It ended the handshake, not yet authenticated, to make room for newer
    /// connections (its pending handshakes, or this address's share, are full).
    Busy,
    /// The first message does not verify: the peer holds another key.
    KeyDiffers,
    /// The first message's ephemeral key was seen before: a replay.
    Replayed,
    /// The first message did not arrive whole in time.
    TooSlow,
}

impl Refusal {
    pub fn code(self) -> u8 {
        match self {
            Refusal::Busy => 1,
            Refusal::KeyDiffers => 2,
            Refusal::Replayed => 3,
            Refusal::TooSlow => 4,
        }
    }

    pub fn from_code(code: u8) -> Option<Refusal> {
        Some(match code {
            1 => Refusal::Busy,
            2 => Refusal::KeyDiffers,
            3 => Refusal::Replayed,
            4 => Refusal::TooSlow,
            _ => return None,
        })
    }

    /// The three bytes that say it.
    pub fn wire(self) -> [u8; 3] {
        let [hi, lo] = REFUSAL_MARK.to_be_bytes();
        [hi, lo, self.code()]
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Busy => "the agent is busy with unauthenticated connections: it ended our handshake, before judging our key, to make room",
            Refusal::KeyDiffers => "the agent could not verify our first handshake message: it holds a different key, or speaks another agent protocol (another netlab release)",
            Refusal::Replayed => "the agent saw our first handshake message before (a replay)",
            Refusal::TooSlow => "our first handshake message did not reach the agent whole in time",
        })
    }
}

use crate::endpoint::waiting::Link;

fn noise(e: snow::Error) -> ChannelError {
    ChannelError::Noise(e.to_string())
}

/// Fills `buf` by `deadline`; `what` names where a timeout struck.
fn read_exact_by(
    link: &mut impl Link,
    buf: &mut [u8],
    deadline: Option<Instant>,
    what: &'static str,
) -> Result<(), ChannelError> {
    crate::endpoint::waiting::fill_by(link, buf, deadline).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => ChannelError::Timeout(what),
        _ => e.into(),
    })
}

/// Reads one length-prefixed Noise message into `buf`, refusing one longer
/// than `buf`. The first byte may take until `first`; the rest must follow
/// within [`FRAME_TIME`] (or by `first`, in a handshake).
fn read_message(
    link: &mut impl Link,
    buf: &mut [u8],
    first: Option<Instant>,
    handshake: bool,
) -> Result<usize, ChannelError> {
    let mut header = [0u8; 2];
    read_exact_by(link, &mut header[..1], first, "waiting for a message")?;
    let rest = if handshake {
        first
    } else {
        Some(Instant::now() + FRAME_TIME)
    };
    read_exact_by(link, &mut header[1..], rest, "inside a message")?;
    let length = u16::from_be_bytes(header) as usize;
    if length > buf.len() {
        return Err(ChannelError::HandshakeTooLong(length));
    }
    read_exact_by(link, &mut buf[..length], rest, "inside a message")?;
    Ok(length)
}

fn write_message(link: &mut impl Write, message: &[u8]) -> io::Result<()> {
    let mut wire = Vec::with_capacity(2 + message.len());
    wire.extend_from_slice(&(message.len() as u16).to_be_bytes());
    wire.extend_from_slice(message);
    link.write_all(&wire)?;
    link.flush()
}

fn handshake_state(key: &Key, initiator: bool) -> Result<snow::HandshakeState, ChannelError> {
    handshake_state_of(PROLOGUE, key, initiator)
}

fn handshake_state_of(
    prologue: &[u8],
    key: &Key,
    initiator: bool,
) -> Result<snow::HandshakeState, ChannelError> {
    let params: snow::params::NoiseParams = PATTERN.parse().map_err(noise)?;
    let builder = snow::Builder::new(params)
        .prologue(prologue)
        .map_err(noise)?
        .psk(0, key.bytes())
        .map_err(noise)?;
    if initiator {
        builder.build_initiator().map_err(noise)
    } else {
        builder.build_responder().map_err(noise)
    }
}

/// The controller's side of the handshake.
pub fn connect<L: Link>(mut link: L, key: &Key) -> Result<Channel<L>, ChannelError> {
    let deadline = Some(Instant::now() + HANDSHAKE_TIME);
    let mut state = handshake_state(key, true)?;
    let mut message = [0u8; HANDSHAKE_MESSAGE_MAX];
    let mut payload = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = state.write_message(&[], &mut message).map_err(noise)?;
    write_message(&mut link, &message[..n])?;
    let mut header = [0u8; 2];
    read_exact_by(
        &mut link,
        &mut header,
        deadline,
        "waiting for the agent's reply",
    )?;
    let length = u16::from_be_bytes(header);
    if length == REFUSAL_MARK {
        let mut code = [0u8; 1];
        read_exact_by(&mut link, &mut code, deadline, "inside the agent's refusal")?;
        return Err(match Refusal::from_code(code[0]) {
            Some(refusal) => ChannelError::Refused(refusal),
            None => ChannelError::Authentication("the agent refused with an unknown code"),
        });
    }
    let length = usize::from(length);
    if length > message.len() {
        return Err(ChannelError::HandshakeTooLong(length));
    }
    read_exact_by(
        &mut link,
        &mut message[..length],
        deadline,
        "inside a message",
    )?;
    state
        .read_message(&message[..length], &mut payload)
        .map_err(|_| ChannelError::Authentication("the agent's reply does not verify"))?;
    Channel::new(link, state)
}

/// A first handshake message that verified: a key holder's (or a replay
/// of one, which [`ReplayCache`] catches and the replayer cannot go on from).
pub struct Verified {
    state: snow::HandshakeState,
    /// The initiator's ephemeral public key: what a replay repeats.
    pub ephemeral: [u8; 32],
}

/// Checks a first handshake message (without its length field) against
/// `key`: cheap (one hash chain and one AEAD open, no Diffie-Hellman), so an
/// agent can judge every connection's first message on one thread.
pub fn verify_first(message: &[u8], key: &Key) -> Result<Verified, ChannelError> {
    if message.len() != FIRST_MESSAGE_LEN {
        return Err(ChannelError::Authentication(
            "a first handshake message of the wrong length",
        ));
    }
    let mut state = handshake_state(key, false)?;
    let mut payload = [0u8; HANDSHAKE_MESSAGE_MAX];
    state
        .read_message(message, &mut payload)
        .map_err(|_| ChannelError::Authentication("wrong key, or an altered first message"))?;
    let mut ephemeral = [0u8; 32];
    ephemeral.copy_from_slice(&message[..32]);
    Ok(Verified { state, ephemeral })
}

/// The agent's reply to a verified first message: the channel is open.
pub fn answer<L: Link>(mut link: L, verified: Verified) -> Result<Channel<L>, ChannelError> {
    let Verified { mut state, .. } = verified;
    let mut message = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = state.write_message(&[], &mut message).map_err(noise)?;
    write_message(&mut link, &message[..n])?;
    Channel::new(link, state)
}

/// Says `refusal` to a peer (best effort: it is closing anyway).
pub fn refuse(link: &mut impl Write, refusal: Refusal) {
    let _ = link.write_all(&refusal.wire());
    let _ = link.flush();
}

/// The agent's side of the handshake on one blocking link: a peer without
/// the key fails at its first message, before anything is written back.
/// (`netlab agent serve` reads first messages on its accept thread instead,
/// then calls [`verify_first`] and [`answer`].)
pub fn accept<L: Link>(mut link: L, key: &Key) -> Result<Channel<L>, ChannelError> {
    let deadline = Some(Instant::now() + HANDSHAKE_TIME);
    let mut message = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = read_message(&mut link, &mut message, deadline, true)?;
    let verified = verify_first(&message[..n], key);
    match verified {
        Ok(verified) => answer(link, verified),
        Err(e) => {
            refuse(&mut link, Refusal::KeyDiffers);
            Err(e)
        }
    }
}

/// First messages' ephemeral keys seen lately, so that each verifies once:
/// a replayer with N recorded first messages holds at most N connections,
/// once each, for as long as they stay in the cache (the most recent
/// [`ReplayCache::CAPACITY`]; a controller makes a few a second at most).
#[derive(Default)]
pub struct ReplayCache {
    seen: std::collections::HashSet<[u8; 32]>,
    order: std::collections::VecDeque<[u8; 32]>,
}

impl ReplayCache {
    pub const CAPACITY: usize = 1 << 16;

    /// Whether `ephemeral` is new (it is remembered from now on).
    pub fn first_time(&mut self, ephemeral: [u8; 32]) -> bool {
        if !self.seen.insert(ephemeral) {
            return false;
        }
        self.order.push_back(ephemeral);
        if self.order.len() > Self::CAPACITY
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }
}

/// An established channel; [`Channel::split`] gives a sending and a
/// receiving half for two threads.
pub struct Channel<L> {
    link: L,
    state: Arc<Mutex<snow::TransportState>>,
    sealed: Vec<u8>,
    opened: Vec<u8>,
}

/// A buffer for one whole Noise message, allocated once per channel half
/// (after the handshake), not per message.
fn noise_buffer() -> Vec<u8> {
    vec![0u8; NOISE_MAX]
}

impl<L: Link> Channel<L> {
    fn new(link: L, state: snow::HandshakeState) -> Result<Channel<L>, ChannelError> {
        Ok(Channel {
            link,
            state: Arc::new(Mutex::new(state.into_transport_mode().map_err(noise)?)),
            sealed: noise_buffer(),
            opened: noise_buffer(),
        })
    }

    /// Sends one message (as one control frame).
    pub fn send<T: Serialize>(&mut self, message: &T) -> Result<(), ChannelError> {
        seal(&self.state, &mut self.link, message, &mut self.sealed)
    }

    /// Receives one message; waits at most `idle` for it to begin.
    pub fn recv<T: DeserializeOwned>(&mut self, idle: Option<Duration>) -> Result<T, ChannelError> {
        open(
            &self.state,
            &mut self.link,
            idle,
            &mut self.sealed,
            &mut self.opened,
        )
    }
}

impl<L> Channel<L> {
    /// The link under the channel (to inspect a test's recording).
    pub fn into_link(self) -> L {
        self.link
    }
}

impl Channel<TcpStream> {
    /// Two halves over the same socket and Noise state.
    pub fn split(self) -> io::Result<(Sealer, Opener)> {
        let write = self.link.try_clone()?;
        write.set_write_timeout(Some(FRAME_TIME))?;
        Ok((
            Sealer {
                link: write,
                state: self.state.clone(),
                sealed: noise_buffer(),
            },
            // The receiving half is the channel itself, its sending
            // left to the Sealer.
            Opener(self),
        ))
    }
}

/// The sending half of a TCP channel.
pub struct Sealer {
    link: TcpStream,
    state: Arc<Mutex<snow::TransportState>>,
    sealed: Vec<u8>,
}

impl Sealer {
    pub fn send<T: Serialize>(&mut self, message: &T) -> Result<(), ChannelError> {
        seal(&self.state, &mut self.link, message, &mut self.sealed)
    }

    /// Closes both directions (the receiving half's reads end).
    pub fn shutdown(&self) {
        let _ = self.link.shutdown(std::net::Shutdown::Both);
    }
}

/// The receiving half of a TCP channel.
pub struct Opener(Channel<TcpStream>);

impl Opener {
    pub fn recv<T: DeserializeOwned>(&mut self, idle: Option<Duration>) -> Result<T, ChannelError> {
        self.0.recv(idle)
    }
}

fn seal<T: Serialize>(
    state: &Mutex<snow::TransportState>,
    link: &mut impl Write,
    message: &T,
    sealed: &mut [u8],
) -> Result<(), ChannelError> {
    let mut frame = Vec::new();
    control::emit(message, &mut frame)?;
    if frame.len() > MAX_FRAME {
        return Err(ChannelError::TooLong(frame.len()));
    }
    let chunk = NOISE_MAX - TAG_LEN;
    let mut wire = Vec::with_capacity(frame.len() + frame.len().div_ceil(chunk) * (2 + TAG_LEN));
    let mut state = super::lock(state);
    for piece in frame.chunks(chunk) {
        let n = state.write_message(piece, sealed).map_err(noise)?;
        wire.extend_from_slice(&(n as u16).to_be_bytes());
        wire.extend_from_slice(&sealed[..n]);
    }
    // Written under the lock: two threads' frames never interleave, and
    // the nonces go out in order.
    link.write_all(&wire)?;
    link.flush()?;
    Ok(())
}

/// The whole length of the frame starting `plain`, once its header is in.
fn frame_length(plain: &[u8]) -> Result<Option<usize>, ChannelError> {
    let Some(header) = plain.get(..control::HEADER_LEN) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes(header.try_into().expect("4 bytes")) as usize;
    if length == 0 {
        return Err(control::FrameError::Empty.into());
    }
    let total = length.saturating_add(control::HEADER_LEN);
    if total > MAX_FRAME {
        return Err(ChannelError::TooLong(total));
    }
    Ok(Some(total))
}

fn open<T: DeserializeOwned>(
    state: &Mutex<snow::TransportState>,
    link: &mut impl Link,
    idle: Option<Duration>,
    sealed: &mut [u8],
    opened: &mut [u8],
) -> Result<T, ChannelError> {
    let mut plain = Vec::new();
    let idle_deadline = idle.map(|d| Instant::now() + d);
    let mut frame_deadline = None;
    loop {
        if let Some(total) = frame_length(&plain)? {
            if plain.len() > total {
                // A frame always ends a Noise message.
                return Err(ChannelError::Decrypt);
            }
            if plain.len() == total {
                return Ok(control::parse(&plain)?);
            }
        }
        let first = frame_deadline.or(idle_deadline);
        let n = read_message(link, sealed, first, false)?;
        frame_deadline.get_or_insert(Instant::now() + FRAME_TIME);
        let n = super::lock(state)
            .read_message(&sealed[..n], opened)
            .map_err(|_| ChannelError::Decrypt)?;
        plain.extend_from_slice(&opened[..n]);
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::io::Read;
    use std::sync::mpsc;

    /// One end of an in-memory duplex pipe.
    pub struct MemLink {
        pub rx: mpsc::Receiver<Vec<u8>>,
        pub tx: mpsc::Sender<Vec<u8>>,
        pending: VecDeque<u8>,
        deadline: Option<Instant>,
        /// Every byte this end wrote, in order.
        pub written: Arc<Mutex<Vec<u8>>>,
    }

    pub fn pair() -> (MemLink, MemLink) {
        let (a_tx, b_rx) = mpsc::channel();
        let (b_tx, a_rx) = mpsc::channel();
        let end = |rx, tx| MemLink {
            rx,
            tx,
            pending: VecDeque::new(),
            deadline: None,
            written: Arc::default(),
        };
        (end(a_rx, a_tx), end(b_rx, b_tx))
    }

    impl Read for MemLink {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pending.is_empty() {
                let got = match self.deadline {
                    None => self.rx.recv().map_err(|_| ()),
                    Some(d) => self
                        .rx
                        .recv_timeout(d.saturating_duration_since(Instant::now()))
                        .map_err(|e| match e {
                            mpsc::RecvTimeoutError::Timeout => (),
                            mpsc::RecvTimeoutError::Disconnected => (),
                        }),
                };
                match got {
                    Ok(bytes) => self.pending.extend(bytes),
                    Err(()) if self.deadline.is_some_and(|d| Instant::now() >= d) => {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    Err(()) => return Ok(0),
                }
            }
            let n = buf.len().min(self.pending.len());
            for (slot, byte) in buf.iter_mut().zip(self.pending.drain(..n)) {
                *slot = byte;
            }
            Ok(n)
        }
    }

    impl Write for MemLink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.lock().unwrap().extend_from_slice(buf);
            self.tx
                .send(buf.to_vec())
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Link for MemLink {
        fn read_deadline(&mut self, deadline: Option<Instant>) -> io::Result<()> {
            self.deadline = deadline;
            Ok(())
        }
    }

    fn handshake(
        client_key: Key,
        agent_key: Key,
    ) -> (
        Result<Channel<MemLink>, ChannelError>,
        Result<Channel<MemLink>, ChannelError>,
    ) {
        let (a, b) = pair();
        let agent = std::thread::spawn(move || accept(b, &agent_key));
        let client = connect(a, &client_key);
        (client, agent.join().unwrap())
    }

    /// A session on one key, and the client's bytes as an eavesdropper
    /// on the wire would record them.
    fn overheard(key: &Key) -> (Channel<MemLink>, Channel<MemLink>, Arc<Mutex<Vec<u8>>>) {
        let (a, b) = pair();
        let written = a.written.clone();
        let agent_key = key.clone();
        let agent = std::thread::spawn(move || accept(b, &agent_key));
        let client = connect(a, key).unwrap();
        (client, agent.join().unwrap().unwrap(), written)
    }

    #[test]
    fn peers_with_one_key_talk_both_ways() {
        let key = Key::from_bytes([7; 32]);
        let (client, agent) = handshake(key.clone(), key);
        let (mut client, mut agent) = (client.unwrap(), agent.unwrap());
        client.send(&"hello".to_string()).unwrap();
        assert_eq!(agent.recv::<String>(None).unwrap(), "hello");
        // A frame longer than one Noise message is split and joined.
        let big = "x".repeat(200_000);
        agent.send(&big).unwrap();
        assert_eq!(client.recv::<String>(None).unwrap(), big);
    }

    #[test]
    fn a_wrong_key_fails_at_the_first_message_and_the_controller_is_told() {
        let (client, agent) = handshake(Key::from_bytes([1; 32]), Key::from_bytes([2; 32]));
        assert!(
            matches!(agent, Err(ChannelError::Authentication(_))),
            "{:?}",
            agent.err()
        );
        assert!(
            matches!(client, Err(ChannelError::Refused(Refusal::KeyDiffers))),
            "{:?}",
            client.err()
        );
    }

    #[test]
    fn a_peer_of_the_previous_protocol_fails_the_first_message() {
        assert_eq!(
            PROLOGUE,
            format!("netlab agent protocol {PROTOCOL}").as_bytes()
        );
        // A controller of protocol 2 (before requests travelled by name),
        // with the right key, writes its first message: this agent cannot
        // verify it.
        let key = Key::from_bytes([7; 32]);
        let mut old = handshake_state_of(b"netlab agent protocol 2", &key, true).unwrap();
        let mut first = [0u8; HANDSHAKE_MESSAGE_MAX];
        let n = old.write_message(&[], &mut first).unwrap();
        assert!(matches!(
            verify_first(&first[..n], &key),
            Err(ChannelError::Authentication(_))
        ));
        // The same message of this protocol verifies.
        let mut new = handshake_state_of(PROLOGUE, &key, true).unwrap();
        let n = new.write_message(&[], &mut first).unwrap();
        assert!(verify_first(&first[..n], &key).is_ok());
        // What the controller is told names both causes.
        assert!(
            Refusal::KeyDiffers
                .to_string()
                .contains("another agent protocol")
        );
    }

    #[test]
    fn a_replayed_handshake_opens_nothing() {
        let key = Key::from_bytes([9; 32]);
        // A real session, recorded as an eavesdropper would see it.
        let (mut client, _agent, recorded) = overheard(&key);
        client.send(&"run".to_string()).unwrap();
        let bytes = recorded.lock().unwrap().clone();
        // Its first message verifies once and is a replay after.
        let first = &bytes[2..2 + FIRST_MESSAGE_LEN];
        let verified = verify_first(first, &key).unwrap();
        let mut cache = ReplayCache::default();
        assert!(cache.first_time(verified.ephemeral));
        assert!(!cache.first_time(verify_first(first, &key).unwrap().ephemeral));
        // Replayed whole to an agent without the cache, the first message
        // verifies but the transport message does not: the agent's new
        // ephemeral key changed every key after it.
        let (mut attacker, b) = pair();
        let agent_key = key.clone();
        let agent = std::thread::spawn(move || {
            accept(b, &agent_key).and_then(|mut channel| channel.recv::<String>(None))
        });
        attacker.write_all(&bytes).unwrap();
        let result = agent.join().unwrap();
        assert!(matches!(result, Err(ChannelError::Decrypt)), "{result:?}");
    }

    #[test]
    fn a_refusal_reads_as_its_reason() {
        for refusal in [
            Refusal::Busy,
            Refusal::KeyDiffers,
            Refusal::Replayed,
            Refusal::TooSlow,
        ] {
            assert_eq!(Refusal::from_code(refusal.code()), Some(refusal));
            let (a, mut b) = pair();
            refuse(&mut b, refusal);
            let got = connect(a, &Key::from_bytes([1; 32]));
            assert!(
                matches!(got, Err(ChannelError::Refused(r)) if r == refusal),
                "{:?}",
                got.err()
            );
        }
        assert_eq!(Refusal::from_code(0), None);
    }

    #[test]
    fn the_replay_cache_forgets_only_its_oldest() {
        let mut cache = ReplayCache::default();
        let key = |i: usize| {
            let mut k = [0u8; 32];
            k[..8].copy_from_slice(&(i as u64).to_be_bytes());
            k
        };
        for i in 0..=ReplayCache::CAPACITY {
            assert!(cache.first_time(key(i)));
        }
        assert!(cache.first_time(key(0)), "the oldest was forgotten");
        assert!(!cache.first_time(key(ReplayCache::CAPACITY)));
        assert!(!cache.first_time(key(2)));
    }

    #[test]
    fn a_replayed_transport_message_does_not_decrypt() {
        let key = Key::from_bytes([3; 32]);
        let (mut client, mut agent, written) = overheard(&key);
        let before = written.lock().unwrap().len();
        client.send(&"once".to_string()).unwrap();
        let message = written.lock().unwrap()[before..].to_vec();
        assert_eq!(agent.recv::<String>(None).unwrap(), "once");
        client.link.tx.send(message).unwrap();
        assert!(matches!(
            agent.recv::<String>(None),
            Err(ChannelError::Decrypt)
        ));
    }

    #[test]
    fn a_silent_or_slow_peer_times_out() {
        let (a, b) = pair();
        let started = Instant::now();
        let agent = std::thread::spawn(move || accept(b, &Key::from_bytes([1; 32])).map(|_| ()));
        // One byte of a length, then nothing.
        let mut a = a;
        a.write_all(&[0]).unwrap();
        let result = agent.join().unwrap();
        assert!(
            matches!(result, Err(ChannelError::Timeout(_))),
            "{result:?}"
        );
        assert!(started.elapsed() >= HANDSHAKE_TIME);
        drop(a);
    }

    #[test]
    fn an_oversized_handshake_message_is_refused_unread() {
        let (mut a, b) = pair();
        let agent = std::thread::spawn(move || accept(b, &Key::from_bytes([1; 32])).map(|_| ()));
        a.write_all(&[0xff, 0xff]).unwrap();
        let result = agent.join().unwrap();
        assert!(
            matches!(result, Err(ChannelError::HandshakeTooLong(65535))),
            "{result:?}"
        );
    }

    #[test]
    fn frame_lengths_are_bounded() {
        assert!(frame_length(&[0, 0]).unwrap().is_none());
        assert!(matches!(
            frame_length(&[0x7f, 0, 0, 0]),
            Err(ChannelError::TooLong(_))
        ));
        assert!(frame_length(&[0, 0, 0, 0]).is_err());
        assert_eq!(frame_length(&[0, 0, 0, 5]).unwrap(), Some(9));
    }
}
