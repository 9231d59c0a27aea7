//! Prometheus rule files (`rule_files:`, checked by `promtool check
//! rules`): groups of alerting rules, each with its expression, how long
//! it must hold (`for:`), its labels and its annotations. The rules are
//! data ([`RuleFile`]), the YAML is written here: names, expressions and
//! label values plain where YAML reads them back unchanged, double-quoted
//! (JSON's escapes, which YAML's double quotes share) otherwise;
//! annotations always quoted (their `{{ $labels.x }}` templates would
//! otherwise open a flow mapping).
//!
//! Invariants: a file with an unnamed rule, two rules of one name in a
//! group, or an empty expression is refused, never written.

use super::{Export, ExportError};
use std::time::Duration;

/// A rule file: comment lines, then its groups.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleFile {
    /// Lines said before the rules (what made the file, how to check it).
    pub header: Vec<String>,
    pub groups: Vec<RuleGroup>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleGroup {
    pub name: String,
    pub rules: Vec<AlertRule>,
}

/// One alerting rule.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRule {
    pub alert: String,
    /// PromQL, one line.
    pub expr: String,
    /// How long the expression must hold before the alert fires.
    pub hold: Option<Duration>,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
}

/// Prometheus' duration syntax for whole seconds (`90s`, `5m`, `2h`), at
/// least a second.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs().max(1);
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// `text` as a YAML scalar that reads back as `text`: plain when nothing
/// in it means something to YAML, else double-quoted.
fn scalar(text: &str) -> String {
    const INDICATORS: &str = "-?:,[]{}#&*!|>'\"%@`";
    let plain = !text.is_empty()
        && !text.starts_with(|c: char| INDICATORS.contains(c) || c.is_whitespace())
        && !text.ends_with(|c: char| c == ':' || c.is_whitespace())
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.chars().any(char::is_control)
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
        )
        && text.parse::<f64>().is_err();
    if plain {
        text.to_string()
    } else {
        quoted(text)
    }
}

/// `text` double-quoted, with JSON's escapes.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

fn refuse(reason: String) -> ExportError {
    ExportError::Render {
        format: RuleFile::FORMAT,
        reason,
    }
}

impl RuleFile {
    fn check(&self) -> Result<(), ExportError> {
        for group in &self.groups {
            if group.name.trim().is_empty() {
                return Err(refuse("a group has no name".into()));
            }
            let mut names = std::collections::HashSet::new();
            for rule in &group.rules {
                if rule.alert.trim().is_empty() {
                    return Err(refuse(format!("group {}: a rule has no name", group.name)));
                }
                if !names.insert(rule.alert.as_str()) {
                    return Err(refuse(format!(
                        "group {}: two rules named {}",
                        group.name, rule.alert
                    )));
                }
                if rule.expr.trim().is_empty() {
                    return Err(refuse(format!("rule {}: an empty expression", rule.alert)));
                }
            }
        }
        Ok(())
    }
}

impl Export for RuleFile {
    const FORMAT: &'static str = "Prometheus rules";
    const MEDIA_TYPE: &'static str = "application/yaml";

    fn render(&self) -> Result<String, ExportError> {
        self.check()?;
        let mut out = String::new();
        for line in &self.header {
            out.push_str(&format!("# {line}\n"));
        }
        out.push_str("groups:\n");
        for group in &self.groups {
            out.push_str(&format!("  - name: {}\n    rules:\n", scalar(&group.name)));
            for rule in &group.rules {
                out.push_str(&format!("      - alert: {}\n", scalar(&rule.alert)));
                out.push_str(&format!("        expr: {}\n", scalar(&rule.expr)));
                if let Some(hold) = rule.hold {
                    out.push_str(&format!("        for: {}\n", duration(hold)));
                }
                for (key, pairs, value) in [
                    ("labels", &rule.labels, scalar as fn(&str) -> String),
                    ("annotations", &rule.annotations, quoted),
                ] {
                    if pairs.is_empty() {
                        continue;
                    }
                    out.push_str(&format!("        {key}:\n"));
                    for (name, text) in pairs {
                        out.push_str(&format!("          {}: {}\n", scalar(name), value(text)));
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(alert: &str, expr: &str) -> AlertRule {
        AlertRule {
            alert: alert.into(),
            expr: expr.into(),
            hold: Some(Duration::from_secs(120)),
            labels: vec![("severity".into(), "warning".into())],
            annotations: vec![(
                "summary".into(),
                "{{ $labels.from }} \"sends\" badly".into(),
            )],
        }
    }

    fn file(rules: Vec<AlertRule>) -> RuleFile {
        RuleFile {
            header: vec!["made by a test".into()],
            groups: vec![RuleGroup {
                name: "g".into(),
                rules,
            }],
        }
    }

    #[test]
    fn durations_are_prometheus_s() {
        assert_eq!(duration(Duration::from_secs(60)), "1m");
        assert_eq!(duration(Duration::from_secs(90)), "90s");
        assert_eq!(duration(Duration::from_secs(7200)), "2h");
        assert_eq!(duration(Duration::ZERO), "1s");
    }

    #[test]
    fn what_is_written_reads_back_as_it_was() {
        let rules = vec![
            rule("A", "up == 0"),
            rule("B", "time() - x{kind=\"probe\"} > 90"),
            rule("C", "- starts with a dash: and has a colon #and a hash"),
            rule("D", "true"),
        ];
        let text = file(rules.clone()).render().unwrap();
        assert!(text.starts_with("# made by a test\ngroups:\n"), "{text}");
        assert!(text.contains("        expr: up == 0\n"), "{text}");
        let read: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        for (i, rule) in rules.iter().enumerate() {
            let got = &read["groups"][0]["rules"][i];
            assert_eq!(got["alert"], rule.alert.as_str());
            assert_eq!(got["expr"], rule.expr.as_str(), "{text}");
            assert_eq!(got["for"], "2m");
            assert_eq!(got["labels"]["severity"], "warning");
            assert_eq!(
                got["annotations"]["summary"],
                rule.annotations[0].1.as_str()
            );
        }
    }

    #[test]
    fn unnamed_twice_named_and_empty_rules_are_refused() {
        for (rules, says) in [
            (vec![rule("", "up")], "no name"),
            (
                vec![rule("A", "up"), rule("A", "down")],
                "two rules named A",
            ),
            (vec![rule("A", " ")], "empty expression"),
        ] {
            let e = file(rules).render().unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
