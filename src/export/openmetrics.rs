//! Prometheus' two exposition formats for a [`prometheus_client`]
//! registry: OpenMetrics 1.0 text ([`OpenMetrics`], what Prometheus asks
//! for) and the older text format 0.0.4 ([`Text004`], for `curl` and
//! `promtool check metrics`), the same figures in each.

use super::{Export, ExportError};
use prometheus_client::registry::Registry;

/// A registry as OpenMetrics text, as a scrape gets it.
pub struct OpenMetrics<'a>(pub &'a Registry);

impl OpenMetrics<'_> {
    /// The exposition, a metric that cannot encode (a bug of its own
    /// type) shown in a comment rather than hidden: a scrape always gets
    /// text.
    pub fn text(&self) -> String {
        self.render()
            .unwrap_or_else(|e| format!("# netlab: {e}\n# EOF\n"))
    }
}

impl Export for OpenMetrics<'_> {
    const FORMAT: &'static str = "OpenMetrics";
    const MEDIA_TYPE: &'static str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    fn render(&self) -> Result<String, ExportError> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, self.0).map_err(|e| {
            ExportError::Render {
                format: Self::FORMAT,
                reason: format!("the registry did not encode: {e}"),
            }
        })?;
        Ok(text)
    }
}

/// A registry in Prometheus' text format 0.0.4: there a counter's
/// metadata is named with its `_total` (OpenMetrics names the family
/// without it), which is what `promtool check metrics` (2.42, Debian's)
/// reads; it reports OpenMetrics' counters as lacking help.
pub struct Text004<'a>(pub &'a Registry);

impl Text004<'_> {
    /// As [`OpenMetrics::text`]: always text.
    pub fn text(&self) -> String {
        text_004(&OpenMetrics(self.0).text())
    }
}

impl Export for Text004<'_> {
    const FORMAT: &'static str = "Prometheus text 0.0.4";
    const MEDIA_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";

    fn render(&self) -> Result<String, ExportError> {
        Ok(text_004(&OpenMetrics(self.0).render()?))
    }
}

/// OpenMetrics text as Prometheus' text format 0.0.4: a counter family's
/// `# HELP` and `# TYPE` named as its samples are (`_total`), `# UNIT`
/// and `# EOF` left out; samples as they are.
fn text_004(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{prefix}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;

    #[test]
    fn a_counter_is_named_with_its_total_in_004_and_without_in_openmetrics() {
        let mut registry = Registry::default();
        let calls: Counter = Counter::default();
        calls.inc_by(3);
        registry.register("netlab_calls", "Calls made", calls);
        let up: Gauge = Gauge::default();
        up.set(1);
        registry.register("netlab_up", "Up", up);
        let open = OpenMetrics(&registry).render().unwrap();
        assert!(open.contains("# TYPE netlab_calls counter\n"), "{open}");
        assert!(open.contains("netlab_calls_total 3\n"), "{open}");
        assert!(open.ends_with("# EOF\n"), "{open}");
        let old = Text004(&registry).render().unwrap();
        assert!(old.contains("# TYPE netlab_calls_total counter\n"), "{old}");
        assert!(
            old.contains("# HELP netlab_calls_total Calls made"),
            "{old}"
        );
        assert!(old.contains("# TYPE netlab_up gauge\n"), "{old}");
        assert!(old.contains("netlab_up 1\n"), "{old}");
        assert!(!old.contains("# EOF"), "{old}");
    }
}
