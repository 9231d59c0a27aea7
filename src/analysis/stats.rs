//! Summaries of repeated measurements: every figure netlab prints from more
//! than one run carries its spread.

pub use crate::record::stats::Spread;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.n), (1.0, 2.0, 3.0, 3));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Spread::of(&[]).is_none());
        assert_eq!(Spread::of(&[f64::NAN, 5.0]).unwrap().n, 1);
        assert!(
            (Spread::of(&[90.0, 100.0, 110.0])
                .unwrap()
                .relative_spread_pct()
                - 10.0)
                .abs()
                < 1e-9
        );
    }
}
