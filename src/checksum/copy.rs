//! Copy variants, from the 1980s routine to the platform's best.
//!
//! - [`bytes`]: one byte per load and store (the stores are volatile, so the
//!   compiler cannot turn the loop into a `memcpy` call, which it otherwise
//!   does with any simple copy loop);
//! - [`halfwords`]: one 16-bit word at a time, likewise;
//! - [`words`]: 64-bit words, unrolled four times (the compiler may widen
//!   these further: that is what an unrolled copy compiles to today);
//! - [`platform`]: `copy_from_slice`, i.e. the C library's `memcpy`;
//! - [`rep_movsb`]: the x86 string copy, which CPUs with ERMSB/FSRM run
//!   as microcode at cache-line width (the kernel's own `copy_user`), and
//!   which `memcpy` does not always pick;
//! - [`copy_nontemporal`]: streaming stores for buffers far
//!   larger than the cache.

/// A copy function by name.
pub type CopyFn = fn(&mut [u8], &[u8]);

/// Every copy variant, by name.
pub const VARIANTS: [(&str, CopyFn); 6] = [
    ("copy-byte", bytes),
    ("copy-16", halfwords),
    ("copy-64-unrolled", words),
    ("memcpy", platform),
    ("copy-rep-movsb", rep_movsb),
    ("copy-nontemporal", copy_nontemporal),
];

pub fn bytes(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy needs equal lengths");
    for (d, s) in dst.iter_mut().zip(src) {
        // SAFETY: d is a valid, exclusive reference.
        unsafe { std::ptr::write_volatile(d, *s) };
    }
}

pub fn halfwords(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy needs equal lengths");
    let mut d = dst.chunks_exact_mut(2);
    let mut s = src.chunks_exact(2);
    for (dw, sw) in (&mut d).zip(&mut s) {
        let v = u16::from_ne_bytes([sw[0], sw[1]]);
        // SAFETY: dw holds two writable bytes; unaligned volatile store via a byte pointer pair.
        unsafe { std::ptr::write_volatile(dw.as_mut_ptr().cast::<[u8; 2]>(), v.to_ne_bytes()) };
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

pub fn words(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy needs equal lengths");
    let mut d = dst.chunks_exact_mut(32);
    let mut s = src.chunks_exact(32);
    for (db, sb) in (&mut d).zip(&mut s) {
        for i in 0..4 {
            let w = u64::from_ne_bytes(sb[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            db[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

pub fn platform(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// `rep movsb` on x86_64; `memcpy` elsewhere.
pub fn rep_movsb(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy needs equal lengths");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdi/rsi point at `len` writable/readable bytes of two
    // distinct slices; rcx counts down to 0; the direction flag is clear
    // (the ABI guarantees it at function boundaries).
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rcx") src.len() => _,
            inout("rdi") dst.as_mut_ptr() => _,
            inout("rsi") src.as_ptr() => _,
            options(nostack, preserves_flags)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// `0..n` in a fixed shuffled order (xorshift, Fisher-Yates): the same
/// walk every run, which no stride prefetcher can predict.
pub fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

/// What one copy costs per byte on this host: `size`-byte copies of hot
/// buffers (in cache) and of cold ones (slots of a pool far larger than
/// the cache, taken in a shuffled order so no prefetcher predicts them).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CopyCost {
    /// The copy timed (e.g. `copy-rep-movsb`, the kernel's own on x86).
    pub copy: String,
    pub size: u64,
    pub hot_ns_per_byte: f64,
    pub cold_ns_per_byte: f64,
}

/// Times `copy` on `size`-byte buffers, hot and cold (a pool of `pool`
/// bytes each way), the fastest of a few batches of about 5 ms each:
/// the copy's cost with the least interference.
pub fn copy_cost(name: &str, copy: CopyFn, size: usize, pool: usize) -> CopyCost {
    use std::hint::black_box;
    use std::time::Instant;
    let size = size.max(64);
    let slots = (pool / size).max(2);
    let src = vec![0x5Au8; slots * size];
    let mut dst = vec![0xA5u8; slots * size];
    let order = shuffled(slots);
    let mut fastest = |cold: bool| {
        let mut next = 0;
        let mut once = |dst: &mut [u8]| {
            let slot = if cold { order[next % slots] } else { 0 };
            next += 1;
            let at = slot * size;
            copy(&mut dst[at..at + size], black_box(&src[at..at + size]));
        };
        // Calibrate a batch to about 5 ms.
        let start = Instant::now();
        for _ in 0..8 {
            once(&mut dst);
        }
        let each = start.elapsed().as_secs_f64() / 8.0;
        let reps = ((5e-3 / each.max(1e-9)) as usize).clamp(8, 10_000_000);
        (0..5)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..reps {
                    once(&mut dst);
                }
                start.elapsed().as_secs_f64() * 1e9 / (reps * size) as f64
            })
            .fold(f64::INFINITY, f64::min)
    };
    let hot_ns_per_byte = fastest(false);
    let cold_ns_per_byte = fastest(true);
    black_box(&dst);
    CopyCost {
        copy: name.into(),
        size: size as u64,
        hot_ns_per_byte,
        cold_ns_per_byte,
    }
}

/// Copies with non-temporal stores (bypassing the cache) where the CPU has
/// them, else with `copy_from_slice`. Worth it only for buffers much larger
/// than the cache, where the copy's destination would only evict useful data.
pub fn copy_nontemporal(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy needs equal lengths");
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; lengths are equal.
            unsafe { copy_stream_avx2(dst, src) };
            return;
        }
    }
    dst.copy_from_slice(src);
}

/// The streaming copy: 32-byte non-temporal stores to an aligned
/// destination, the unaligned head and tail copied plainly.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_stream_avx2(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{_mm_sfence, _mm256_loadu_si256, _mm256_stream_si256};
    // Head bytes until the destination is 32-byte aligned.
    let head = dst.as_ptr().align_offset(32).min(dst.len());
    dst[..head].copy_from_slice(&src[..head]);
    let (dst, src) = (&mut dst[head..], &src[head..]);
    let mut d = dst.chunks_exact_mut(32);
    let mut s = src.chunks_exact(32);
    for (db, sb) in (&mut d).zip(&mut s) {
        // SAFETY: db is 32-byte aligned (we aligned the start and step by 32).
        unsafe {
            let v = _mm256_loadu_si256(sb.as_ptr().cast());
            _mm256_stream_si256(db.as_mut_ptr().cast(), v);
        }
    }
    d.into_remainder().copy_from_slice(s.remainder());
    // Orders the streaming stores before anything that follows.
    _mm_sfence();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 13) as u8).collect();
        for (name, copy) in VARIANTS {
            for align in 0..8 {
                for len in 0..=260 {
                    let mut dst = vec![0xEEu8; 300];
                    copy(&mut dst[align..align + len], &src[..len]);
                    assert_eq!(
                        &dst[align..align + len],
                        &src[..len],
                        "{name} {len} {align}"
                    );
                    assert!(
                        dst[align + len..].iter().all(|&b| b == 0xEE),
                        "{name} wrote past the end"
                    );
                }
            }
        }
    }

    #[test]
    fn a_cold_copy_costs_at_least_a_hot_one() {
        let cost = copy_cost("memcpy", platform, 64 << 10, 64 << 20);
        assert!(cost.hot_ns_per_byte > 0.0, "{cost:?}");
        assert!(
            cost.cold_ns_per_byte >= 0.8 * cost.hot_ns_per_byte,
            "{cost:?}"
        );
        // No copy of a byte takes a microsecond, or no time at all.
        assert!(cost.cold_ns_per_byte < 1000.0, "{cost:?}");
    }

    #[test]
    fn nontemporal_copy_copies_at_any_alignment() {
        let src: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        for offset in 0..33 {
            let mut dst = vec![0u8; 5100];
            copy_nontemporal(&mut dst[offset..offset + 4000], &src[..4000]);
            assert_eq!(&dst[offset..offset + 4000], &src[..4000]);
        }
    }
}
