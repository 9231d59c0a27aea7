//! The byte pattern senders send and receivers verify.
//!
//! Byte `i` of a stream is `PATTERN[i mod PERIOD]`, where the table is a
//! multiplicative hash of the index and the period is 17 pages (69632
//! bytes). A lost, duplicated or shifted run of bytes breaks the comparison
//! unless its length is a multiple of the period, which no power of two is
//! (17 is odd), and any flipped byte breaks it. Both sides hold the table
//! once, extended by the largest slice they will ask for, so a sender's
//! record at stream offset `o` is simply a borrowed slice starting at
//! `o mod PERIOD` (no per-record fill) and a receiver verifies a read with one
//! `memcmp` against the same slice: verification costs about what the copy
//! out of the socket cost, not a byte loop.
//!
//! The table is page-aligned and the period a whole number of pages, so
//! records whose size is a multiple of the page size are always sent from
//! page-aligned addresses, as a tool that sends one fixed buffer (iperf3,
//! ttcp) does; alignment would otherwise bias comparisons with such tools.

/// Length of the repeating pattern: 17 pages, so power-of-two sized slips
/// never line up with it and page-multiple records stay page-aligned.
pub const PERIOD: usize = 17 * PAGE;
const PAGE: usize = 4096;

/// A zero-initialised, page-aligned byte buffer (for the pattern and for
/// receive buffers: the kernel's copy routines run fastest on aligned memory,
/// and the peers netlab is compared with use page-aligned buffers).
pub struct AlignedBuf {
    pages: Vec<Page>,
    len: usize,
}

#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Page([u8; PAGE]);

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            pages: vec![Page([0; PAGE]); len.div_ceil(PAGE).max(1)],
            len,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the pages are contiguous, initialised bytes, at least len long.
        unsafe { std::slice::from_raw_parts(self.pages.as_ptr().cast::<u8>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.pages.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// The pattern, extended so any slice of up to `max_len` bytes is contiguous.
pub struct Pattern {
    bytes: AlignedBuf,
    max_len: usize,
}

fn byte_at(index: usize) -> u8 {
    let mixed = (index as u32 ^ 0x5bd1_e995).wrapping_mul(2_654_435_761);
    (mixed >> 24) as u8
}

impl Pattern {
    /// A pattern able to hand out slices of up to `max_len` bytes.
    pub fn new(max_len: usize) -> Pattern {
        let mut bytes = AlignedBuf::zeroed(PERIOD + max_len);
        for (i, byte) in bytes.as_mut_slice().iter_mut().enumerate() {
            *byte = byte_at(i % PERIOD);
        }
        Pattern { bytes, max_len }
    }

    /// The `len` bytes of the stream starting at `offset`.
    ///
    /// # Panics
    /// If `len` exceeds the `max_len` the pattern was built for.
    pub fn slice(&self, offset: u64, len: usize) -> &[u8] {
        assert!(
            len <= self.max_len,
            "pattern slice of {len} > {}",
            self.max_len
        );
        let start = (offset % PERIOD as u64) as usize;
        &self.bytes.as_slice()[start..start + len]
    }

    /// Checks `data` received at stream `offset`; on mismatch returns the
    /// stream offset of the first wrong byte.
    pub fn verify(&self, offset: u64, data: &[u8]) -> Result<(), u64> {
        let mut done = 0usize;
        while done < data.len() {
            let len = (data.len() - done).min(self.max_len);
            let want = self.slice(offset + done as u64, len);
            let got = &data[done..done + len];
            if want != got {
                let first = want.iter().zip(got).position(|(a, b)| a != b).unwrap_or(0);
                return Err(offset + (done + first) as u64);
            }
            done += len;
        }
        Ok(())
    }

    /// The largest slice this pattern hands out.
    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_continue_across_the_period() {
        let p = Pattern::new(1000);
        let a = p.slice(PERIOD as u64 - 10, 20).to_vec();
        let b: Vec<u8> = (PERIOD - 10..PERIOD + 10)
            .map(|i| byte_at(i % PERIOD))
            .collect();
        assert_eq!(a, b);
        assert_eq!(p.slice(0, 100), p.slice(PERIOD as u64, 100));
    }

    #[test]
    fn verify_accepts_the_stream_and_finds_the_first_bad_byte() {
        let p = Pattern::new(4096);
        let mut data = p.slice(12_345, 4096).to_vec();
        assert_eq!(p.verify(12_345, &data), Ok(()));
        data[100] ^= 1;
        assert_eq!(p.verify(12_345, &data), Err(12_445));
        // A shifted stream (a lost byte) fails at once.
        let shifted = p.slice(12_346, 4096).to_vec();
        assert!(p.verify(12_345, &shifted).is_err());
    }

    #[test]
    fn verify_handles_reads_longer_than_max_len() {
        let p = Pattern::new(1000);
        let long: Vec<u8> = (0..5000).map(|i| byte_at((77 + i) % PERIOD)).collect();
        assert_eq!(p.verify(77, &long), Ok(()));
    }

    #[test]
    fn page_multiple_records_are_page_aligned() {
        let p = Pattern::new(128 << 10);
        for k in 0..40u64 {
            assert_eq!(
                p.slice(k * (128 << 10), 128 << 10).as_ptr() as usize % 4096,
                0
            );
        }
        let mut buf = AlignedBuf::zeroed(10_000);
        assert_eq!(buf.as_slice().len(), 10_000);
        assert_eq!(buf.as_mut_slice().as_ptr() as usize % 4096, 0);
    }

    #[test]
    fn table_is_not_trivially_periodic() {
        // No shift by a small amount or a power of two maps the table onto itself.
        let p = Pattern::new(PERIOD);
        let base = p.slice(0, 4096);
        for shift in (1..=64).chain((1..16).map(|k| 1usize << k)) {
            assert_ne!(base, p.slice(shift as u64, 4096), "shift {shift}");
        }
    }
}
