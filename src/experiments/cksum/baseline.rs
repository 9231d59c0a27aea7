//! `openssl speed -evp` beside netlab's AEAD timings, on the same host and
//! in the same run (#65): OpenSSL's own assembly is the yardstick a
//! reader trusts, so a figure of netlab's that strays from it is either
//! explained or wrong.
//!
//! Each cipher and direction is one `openssl speed -mr -elapsed -aead
//! -seconds 1 -bytes SIZE -evp CIPHER [-decrypt]`: `-aead` times the
//! sequence a TLS record takes (a fresh IV, the 13-byte additional data,
//! the update and the tag), `-elapsed` wall-clock time as netlab's own
//! timings are, and `-mr` a line a program reads (`+F:...:bytes per
//! second`).

use crate::checksum::aead::Cipher;
use crate::experiments::cksum::record::{Baseline, BaselineRow, Kind};
use std::process::Command;

/// Seconds `openssl speed` runs each cipher and direction.
pub const SECONDS: u32 = 1;

/// The arguments for one cipher and direction at one size.
pub fn args(cipher: Cipher, size: usize, kind: Kind) -> Vec<String> {
    let mut args: Vec<String> = [
        "speed",
        "-mr",
        "-elapsed",
        "-aead",
        "-seconds",
        &SECONDS.to_string(),
        "-bytes",
        &size.to_string(),
        "-evp",
        cipher.name(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if kind == Kind::Open {
        args.push("-decrypt".into());
    }
    args
}

/// Bytes a second from `openssl speed -mr`'s `+F:<n>:<name>:<rate>...`
/// line (one rate a size; one size here).
pub fn parse_rate(output: &str) -> Result<f64, String> {
    let line = output
        .lines()
        .find(|l| l.starts_with("+F:"))
        .ok_or_else(|| "no +F: line in openssl speed's output".to_string())?;
    let rate = line
        .rsplit(':')
        .next()
        .and_then(|r| r.trim().parse::<f64>().ok())
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| format!("openssl speed's rate line {line:?} has no rate"))?;
    Ok(rate)
}

/// The CPU features either library chooses its AEAD code by, as this
/// host has them.
pub fn cpu_features() -> Vec<String> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! have {
            ($($f:tt),*) => {
                $(if std::is_x86_feature_detected!($f) { out.push($f.to_string()); })*
            };
        }
        have!(
            "aes",
            "pclmulqdq",
            "avx2",
            "vaes",
            "vpclmulqdq",
            "avx512f",
            "avx512ifma"
        );
    }
    out
}

/// Why netlab's figure for `cipher` strays from openssl's by `ratio`
/// (netlab's time over openssl's) at `size`, from what is known of the
/// two libraries' code paths and the CPU's features; None within 10%, or
/// when nothing known explains it.
pub fn explain(cipher: &str, ratio: f64, size: usize, cpu: &[String]) -> Option<String> {
    let has = |f: &str| cpu.iter().any(|c| c == f);
    if (ratio - 1.0).abs() <= 0.10 {
        return None;
    }
    let gcm = cipher.starts_with("aes-");
    if gcm && ratio < 1.0 && has("vaes") && has("vpclmulqdq") {
        return Some(
            "this CPU has VAES and VPCLMULQDQ, and ring seals and opens AES-GCM with its VAES/AVX2 code, two blocks an instruction; an OpenSSL without such code (Debian's 3.0 libcrypto has no 256-bit vaesenc) runs 128-bit AES-NI".into(),
        );
    }
    if !gcm && ratio > 1.0 && has("avx512f") {
        return Some(format!(
            "ring's Poly1305 on x86-64 is portable C (its ChaCha20 is AVX2), while OpenSSL's ChaCha20 and Poly1305 have AVX-512 code{}",
            if has("avx512ifma") {
                " (Poly1305 with the AVX-512 IFMA multiply this CPU has)"
            } else {
                ""
            }
        ));
    }
    if ratio < 1.0 && size <= 4096 {
        return Some(
            "at this size OpenSSL's per-call setup (its EVP context, a new IV and the additional data a call) weighs on each call more than ring's".into(),
        );
    }
    None
}

/// Runs `openssl speed` for every cipher, sealing and opening, at `size`.
/// A host without openssl, or a cipher it refuses, is said, not fatal.
pub fn openssl_speed(size: usize, ciphers: &[Cipher]) -> Baseline {
    let mut baseline = Baseline {
        cpu: cpu_features(),
        ..Baseline::default()
    };
    match Command::new("openssl").arg("version").output() {
        Ok(out) if out.status.success() => {
            baseline.version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        Ok(out) => {
            baseline.problem = Some(format!("openssl version failed: {}", out.status));
            return baseline;
        }
        Err(e) => {
            baseline.problem = Some(format!("openssl is not on this host's PATH ({e})"));
            return baseline;
        }
    }
    let kb = size as f64 / 1024.0;
    for &cipher in ciphers {
        for kind in [Kind::Seal, Kind::Open] {
            let args = args(cipher, size, kind);
            if baseline.command.is_empty() {
                baseline.command = format!("openssl {}", args.join(" "));
            }
            let rate = Command::new("openssl")
                .args(&args)
                .output()
                .map_err(|e| e.to_string())
                .and_then(|out| {
                    if out.status.success() {
                        parse_rate(&String::from_utf8_lossy(&out.stdout))
                    } else {
                        Err(format!(
                            "exit {}: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr).trim()
                        ))
                    }
                });
            match rate {
                Ok(rate) => {
                    let ns_per_op = size as f64 / rate * 1e9;
                    baseline.rows.push(BaselineRow {
                        cipher: cipher.name().into(),
                        kind,
                        ns_per_kb: ns_per_op / kb,
                        gb_s: rate / 1e9,
                    });
                }
                Err(e) => {
                    let problem = format!("openssl speed {} ({kind:?}): {e}", cipher.name());
                    baseline.problem = Some(match baseline.problem.take() {
                        Some(p) => format!("{p}; {problem}"),
                        None => problem,
                    });
                }
            }
        }
    }
    baseline
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_readable_rate_is_read_and_a_broken_one_refused() {
        let out = "+DT:AES-128-GCM:1:1408\n+R:1234:AES-128-GCM:1.000000\n+H:1408\n+F:22:AES-128-GCM:1737496576.00\n";
        assert_eq!(parse_rate(out), Ok(1_737_496_576.0));
        assert!(
            parse_rate("type 1408 bytes\n")
                .unwrap_err()
                .contains("no +F:")
        );
        assert!(
            parse_rate("+F:22:AES-128-GCM:\n")
                .unwrap_err()
                .contains("no rate")
        );
        assert!(parse_rate("+F:22:AES-128-GCM:0.00\n").is_err());
    }

    #[test]
    fn a_difference_is_explained_only_by_what_the_cpu_has() {
        let zen = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(explain("aes-128-gcm", 1.05, 1 << 20, &[]), None);
        let vaes = zen(&["aes", "vaes", "vpclmulqdq"]);
        assert!(
            explain("aes-128-gcm", 0.5, 1 << 20, &vaes)
                .unwrap()
                .contains("VAES")
        );
        // Without VAES a faster ring at 1 MB is not explained.
        assert_eq!(explain("aes-128-gcm", 0.5, 1 << 20, &zen(&["aes"])), None);
        let avx512 = zen(&["avx512f", "avx512ifma"]);
        let why = explain("chacha20-poly1305", 1.8, 1 << 20, &avx512).unwrap();
        assert!(why.contains("portable C") && why.contains("IFMA"), "{why}");
        assert_eq!(
            explain("chacha20-poly1305", 1.8, 1 << 20, &zen(&["avx2"])),
            None
        );
        assert!(
            explain("chacha20-poly1305", 0.6, 64, &[])
                .unwrap()
                .contains("per-call")
        );
    }

    #[test]
    fn opening_is_timed_with_decrypt() {
        let a = args(Cipher::Chacha20Poly1305, 1408, Kind::Open);
        assert!(a.ends_with(&["-evp".into(), "chacha20-poly1305".into(), "-decrypt".into()]));
        assert!(!args(Cipher::Aes128Gcm, 64, Kind::Seal).contains(&"-decrypt".to_string()));
    }
}
