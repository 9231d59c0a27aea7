//! The Internet checksum (RFC 1071) and the copies it is paid for beside.
//!
//! The checksum is the 16-bit one's complement of the one's complement sum
//! of the data taken as 16-bit big-endian words (an odd last byte is padded
//! with zero). RFC 1071 §2 gives the properties every variant here uses:
//! the sum is commutative and associative, so words can be added in any
//! order and in wider units (32 or 64 bits) with the carries folded back in
//! at the end (§2(C), "parallel summation"); and it is byte-order
//! independent (§2(B)), so a little-endian machine may sum native words and
//! swap the two bytes of the result.
//!
//! Variants, each returning the checksum (the complemented sum):
//! - [`naive16`]: one 16-bit word at a time, as the 1980s routine did;
//! - [`wide`]: 64-bit words, unrolled four times, carries folded at the end;
//! - [`simd`]: AVX2 or SSE2 chosen at run time, [`wide`] elsewhere;
//! - fused copy-and-checksum for each width ([`fused_naive16`],
//!   [`fused_wide`], [`fused_simd`]): Van Jacobson's point that the data can
//!   be checksummed while it is copied, for little more than the copy.
//!
//! [`update16`] is RFC 1624's incremental update for one changed 16-bit field.
//! Copy variants live in [`copy`], and the AEADs of TLS and QUIC, the
//! per-byte cost of today's transports, in [`aead`].

pub mod aead;
pub mod copy;
pub mod scalar;
pub mod simd;

pub use scalar::{
    add_carry, fold, from_native, fused_naive16, fused_wide, naive16, sum_naive16, sum_wide_native,
    update16, wide,
};

/// RFC 1071 checksum with the widest SIMD this CPU has.
pub fn simd(data: &[u8]) -> u16 {
    from_native(simd::sum_native(data))
}

/// Copies and checksums with SIMD.
pub fn fused_simd(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "fused copy needs equal lengths");
    from_native(simd::fused_sum_native(dst, src))
}

/// A checksum function by name, for the experiment and the benches.
pub type ChecksumFn = fn(&[u8]) -> u16;
/// A fused copy-and-checksum function.
pub type FusedFn = fn(&mut [u8], &[u8]) -> u16;

/// Every checksum variant, by name.
pub const VARIANTS: [(&str, ChecksumFn); 3] =
    [("naive16", naive16), ("wide", wide), ("simd", simd)];
/// Every fused variant, by name.
pub const FUSED: [(&str, FusedFn); 3] = [
    ("fused-naive16", fused_naive16),
    ("fused-wide", fused_wide),
    ("fused-simd", fused_simd),
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2, checksum 220d.
    const RFC1071_EXAMPLE: [u8; 8] = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];

    #[test]
    fn rfc1071_worked_example() {
        assert_eq!(fold(sum_naive16(&RFC1071_EXAMPLE)), 0xddf2);
        for (name, f) in VARIANTS {
            assert_eq!(f(&RFC1071_EXAMPLE), 0x220d, "{name}");
        }
        for (name, f) in FUSED {
            let mut dst = [0u8; 8];
            assert_eq!(f(&mut dst, &RFC1071_EXAMPLE), 0x220d, "{name}");
            assert_eq!(dst, RFC1071_EXAMPLE, "{name}");
        }
    }

    #[test]
    fn data_with_its_checksum_sums_to_zero() {
        // An IPv4 header (RFC 791) with its checksum field filled: verifies to 0.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        for (name, f) in VARIANTS {
            assert_eq!(f(&header), 0, "{name}");
        }
    }

    #[test]
    fn every_length_and_alignment_agree() {
        let pool: Vec<u8> = (0..4096 + 8)
            .map(|i| (i * 7 + 13) as u8 ^ (i >> 5) as u8)
            .collect();
        let mut dst = vec![0u8; 4096 + 8];
        for align in 0..8 {
            for len in 0..=4096 {
                let data = &pool[align..align + len];
                let want = naive16(data);
                for (name, f) in VARIANTS {
                    assert_eq!(f(data), want, "{name} len {len} align {align}");
                }
                for (name, f) in FUSED {
                    let out = &mut dst[align..align + len];
                    assert_eq!(f(out, data), want, "{name} len {len} align {align}");
                    assert_eq!(&*out, data, "{name} copy len {len} align {align}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn variants_agree_on_random_data(data in proptest::collection::vec(any::<u8>(), 0..5000), start in 0usize..8) {
            let data = &data[start.min(data.len())..];
            let want = naive16(data);
            prop_assert_eq!(wide(data), want);
            prop_assert_eq!(simd(data), want);
        }

        #[test]
        fn incremental_update_matches_recomputing(
            mut data in proptest::collection::vec(any::<u8>(), 2..512),
            field in 0usize..255,
            value in any::<u16>(),
        ) {
            let at = (field * 2) % (data.len() & !1);
            let before = wide(&data);
            let old = u16::from_be_bytes([data[at], data[at + 1]]);
            data[at..at + 2].copy_from_slice(&value.to_be_bytes());
            let after = wide(&data);
            let updated = update16(before, old, value);
            // One's complement has two zeros; RFC 1624 §3 notes the update may
            // produce 0xffff where recomputation gives 0 (or vice versa).
            prop_assert!(updated == after || (updated ^ after == 0xffff && (updated == 0 || after == 0)),
                "updated {updated:04x} recomputed {after:04x}");
        }
    }
}

#[cfg(test)]
mod crate_agreement {
    /// The `internet-checksum` crate computes the same checksum.
    #[test]
    fn agrees_with_the_internet_checksum_crate() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 97 % 256) as u8).collect();
        for len in [0, 1, 2, 3, 20, 1407, 1408, 4999] {
            let theirs = u16::from_be_bytes(internet_checksum::checksum(&data[..len]));
            assert_eq!(super::simd(&data[..len]), theirs, "len {len}");
        }
    }
}
