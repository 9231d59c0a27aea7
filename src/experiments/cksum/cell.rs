//! The checksum and copy experiment (source: 003, Van Jacobson's per-KB
//! costs): its plan (sizes checked against the memory they need), and each
//! size measured in an endpoint process (`role` times the
//! variants there).

use crate::checksum::aead::Cipher;
use crate::controller::Interrupted;
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::{ControlError, Wait};
use crate::controller::resume::CellKey;
use crate::controller::runner::{MeasureCell, Measured};
use crate::experiments::cksum::record::CksumData;
use crate::experiments::cksum::record::{CksumResult, CksumSpec};
use crate::units::{format_size, parse_size};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    #[error("--sizes: {0}")]
    Size(String),
    #[error(
        "size {size} needs about {needed} of memory (buffers and cold pools) but only {available} is available"
    )]
    Memory {
        size: String,
        needed: String,
        available: String,
    },
}

/// The sizes to time and how.
#[derive(Debug, Clone, PartialEq)]
pub struct CksumPlan {
    pub sizes: Vec<u64>,
    /// Timed batches per variant (the median is reported, with min and max).
    pub batches: u32,
    /// Bytes the cold runs walk through; should exceed the last-level cache.
    pub cold_pool: u64,
    /// The AEADs timed beside the checksum and the copy.
    pub ciphers: Vec<Cipher>,
    /// `openssl speed -evp` for the same ciphers and sizes, beside.
    pub openssl: bool,
}

impl Default for CksumPlan {
    /// `netlab cksum`'s defaults: from a minimum-size packet to 64 MB, 9
    /// batches, a 512 MB cold pool.
    fn default() -> Self {
        CksumPlan {
            sizes: vec![64, 1408, 4096, 65536, 1 << 20, 64 << 20],
            batches: 9,
            cold_pool: 512 << 20,
            ciphers: Cipher::ALL.to_vec(),
            openssl: false,
        }
    }
}

impl CksumPlan {
    /// The lab's smoke profile: sizes up to 16 MB, 3 batches.
    pub fn smoke() -> Self {
        CksumPlan {
            sizes: vec![64, 1408, 65536, 16 << 20],
            batches: 3,
            cold_pool: 64 << 20,
            ciphers: Cipher::ALL.to_vec(),
            openssl: false,
        }
    }

    /// The lab's quick profile.
    pub fn quick() -> Self {
        CksumPlan {
            sizes: vec![64, 1408, 65536, 1 << 20, 64 << 20],
            batches: 5,
            cold_pool: 256 << 20,
            ciphers: Cipher::ALL.to_vec(),
            openssl: false,
        }
    }

    /// The lab's full profile.
    pub fn full() -> Self {
        CksumPlan {
            batches: 15,
            openssl: true,
            ..CksumPlan::default()
        }
    }

    /// A plan of the sizes in a list like `64,1408,1M`, every cipher.
    pub fn with_sizes(text: &str, batches: u32, cold_pool: u64) -> Result<Self, PlanError> {
        let sizes = text
            .split(',')
            .map(|s| parse_size(s.trim()).map_err(|e| PlanError::Size(e.to_string())))
            .collect::<Result<Vec<u64>, PlanError>>()?;
        Ok(CksumPlan {
            sizes,
            batches,
            cold_pool,
            ciphers: Cipher::ALL.to_vec(),
            openssl: false,
        })
    }

    /// The cells, once the memory each needs is known to be available.
    pub fn specs(&self) -> Result<Vec<CksumSpec>, PlanError> {
        let available = super::bounds::mem_available().unwrap_or(u64::MAX);
        for &size in &self.sizes {
            let needed = super::bounds::memory_needed(size, self.cold_pool);
            if needed > available / 2 {
                return Err(PlanError::Memory {
                    size: format_size(size),
                    needed: format_size(needed),
                    available: format_size(available),
                });
            }
        }
        Ok(self
            .sizes
            .iter()
            .map(|&size| CksumSpec {
                size: size as usize,
                cold_pool: self.cold_pool as usize,
                batches: self.batches,
                ciphers: self.ciphers.iter().map(|c| c.name().to_string()).collect(),
                openssl: self.openssl,
            })
            .collect())
    }
}

/// Times each size's variants in an endpoint process of its own, on this
/// host or `on` an agent's.
#[derive(Debug, Clone, Default)]
pub struct CksumMeasure {
    pub on: Option<String>,
}

impl MeasureCell for CksumMeasure {
    type Cell = CksumSpec;
    type Data = CksumData;

    fn label(&self, spec: &CksumSpec) -> String {
        format!("cksum {}", format_size(spec.size as u64))
    }

    fn key(&self, spec: &CksumSpec) -> CellKey {
        // The agent it runs on is part of the cell.
        CellKey::of("cksum", &(spec, &self.on))
    }

    fn measure(&mut self, spec: &CksumSpec) -> Result<Measured<CksumData>, Interrupted> {
        let outcome = (|| -> Result<CksumResult, ControlError> {
            let launcher = match &self.on {
                Some(agent) => Launcher::remote("local", agent)?,
                None => Launcher::loopback(),
            };
            let mut endpoint = launcher.spawn("cksum", End::To)?;
            let result = endpoint.call(spec.clone(), Wait::until_done("measuring"))?;
            endpoint.finish();
            Ok(result)
        })();
        let placement = if self.on.is_some() { "remote" } else { "local" };
        crate::controller::measured(placement, outcome, |result| CksumData {
            params: spec.clone(),
            result,
        })
    }
}
