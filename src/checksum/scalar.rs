//! The Internet checksum (RFC 1071) in scalar code: one 16-bit word at a
//! time as the 1980s routine did, and in 64-bit words with the carries
//! folded back at the end (§2(C)); the fused copy-and-checksum of each;
//! RFC 1624's incremental update. The SIMD sums ([`super::simd`]) fall
//! back to these and fold as they do.

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
pub fn add_carry(a: u64, b: u64) -> u64 {
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

/// RFC 1624 eqn. 3: the new checksum after one 16-bit field changes from
/// `old_field` to `new_field`, without touching the rest of the data:
/// `HC' = ~(~HC + ~m + m')`.
pub fn update16(checksum: u16, old_field: u16, new_field: u16) -> u16 {
    let sum = u64::from(!checksum) + u64::from(!old_field) + u64::from(new_field);
    !fold(sum)
}
