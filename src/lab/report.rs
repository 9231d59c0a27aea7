//! The lab's sections as text: each experiment's table in its source's
//! shape, the historical figures beside, as `netlab lab` prints them and
//! writes them to `tables.txt`.

use crate::analysis::split::split;
use crate::experiments::cksum::analysis::per_byte_costs;
use crate::experiments::page::{self, Report};
use crate::experiments::{
    cksum::report as cksum, login::report as login, rpc::report as rpc, stream::report as tables,
};
use crate::lab::Section;
use crate::measure::host::HostFacts;
use crate::record::testbed::AgentFacts;
use crate::record::testbed::Placement;
use crate::report::html;
use crate::units::format_size;
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

/// One section of the lab as it prints.
pub fn text(section: &Section) -> String {
    match section {
        Section::Skipped(note) => format!("skipped: {note}\n"),
        Section::Stream { title, records } => {
            tables::stream_section(title, records) + &crate::report::profile::then_and_now(records)
        }
        Section::Barrier { records } => {
            let mut text =
                tables::stream_table("1988's sound barrier, over netns ether10", records);
            text.push_str(&tables::barrier_text(records).unwrap_or_default());
            text
        }
        Section::Rpc { title, explained } => format!(
            "{title}{}",
            rpc::table(&explained.records, &explained.findings)
        ),
        Section::Sweep {
            title,
            summary,
            records,
            precision,
        } => {
            let mut text = crate::experiments::sweep::report::sweep_table(title, summary, records);
            if let Some(precision) = precision {
                text.push_str(&crate::experiments::sweep::report::precision_text(
                    precision,
                ));
            }
            text
        }
        Section::Cksum {
            batches,
            records,
            sweep_model,
        } => {
            let mut text = format!("netlab cksum: ns per KB, median of {batches} batches\n");
            text.push_str(&cksum::table(records));
            if let (Some(model), Some((copy, sum))) = (sweep_model, per_byte_costs(records, 65536))
            {
                text.push_str(&format!(
                    "the stream sweep's {} (loopback: two copies per byte, no checksum; copy and checksum costs hot at 64 KB)\n",
                    split(model.per_byte * 1e9, copy, sum, 2, 0).describe()
                ));
            }
            text
        }
        Section::Login { window_s, records } => format!(
            "netlab login: users typing 5 chars/s into `cat > /dev/null` (netlab's designs over rlogin), {window_s} s windows, {}\n{}",
            where_run(records.iter().map(|r| &r.data.params.placement)),
            login::table(records)
        ),
        Section::LoginLimits { records } => login::design_limits(records),
        Section::Output { bytes, records } => format!(
            "netlab output: {} of text typed through each design (unpaced), {}\n{}",
            format_size(*bytes),
            where_run(records.iter().map(|r| &r.data.params.placement)),
            crate::experiments::output::report::output_table(records)
        ),
    }
}

/// Where a section's cells ran, each place once in order: loopback, a
/// netns link by its profile, or from one host to another.
fn where_run<'a>(placements: impl IntoIterator<Item = &'a Placement>) -> String {
    let mut places: Vec<String> = Vec::new();
    for placement in placements {
        let place = match placement {
            Placement::Loopback => "loopback".to_string(),
            Placement::Netns { link, .. } => format!(
                "netns over {}",
                link.name.as_deref().unwrap_or("a custom link")
            ),
            Placement::Remote { from, to } => format!("from {from} to {to}"),
        };
        if !places.contains(&place) {
            places.push(place);
        }
    }
    places.join(", ")
}
