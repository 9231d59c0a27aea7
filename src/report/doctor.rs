//! `netlab doctor`'s text: one line per capability, its fix beneath when
//! it is missing or limited; and the short form the lab prints when it
//! skips something.

use crate::controller::doctor::{Capability, Status};

/// The full report.
pub fn text(found: &[Capability]) -> String {
    let mut out = String::new();
    for c in found {
        let mark = match c.status {
            Status::Ok => "ok     ",
            Status::Limited => "limited",
            Status::Missing => "MISSING",
        };
        out.push_str(&format!(
            "{mark} {:<24} {}  [{}]\n",
            c.name, c.detail, c.used_by
        ));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("        {:<24} fix: {fix}\n", ""));
        }
    }
    let gaps = found.iter().filter(|c| c.status != Status::Ok).count();
    out.push_str(&format!(
        "{} of {} capabilities fully here{}\n",
        found.len() - gaps,
        found.len(),
        if gaps == 0 {
            ""
        } else {
            "; each gap's fix is above"
        }
    ));
    out
}

/// One line naming what is missing or limited (None when nothing is).
pub fn short(found: &[Capability]) -> Option<String> {
    let gaps: Vec<String> = found
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| match c.status {
            Status::Limited => format!("{} (limited)", c.name),
            _ => c.name.clone(),
        })
        .collect();
    (!gaps.is_empty()).then(|| {
        format!(
            "doctor: this host lacks {}; `netlab doctor` says how to fix each\n",
            gaps.join(", ")
        )
    })
}

/// `netlab doctor --json`.
pub fn doc(found: &[Capability]) -> serde_json::Value {
    serde_json::json!({ "doctor": found })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(name: &str, status: Status) -> Capability {
        Capability {
            name: name.into(),
            status,
            detail: "d".into(),
            used_by: "u",
            fix: (status != Status::Ok).then(|| format!("get {name}")),
        }
    }

    #[test]
    fn the_short_form_names_only_the_gaps() {
        let found = [
            cap("tbf", Status::Ok),
            cap("netem", Status::Missing),
            cap("ptys", Status::Limited),
        ];
        assert_eq!(
            short(&found).unwrap(),
            "doctor: this host lacks netem, ptys (limited); `netlab doctor` says how to fix each\n"
        );
        assert_eq!(short(&found[..1]), None);
        let text = text(&found);
        assert!(text.contains("MISSING netem"), "{text}");
        assert!(text.contains("fix: get netem"), "{text}");
        assert!(text.ends_with("1 of 3 capabilities fully here; each gap's fix is above\n"));
    }
}
