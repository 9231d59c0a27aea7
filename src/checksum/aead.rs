//! The per-byte cost 1988 did not have: the AEADs of TLS 1.3 (RFC 8446
//! §5.2, RFC 8446 §9.1's mandatory AES-128-GCM, and the usual AES-256-GCM
//! and ChaCha20-Poly1305 of RFC 8439) and of QUIC (RFC 9001 §5.3), timed
//! per KB beside the checksum and the copy.
//!
//! The ciphers are ring's (the crate rustls and quinn use): its AES-GCM
//! is BoringSSL's assembly (AES-NI with carry-less multiply, or VAES where
//! the CPU has it), so the figures are what a Rust TLS or QUIC stack pays,
//! not a toy's. ring builds with a C compiler alone, where aws-lc-rs wants
//! CMake as well, which a fresh Debian machine lacks.
//!
//! Sealing and opening run in place, as a record layer does once the
//! plaintext is in the record buffer. Opening must meet a valid tag every
//! time without a copy to restore the ciphertext, and both AEADs are a
//! keystream XOR with a MAC over the ciphertext, so one buffer can cycle:
//! sealing P gives C = P ^ K with tag T1 = MAC(C); sealing C under the same
//! nonce gives P back with T2 = MAC(P). Opening P with T2 then yields C, and
//! opening C with T1 yields P: every open is a real, authenticated one, at
//! the cost of reusing a nonce, which a benchmark may and a protocol must
//! never.

use ring::aead::{
    AES_128_GCM, AES_256_GCM, Aad, Algorithm, CHACHA20_POLY1305, LessSafeKey, Nonce, Tag,
    UnboundKey,
};

/// An AEAD a TLS 1.3 or QUIC connection may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Cipher {
    pub const ALL: [Cipher; 3] = [
        Cipher::Aes128Gcm,
        Cipher::Aes256Gcm,
        Cipher::Chacha20Poly1305,
    ];

    /// The name netlab and `openssl speed -evp` both use.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "aes-128-gcm",
            Cipher::Aes256Gcm => "aes-256-gcm",
            Cipher::Chacha20Poly1305 => "chacha20-poly1305",
        }
    }

    fn algorithm(self) -> &'static Algorithm {
        match self {
            Cipher::Aes128Gcm => &AES_128_GCM,
            Cipher::Aes256Gcm => &AES_256_GCM,
            Cipher::Chacha20Poly1305 => &CHACHA20_POLY1305,
        }
    }
}

impl std::str::FromStr for Cipher {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        Cipher::ALL
            .into_iter()
            .find(|c| c.name() == wanted)
            .ok_or_else(|| {
                format!(
                    "unknown cipher {s:?}: one of {}",
                    Cipher::ALL.map(Cipher::name).join(", ")
                )
            })
    }
}

impl serde::Serialize for Cipher {
    /// By [`Cipher::name`], as the command line writes it.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Cipher {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A TLS record's additional data: its 5-byte header (RFC 8446 §5.2).
const AAD: [u8; 5] = [23, 3, 3, 0, 0];

/// One cipher's key, for timing.
pub struct Bench {
    key: LessSafeKey,
    /// The tags of the two states a buffer cycles through (see the module
    /// doc), once [`Bench::prime`] has set a buffer up.
    tags: Option<(Tag, Tag)>,
}

impl Bench {
    /// A key of fixed bytes: timing depends on none of them.
    pub fn new(cipher: Cipher) -> Bench {
        let algorithm = cipher.algorithm();
        let bytes: Vec<u8> = (0..algorithm.key_len() as u8).collect();
        let key = UnboundKey::new(algorithm, &bytes).expect("a key of the cipher's length");
        Bench {
            key: LessSafeKey::new(key),
            tags: None,
        }
    }

    fn nonce() -> Nonce {
        Nonce::assume_unique_for_key([7; 12])
    }

    /// Seals `buf` in place; the tag, as a record's last 16 bytes.
    pub fn seal(&self, buf: &mut [u8]) -> Tag {
        self.key
            .seal_in_place_separate_tag(Self::nonce(), Aad::from(AAD), buf)
            .expect("a buffer within the cipher's limit")
    }

    /// Readies every buffer that holds `plain` for [`Bench::open`]: the
    /// two tags of the cycle, from two seals of a copy.
    pub fn prime(&mut self, plain: &[u8]) {
        let mut scratch = plain.to_vec();
        let t1 = self.seal(&mut scratch);
        let t2 = self.seal(&mut scratch);
        debug_assert_eq!(
            scratch, plain,
            "sealing twice under one nonce is the identity"
        );
        self.tags = Some((t1, t2));
    }

    /// Opens `buf` in place: `state` says which of the cycle's two texts it
    /// holds (false: the plaintext the buffers were primed with). Returns
    /// the new state. Panics if a tag fails, which only a broken cycle can
    /// cause.
    pub fn open(&self, buf: &mut [u8], state: bool) -> bool {
        let (t1, t2) = self.tags.expect("prime before open");
        let tag = if state { t1 } else { t2 };
        self.key
            .open_in_place_separate_tag(Self::nonce(), Aad::from(AAD), tag, buf, 0..)
            .expect("the cycle's tag authenticates");
        !state
    }
}

/// A cipher's single-core rate on this host, timed hot: the best of
/// several rounds of sealing and of opening `len`-byte records, ns per KB
/// of plaintext each. What a stream's sealing or opening is compared
/// with (#65): a connection cannot seal faster than its core can.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CipherRate {
    pub record: usize,
    pub seal_ns_per_kb: f64,
    pub open_ns_per_kb: f64,
}

/// Times [`CipherRate`] in about `rounds` × 2 × 256 KB of work (a few
/// milliseconds).
pub fn single_core_rate(cipher: Cipher, record: usize, rounds: u32) -> CipherRate {
    let record = record.clamp(1, 1 << 20);
    let per_round = (256 * 1024 / record).max(1);
    let plain: Vec<u8> = (0..record).map(|i| (i * 31 % 251) as u8).collect();
    let mut bench = Bench::new(cipher);
    bench.prime(&plain);
    let mut buf = plain.clone();
    let kb = (per_round * record) as f64 / 1024.0;
    let best = |f: &mut dyn FnMut()| {
        (0..rounds.max(1))
            .map(|_| {
                let start = std::time::Instant::now();
                f();
                start.elapsed().as_nanos() as f64 / kb
            })
            .fold(f64::INFINITY, f64::min)
    };
    let seal_ns_per_kb = best(&mut || {
        for _ in 0..per_round {
            let _ = std::hint::black_box(bench.seal(std::hint::black_box(&mut buf)));
        }
    });
    buf.copy_from_slice(&plain);
    let mut state = false;
    let open_ns_per_kb = best(&mut || {
        for _ in 0..per_round {
            state = bench.open(std::hint::black_box(&mut buf), state);
        }
    });
    CipherRate {
        record,
        seal_ns_per_kb,
        open_ns_per_kb,
    }
}

impl CipherRate {
    /// The rate sealing alone allows, bits of plaintext per second.
    pub fn seal_bps(&self) -> f64 {
        8.0 * 1024.0 * 1e9 / self.seal_ns_per_kb.max(1e-9)
    }

    pub fn open_bps(&self) -> f64 {
        8.0 * 1024.0 * 1e9 / self.open_ns_per_kb.max(1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_open_of_the_cycle_authenticates_and_comes_back() {
        for cipher in Cipher::ALL {
            for len in [0usize, 1, 64, 1408, 16384 + 3] {
                let plain: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
                let mut bench = Bench::new(cipher);
                bench.prime(&plain);
                let mut buf = plain.clone();
                let mut state = false;
                for _ in 0..4 {
                    state = bench.open(&mut buf, state);
                }
                assert_eq!(buf, plain, "{cipher} at {len}");
                if len > 0 {
                    bench.open(&mut buf, false);
                    assert_ne!(buf, plain, "{cipher}: an open changes the bytes");
                }
            }
        }
    }

    #[test]
    fn a_wrong_state_fails_authentication() {
        let mut bench = Bench::new(Cipher::Aes128Gcm);
        let plain = vec![5u8; 100];
        bench.prime(&plain);
        let mut buf = plain.clone();
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bench.open(&mut buf, true)));
        assert!(result.is_err(), "the tag of the other text must not verify");
    }

    #[test]
    fn sealing_matches_the_published_vector() {
        // RFC 8439 §2.8.2's AEAD_CHACHA20_POLY1305 test vector, through the
        // same ring calls the timings use.
        let key: Vec<u8> = (0x80u8..=0x9f).collect();
        let nonce = [
            0x07, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
        ];
        let aad = [
            0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
        ];
        let mut text = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".to_vec();
        let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).unwrap());
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut text,
            )
            .unwrap();
        assert_eq!(
            &text[..8],
            &[0xd3, 0x1a, 0x8d, 0x34, 0x64, 0x8e, 0x60, 0xdb]
        );
        assert_eq!(
            tag.as_ref(),
            &[
                0x1a, 0xe1, 0x0b, 0x59, 0x4f, 0x09, 0xe2, 0x6a, 0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60,
                0x06, 0x91
            ]
        );
    }

    #[test]
    fn a_single_core_rate_is_timed_for_both_directions_and_serialises_by_name() {
        let rate = single_core_rate(Cipher::Chacha20Poly1305, 16384, 2);
        assert_eq!(rate.record, 16384);
        assert!(rate.seal_ns_per_kb > 0.0 && rate.seal_ns_per_kb.is_finite());
        assert!(rate.open_ns_per_kb > 0.0 && rate.open_ns_per_kb.is_finite());
        assert!(rate.seal_bps() > 0.0);
        let json = serde_json::to_string(&Cipher::Aes256Gcm).unwrap();
        assert_eq!(json, "\"aes-256-gcm\"");
        assert_eq!(
            serde_json::from_str::<Cipher>(&json).unwrap(),
            Cipher::Aes256Gcm
        );
        assert!(serde_json::from_str::<Cipher>("\"des\"").is_err());
    }

    #[test]
    fn cipher_names_parse_and_unknown_ones_are_refused() {
        for c in Cipher::ALL {
            assert_eq!(c.name().parse::<Cipher>(), Ok(c));
        }
        assert_eq!("AES_128_GCM".parse::<Cipher>(), Ok(Cipher::Aes128Gcm));
        let e = "rc4".parse::<Cipher>().unwrap_err();
        assert!(
            e.contains("unknown cipher \"rc4\"") && e.contains("chacha20-poly1305"),
            "{e}"
        );
    }
}
