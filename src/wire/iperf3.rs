//! iperf3's control protocol as a stock `iperf3 -s` (3.x) speaks it, apart
//! from I/O. Read from iperf 3.12's `src/iperf_api.c` (`send_parameters`,
//! `send_results`, `JSON_write`/`JSON_read`), `src/iperf_client_api.c`
//! (`iperf_handle_message_client`) and `src/iperf_api.h` (the states and
//! error numbers):
//!
//! - The client opens the control connection and writes a [`Cookie`]: 36
//!   characters and a NUL. Each data connection starts with the same
//!   cookie, which is how the server ties it to the test.
//! - The server drives the test with one signed [`State`] byte at a time:
//!   `PARAM_EXCHANGE` (the client writes its [`Params`]), `CREATE_STREAMS`
//!   (the client opens the data connections), `TEST_START`, `TEST_RUNNING`;
//!   the client ends the test by writing `TEST_END`; then
//!   `EXCHANGE_RESULTS` (the client writes its [`Results`] and reads the
//!   server's), `DISPLAY_RESULTS`, and the client writes `IPERF_DONE`.
//!   `ACCESS_DENIED` means the server is busy with another client's test;
//!   `SERVER_ERROR` is followed by two 4-byte big-endian numbers, iperf's
//!   error number and the system's errno.
//! - JSON travels as a 4-byte big-endian length and the text
//!   ([`frame`], [`frame_length`]).
//!
//! Invariant: a peer's announced JSON length above [`MAX_JSON`] is refused
//! before anything is allocated for it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
/// `COOKIE_SIZE` (`iperf.h`): "size of an ascii uuid", its NUL included.
pub const COOKIE_SIZE: usize = 37;
/// The most JSON netlab reads in one frame (a server's results with its
/// own output inside run to kilobytes; nothing honest comes near this).
pub const MAX_JSON: usize = 1 << 20;
/// `UDP_CONNECT_MSG` and `UDP_CONNECT_REPLY` (`iperf.h`): a UDP stream's
/// first datagram and the server's answer.
pub const UDP_CONNECT_MSG: u32 = 0x3637_3839;
pub const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
/// The version netlab says it speaks (`client_version`).
pub const CLIENT_VERSION: &str = "3.12";

/// What the server (and, at the end, the client) says with one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfStart,
    IperfDone,
    AccessDenied,
    ServerError,
}

impl State {
    /// The byte on the wire (`iperf_api.h`).
    pub fn byte(self) -> u8 {
        let code: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        code as u8
    }

    /// The state a byte names (iperf's unused 3, 5-8 are not states a
    /// server sends).
    pub fn from_byte(byte: u8) -> Result<State, Iperf3Error> {
        Ok(match byte as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            _ => return Err(Iperf3Error::UnknownState(byte)),
        })
    }
}

/// What a peer's bytes can be wrong about.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Iperf3Error {
    #[error("not iperf3's control protocol: byte {0:#04x} is no iperf3 state")]
    UnknownState(u8),
    #[error("a JSON frame of {0} bytes announced, over the {MAX_JSON} netlab reads")]
    TooLong(usize),
    #[error("the peer's JSON does not parse as iperf3's {what}: {why}")]
    Json { what: &'static str, why: String },
    #[error("a cookie is {COOKIE_SIZE} bytes ending in NUL, of printable ASCII before it")]
    BadCookie,
    #[error("the server said {got:?} where iperf3's exchange has {expected:?} next")]
    OutOfOrder { got: State, expected: State },
}

/// The client's side of the exchange as a state machine: the state the
/// server must send next (`iperf_handle_message_client` takes them in
/// this order, once each). A state out of order is an error, never a
/// second set of streams or a second test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    ParamExchange,
    CreateStreams,
    TestStart,
    TestRunning,
    ExchangeResults,
    DisplayResults,
}

/// What the client does with the server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The state expected: act on it, then expect the next (None: the
    /// exchange is over once the client has said `IPERF_DONE`).
    Act(State, Option<Expect>),
    /// The server refused or ended the test (`ACCESS_DENIED`,
    /// `SERVER_ERROR`, `SERVER_TERMINATE`), whenever it comes.
    Refusal(State),
}

impl Expect {
    /// What the server must say first (after the cookie).
    pub const FIRST: Expect = Expect::ParamExchange;

    /// The state this waits for.
    pub fn state(self) -> State {
        match self {
            Expect::ParamExchange => State::ParamExchange,
            Expect::CreateStreams => State::CreateStreams,
            Expect::TestStart => State::TestStart,
            Expect::TestRunning => State::TestRunning,
            Expect::ExchangeResults => State::ExchangeResults,
            Expect::DisplayResults => State::DisplayResults,
        }
    }

    fn after(self) -> Option<Expect> {
        match self {
            Expect::ParamExchange => Some(Expect::CreateStreams),
            Expect::CreateStreams => Some(Expect::TestStart),
            Expect::TestStart => Some(Expect::TestRunning),
            Expect::TestRunning => Some(Expect::ExchangeResults),
            Expect::ExchangeResults => Some(Expect::DisplayResults),
            Expect::DisplayResults => None,
        }
    }

    /// The server said `got` while the client waits for `self`.
    pub fn step(self, got: State) -> Result<Step, Iperf3Error> {
        match got {
            State::AccessDenied | State::ServerError | State::ServerTerminate => {
                Ok(Step::Refusal(got))
            }
            _ if got == self.state() => Ok(Step::Act(got, self.after())),
            _ => Err(Iperf3Error::OutOfOrder {
                got,
                expected: self.state(),
            }),
        }
    }
}

/// The cookie that names a test on its control and data connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cookie([u8; COOKIE_SIZE]);

/// `make_cookie`'s alphabet (`iperf_util.c`).
const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

impl Cookie {
    /// A cookie from 36 random bytes (each picks one of 32 characters).
    pub fn from_random(random: [u8; COOKIE_SIZE - 1]) -> Cookie {
        let mut bytes = [0u8; COOKIE_SIZE];
        for (b, r) in bytes.iter_mut().zip(random) {
            *b = COOKIE_CHARS[(r % 32) as usize];
        }
        Cookie(bytes)
    }

    /// A fresh cookie from the system's random source.
    pub fn new() -> std::io::Result<Cookie> {
        let mut random = [0u8; COOKIE_SIZE - 1];
        getrandom::fill(&mut random).map_err(std::io::Error::other)?;
        Ok(Cookie::from_random(random))
    }

    pub fn as_bytes(&self) -> &[u8; COOKIE_SIZE] {
        &self.0
    }

    /// The cookie's text, without its NUL (as iperf3's `start.cookie`).
    pub fn as_str(&self) -> &str {
        // Every constructor leaves printable ASCII before the NUL.
        std::str::from_utf8(&self.0[..COOKIE_SIZE - 1]).unwrap_or_default()
    }

    /// Checks a cookie read from a peer.
    pub fn parse(bytes: &[u8]) -> Result<Cookie, Iperf3Error> {
        let array: [u8; COOKIE_SIZE] = bytes.try_into().map_err(|_| Iperf3Error::BadCookie)?;
        let (last, text) = array.split_last().expect("not empty");
        if *last != 0 || !text.iter().all(|b| b.is_ascii_graphic()) {
            return Err(Iperf3Error::BadCookie);
        }
        Ok(Cookie(array))
    }
}

/// The test's parameters as the client writes them (`send_parameters`).
/// Fields iperf3 writes only when set are `None` when absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<bool>,
    /// Seconds omitted at the start.
    pub omit: u64,
    /// Seconds (0 with `num`).
    pub time: u64,
    /// Bytes to send (0: by time).
    pub num: u64,
    pub blockcount: u64,
    pub parallel: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    /// Socket buffer size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// Bytes per write (and per UDP datagram).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// Bits a second per stream (UDP's target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_timer: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    pub client_version: String,
}

/// An integer iperf3 wrote: iperf 3.12 writes -1 as 18446744073709551615
/// (its JSON library prints the 64-bit pattern unsigned), so a value past
/// `i64::MAX` is read back as the signed number it was; a fraction (cJSON
/// numbers are doubles) is truncated.
fn signed<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    if let Some(v) = n.as_i64() {
        Ok(v)
    } else if let Some(v) = n.as_u64() {
        Ok(v as i64)
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        Ok(f as i64)
    }
}

/// One stream's account in the results exchange (`send_results`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    #[serde(deserialize_with = "signed")]
    pub id: i64,
    /// Sent by a sender, received by a receiver.
    pub bytes: u64,
    /// -1 where unknown (a receiver).
    #[serde(deserialize_with = "signed")]
    pub retransmits: i64,
    /// UDP: seconds.
    pub jitter: f64,
    /// UDP: datagrams lost (or out of order).
    #[serde(deserialize_with = "signed")]
    pub errors: i64,
    /// UDP: datagrams.
    #[serde(deserialize_with = "signed")]
    pub packets: i64,
    pub start_time: f64,
    pub end_time: f64,
}

/// One side's results (`send_results`): its CPU over the test and its
/// streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// 1 when the sender counted retransmits, 0 when it could not, -1 from
    /// a receiver.
    #[serde(deserialize_with = "signed")]
    pub sender_has_retransmits: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    #[serde(default)]
    pub streams: Vec<StreamResult>,
    /// The server's own report, when asked for (`--get-server-output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

/// `value` as a frame: its length (4 bytes, big-endian) and its JSON.
pub fn frame<T: Serialize>(value: &T) -> Vec<u8> {
    let text = serde_json::to_vec(value).expect("iperf3's types serialize");
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(&text);
    out
}

/// The JSON length a frame's header announces, refused above [`MAX_JSON`].
pub fn frame_length(header: [u8; 4]) -> Result<usize, Iperf3Error> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_JSON {
        return Err(Iperf3Error::TooLong(len));
    }
    Ok(len)
}

/// A frame's JSON as `T` (`what` names it in the error).
pub fn parse_json<T: serde::de::DeserializeOwned>(
    text: &[u8],
    what: &'static str,
) -> Result<T, Iperf3Error> {
    serde_json::from_slice(text).map_err(|e| Iperf3Error::Json {
        what,
        why: e.to_string(),
    })
}

/// What a `SERVER_ERROR`'s iperf error number means (`iperf_error.c`),
/// for the numbers a server sends a client; others by number.
pub fn server_error_text(i_errno: i32) -> String {
    let text = match i_errno {
        20 => "block size invalid",
        27 => "total required bandwidth is larger than server's limit",
        101 => "test initialization failed",
        102 => "unable to listen for connections",
        104 => "unable to accept connection from client",
        106 => "unable to receive cookie at server",
        109 => "control socket has closed unexpectedly",
        110 => "received an unknown control message",
        114 => "unable to receive parameters from client",
        119 => "the client has terminated",
        120 => "the server has terminated",
        121 => "the server is busy running a test. try again later",
        122 => "unable to set TCP/SCTP NODELAY",
        123 => "unable to set TCP/SCTP MSS",
        124 => "unable to set socket buffer size",
        130 => "unable to set socket window size",
        131 => "protocol does not exist",
        134 => "unable to set TCP_CONGESTION",
        142 => "test authorization failed",
        200 => "unable to create a new stream",
        202 => "unable to start stream listener",
        203 => "unable to connect stream",
        204 => "unable to accept stream connection",
        _ => return format!("iperf error {i_errno}"),
    };
    format!("{text} (iperf error {i_errno})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_figures_read_back_to_the_last_bit() {
        // fuzz/iperf3_control's find (2026-12-04): without serde_json's
        // float_roundtrip, 6.7751177688833374e38 read back one bit off.
        let text =
            br#"[877688833387.83388,6188,677511776888333838877688833387688833387.83388,3333]"#;
        let results: Results = parse_json(text, "results").unwrap();
        let again = frame(&results);
        assert_eq!(
            parse_json::<Results>(&again[4..], "results").unwrap(),
            results
        );
    }

    #[test]
    fn the_client_takes_each_state_once_in_order() {
        let mut expect = Some(Expect::FIRST);
        let order = [
            State::ParamExchange,
            State::CreateStreams,
            State::TestStart,
            State::TestRunning,
            State::ExchangeResults,
            State::DisplayResults,
        ];
        for state in order {
            let Step::Act(acted, next) = expect.unwrap().step(state).unwrap() else {
                panic!("{state:?}");
            };
            assert_eq!(acted, state);
            expect = next;
        }
        assert_eq!(expect, None);
        // A second CREATE_STREAMS or TEST_RUNNING, or a state a client
        // never gets, is out of order, whenever it comes.
        assert_eq!(
            Expect::TestStart.step(State::CreateStreams),
            Err(Iperf3Error::OutOfOrder {
                got: State::CreateStreams,
                expected: State::TestStart
            })
        );
        assert!(Expect::ExchangeResults.step(State::TestRunning).is_err());
        assert!(Expect::TestRunning.step(State::IperfDone).is_err());
        for refusal in [
            State::AccessDenied,
            State::ServerError,
            State::ServerTerminate,
        ] {
            assert_eq!(
                Expect::TestRunning.step(refusal),
                Ok(Step::Refusal(refusal))
            );
        }
    }

    #[test]
    fn every_state_reads_back_as_written() {
        let all = [
            State::TestStart,
            State::TestRunning,
            State::TestEnd,
            State::ParamExchange,
            State::CreateStreams,
            State::ServerTerminate,
            State::ClientTerminate,
            State::ExchangeResults,
            State::DisplayResults,
            State::IperfStart,
            State::IperfDone,
            State::AccessDenied,
            State::ServerError,
        ];
        for s in all {
            assert_eq!(State::from_byte(s.byte()), Ok(s));
        }
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        assert_eq!(State::ParamExchange.byte(), 9);
        // "SSH-" and "HTTP" start with no state iperf3 sends.
        assert_eq!(State::from_byte(b'S'), Err(Iperf3Error::UnknownState(b'S')));
        assert!(State::from_byte(3).is_err());
    }

    #[test]
    fn a_cookie_is_36_of_iperfs_characters_and_a_nul() {
        let c = Cookie::from_random([255; 36]);
        assert_eq!(c.as_bytes()[36], 0);
        assert!(c.as_bytes()[..36].iter().all(|b| COOKIE_CHARS.contains(b)));
        assert_eq!(Cookie::parse(c.as_bytes()), Ok(c));
        let fresh = Cookie::new().unwrap();
        assert_ne!(fresh, Cookie::new().unwrap());
        assert!(Cookie::parse(&[b'a'; 37]).is_err());
        assert!(Cookie::parse(&[0; 12]).is_err());
    }

    #[test]
    fn frames_carry_their_length_and_refuse_a_huge_one() {
        let params = Params {
            tcp: Some(true),
            time: 10,
            parallel: 4,
            reverse: Some(true),
            client_version: CLIENT_VERSION.into(),
            ..Params::default()
        };
        let bytes = frame(&params);
        let len = frame_length(bytes[..4].try_into().unwrap()).unwrap();
        assert_eq!(len, bytes.len() - 4);
        let back: Params = parse_json(&bytes[4..], "parameters").unwrap();
        assert_eq!(back, params);
        // Absent options are absent, as iperf3 writes them.
        let text = String::from_utf8(bytes[4..].to_vec()).unwrap();
        assert!(
            !text.contains("udp") && !text.contains("bidirectional"),
            "{text}"
        );
        assert_eq!(
            frame_length(u32::MAX.to_be_bytes()),
            Err(Iperf3Error::TooLong(u32::MAX as usize))
        );
    }

    #[test]
    fn a_servers_results_parse_as_iperf3_writes_them() {
        // iperf 3.12's send_results, as a server sends it after a test.
        // (-1 as 3.12 prints it: the 64-bit pattern, unsigned.)
        let text = br#"{"cpu_util_total":45.2,"cpu_util_user":2.27,"cpu_util_system":42.9,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":2882273280,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.000161}]}"#;
        let r: Results = parse_json(text, "results").unwrap();
        assert_eq!(r.streams[0].bytes, 2_882_273_280);
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert!(parse_json::<Results>(b"{\"streams\":7}", "results").is_err());
    }

    #[test]
    fn server_errors_read_as_iperf3_says_them() {
        assert!(server_error_text(121).starts_with("the server is busy running a test"));
        assert_eq!(server_error_text(999), "iperf error 999");
    }
}
