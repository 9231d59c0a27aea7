//! Prometheus alert rules for the continuous mesh's metrics
//! ([`super::metrics`]): a host whose row or column is bad, a path whose
//! loss is above the SLO, an agent that does not answer, and a controller
//! that stopped measuring. Each waits two probe cycles (`for:`), so one
//! unlucky cycle raises nothing. `netlab mesh rules` prints them for the
//! options given; `deploy/prometheus/netlab-rules.yml` holds them for the
//! defaults (a test keeps the two equal and `promtool check rules` passes
//! on both).

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

/// Prometheus' duration syntax for whole seconds (`90s`, `5m`).
fn prom_duration(d: Duration) -> String {
    let s = d.as_secs().max(1);
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The rule file's YAML.
pub fn render(settings: RuleSettings) -> String {
    let two_cycles = prom_duration(settings.every * 2);
    // A controller is stale after three cycles without one finishing (a
    // throughput pass delays the probes by its own length).
    let stale_s = (settings.every * 3).as_secs().max(1);
    let loss = settings.loss_ratio;
    let loss_pct = 100.0 * loss;
    format!(
        r#"# Alert rules for netlab's continuous mesh (netlab mesh --every {every} --loss-slo {loss_pct}%).
# Made by `netlab mesh rules`; check with `promtool check rules`.
groups:
  - name: netlab-mesh
    rules:
      - alert: NetlabHostRowBad
        expr: netlab_mesh_row_bad_ratio >= {BAD_SHARE}
        for: {two_cycles}
        labels:
          severity: warning
        annotations:
          summary: "{{{{ $labels.from }}}} sends badly: {{{{ $value | humanizePercentage }}}} of its paths breach the SLO"
          description: "Most paths from {{{{ $labels.from }}}} (zone {{{{ $labels.zone }}}}, rack {{{{ $labels.rack }}}}) lose more than {loss_pct}% of probes or fail: look at the host's sending side (its NIC, its link, its ToR port) before the paths."
      - alert: NetlabHostColumnBad
        expr: netlab_mesh_column_bad_ratio >= {BAD_SHARE}
        for: {two_cycles}
        labels:
          severity: warning
        annotations:
          summary: "{{{{ $labels.to }}}} receives badly: {{{{ $value | humanizePercentage }}}} of its paths breach the SLO"
          description: "Most paths to {{{{ $labels.to }}}} (zone {{{{ $labels.zone }}}}, rack {{{{ $labels.rack }}}}) lose more than {loss_pct}% of probes or fail: look at the host's receiving side."
      - alert: NetlabPathLossAboveSLO
        expr: netlab_mesh_path_loss_ratio > {loss}
        for: {two_cycles}
        labels:
          severity: warning
        annotations:
          summary: "{{{{ $labels.from }}}} -> {{{{ $labels.to }}}} loses {{{{ $value | humanizePercentage }}}} of probes (SLO {loss_pct}%)"
          description: "The path's probes lost more than the SLO for two cycles; if the host's row or column is bad too, the host is the cause, not the path."
      - alert: NetlabPathProbeFailed
        expr: netlab_mesh_path_failed == 1
        for: {two_cycles}
        labels:
          severity: warning
        annotations:
          summary: "{{{{ $labels.from }}}} -> {{{{ $labels.to }}}}: the probe failed"
          description: "A probe call went unanswered five times in a row: the path drops nearly everything, or the receiving agent is gone."
      - alert: NetlabAgentUnreachable
        expr: netlab_mesh_agent_up == 0
        for: {two_cycles}
        labels:
          severity: critical
        annotations:
          summary: "agent {{{{ $labels.agent }}}} does not answer the controller"
          description: "The agent took no part in two probe cycles (down, its port blocked, or another key): its row and column are unmeasured."
      - alert: NetlabMeshStale
        expr: time() - netlab_mesh_last_cycle_timestamp_seconds{{kind="probe"}} > {stale_s}
        labels:
          severity: warning
        annotations:
          summary: "the mesh controller finished no probe cycle for {stale_s} s"
          description: "The continuous controller stopped measuring (stopped, stuck, or a throughput pass far longer than the probe cycle)."
"#,
        every = prom_duration(settings.every),
    )
}

/// Writes the rules to `path` whole or not at all (a temporary file beside
/// it, renamed over it).
pub fn write(path: &std::path::Path, settings: RuleSettings) -> anyhow::Result<()> {
    use anyhow::Context;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    // The file is replaced whole by a rename: never over something that
    // is not a regular file (as root, `--rules /dev/full` would have put
    // a file where the device was).
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => anyhow::bail!(
            "--rules {}: it exists and is not a regular file; netlab writes rules only to a file of its own",
            path.display()
        ),
        _ => {}
    }
    let mut file = tempfile::NamedTempFile::new_in(dir).with_context(|| {
        format!(
            "--rules {}: cannot write the rule file in {}",
            path.display(),
            dir.display()
        )
    })?;
    std::io::Write::write_all(&mut file, render(settings).as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("--rules {}: writing the rules", path.display()))?;
    file.persist(path)
        .map_err(|e| anyhow::anyhow!("--rules {}: {}", path.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_prometheus_s() {
        assert_eq!(prom_duration(Duration::from_secs(60)), "1m");
        assert_eq!(prom_duration(Duration::from_secs(90)), "90s");
        assert_eq!(prom_duration(Duration::from_secs(7200)), "2h");
    }

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
