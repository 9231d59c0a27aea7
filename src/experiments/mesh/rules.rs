//! Prometheus alert rules for the continuous mesh's metrics
//! ([`super::metrics`]): a host whose row or column is bad, a path whose
//! loss is above the SLO, an agent that does not answer, and a controller
//! that stopped measuring. Each waits two probe cycles (`for:`), so one
//! unlucky cycle raises nothing. `netlab mesh rules` prints them for the
//! options given; `deploy/prometheus/netlab-rules.yml` holds them for the
//! defaults (a test keeps the two equal and `promtool check rules` passes
//! on both).

use crate::export::Export;
use crate::export::rules::{AlertRule, RuleFile, RuleGroup, duration};
use std::time::Duration;

/// A host is bad in its row (or column) when at least this share of its
/// paths breach the SLO: one bad path out of many is that path's.
pub const BAD_SHARE: f64 = 0.5;

/// What the rules are written for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleSettings {
    /// The probe cycle (`--every`).
    pub every: Duration,
    /// The loss SLO, a ratio (`--loss-slo`).
    pub loss_ratio: f64,
}

/// The rules for `settings`, as data.
pub fn rule_file(settings: RuleSettings) -> RuleFile {
    let two_cycles = Some(settings.every * 2);
    // A controller is stale after three cycles without one finishing (a
    // throughput pass delays the probes by its own length).
    let stale_s = (settings.every * 3).as_secs().max(1);
    let loss = settings.loss_ratio;
    let loss_pct = 100.0 * loss;
    let rule = |alert: &str, expr: String, severity: &str, summary: String, description: String| {
        AlertRule {
            alert: alert.into(),
            expr,
            hold: two_cycles,
            labels: vec![("severity".into(), severity.into())],
            annotations: vec![
                ("summary".into(), summary),
                ("description".into(), description),
            ],
        }
    };
    let stale = AlertRule {
        hold: None,
        ..rule(
            "NetlabMeshStale",
            format!(
                "time() - netlab_mesh_last_cycle_timestamp_seconds{{kind=\"probe\"}} > {stale_s}"
            ),
            "warning",
            format!("the mesh controller finished no probe cycle for {stale_s} s"),
            "The continuous controller stopped measuring (stopped, stuck, or a throughput pass far longer than the probe cycle).".into(),
        )
    };
    RuleFile {
        header: vec![
            format!(
                "Alert rules for netlab's continuous mesh (netlab mesh --every {} --loss-slo {loss_pct}%).",
                duration(settings.every)
            ),
            "Made by `netlab mesh rules`; check with `promtool check rules`.".into(),
        ],
        groups: vec![RuleGroup {
            name: "netlab-mesh".into(),
            rules: vec![
                rule(
                    "NetlabHostRowBad",
                    format!("netlab_mesh_row_bad_ratio >= {BAD_SHARE}"),
                    "warning",
                    "{{ $labels.from }} sends badly: {{ $value | humanizePercentage }} of its paths breach the SLO".into(),
                    format!("Most paths from {{{{ $labels.from }}}} (zone {{{{ $labels.zone }}}}, rack {{{{ $labels.rack }}}}) lose more than {loss_pct}% of probes or fail: look at the host's sending side (its NIC, its link, its ToR port) before the paths."),
                ),
                rule(
                    "NetlabHostColumnBad",
                    format!("netlab_mesh_column_bad_ratio >= {BAD_SHARE}"),
                    "warning",
                    "{{ $labels.to }} receives badly: {{ $value | humanizePercentage }} of its paths breach the SLO".into(),
                    format!("Most paths to {{{{ $labels.to }}}} (zone {{{{ $labels.zone }}}}, rack {{{{ $labels.rack }}}}) lose more than {loss_pct}% of probes or fail: look at the host's receiving side."),
                ),
                rule(
                    "NetlabPathLossAboveSLO",
                    format!("netlab_mesh_path_loss_ratio > {loss}"),
                    "warning",
                    format!("{{{{ $labels.from }}}} -> {{{{ $labels.to }}}} loses {{{{ $value | humanizePercentage }}}} of probes (SLO {loss_pct}%)"),
                    "The path's probes lost more than the SLO for two cycles; if the host's row or column is bad too, the host is the cause, not the path.".into(),
                ),
                rule(
                    "NetlabPathProbeFailed",
                    "netlab_mesh_path_failed == 1".into(),
                    "warning",
                    "{{ $labels.from }} -> {{ $labels.to }}: the probe failed".into(),
                    "A probe call went unanswered five times in a row: the path drops nearly everything, or the receiving agent is gone.".into(),
                ),
                rule(
                    "NetlabAgentUnreachable",
                    "netlab_mesh_agent_up == 0".into(),
                    "critical",
                    "agent {{ $labels.agent }} does not answer the controller".into(),
                    "The agent took no part in two probe cycles (down, its port blocked, or another key): its row and column are unmeasured.".into(),
                ),
                stale,
            ],
        }],
    }
}

/// The rule file's YAML.
pub fn render(settings: RuleSettings) -> String {
    // Every rule above is named once and has an expression.
    rule_file(settings)
        .render()
        .expect("the mesh's rules are well formed")
}

/// Writes the rules to `path` whole or not at all (a temporary file beside
/// it, renamed over it).
pub fn write(path: &std::path::Path, settings: RuleSettings) -> anyhow::Result<()> {
    use anyhow::Context;
    rule_file(settings)
        .write_to(path)
        .with_context(|| format!("--rules {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_wait_two_cycles_and_carry_the_slo() {
        let text = render(RuleSettings {
            every: Duration::from_secs(30),
            loss_ratio: 0.02,
        });
        assert!(text.contains("for: 1m"), "{text}");
        assert!(
            text.contains("netlab_mesh_path_loss_ratio > 0.02"),
            "{text}"
        );
        assert!(text.contains("> 90"), "{text}");
    }

    #[test]
    fn a_rule_file_that_cannot_be_written_is_an_error_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/rules.yml");
        let settings = RuleSettings {
            every: Duration::from_secs(30),
            loss_ratio: 0.01,
        };
        let error = write(&missing, settings).unwrap_err();
        assert!(format!("{error:#}").contains("--rules"), "{error:#}");
        let path = dir.path().join("rules.yml");
        write(&path, settings).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), render(settings));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
