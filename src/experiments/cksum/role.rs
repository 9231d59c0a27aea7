//! The checksum and copy timings an endpoint runs (source: 003, Van
//! Jacobson's per-KB costs): every checksum, fused and copy variant at one
//! size, on cache-hot and cache-cold buffers, beside the machine's own
//! limits measured in the same run.
//!
//! Timing: a batch repeats one operation until it has run at least
//! [`BATCH_TARGET`] (calibrated once per variant and size), and the figure
//! is the median of `batches` batches, with min and max. *Hot* reuses one
//! buffer, already in cache. *Cold* walks a pool of buffers much larger than
//! the last-level cache, a different buffer each operation, so every byte
//! comes from memory. Runs in an endpoint process, like every data path.

use crate::checksum::aead::{self, Cipher};
use crate::checksum::{self, copy, simd};
use crate::endpoint::pattern::AlignedBuf;
use crate::experiments::cksum::record::{CksumResult, CksumSpec, Kind, Row};
use crate::record::stats::Spread;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Least duration of one timed batch.
pub const BATCH_TARGET: Duration = Duration::from_millis(2);

/// The fastest possible read of every byte: 256-bit loads OR-ed together.
/// Written with AVX2 intrinsics where the CPU has them, so the limit does
/// not depend on the optimiser vectorising a loop (at the debug profile's
/// opt-level it would not, and the "limit" fell below the SIMD checksum).
pub fn read_sweep(data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present.
            return unsafe { read_sweep_avx2(data) };
        }
    }
    read_sweep_portable(data)
}

fn read_sweep_portable(data: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (i, a) in acc.iter_mut().enumerate() {
            *a |= u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        }
    }
    let tail = blocks
        .remainder()
        .iter()
        .fold(0u64, |a, &b| a | u64::from(b));
    acc[0] | acc[1] | acc[2] | acc[3] | tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn read_sweep_avx2(data: &[u8]) -> u64 {
    use std::arch::x86_64::*;
    let mut blocks = data.chunks_exact(128);
    let (mut a, mut b, mut c, mut d) = (
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
    );
    for block in &mut blocks {
        let p = block.as_ptr() as *const __m256i;
        // SAFETY: 128 readable bytes; unaligned loads.
        unsafe {
            a = _mm256_or_si256(a, _mm256_loadu_si256(p));
            b = _mm256_or_si256(b, _mm256_loadu_si256(p.add(1)));
            c = _mm256_or_si256(c, _mm256_loadu_si256(p.add(2)));
            d = _mm256_or_si256(d, _mm256_loadu_si256(p.add(3)));
        }
    }
    let all = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
    let mut lanes = [0u64; 4];
    // SAFETY: 32 writable bytes.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, all) };
    lanes[0] | lanes[1] | lanes[2] | lanes[3] | read_sweep_portable(blocks.remainder())
}

enum Op {
    Read(fn(&[u8]) -> u64),
    Checksum(checksum::ChecksumFn),
    Fused(checksum::FusedFn),
    Copy(copy::CopyFn),
    /// Seals the destination in place.
    Seal(Box<aead::Bench>),
    /// Opens the destination in place, once [`Buffers::prime`] has set
    /// every destination up for its cipher.
    Open(Box<aead::Bench>),
}

/// Buffers for one size: hot ones and cold pools.
/// Buffers are page-aligned, as kernel and network buffers are.
struct Buffers {
    size: usize,
    src: AlignedBuf,
    dst: AlignedBuf,
    pool_src: AlignedBuf,
    pool_dst: AlignedBuf,
    /// The cold slots in a shuffled order, so no stride prefetcher can
    /// predict the next one: each cold operation meets lines that are not
    /// in any cache.
    order: Vec<usize>,
    next: usize,
    /// Which text of an open's cycle each destination holds (the hot one
    /// last), since [`Buffers::prime`].
    opened: Vec<bool>,
}

impl Buffers {
    fn new(size: usize, cold_pool: usize) -> Buffers {
        let stride = size.next_multiple_of(4096) + 64;
        let slots = (cold_pool / stride).max(2);
        let fill = |n: usize| {
            let mut buf = AlignedBuf::zeroed(n);
            for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31) ^ (i >> 11) as u8;
            }
            lock_in_memory(buf.as_slice());
            buf
        };
        // A fixed permutation: the same walk every run.
        let order = crate::checksum::copy::shuffled(slots);
        Buffers {
            size,
            src: fill(size),
            dst: AlignedBuf::zeroed(size),
            pool_src: fill(slots * stride),
            pool_dst: fill(slots * stride),
            opened: vec![false; slots + 1],
            order,
            next: 0,
        }
    }

    fn stride(&self) -> usize {
        self.size.next_multiple_of(4096) + 64
    }

    /// Before an open is timed: every destination (the hot one, or each
    /// cold slot) holds the same plaintext, and `bench` knows its tags.
    fn prime(&mut self, bench: &mut aead::Bench, cold: bool) {
        let size = self.size;
        let plain = self.src.as_slice().to_vec();
        bench.prime(&plain);
        if cold {
            let stride = self.stride();
            for slot in self.pool_dst.as_mut_slice().chunks_mut(stride) {
                if slot.len() >= size {
                    slot[..size].copy_from_slice(&plain);
                }
            }
        } else {
            self.dst.as_mut_slice().copy_from_slice(&plain);
        }
        self.opened.fill(false);
    }

    /// Runs `op` once, on the hot buffers or on the next cold slot.
    fn run(&mut self, op: &Op, cold: bool) -> u64 {
        let (src, dst, slot) = if cold {
            let stride = self.stride();
            let slot = self.order[self.next % self.order.len()];
            let at = slot * stride;
            self.next += 1;
            (
                &self.pool_src.as_slice()[at..at + self.size],
                &mut self.pool_dst.as_mut_slice()[at..at + self.size],
                Some(slot),
            )
        } else {
            (self.src.as_slice(), self.dst.as_mut_slice(), None)
        };
        match op {
            Op::Seal(bench) => u64::from(bench.seal(black_box(dst)).as_ref()[0]),
            Op::Open(bench) => {
                // Only an open keeps a state, so no other variant pays for
                // looking it up (the hot one is the last).
                let hot = self.opened.len() - 1;
                let opened = &mut self.opened[slot.unwrap_or(hot)];
                *opened = bench.open(black_box(dst), *opened);
                u64::from(dst.first().copied().unwrap_or(0))
            }
            Op::Read(f) => f(black_box(src)),
            Op::Checksum(f) => u64::from(f(black_box(src))),
            Op::Fused(f) => u64::from(f(dst, black_box(src))),
            Op::Copy(f) => {
                f(dst, black_box(src));
                u64::from(dst[0])
            }
        }
    }

    /// Touches every page the next operations use, so none pays for a
    /// page the kernel reclaimed meanwhile (a machine reclaiming idle memory,
    /// as DAMON does here, otherwise charges the first variant timed after
    /// a pause with page faults: 13 µs for a 64-byte "cold" read).
    fn touch(&mut self, cold: bool) {
        let (src, dst) = if cold {
            (&self.pool_src, &mut self.pool_dst)
        } else {
            (&self.src, &mut self.dst)
        };
        let mut sink = 0u8;
        for page in src.as_slice().chunks(4096) {
            sink ^= page[0];
        }
        for page in dst.as_mut_slice().chunks_mut(4096) {
            page[0] = black_box(page[0]);
        }
        black_box(sink);
    }

    /// ns per operation over `batches` calibrated batches.
    fn time(&mut self, op: &mut Op, cold: bool, batches: u32) -> Spread {
        if let Op::Open(bench) = op {
            self.prime(bench, cold);
        }
        let op = &*op;
        self.touch(cold);
        // Warm up (and, hot, bring the buffer into cache), then calibrate.
        let mut sink = 0u64;
        for _ in 0..3 {
            sink ^= self.run(op, cold);
        }
        let start = Instant::now();
        sink ^= self.run(op, cold);
        let one = start.elapsed().max(Duration::from_nanos(20));
        let reps = (BATCH_TARGET.as_nanos() / one.as_nanos()).clamp(1, 10_000_000) as u32;
        let mut per_op = Vec::with_capacity(batches as usize);
        for _ in 0..batches {
            let start = Instant::now();
            for _ in 0..reps {
                sink ^= self.run(op, cold);
            }
            per_op.push(start.elapsed().as_nanos() as f64 / f64::from(reps));
        }
        black_box(sink);
        Spread::of(&per_op).expect("at least one batch")
    }
}

/// Keeps `buf`'s pages resident where the process may (`mlock`: root, or
/// within RLIMIT_MEMLOCK; otherwise [`Buffers::touch`] alone brings them
/// back before each variant). Unlocked when the process exits.
fn lock_in_memory(buf: &[u8]) {
    // SAFETY: the range is a live allocation; mlock only pins its pages.
    let _ = unsafe { libc::mlock(buf.as_ptr().cast(), buf.len()) };
}

/// Every variant, in table order, with its kind: the AEADs of `ciphers`
/// last, each sealing then opening.
fn ops(ciphers: &[Cipher]) -> Vec<(String, Kind, Op)> {
    let mut ops: Vec<(String, Kind, Op)> =
        vec![("read-limit".into(), Kind::ReadLimit, Op::Read(read_sweep))];
    for (name, f) in checksum::VARIANTS {
        ops.push((name.into(), Kind::Checksum, Op::Checksum(f)));
    }
    for (name, f) in checksum::FUSED {
        ops.push((name.into(), Kind::Fused, Op::Fused(f)));
    }
    for (name, f) in copy::VARIANTS {
        ops.push((name.into(), Kind::Copy, Op::Copy(f)));
    }
    for &cipher in ciphers {
        let bench = || Box::new(aead::Bench::new(cipher));
        ops.push((format!("seal-{cipher}"), Kind::Seal, Op::Seal(bench())));
        ops.push((format!("open-{cipher}"), Kind::Open, Op::Open(bench())));
    }
    ops
}

/// The ciphers a request names; an unknown name is refused.
pub fn ciphers(spec: &CksumSpec) -> Result<Vec<Cipher>, String> {
    spec.ciphers.iter().map(|c| c.parse()).collect()
}

/// Measures every variant at `spec.size`, hot and cold.
pub fn measure(spec: &CksumSpec) -> CksumResult {
    let ciphers = ciphers(spec).unwrap_or_default();
    let mut buffers = Buffers::new(spec.size, spec.cold_pool);
    let kb = spec.size as f64 / 1024.0;
    let mut rows = Vec::new();
    for cold in [false, true] {
        let mut timed: Vec<(String, Kind, Spread)> = Vec::new();
        for (name, kind, mut op) in ops(&ciphers) {
            let spread = buffers.time(&mut op, cold, spec.batches);
            timed.push((name, kind, spread));
        }
        // A limit is the best of the kernels that bound it, measured here
        // at the same size and temperature: the read sweep for checksums;
        // the fastest of memcpy, rep movsb and the non-temporal copy for
        // copies and fused copies.
        let limit_of = |kind: Kind| {
            timed
                .iter()
                .filter(|t| crate::experiments::cksum::analysis::bounds(kind, &t.0, t.1))
                .map(|t| t.2.median)
                .min_by(f64::total_cmp)
                .unwrap_or(1.0)
        };
        for (name, kind, ns) in &timed {
            rows.push(Row {
                variant: name.clone(),
                kind: *kind,
                cold,
                ns_per_kb: ns.scaled(1.0 / kb),
                gb_s: spec.size as f64 / ns.median,
                fraction_of_limit: limit_of(*kind) / ns.median,
            });
        }
    }
    CksumResult {
        size: spec.size,
        simd_path: simd::path().into(),
        rows,
        openssl: spec
            .openssl
            .then(|| super::baseline::openssl_speed(spec.size, &ciphers)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_every_variant_hot_and_cold() {
        let r = measure(&CksumSpec {
            size: 4096,
            cold_pool: 1 << 20,
            batches: 3,
            ciphers: Cipher::ALL.map(|c| c.name().to_string()).to_vec(),
            openssl: false,
        });
        assert_eq!(
            r.rows.len(),
            2 * (1 + 3 + 3 + copy::VARIANTS.len() + 2 * Cipher::ALL.len())
        );
        assert!(r.openssl.is_none());
        for row in &r.rows {
            assert!(row.ns_per_kb.median > 0.0 && row.gb_s > 0.0, "{row:?}");
            assert!(row.fraction_of_limit > 0.0);
        }
        // A limit is the fastest of the kernels that bound it, so among
        // those kernels (at one temperature) the fastest sits at exactly
        // 1 and none above it. Which kernel that is depends on the host: a
        // vectorised checksum may outrun the read sweep.
        for cold in [false, true] {
            for kind in [Kind::ReadLimit, Kind::Copy] {
                let bounding: Vec<f64> = r
                    .rows
                    .iter()
                    .filter(|row| {
                        row.cold == cold
                            && crate::experiments::cksum::analysis::bounds(
                                kind,
                                &row.variant,
                                row.kind,
                            )
                    })
                    .map(|row| row.fraction_of_limit)
                    .collect();
                let best = bounding.iter().copied().fold(0.0, f64::max);
                assert!(
                    (best - 1.0).abs() < 1e-9,
                    "{kind:?} cold={cold}: {bounding:?}"
                );
            }
        }
    }

    #[test]
    fn read_sweep_touches_every_byte() {
        // Every position of a long buffer, through both paths.
        for len in [0usize, 1, 31, 127, 128, 129, 1000] {
            for at in 0..len {
                let mut data = vec![0u8; len];
                data[at] = 0x40;
                assert_ne!(read_sweep(&data), 0, "len {len} at {at}");
                assert_ne!(read_sweep_portable(&data), 0, "len {len} at {at}");
            }
            assert_eq!(read_sweep(&vec![0u8; len]), 0);
        }
        let mut data = vec![0u8; 1000];
        assert_eq!(read_sweep(&data), 0);
        data[999] = 1;
        assert_ne!(read_sweep(&data), 0);
        data[999] = 0;
        data[500] = 0x80;
        assert_ne!(read_sweep(&data), 0);
    }
}

/// The cksum experiment's endpoint role: one request, one size's timings.
#[derive(Default)]
pub struct CksumRole;

impl crate::endpoint::role::Protocol for CksumRole {
    const ROLE: &'static str = "cksum";
    type Event = ();
}

/// One size's timings.
impl crate::endpoint::role::Request for CksumSpec {
    type Role = CksumRole;
    type Reply = CksumResult;
    const NAME: &'static str = "Measure";
}

impl crate::endpoint::role::Role for CksumRole {
    const ROUTES: &'static [crate::endpoint::role::Route<Self>] =
        &[crate::endpoint::role::route::<CksumSpec>()];
}

impl crate::endpoint::role::Handler<CksumSpec> for CksumRole {
    fn handle(
        &mut self,
        spec: CksumSpec,
        _: &mut crate::endpoint::role::Link<'_>,
    ) -> Result<CksumResult, crate::endpoint::role::RoleError> {
        Ok(measure(&spec))
    }

    fn check(
        spec: &mut CksumSpec,
        run: &str,
        policy: &crate::endpoint::agent::policy::Policy,
    ) -> Result<(), String> {
        policy.part_of(
            run,
            <Self as crate::endpoint::role::Protocol>::ROLE,
            "a checksum measurement",
        )?;
        // The command line's bounds, on this host's memory.
        super::bounds::check(spec)?;
        ciphers(spec).map(|_| ())
    }
}
