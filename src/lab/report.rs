//! What the lab writes around its sections: the heading across hosts,
//! the timestamped results directory, and once every section ran,
//! `tables.txt` and the report from the records alone.

use crate::experiments::page::{self, Report};
use crate::measure::host::HostFacts;
use crate::record::testbed::AgentFacts;
use crate::report::html;
use std::io;
use std::path::{Path, PathBuf};

/// The lab's heading across a real path: the ends, the controller and
/// every agent reached.
pub fn across_header(from: &str, to: &str, host: &HostFacts, agents: &[AgentFacts]) -> String {
    let mut header = format!(
        "netlab lab across hosts: from {from} to {to}\n{}\n",
        crate::report::table::controller_line(host)
    );
    for agent in agents {
        header.push_str(&crate::report::table::agent_line(agent));
        header.push('\n');
    }
    header.push('\n');
    header
}

/// A new timestamped results directory under `out_dir`.
pub fn results_dir(out_dir: &Path) -> io::Result<PathBuf> {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let dir = out_dir.join(stamp);
    std::fs::create_dir_all(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// What the lab writes beside its records once every section ran.
pub struct Finished {
    /// To print after the sections: where the results are, the layer
    /// tables (with --profile), the report and its most notable findings.
    pub text: String,
    /// Figures that could not be drawn, and why.
    pub figure_errors: Vec<String>,
}

/// Writes `tables.txt` (the sections as `printed`, then the layer tables
/// of the whole lab with --profile) and the report from the records of
/// `dir/results.jsonl` alone.
pub fn finish(dir: &Path, printed: &str) -> io::Result<Finished> {
    let context = |what: &str, path: &Path| {
        let path = path.display().to_string();
        let what = what.to_string();
        move |e: io::Error| io::Error::new(e.kind(), format!("cannot {what} {path}: {e}"))
    };
    let records_path = dir.join("results.jsonl");
    let loaded = page::load(&records_path).map_err(context("read back", &records_path))?;
    let profile = crate::report::profile::text(&loaded.records);
    let tables_path = dir.join("tables.txt");
    std::fs::write(&tables_path, format!("{printed}{profile}"))
        .map_err(context("write", &tables_path))?;
    let written = html::write(&loaded, &Report, "results.jsonl", dir)
        .map_err(context("write the report into", dir))?;
    let text = format!(
        "lab results: {} (records: {})\n{profile}{}",
        dir.display(),
        records_path.display(),
        written.summary_text("most notable:\n")
    );
    Ok(Finished {
        text,
        figure_errors: written.figure_errors,
    })
}
