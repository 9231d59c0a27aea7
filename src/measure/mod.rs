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
