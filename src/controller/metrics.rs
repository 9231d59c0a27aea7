//! `/metrics` over HTTP for Prometheus: a [`prometheus_client`] registry
//! encoded as OpenMetrics text (`application/openmetrics-text;
//! version=1.0.0`) at each scrape, served by `tiny_http` on one thread of
//! its own (netlab has no async runtime; a scrape every few seconds needs
//! none). Used by the continuous mesh controller and by agents.
//!
//! A scraper that asks for OpenMetrics (`Accept:
//! application/openmetrics-text`, as Prometheus does) gets it; any other
//! gets the same figures in Prometheus' text format 0.0.4
//! ([`text_004`]): there a counter's metadata is named with its `_total`
//! (OpenMetrics names the family without it), which is what `promtool
//! check metrics` (2.42, Debian's) reads; it reports OpenMetrics'
//! counters as lacking help.
//!
//! Invariants: the port is bound before [`serve`] returns, so a port in
//! use is an error at start, never a thread that fails later; anything
//! but `GET /metrics` (or `/`) is answered 404 or 405 without encoding;
//! dropping the [`MetricsServer`] stops its thread and frees the port.

use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The content type Prometheus asks for and the crate writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Prometheus' older text format, for scrapers that do not ask for
/// OpenMetrics (curl, `promtool check metrics`).
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why the metrics endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(
        "--metrics {0}: the port is in use (another exporter, or a netlab already serving there): choose another"
    )]
    InUse(SocketAddr),
    #[error("--metrics {0}: {1}")]
    Bind(SocketAddr, String),
}

/// A registry others update (under its lock) while the server reads it.
pub type SharedRegistry = Arc<Mutex<Registry>>;

/// A running `/metrics` endpoint; stops when dropped.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// The address it listens on (the port chosen when 0 was asked).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The registry's exposition now, as a scrape gets it.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail; a metric that cannot encode is a
    // bug of its own type, shown rather than hidden.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, registry) {
        text = format!("# netlab: the registry did not encode: {e}\n# EOF\n");
    }
    text
}

/// Serves `registry` at `http://ADDRESS/metrics` until the server is
/// dropped.
pub fn serve(address: SocketAddr, registry: SharedRegistry) -> Result<MetricsServer, MetricsError> {
    let server = tiny_http::Server::http(address).map_err(|e| {
        match e.downcast_ref::<std::io::Error>().map(|e| e.kind()) {
            Some(std::io::ErrorKind::AddrInUse) => MetricsError::InUse(address),
            _ => MetricsError::Bind(address, e.to_string()),
        }
    })?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| MetricsError::Bind(address, "not an IP listener".into()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let request = match server.recv_timeout(Duration::from_millis(100)) {
                    Ok(Some(request)) => request,
                    Ok(None) => continue,
                    Err(_) => continue,
                };
                let openmetrics = request.headers().iter().any(|h| {
                    h.field.equiv("Accept")
                        && h.value.as_str().contains("application/openmetrics-text")
                });
                let response = answer(request.method(), request.url(), openmetrics, &registry);
                // A scraper that went away costs nothing but its answer.
                let _ = request.respond(response);
            }
        })
        .map_err(|e| MetricsError::Bind(address, e.to_string()))?;
    Ok(MetricsServer {
        address: bound,
        stop,
        thread: Some(thread),
    })
}

/// OpenMetrics text as Prometheus' text format 0.0.4: a counter family's
/// `# HELP` and `# TYPE` named as its samples are (`_total`), `# UNIT`
/// and `# EOF` left out; samples as they are.
pub fn text_004(openmetrics: &str) -> String {
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

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

/// What a request gets: the exposition for `GET /metrics`, else an error.
fn answer(
    method: &tiny_http::Method,
    url: &str,
    openmetrics: bool,
    registry: &SharedRegistry,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let path = url.split('?').next().unwrap_or(url);
    match (method, path) {
        (tiny_http::Method::Get, "/metrics" | "/") => {
            let text = match registry.lock() {
                Ok(registry) => encode(&registry),
                Err(poisoned) => encode(&poisoned.into_inner()),
            };
            if openmetrics {
                tiny_http::Response::from_data(text.into_bytes())
                    .with_header(header("Content-Type", OPENMETRICS))
            } else {
                tiny_http::Response::from_data(text_004(&text).into_bytes())
                    .with_header(header("Content-Type", TEXT_004))
            }
        }
        (tiny_http::Method::Get, _) => {
            tiny_http::Response::from_data(b"not found\n".to_vec()).with_status_code(404)
        }
        _ => tiny_http::Response::from_data(b"GET /metrics only\n".to_vec())
            .with_status_code(405)
            .with_header(header("Allow", "GET")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use std::io::{Read, Write};

    fn get(address: SocketAddr, request: &str) -> String {
        let mut socket = std::net::TcpStream::connect(address).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        socket.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        let _ = socket.read_to_string(&mut reply);
        reply
    }

    #[test]
    fn a_scrape_gets_openmetrics_and_other_paths_do_not() {
        let mut registry = Registry::default();
        let runs = Counter::<u64>::default();
        registry.register("netlab_test_runs", "Runs", runs.clone());
        runs.inc_by(3);
        let registry = Arc::new(Mutex::new(registry));
        let server = serve("127.0.0.1:0".parse().unwrap(), registry).unwrap();
        let reply = get(
            server.address(),
            "GET /metrics HTTP/1.0\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n",
        );
        assert!(
            reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"),
            "{reply}"
        );
        assert!(reply.contains("application/openmetrics-text"), "{reply}");
        assert!(reply.contains("netlab_test_runs_total 3"), "{reply}");
        assert!(reply.trim_end().ends_with("# EOF"), "{reply}");
        // Without asking, the 0.0.4 text format: the counter's metadata
        // named as its sample.
        let plain = get(server.address(), "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(plain.contains("text/plain; version=0.0.4"), "{plain}");
        assert!(
            plain.contains("# TYPE netlab_test_runs_total counter"),
            "{plain}"
        );
        assert!(!plain.contains("# EOF"), "{plain}");
        let missing = get(server.address(), "GET /nothing HTTP/1.0\r\n\r\n");
        assert!(missing.contains(" 404 "), "{missing}");
        let post = get(
            server.address(),
            "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(post.contains(" 405 "), "{post}");
    }

    #[test]
    fn a_port_in_use_is_refused_by_name() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap();
        let error = serve(address, Arc::default()).err().expect("refused");
        assert!(matches!(error, MetricsError::InUse(_)), "{error}");
        assert!(error.to_string().contains("in use"), "{error}");
    }
}
