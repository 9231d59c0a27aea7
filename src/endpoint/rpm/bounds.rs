//! The bounds of an rpm test, the same whoever asks for it: the command
//! line and a controller's request to an agent (the measuring role's
//! check).

/// The draft's MPS: probe pairs a second, at most.
pub const MAX_PROBE_RATE: u32 = 100;
/// The draft's MNP: load-generating connections, at most (per direction).
pub const DRAFT_MAX_CONNECTIONS: usize = 16;
/// The most `--max-connections` may allow (threads and sockets per end).
pub const CEILING_CONNECTIONS: usize = 256;

/// The bounds of an rpm test, the same whoever asks for it: the command
/// line, or a controller's request to an agent (the measuring role's
/// check), so an agent never runs a test the command line would refuse.
pub fn check_bounds(
    probe_rate: u32,
    max_connections: usize,
    seconds: f64,
    idle_probes: u32,
) -> Result<(), String> {
    if probe_rate == 0 || probe_rate > MAX_PROBE_RATE {
        return Err(format!(
            "--probe-rate {probe_rate}: from 1 to {MAX_PROBE_RATE} probe pairs a second (the draft's MPS)"
        ));
    }
    if max_connections == 0 || max_connections > CEILING_CONNECTIONS {
        return Err(format!(
            "--max-connections {max_connections}: from 1 to {CEILING_CONNECTIONS}"
        ));
    }
    if !(2.0..=60.0).contains(&seconds) {
        return Err(format!("--duration {seconds} s: from 2 s to 60 s"));
    }
    if !(1..=1000).contains(&idle_probes) {
        return Err(format!("--idle-probes {idle_probes}: from 1 to 1000"));
    }
    Ok(())
}
