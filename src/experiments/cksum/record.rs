//! The checksum and copy timings as records carry them. Data only;
//! `role` times the variants.

use crate::record::stats::Spread;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CksumSpec {
    pub size: usize,
    /// Bytes of the pool the cold runs walk (per buffer side).
    pub cold_pool: usize,
    pub batches: u32,
    /// The AEADs to time (names of [`crate::checksum::aead::Cipher`]);
    /// records before #65 timed none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ciphers: Vec<String>,
    /// Also run `openssl speed -evp` for the same ciphers and size, on the
    /// same host, as the baseline the AEAD timings are judged against.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub openssl: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Checksum,
    Fused,
    Copy,
    /// The read limit: the cheapest possible pass over the bytes.
    ReadLimit,
    /// An AEAD sealing in place (a TLS record's or a QUIC packet's).
    Seal,
    /// An AEAD opening in place, its tag verified.
    Open,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub variant: String,
    pub kind: Kind,
    pub cold: bool,
    pub ns_per_kb: Spread,
    /// GB/s (10⁹ bytes per second) at the median.
    pub gb_s: f64,
    /// Median time over the matching limit's median time: 1.0 = at the limit
    /// (checksums against the read limit; copies and fused copies against
    /// the fastest of memcpy, rep movsb and the non-temporal copy; records
    /// before 2026-11-24: against memcpy alone).
    pub fraction_of_limit: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CksumResult {
    pub size: usize,
    pub simd_path: String,
    pub rows: Vec<Row>,
    /// `openssl speed -evp` at the same size, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openssl: Option<Baseline>,
}

/// `openssl speed` on the measuring host: its figures, or why there are
/// none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `openssl version`'s line.
    pub version: String,
    /// The command for one cipher, as run.
    pub command: String,
    pub rows: Vec<BaselineRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The CPU features that choose either library's code path (aes,
    /// pclmulqdq, avx2, vaes, vpclmulqdq, avx512f, avx512ifma), as the
    /// measuring host has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<String>,
}

/// One cipher and direction, as `openssl speed -evp -aead` timed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRow {
    pub cipher: String,
    /// Seal (encrypt) or Open (`-decrypt`).
    pub kind: Kind,
    pub ns_per_kb: f64,
    pub gb_s: f64,
}

/// A cksum record's own part: the size and temperature asked for, and every variant's timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "cksum")]
pub struct CksumData {
    pub params: CksumSpec,
    pub result: Option<Box<CksumResult>>,
}

/// A cksum record.
pub type Record = crate::record::Record<CksumData>;

/// Nothing of a cksum cell is read by the profile report beyond its profile.
impl crate::record::profile::Profiled for CksumData {}
