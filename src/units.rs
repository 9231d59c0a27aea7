//! Parsing of the sizes and durations users type on the command line.
//!
//! Size suffixes follow the ttcp/iperf convention for byte counts, with the
//! SI and IEC spellings available when the user wants to be explicit:
//!
//! | suffix            | factor      |
//! |-------------------|-------------|
//! | none, `B`         | 1           |
//! | `K`, `KiB`        | 1024        |
//! | `M`, `MiB`        | 1024²       |
//! | `G`, `GiB`        | 1024³       |
//! | `KB`, `MB`, `GB`  | 10³, 10⁶, 10⁹ |
//!
//! Suffixes are case-insensitive except that `b` alone is not accepted (it
//! would mean bits to a network engineer). A size is a whole, positive number
//! of bytes: `0`, `-1`, `1.5K`, `1e999` and `4Q` are errors that name the
//! offending text.

use std::time::Duration;
use thiserror::Error;

/// Why a size or duration could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("empty size")]
    Empty,
    #[error("size \"{0}\" is negative; sizes are positive byte counts")]
    Negative(String),
    #[error("size \"{0}\" is not a whole number of bytes (use 4M, 4MiB, 1G, 1500, ...)")]
    Malformed(String),
    #[error("unknown size suffix in \"{0}\" (expected B, K, KiB, KB, M, MiB, MB, G, GiB or GB)")]
    UnknownSuffix(String),
    #[error("size \"{0}\" must be greater than zero")]
    Zero(String),
    #[error("size \"{0}\" is too large")]
    TooLarge(String),
    #[error("duration \"{0}\" is not valid (use 500ms, 2s, 1m): {1}")]
    Duration(String, String),
    #[error("duration \"{0}\" must be greater than zero")]
    ZeroDuration(String),
    #[error("size range \"{0}\" is not valid: {1}")]
    Range(String, String),
}

/// Parses a positive byte count such as `1500`, `128K`, `4MiB` or `1GB`.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(UnitError::Empty);
    }
    if trimmed.starts_with('-') {
        return Err(UnitError::Negative(text.to_string()));
    }
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(UnitError::Malformed(text.to_string()));
    }
    let factor: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" => 1,
        "b" if suffix == "B" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other
            if other.starts_with('.')
                || other.starts_with('e')
                || other.starts_with(',')
                || other.starts_with('x') =>
        {
            return Err(UnitError::Malformed(text.to_string()));
        }
        _ => return Err(UnitError::UnknownSuffix(text.to_string())),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| UnitError::TooLarge(text.to_string()))?;
    let bytes = value
        .checked_mul(factor)
        .ok_or_else(|| UnitError::TooLarge(text.to_string()))?;
    if bytes == 0 {
        return Err(UnitError::Zero(text.to_string()));
    }
    Ok(bytes)
}

/// Parses a positive duration such as `500ms`, `2s` or `1m`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let trimmed = text.trim();
    let duration = if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit()) {
        let secs: u64 = trimmed.parse().map_err(|e: std::num::ParseIntError| {
            UnitError::Duration(text.into(), e.to_string())
        })?;
        Duration::from_secs(secs)
    } else {
        humantime::parse_duration(trimmed)
            .map_err(|e| UnitError::Duration(text.to_string(), e.to_string()))?
    };
    if duration.is_zero() {
        return Err(UnitError::ZeroDuration(text.to_string()));
    }
    Ok(duration)
}

/// Parses a list of sizes: either a comma-separated list (`64,1K,4K`) or a
/// geometric range `LO..HI` (doubling from LO while not above HI, HI always
/// included), optionally with a step factor `LO..HI*4`.
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, UnitError> {
    if let Some((lo, rest)) = text.split_once("..") {
        let (hi, factor) = match rest.split_once(['*', 'x']) {
            Some((hi, f)) => {
                let factor: u64 = f.parse().map_err(|_| {
                    UnitError::Range(text.into(), format!("bad step factor \"{f}\""))
                })?;
                (hi, factor)
            }
            None => (rest, 2),
        };
        if factor < 2 {
            return Err(UnitError::Range(
                text.into(),
                "step factor must be at least 2".into(),
            ));
        }
        let lo = parse_size(lo)?;
        let hi = parse_size(hi)?;
        if lo > hi {
            return Err(UnitError::Range(
                text.into(),
                "the low end is above the high end".into(),
            ));
        }
        let mut sizes = Vec::new();
        let mut size = lo;
        while size < hi {
            sizes.push(size);
            size = size.saturating_mul(factor);
        }
        sizes.push(hi);
        Ok(sizes)
    } else {
        let sizes = text
            .split(',')
            .map(parse_size)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sizes)
    }
}

/// Formats a byte count compactly with binary suffixes when exact (`128K`, `4M`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (factor, suffix) in UNITS {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{}", bytes / factor, suffix);
        }
    }
    bytes.to_string()
}

/// Byte counts that may be zero, as a list (`0,512,4K`) or as every
/// integer of a range (`4000..4100`): RPC argument sizes.
pub fn parse_count_list(text: &str) -> Result<Vec<usize>, UnitError> {
    if let Some((lo, hi)) = text.split_once("..") {
        let bound = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| UnitError::Range(text.into(), format!("\"{s}\" is not a byte count")))
        };
        let (lo, hi) = (bound(lo)?, bound(hi)?);
        if lo > hi {
            return Err(UnitError::Range(
                text.into(),
                "the low end is above the high end".into(),
            ));
        }
        let count = (hi - lo).saturating_add(1);
        if count > MAX_LIST {
            return Err(UnitError::Range(
                text.into(),
                format!("{count} sizes; a list holds at most {MAX_LIST}"),
            ));
        }
        return Ok((lo..=hi).collect());
    }
    if text.split(',').count() > MAX_LIST {
        return Err(UnitError::Range(
            text.into(),
            format!("a list holds at most {MAX_LIST} sizes"),
        ));
    }
    text.split(',')
        .map(|s| match s.trim() {
            "0" => Ok(0),
            s => parse_size(s).map(|v| v as usize),
        })
        .collect()
}

/// The most values a list or range of counts may give: each is at least a
/// cell to measure.
pub const MAX_LIST: usize = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_of_counts_is_bounded_before_it_is_made() {
        let e = parse_count_list("0..99999999999").unwrap_err();
        assert!(e.to_string().contains("100000000000 sizes"), "{e}");
        assert_eq!(parse_count_list("4000..4002"), Ok(vec![4000, 4001, 4002]));
        assert!(parse_count_list(&"1,".repeat(MAX_LIST + 1)).is_err());
    }

    #[test]
    fn plain_and_suffixed_sizes() {
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("1500B"), Ok(1500));
        assert_eq!(parse_size("128K"), Ok(131_072));
        assert_eq!(parse_size("128k"), Ok(131_072));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("10KB"), Ok(10_000));
    }

    #[test]
    fn bad_sizes_name_the_problem() {
        assert_eq!(parse_size("0"), Err(UnitError::Zero("0".into())));
        assert_eq!(parse_size("0K"), Err(UnitError::Zero("0K".into())));
        assert_eq!(parse_size("-1"), Err(UnitError::Negative("-1".into())));
        assert_eq!(parse_size("4Q"), Err(UnitError::UnknownSuffix("4Q".into())));
        assert_eq!(
            parse_size("1e999"),
            Err(UnitError::Malformed("1e999".into()))
        );
        assert_eq!(parse_size("1.5K"), Err(UnitError::Malformed("1.5K".into())));
        assert_eq!(parse_size("K"), Err(UnitError::Malformed("K".into())));
        assert_eq!(parse_size(""), Err(UnitError::Empty));
        assert_eq!(parse_size("4b"), Err(UnitError::UnknownSuffix("4b".into())));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(UnitError::TooLarge(_))
        ));
        assert!(matches!(
            parse_size("20000000000G"),
            Err(UnitError::TooLarge(_))
        ));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn geometric_ranges_and_lists() {
        assert_eq!(parse_size_list("64..1K"), Ok(vec![64, 128, 256, 512, 1024]));
        assert_eq!(
            parse_size_list("100..1000"),
            Ok(vec![100, 200, 400, 800, 1000])
        );
        assert_eq!(
            parse_size_list("1K..64K*4"),
            Ok(vec![1024, 4096, 16384, 65536])
        );
        assert_eq!(parse_size_list("1K,4000,4K"), Ok(vec![1024, 4000, 4096]));
        assert!(parse_size_list("1M..64").is_err());
        assert!(parse_size_list("64..1K*1").is_err());
        assert!(parse_size_list("64,,128").is_err());
    }

    #[test]
    fn formatting_round_trips_exact_sizes() {
        for text in ["64", "1K", "128K", "4M", "1G", "1500"] {
            assert_eq!(format_size(parse_size(text).unwrap()), text);
        }
    }

    #[test]
    fn count_lists_take_zero_and_every_integer_of_a_range() {
        assert_eq!(parse_count_list("0,512,4K").unwrap(), [0, 512, 4096]);
        assert_eq!(parse_count_list("4095..4097").unwrap(), [4095, 4096, 4097]);
        assert!(parse_count_list("9..3").is_err());
        assert!(parse_count_list("a..3").is_err());
        assert!(matches!(
            parse_count_list("4Q"),
            Err(UnitError::UnknownSuffix(_))
        ));
    }
}
