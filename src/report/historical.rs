//! The source documents' figures, for printing "then" beside "now".
//!
//! `reference/historical-figures.toml` is a copy of the project's shared
//! transcription of the five documents, compiled into the binary so that a
//! report never depends on the working directory. Only the fields a report
//! prints are typed here; the rest of the file is kept for later experiments.

use serde::Deserialize;
use std::sync::OnceLock;

const TOML: &str = include_str!("../../reference/historical-figures.toml");

/// Bill Joy, TCP-IP Digest, November 1981 (004).
#[derive(Debug, Clone, Deserialize)]
pub struct BerkeleyVax {
    pub source: String,
    pub transfer_bytes: u64,
    pub record_bytes: u64,
    pub seconds: f64,
    pub user_user_mbaud: f64,
    pub link_mbaud: f64,
    pub sender_cpu: String,
    pub receiver_idle_pct: f64,
    pub system_time_split_pct: std::collections::BTreeMap<String, f64>,
    /// Joy's ladder: each step and its projected Mbaud user to user.
    pub projections_mbaud: Vec<(String, f64)>,
}

/// Van Jacobson's notes on BSD TCP speed-ups, 1988 (003).
#[derive(Debug, Clone, Deserialize)]
pub struct BsdSpeedups {
    pub source: String,
    pub machine: String,
    pub stock_sunos35_kbytes_s: f64,
    pub sosend_1k_chunks_kbytes_s: f64,
    pub best_kbytes_s: f64,
    pub cleaned_up_kbytes_s: f64,
    /// Throughput with Sun's if_le.c queueing one packet to the LANCE.
    pub sound_barrier_kbytes_s: f64,
    pub packet_data_bytes: u64,
    pub checksum_us_per_kb: Vec<f64>,
    pub copy_us_per_kb: Vec<f64>,
    pub copy_and_checksum_fused_us_per_kb: f64,
    pub per_packet_us: std::collections::BTreeMap<String, f64>,
    /// The 800 µs fixed cost by part: `protocol`, `stalls`,
    /// `device_interrupt_task` (and `protocol_before_header_prediction`).
    pub fixed_cost_split_pct: std::collections::BTreeMap<String, f64>,
    pub cpu_sender_pct: f64,
    pub cpu_receiver_pct: Vec<f64>,
    pub rule_of_thumb: String,
}

/// Sun RPC time for 100 calls vs argument size, 1989 (001).
#[derive(Debug, Clone, Deserialize)]
pub struct RpcSizeSweep {
    pub source: String,
    pub what: String,
    pub unit: String,
    /// The unit the figures must be in (the document states none), and why.
    #[serde(default)]
    pub unit_derived: Option<String>,
    #[serde(default)]
    pub unit_derivation: Option<String>,
    /// `arg_bytes`, `tcp_local`, `tcp_remote`, `udp_local`, `udp_remote`.
    pub columns: Vec<String>,
    pub rows: Vec<Vec<f64>>,
    pub slow_ranges_bytes: Vec<Vec<u64>>,
    pub profile_note: String,
}

/// Users typing through rlogind, normal vs kernel-assisted, 1989 (000).
#[derive(Debug, Clone, Deserialize)]
pub struct LoginRelayLoad {
    pub source: String,
    pub what: String,
    /// `relay` ("user" or "kernel"), `users`, `procs_r`, `procs_b`,
    /// `faults_sys`, `cs`, `cpu_us`, `cpu_sy`, `cpu_id`, `pkts_in`,
    /// `pkts_out`; -1 where the document gives a range instead.
    pub columns: Vec<String>,
    pub rows: Vec<Vec<toml::Value>>,
    pub responsiveness: LoginResponsiveness,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LoginResponsiveness {
    pub user: String,
    pub kernel: String,
}

/// Typing files through telnet vs DECnet and LAT, 1987 (002).
#[derive(Debug, Clone, Deserialize)]
pub struct TerminalOutput {
    pub source: String,
    pub what: String,
    pub telnet: TelnetOutput,
    pub lat_direct: LatDirect,
    pub decnet_set_host: DecnetSetHost,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TelnetOutput {
    pub remote_cpu_pct: f64,
    pub avg_packet_bytes: f64,
    pub terminal_kbytes_s_max: f64,
    pub remote_kernel_pct: f64,
    pub remote_user_pct: f64,
    pub server_process_pct: f64,
    pub ip_acp_pct: f64,
    pub type_pct: f64,
    pub ether_kbytes_s_before: f64,
    pub ether_kbytes_s_during: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LatDirect {
    pub remote_idle_pct_min: f64,
    pub ether_kbytes_s_before: f64,
    pub ether_kbytes_s_during: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DecnetSetHost {
    pub remote_idle_pct_min: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Historical {
    pub berkeley_vax: BerkeleyVax,
    pub terminal_output: TerminalOutput,
    pub login_relay_load: LoginRelayLoad,
    pub bsd_speedups: BsdSpeedups,
    pub rpc_size_sweep: RpcSizeSweep,
}

/// The parsed figures (parsed once; the file is part of the build).
pub fn figures() -> &'static Historical {
    static PARSED: OnceLock<Historical> = OnceLock::new();
    PARSED.get_or_init(|| toml::from_str(TOML).expect("reference/historical-figures.toml parses"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reference_file_parses_with_the_documents_numbers() {
        let h = super::figures();
        assert_eq!(h.berkeley_vax.transfer_bytes, 4 * 1024 * 1024);
        assert_eq!(h.berkeley_vax.record_bytes, 1024);
        assert_eq!(h.berkeley_vax.seconds, 28.0);
        assert_eq!(h.bsd_speedups.best_kbytes_s, 1000.0);
        assert_eq!(h.bsd_speedups.sosend_1k_chunks_kbytes_s, 456.0);
    }
}

#[cfg(test)]
mod sync {
    /// The compiled-in copy must match the project's shared transcription
    /// when it is beside the repository (as in CI and development).
    #[test]
    fn copy_matches_the_shared_reference() {
        let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/reference/historical-figures.toml");
        match std::fs::read_to_string(&shared) {
            Ok(text) => assert_eq!(
                text,
                super::TOML,
                "reference/historical-figures.toml is out of date: copy {} over it",
                shared.display()
            ),
            Err(_) => eprintln!("{} not present; copy not checked", shared.display()),
        }
    }

    /// The login model's per-keystroke counts come from these rows.
    #[test]
    fn the_login_model_s_16_user_counts_are_the_document_s() {
        use crate::model::sunos35::{Design1989, table16};
        let h = super::figures();
        for design in Design1989::ALL {
            let row = h
                .login_relay_load
                .rows
                .iter()
                .find(|r| {
                    r[0].as_str() == Some(design.table_name()) && r[1].as_integer() == Some(16)
                })
                .expect("a 16-user row");
            let expected = match design {
                Design1989::Rlogind => table16::RLOGIND,
                Design1989::Kernel => table16::KERNEL,
            };
            let got = [4, 5, 9, 10].map(|i| row[i].as_integer().expect("a count") as f64);
            assert_eq!(got, expected);
        }
    }
}
