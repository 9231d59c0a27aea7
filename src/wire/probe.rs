//! The fleet's probe datagrams (#64): a call one agent sends a peer over
//! UDP, to the peer's agent port, and the answer the peer sends back, each
//! sealed with a MAC under a key derived from the agent key, so only
//! holders of the key are answered (a probe goes only to an agent that
//! holds the key, and no stranger can make an agent send anything).
//!
//! ```text
//!  0   4  magic "NLfp"
//!  4   1  version (1)
//!  5   1  kind: 1 call, 2 answer
//!  6   2  zero
//!  8   4  sequence number (the caller's; echoed)
//! 12   8  stamp (the caller's clock, µs; echoed)
//! 20   1  zone length z (0 in a call)
//! 21   z  the answerer's zone (UTF-8)
//!  .   1  rack length r (0 in a call)
//!  .   r  the answerer's rack (UTF-8)
//!  .   .  zero padding: a call is always CALL_LEN bytes
//! -16 16  MAC: keyed BLAKE2s-128 of every byte before it
//! ```
//!
//! Invariants: an answer is never longer than the call it answers
//! ([`CALL_LEN`] is the longest answer), so an agent amplifies nothing;
//! [`parse`] checks the MAC before it reads a field, and accepts exactly
//! what [`emit`] writes (labels at most [`MAX_LABEL`] bytes of UTF-8
//! without control characters, padding zero), so `emit(parse(b)) == b`.
//!
//! A replayed call is answered again, to the address it came from: a
//! stranger who can capture and spoof gets an answer no larger than the
//! call sent to a host that was probed anyway.

use blake2::Blake2sMac;
use blake2::digest::consts::U16;
use blake2::digest::{KeyInit, Mac};
use thiserror::Error;

const MAGIC: &[u8; 4] = b"NLfp";
const VERSION: u8 = 1;
/// Bytes of the MAC.
pub const MAC_LEN: usize = 16;
/// The longest zone or rack an answer carries.
pub const MAX_LABEL: usize = 63;
/// The fixed fields before the labels.
const HEAD: usize = 20;
/// Every call's length: the longest answer's.
pub const CALL_LEN: usize = HEAD + 2 + 2 * MAX_LABEL + MAC_LEN;
/// The shortest answer's length (no labels).
pub const MIN_LEN: usize = HEAD + 2 + MAC_LEN;

/// The key the probes' MACs use, derived from the agent key.
#[derive(Clone)]
pub struct ProbeKey([u8; 32]);

impl std::fmt::Debug for ProbeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProbeKey(..)")
    }
}

impl ProbeKey {
    /// The probe key of an agent key: BLAKE2s keyed with it, of a fixed
    /// label, so the probes never use the channel's key itself.
    pub fn derive(agent_key: &[u8; 32]) -> ProbeKey {
        let mut mac =
            <Blake2sMac<blake2::digest::consts::U32> as KeyInit>::new_from_slice(agent_key)
                .expect("32 bytes is a BLAKE2s key");
        mac.update(b"netlab fleet probe key v1");
        ProbeKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self) -> Blake2sMac<U16> {
        <Blake2sMac<U16> as KeyInit>::new_from_slice(&self.0).expect("32 bytes is a BLAKE2s key")
    }
}

/// A call or its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Call {
        seq: u32,
        stamp_us: u64,
    },
    Answer {
        seq: u32,
        stamp_us: u64,
        zone: String,
        rack: String,
    },
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProbeError {
    #[error("{0} bytes is no probe (a call is {CALL_LEN}, an answer {MIN_LEN} to {CALL_LEN})")]
    Length(usize),
    #[error("its MAC does not match (another key, or altered)")]
    Mac,
    #[error("not a netlab probe (magic or version)")]
    Magic,
    #[error("unknown probe kind {0}")]
    Kind(u8),
    #[error("a label is longer than {MAX_LABEL} bytes, not UTF-8 or holds control characters")]
    Label,
    #[error("its fields do not fill it exactly (nonzero padding or reserved bytes)")]
    Layout,
}

fn label_ok(label: &str) -> bool {
    label.len() <= MAX_LABEL && !label.chars().any(char::is_control)
}

/// The datagram of `probe`, sealed with `key`. A label longer than
/// [`MAX_LABEL`] or holding control characters is refused.
pub fn emit(probe: &Probe, key: &ProbeKey) -> Result<Vec<u8>, ProbeError> {
    let (kind, seq, stamp_us, zone, rack) = match probe {
        Probe::Call { seq, stamp_us } => (1u8, *seq, *stamp_us, "", ""),
        Probe::Answer {
            seq,
            stamp_us,
            zone,
            rack,
        } => (2u8, *seq, *stamp_us, zone.as_str(), rack.as_str()),
    };
    if !label_ok(zone) || !label_ok(rack) {
        return Err(ProbeError::Label);
    }
    let mut out = Vec::with_capacity(CALL_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[VERSION, kind, 0, 0]);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&stamp_us.to_be_bytes());
    for label in [zone, rack] {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    if kind == 1 {
        out.resize(CALL_LEN - MAC_LEN, 0);
    }
    Ok(seal(out, key))
}

/// `body` with its MAC after it: what [`emit`] sends, and how a fuzzer
/// makes bytes that pass the MAC to test the layout's checks.
pub fn seal(mut body: Vec<u8>, key: &ProbeKey) -> Vec<u8> {
    let mut mac = key.mac();
    mac.update(&body);
    body.extend_from_slice(&mac.finalize().into_bytes());
    body
}

/// Reads a datagram: its MAC first, then its fields, exactly.
pub fn parse(bytes: &[u8], key: &ProbeKey) -> Result<Probe, ProbeError> {
    if !(MIN_LEN..=CALL_LEN).contains(&bytes.len()) {
        return Err(ProbeError::Length(bytes.len()));
    }
    let (body, tag) = bytes.split_at(bytes.len() - MAC_LEN);
    let mut mac = key.mac();
    mac.update(body);
    mac.verify_slice(tag).map_err(|_| ProbeError::Mac)?;
    if &body[..4] != MAGIC || body[4] != VERSION {
        return Err(ProbeError::Magic);
    }
    if body[6..8] != [0, 0] {
        return Err(ProbeError::Layout);
    }
    let kind = body[5];
    let seq = u32::from_be_bytes(body[8..12].try_into().expect("4 bytes"));
    let stamp_us = u64::from_be_bytes(body[12..20].try_into().expect("8 bytes"));
    let mut at = HEAD;
    let mut labels = [String::new(), String::new()];
    for label in &mut labels {
        let len = usize::from(*body.get(at).ok_or(ProbeError::Layout)?);
        let bytes = body.get(at + 1..at + 1 + len).ok_or(ProbeError::Layout)?;
        *label = std::str::from_utf8(bytes)
            .map_err(|_| ProbeError::Label)?
            .to_string();
        if !label_ok(label) {
            return Err(ProbeError::Label);
        }
        at += 1 + len;
    }
    let [zone, rack] = labels;
    match kind {
        1 if zone.is_empty()
            && rack.is_empty()
            && bytes.len() == CALL_LEN
            && body[at..].iter().all(|&b| b == 0) =>
        {
            Ok(Probe::Call { seq, stamp_us })
        }
        2 if at == body.len() => Ok(Probe::Answer {
            seq,
            stamp_us,
            zone,
            rack,
        }),
        1 | 2 => Err(ProbeError::Layout),
        other => Err(ProbeError::Kind(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> ProbeKey {
        ProbeKey::derive(&[b; 32])
    }

    #[test]
    fn a_call_is_as_long_as_the_longest_answer() {
        let call = emit(
            &Probe::Call {
                seq: 1,
                stamp_us: 2,
            },
            &key(1),
        )
        .unwrap();
        let longest = emit(
            &Probe::Answer {
                seq: 1,
                stamp_us: 2,
                zone: "z".repeat(MAX_LABEL),
                rack: "r".repeat(MAX_LABEL),
            },
            &key(1),
        )
        .unwrap();
        assert_eq!((call.len(), longest.len()), (CALL_LEN, CALL_LEN));
    }

    #[test]
    fn another_key_or_one_flipped_bit_is_refused() {
        let answer = Probe::Answer {
            seq: 7,
            stamp_us: 9,
            zone: "a".into(),
            rack: "r1".into(),
        };
        let bytes = emit(&answer, &key(1)).unwrap();
        assert_eq!(parse(&bytes, &key(1)), Ok(answer));
        assert_eq!(parse(&bytes, &key(2)), Err(ProbeError::Mac));
        for i in 0..bytes.len() {
            let mut bent = bytes.clone();
            bent[i] ^= 0x10;
            assert_eq!(parse(&bent, &key(1)), Err(ProbeError::Mac), "byte {i}");
        }
    }

    #[test]
    fn labels_past_their_bound_are_refused_on_the_way_out() {
        for (zone, rack) in [
            ("z".repeat(MAX_LABEL + 1), String::new()),
            ("a\n".into(), "r".into()),
        ] {
            let answer = Probe::Answer {
                seq: 0,
                stamp_us: 0,
                zone,
                rack,
            };
            assert_eq!(emit(&answer, &key(1)), Err(ProbeError::Label));
        }
    }

    proptest! {
        #[test]
        fn probes_round_trip(seq: u32, stamp_us: u64, zone in "[a-z0-9é-]{0,20}", rack in "[a-z0-9/]{0,63}", call: bool) {
            let probe = if call { Probe::Call { seq, stamp_us } } else { Probe::Answer { seq, stamp_us, zone, rack } };
            let bytes = emit(&probe, &key(3)).unwrap();
            prop_assert_eq!(parse(&bytes, &key(3)), Ok(probe));
        }

        #[test]
        fn any_bytes_sealed_with_the_key_parse_only_as_emitted(body in proptest::collection::vec(any::<u8>(), 0..CALL_LEN)) {
            // A MAC that matches proves nothing about the layout: a key
            // holder's bug must still be refused, or read back exactly.
            let bytes = seal(body, &key(4));
            if let Ok(probe) = parse(&bytes, &key(4)) {
                prop_assert_eq!(emit(&probe, &key(4)).unwrap(), bytes);
            }
        }
    }
}
