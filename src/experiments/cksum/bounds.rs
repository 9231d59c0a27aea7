//! What one checksum cell may hold, the same whoever asks for it: the
//! command line (`CksumPlan::specs`, on the controller's host) and a
//! controller's request to an agent (the role's check, on the agent's
//! host, whose memory is the one that counts there).

use super::record::CksumSpec;
use crate::units::format_size;

/// Most timed batches a variant takes (`--batches`).
pub const MAX_BATCHES: u32 = 1000;

/// This host's MemAvailable, bytes.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Bytes a cell of `size` holds at once: the hot source and destination,
/// and two cold pools of at least two buffers each.
pub fn memory_needed(size: u64, cold_pool: u64) -> u64 {
    let buffers = size
        .checked_next_multiple_of(4096)
        .unwrap_or(u64::MAX)
        .saturating_mul(2)
        .saturating_add(128);
    size.saturating_mul(2)
        .saturating_add(cold_pool.max(buffers).saturating_mul(2))
}

/// A request's cell checked on the host that would run it: its batches,
/// and its memory against half of what is available here.
pub fn check(spec: &CksumSpec) -> Result<(), String> {
    if !(1..=MAX_BATCHES).contains(&spec.batches) {
        return Err(format!(
            "--batches {}: from 1 to {MAX_BATCHES}",
            spec.batches
        ));
    }
    let available = mem_available().unwrap_or(u64::MAX);
    let needed = memory_needed(spec.size as u64, spec.cold_pool as u64);
    if needed > available / 2 {
        return Err(format!(
            "a checksum cell of {} needs {} of memory, more than half of the {} available here",
            format_size(spec.size as u64),
            format_size(needed),
            format_size(available)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_past_this_hosts_memory_or_the_batches_is_refused() {
        let spec = |size: usize, batches: u32| CksumSpec {
            size,
            cold_pool: 1 << 20,
            batches,
            ciphers: Vec::new(),
            openssl: false,
        };
        assert!(check(&spec(64 << 10, 9)).is_ok());
        assert!(
            check(&spec(1 << 50, 9))
                .unwrap_err()
                .contains("more than half")
        );
        assert!(
            check(&spec(usize::MAX, 9))
                .unwrap_err()
                .contains("more than half")
        );
        assert!(check(&spec(64, 0)).unwrap_err().contains("--batches 0"));
        assert!(
            check(&spec(64, 5000))
                .unwrap_err()
                .contains("--batches 5000")
        );
    }
}
