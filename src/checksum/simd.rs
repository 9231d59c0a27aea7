//! SIMD sums for the Internet checksum.
//!
//! The data is taken as 32-bit native words, each zero-extended into a 64-bit
//! lane and added there (`unpack{lo,hi}_epi32` with zero, `add_epi64`): a lane
//! cannot overflow before 2^32 additions, i.e. 16 GiB, far beyond any buffer
//! netlab sums. The lanes are then added with end-around carry and the
//! 64-bit total folded as in [`super::wide`]. AVX2 is used when the CPU has
//! it, else SSE2 (always present on x86_64); other architectures use the
//! 64-bit scalar sum.

use super::scalar::sum_wide_native;

/// Below this many bytes the scalar 64-bit sum wins: the SIMD set-up and
/// the reduction of its lanes cost more than they save (measured: 64-byte
/// buffers took 25 ns with AVX2 and 10 ns scalar).
pub const SIMD_MIN: usize = 256;

/// The native-order wide sum of `data` with the best SIMD available.
pub fn sum_native(data: &[u8]) -> u64 {
    if data.len() < SIMD_MIN {
        return sum_wide_native(data);
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present.
            return unsafe { x86::sum_avx2(data) };
        }
        // SAFETY: SSE2 is part of x86_64.
        unsafe { x86::sum_sse2(data) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    sum_wide_native(data)
}

/// Copies `src` to `dst` and returns the native-order wide sum.
pub fn fused_sum_native(dst: &mut [u8], src: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if src.len() >= SIMD_MIN && std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; lengths are checked by the caller.
            return unsafe { x86::fused_avx2(dst, src) };
        }
    }
    super::copy::words(dst, src);
    sum_wide_native(src)
}

/// Which SIMD path [`sum_native`] takes on this CPU.
pub fn path() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
        "sse2"
    }
    #[cfg(not(target_arch = "x86_64"))]
    "portable"
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::checksum::scalar::{add_carry, sum_wide_native};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub unsafe fn sum_avx2(data: &[u8]) -> u64 {
        let zero = _mm256_setzero_si256();
        let (mut a0, mut a1, mut a2, mut a3) = (zero, zero, zero, zero);
        let mut blocks = data.chunks_exact(64);
        for b in &mut blocks {
            // SAFETY: each block holds 64 readable bytes; loadu has no alignment need.
            let (v0, v1) = unsafe {
                (
                    _mm256_loadu_si256(b.as_ptr().cast()),
                    _mm256_loadu_si256(b.as_ptr().add(32).cast()),
                )
            };
            a0 = _mm256_add_epi64(a0, _mm256_unpacklo_epi32(v0, zero));
            a1 = _mm256_add_epi64(a1, _mm256_unpackhi_epi32(v0, zero));
            a2 = _mm256_add_epi64(a2, _mm256_unpacklo_epi32(v1, zero));
            a3 = _mm256_add_epi64(a3, _mm256_unpackhi_epi32(v1, zero));
        }
        let mut lanes = [0u64; 16];
        // SAFETY: lanes has room for four 32-byte stores.
        unsafe {
            _mm256_storeu_si256(lanes.as_mut_ptr().cast(), a0);
            _mm256_storeu_si256(lanes.as_mut_ptr().add(4).cast(), a1);
            _mm256_storeu_si256(lanes.as_mut_ptr().add(8).cast(), a2);
            _mm256_storeu_si256(lanes.as_mut_ptr().add(12).cast(), a3);
        }
        let sum = lanes.iter().fold(0u64, |s, &l| add_carry(s, l));
        add_carry(sum, sum_wide_native(blocks.remainder()))
    }

    #[target_feature(enable = "sse2")]
    pub unsafe fn sum_sse2(data: &[u8]) -> u64 {
        let zero = _mm_setzero_si128();
        let (mut a0, mut a1) = (zero, zero);
        let mut blocks = data.chunks_exact(16);
        for b in &mut blocks {
            // SAFETY: each block holds 16 readable bytes.
            let v = unsafe { _mm_loadu_si128(b.as_ptr().cast()) };
            a0 = _mm_add_epi64(a0, _mm_unpacklo_epi32(v, zero));
            a1 = _mm_add_epi64(a1, _mm_unpackhi_epi32(v, zero));
        }
        let mut lanes = [0u64; 4];
        // SAFETY: lanes has room for two 16-byte stores.
        unsafe {
            _mm_storeu_si128(lanes.as_mut_ptr().cast(), a0);
            _mm_storeu_si128(lanes.as_mut_ptr().add(2).cast(), a1);
        }
        let sum = lanes.iter().fold(0u64, |s, &l| add_carry(s, l));
        add_carry(sum, sum_wide_native(blocks.remainder()))
    }

    /// Copies and sums 64 bytes per iteration. The 16-bit words of each
    /// 32-bit lane are split with an AND and a shift (no shuffles, which
    /// compete with nothing else here) and added into 32-bit lanes, flushed
    /// to 64-bit every 64 KiB before they could overflow. Destinations far
    /// larger than the L2 cache (`stream`) get non-temporal stores, which
    /// skip reading the destination lines in first.
    #[target_feature(enable = "avx2")]
    pub unsafe fn fused_avx2(dst: &mut [u8], src: &[u8]) -> u64 {
        const FLUSH: usize = 64 * 1024;
        let stream = src.len() >= 8 << 20 && dst.as_ptr().align_offset(32) == 0;
        let mask = _mm256_set1_epi32(0xffff);
        let zero = _mm256_setzero_si256();
        let mut total = 0u64;
        let blocks = src.len() / 64;
        let mut done = 0usize;
        while done < blocks {
            let run = (blocks - done).min(FLUSH / 64);
            let (mut a0, mut a1, mut a2, mut a3) = (zero, zero, zero, zero);
            for i in done..done + run {
                // SAFETY: i < blocks, so 64 bytes at i * 64 are in both slices.
                unsafe {
                    let s = src.as_ptr().add(i * 64);
                    let d = dst.as_mut_ptr().add(i * 64);
                    let v0 = _mm256_loadu_si256(s.cast());
                    let v1 = _mm256_loadu_si256(s.add(32).cast());
                    if stream {
                        _mm256_stream_si256(d.cast(), v0);
                        _mm256_stream_si256(d.add(32).cast(), v1);
                    } else {
                        _mm256_storeu_si256(d.cast(), v0);
                        _mm256_storeu_si256(d.add(32).cast(), v1);
                    }
                    a0 = _mm256_add_epi32(a0, _mm256_and_si256(v0, mask));
                    a1 = _mm256_add_epi32(a1, _mm256_srli_epi32(v0, 16));
                    a2 = _mm256_add_epi32(a2, _mm256_and_si256(v1, mask));
                    a3 = _mm256_add_epi32(a3, _mm256_srli_epi32(v1, 16));
                }
            }
            // Each 32-bit lane took at most 1024 16-bit values: no overflow.
            let sum = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
            let mut lanes = [0u32; 8];
            // SAFETY: lanes has room for one 32-byte store.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), sum) };
            total += lanes.iter().map(|&l| u64::from(l)).sum::<u64>();
            done += run;
        }
        if stream {
            _mm_sfence();
        }
        let tail = blocks * 64;
        dst[tail..].copy_from_slice(&src[tail..]);
        add_carry(total, sum_wide_native(&src[tail..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_agrees_with_the_scalar_sum() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [0, 1, 15, 16, 17, 63, 64, 65, 1000, 9999] {
            let want = super::super::fold(sum_wide_native(&data[..len]));
            assert_eq!(
                super::super::fold(sum_native(&data[..len])),
                want,
                "len {len}"
            );
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: SSE2 is part of x86_64.
                let sse = unsafe { x86::sum_sse2(&data[..len]) };
                assert_eq!(super::super::fold(sse), want, "sse2 len {len}");
            }
        }
    }

    #[test]
    fn fused_streaming_path_for_large_aligned_buffers() {
        let len = (9 << 20) + 77;
        let src = crate::endpoint::pattern::Pattern::new(len);
        let src = src.slice(3, len);
        let mut dst = crate::endpoint::pattern::AlignedBuf::zeroed(len);
        let sum = fused_sum_native(dst.as_mut_slice(), src);
        assert_eq!(dst.as_slice(), src);
        assert_eq!(
            super::super::fold(sum),
            super::super::fold(sum_wide_native(src))
        );
    }
}
