//! What each endpoint and the controller measure: per-process CPU and
//! scheduling ([`rusage`]), the machine's CPU split ([`procstat`]), the
//! kernel's per-connection view ([`tcpinfo`]), its protocol counters
//! ([`netstat`]), the host's facts ([`host`]) and the limits a load can
//! cross ([`limits`]), and whether the user asked to stop ([`stop`]). How
//! each figure is obtained and where it is blind is written down in
//! `docs/MEASUREMENT.md`.

pub mod drops;
pub mod host;
pub mod ifstat;
pub mod irtt;
pub mod kallsyms;
pub mod limits;
pub mod mptcp;
pub mod netstat;
pub mod packet_cost;
pub mod procstat;
pub mod profile;
pub mod qdisc;
pub mod rusage;
pub mod schedstat;
pub mod stop;
pub mod tcpinfo;
pub mod usersyms;
pub mod waits;
pub mod window;

/// The median of values sorted already: the middle one, or the mean of the
/// middle two for an even count; none of none.
pub fn median_of_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_median_is_the_middle_or_the_mean_of_the_middle_two() {
        assert_eq!(super::median_of_sorted(&[]), None);
        assert_eq!(super::median_of_sorted(&[1.0, 2.0, 9.0]), Some(2.0));
        assert_eq!(super::median_of_sorted(&[1.0, 2.0, 4.0, 9.0]), Some(3.0));
    }
}
