//! The lab's sections as text: each experiment's table in its source's
//! shape, the historical figures beside, as `netlab lab` prints them and
//! writes them to `tables.txt`.

use super::{cksum, login, rpc, tables};
use crate::analysis::cksum::per_byte_costs;
use crate::analysis::split::split;
use crate::experiment::lab::Section;
use crate::record::testbed::Placement;
use crate::record::{Record, RecordData};
use crate::units::format_size;

/// A stream table with the 1981 figures beside it.
pub fn stream_section(title: &str, records: &[Record]) -> String {
    let mut text = tables::stream_table(title, records);
    if let Some(line) = tables::berkeley_then_now(records) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// One section of the lab as it prints.
pub fn text(section: &Section) -> String {
    match section {
        Section::Skipped(note) => format!("skipped: {note}\n"),
        Section::Stream { title, records } => stream_section(title, records),
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
            let mut text = tables::sweep_table(title, summary, records);
            if let Some(precision) = precision {
                text.push_str(&tables::precision_text(precision));
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
            where_run(records),
            login::table(records)
        ),
        Section::LoginLimits { records } => login::design_limits(records),
        Section::Output { bytes, records } => format!(
            "netlab output: {} of text typed through each design (unpaced), {}\n{}",
            format_size(*bytes),
            where_run(records),
            login::output_table(records)
        ),
    }
}

/// Where a section's cells ran, each place once in order: loopback, a
/// netns link by its profile, or from one host to another.
fn where_run(records: &[Record]) -> String {
    let mut places: Vec<String> = Vec::new();
    for record in records {
        let placement = match &record.data {
            RecordData::Login { params, .. } => &params.placement,
            RecordData::Output { params, .. } => &params.placement,
            _ => continue,
        };
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
