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
//! Copy variants live in [`copy`].

pub mod copy;
pub mod simd;

/// Folds a 64-bit sum of 16-bit quantities to 16 bits with end-around carry.
pub fn fold(mut sum: u64) -> u16 {
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// One's complement sum of `data` as big-endian 16-bit words, unfolded,
/// one word at a time.
pub fn sum_naive16(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// RFC 1071 checksum, one 16-bit word at a time.
pub fn naive16(data: &[u8]) -> u16 {
    !fold(sum_naive16(data))
}

/// Adds with end-around carry.
#[inline(always)]
fn add_carry(a: u64, b: u64) -> u64 {
    let (s, c) = a.overflowing_add(b);
    s + u64::from(c)
}

/// One's complement sum of `data` in native 64-bit words (little-endian
/// here), the result's bytes still swapped; see [`from_native`].
pub fn sum_wide_native(data: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (i, a) in acc.iter_mut().enumerate() {
            let w = u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            *a = add_carry(*a, w);
        }
    }
    let mut sum = add_carry(add_carry(acc[0], acc[1]), add_carry(acc[2], acc[3]));
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        sum = add_carry(sum, u64::from_ne_bytes(w.try_into().expect("8 bytes")));
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut last = [0u8; 8];
        last[..tail.len()].copy_from_slice(tail);
        sum = add_carry(sum, u64::from_ne_bytes(last));
    }
    sum
}

/// Turns a native-order wide sum into the checksum of RFC 1071.
#[inline]
pub fn from_native(sum: u64) -> u16 {
    let folded = fold(sum);
    !(if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    })
}

/// RFC 1071 checksum in 64-bit words.
pub fn wide(data: &[u8]) -> u16 {
    from_native(sum_wide_native(data))
}

/// RFC 1071 checksum with the widest SIMD this CPU has.
pub fn simd(data: &[u8]) -> u16 {
    from_native(simd::sum_native(data))
}

/// Copies `src` into `dst` (same length) and returns the checksum, a word at a time.
pub fn fused_naive16(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "fused copy needs equal lengths");
    let mut sum = 0u64;
    let mut d = dst.chunks_exact_mut(2);
    let mut s = src.chunks_exact(2);
    for (dw, sw) in (&mut d).zip(&mut s) {
        dw.copy_from_slice(sw);
        sum += u64::from(u16::from_be_bytes([sw[0], sw[1]]));
    }
    if let ([dl], [sl]) = (d.into_remainder(), s.remainder()) {
        *dl = *sl;
        sum += u64::from(*sl) << 8;
    }
    !fold(sum)
}

/// Copies and checksums in 64-bit words.
pub fn fused_wide(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "fused copy needs equal lengths");
    let mut acc = [0u64; 4];
    let mut d = dst.chunks_exact_mut(32);
    let mut s = src.chunks_exact(32);
    for (db, sb) in (&mut d).zip(&mut s) {
        for (i, a) in acc.iter_mut().enumerate() {
            let bytes: [u8; 8] = sb[i * 8..i * 8 + 8].try_into().expect("8 bytes");
            db[i * 8..i * 8 + 8].copy_from_slice(&bytes);
            *a = add_carry(*a, u64::from_ne_bytes(bytes));
        }
    }
    let sum = add_carry(add_carry(acc[0], acc[1]), add_carry(acc[2], acc[3]));
    let (dt, st) = (d.into_remainder(), s.remainder());
    dt.copy_from_slice(st);
    from_native(add_carry(sum, sum_wide_native(st)))
}

/// Copies and checksums with SIMD.
pub fn fused_simd(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "fused copy needs equal lengths");
    from_native(simd::fused_sum_native(dst, src))
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit field changes from
/// `old_field` to `new_field`, without touching the rest of the data:
/// `HC' = ~(~HC + ~m + m')`.
pub fn update16(checksum: u16, old_field: u16, new_field: u16) -> u16 {
    let sum = u64::from(!checksum) + u64::from(!old_field) + u64::from(new_field);
    !fold(sum)
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
