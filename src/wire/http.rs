//! The head of an HTTP/1.x request (RFC 9112 §2-3, §5, §9.3), as the
//! metrics endpoints read it from strangers: bounded before it is parsed,
//! parsed by `httparse`, and reduced to the few facts a scrape needs.
//!
//! Invariants: [`read_head`] looks at no more than [`MAX_HEAD`] bytes and
//! refuses a head that does not fit, a line longer than [`MAX_LINE`] and
//! more than [`MAX_HEADERS`] header fields, whatever arrives after them;
//! a request that carries a body is refused (a scrape has none, and a
//! body not read would be taken for the next request); [`emit_head`]
//! writes a [`Head`] that [`read_head`] reads back the same.

/// The most bytes a request's head (its line and header fields) may take.
pub const MAX_HEAD: usize = 8 * 1024;
/// The longest line of a head, its CRLF included.
pub const MAX_LINE: usize = 4 * 1024;
/// The most header fields a head may carry.
pub const MAX_HEADERS: usize = 32;

/// The methods a metrics endpoint tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// Any other token (RFC 9110 §9): answered 405.
    Other,
}

/// What a request's head said, as far as a scrape needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: Method,
    /// The target's path, without its query.
    pub path: String,
    /// HTTP/1.1 (true) or HTTP/1.0.
    pub http11: bool,
    /// Whether the connection stays open after the answer (RFC 9112 §9.3:
    /// 1.1 unless `Connection: close`, 1.0 only with `keep-alive`).
    pub keep_alive: bool,
    /// Whether `Accept` names OpenMetrics' text format.
    pub openmetrics: bool,
}

/// Why a head was refused, with the status it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the request's head is over {MAX_HEAD} bytes")]
    HeadTooLong,
    #[error("a line of the request's head is over {MAX_LINE} bytes")]
    LineTooLong,
    #[error("the request has over {MAX_HEADERS} header fields")]
    TooManyHeaders,
    #[error("the request carries a body")]
    Body,
    #[error("the request is not HTTP/1.x")]
    Malformed,
}

impl Refused {
    /// The status line's code and reason.
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Refused::HeadTooLong | Refused::LineTooLong | Refused::TooManyHeaders => {
                (431, "Request Header Fields Too Large")
            }
            Refused::Body => (413, "Content Too Large"),
            Refused::Malformed => (400, "Bad Request"),
        }
    }
}

/// What the bytes so far hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// A whole head, and how many bytes it took.
    Whole(Head, usize),
    /// Not whole yet, and within every bound.
    Partial,
}

/// Reads the head at the start of `bytes` (what arrived on a connection,
/// pipelined requests after it included).
pub fn read_head(bytes: &[u8]) -> Result<Reading, Refused> {
    let window = &bytes[..bytes.len().min(MAX_HEAD)];
    // Each line with its LF (the last one, unended, as far as it goes).
    let too_long = |part: &[u8]| part.split(|&b| b == b'\n').any(|l| l.len() + 1 > MAX_LINE);
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let parsed = request.parse(window);
    let taken = match parsed {
        Ok(httparse::Status::Complete(n)) if too_long(&window[..n]) => {
            return Err(Refused::LineTooLong);
        }
        Ok(httparse::Status::Complete(n)) => n,
        _ if too_long(window) => return Err(Refused::LineTooLong),
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => {
            return Err(Refused::HeadTooLong);
        }
        Ok(httparse::Status::Partial) => return Ok(Reading::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err(Refused::TooManyHeaders),
        Err(_) => return Err(Refused::Malformed),
    };
    let http11 = match request.version {
        Some(1) => true,
        Some(0) => false,
        _ => return Err(Refused::Malformed),
    };
    let method = match request.method.unwrap_or_default() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    let target = request.path.unwrap_or_default();
    let path = target.split('?').next().unwrap_or(target).to_string();
    // A target with no path before its query (`?x`) is no form RFC 9112
    // §3.2 allows (origin-form starts with `/`); found by fuzz/http_head.
    if path.is_empty() {
        return Err(Refused::Malformed);
    }
    let field = |name: &'static str| {
        request
            .headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
    };
    let carries_body = field("content-length").any(|v| v.trim() != "0")
        || field("transfer-encoding").next().is_some();
    if carries_body {
        return Err(Refused::Body);
    }
    let connection: Vec<String> = field("connection")
        .flat_map(|v| {
            v.split(',')
                .map(|t| t.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let keep_alive = if http11 {
        !connection.iter().any(|t| t == "close")
    } else {
        connection.iter().any(|t| t == "keep-alive")
    };
    let openmetrics = field("accept").any(|v| v.contains("application/openmetrics-text"));
    Ok(Reading::Whole(
        Head {
            method,
            path,
            http11,
            keep_alive,
            openmetrics,
        },
        taken,
    ))
}

/// A head that [`read_head`] reads as `head` (for tests and fuzzing: the
/// round trip; `Method::Other` is written as `POST`).
pub fn emit_head(head: &Head) -> Vec<u8> {
    let method = match head.method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Other => "POST",
    };
    let version = if head.http11 { "1.1" } else { "1.0" };
    let mut text = format!("{method} {} HTTP/{version}\r\n", head.path);
    match (head.http11, head.keep_alive) {
        (true, false) => text.push_str("Connection: close\r\n"),
        (false, true) => text.push_str("Connection: keep-alive\r\n"),
        _ => {}
    }
    if head.openmetrics {
        text.push_str("Accept: application/openmetrics-text;version=1.0.0\r\n");
    }
    text.push_str("\r\n");
    text.into_bytes()
}

/// An answer's head and body, as bytes to send; `with_body` false for HEAD
/// (the same head, RFC 9110 §9.3.2).
pub fn emit_answer(
    (code, reason): (u16, &str),
    fields: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
    with_body: bool,
) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {code} {reason}\r\n");
    for (name, value) in fields {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    out.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let mut bytes = out.into_bytes();
    if with_body {
        bytes.extend_from_slice(body);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_prometheus_scrape_is_read_with_what_follows_it_left() {
        let scrape = b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\nUser-Agent: Prometheus/2.42\r\n\r\nGET /";
        let Ok(Reading::Whole(head, taken)) = read_head(scrape) else {
            panic!("{:?}", read_head(scrape));
        };
        assert_eq!(&scrape[taken..], b"GET /");
        assert_eq!(head.method, Method::Get);
        assert_eq!(head.path, "/metrics");
        assert!(head.http11 && head.keep_alive && head.openmetrics);
        let plain = read_head(b"HEAD / HTTP/1.0\r\n\r\n").unwrap();
        let Reading::Whole(head, _) = plain else {
            panic!()
        };
        assert_eq!(head.method, Method::Head);
        assert!(!head.keep_alive && !head.openmetrics);
    }

    #[test]
    fn every_bound_is_refused_by_name() {
        assert_eq!(read_head(b"GET /metrics HT"), Ok(Reading::Partial));
        let long_line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_LINE));
        assert_eq!(read_head(long_line.as_bytes()), Err(Refused::LineTooLong));
        // A line that never ends is refused once it passes the bound, not
        // buffered until it does end.
        let unended = "X".repeat(MAX_LINE + 1);
        assert_eq!(read_head(unended.as_bytes()), Err(Refused::LineTooLong));
        let many = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            (0..=MAX_HEADERS)
                .map(|i| format!("X-{i}: 1\r\n"))
                .collect::<String>()
        );
        assert_eq!(read_head(many.as_bytes()), Err(Refused::TooManyHeaders));
        let wide = format!(
            "GET / HTTP/1.1\r\n{}",
            (0..30)
                .map(|i| format!("X-{i}: {}\r\n", "v".repeat(400)))
                .collect::<String>()
        );
        assert_eq!(read_head(wide.as_bytes()), Err(Refused::HeadTooLong));
        assert_eq!(
            read_head(b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
            Err(Refused::Body)
        );
        assert_eq!(
            read_head(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(Refused::Body)
        );
        assert_eq!(
            read_head(b"\x16\x03\x01\x02\x00\r\n\r\n"),
            Err(Refused::Malformed)
        );
        assert_eq!(Refused::LineTooLong.status().0, 431);
        // No path before the query (fuzz/http_head's find, 2026-12-04):
        // read, it could not be written back.
        assert_eq!(
            read_head(b"\n\n1SXXS^ ? HTTP/1.0\r\n\r\n"),
            Err(Refused::Malformed)
        );
        assert_eq!(
            read_head(b"GET ?x=1 HTTP/1.1\r\n\r\n"),
            Err(Refused::Malformed)
        );
    }

    fn heads() -> impl Strategy<Value = Head> {
        (
            prop_oneof![Just(Method::Get), Just(Method::Head), Just(Method::Other)],
            "/[a-z0-9/_.-]{0,40}",
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(method, path, http11, keep_alive, openmetrics)| Head {
                method,
                path,
                http11,
                keep_alive,
                openmetrics,
            })
    }

    proptest! {
        #[test]
        fn a_written_head_reads_back_the_same(head in heads(), tail in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut bytes = emit_head(&head);
            let len = bytes.len();
            bytes.extend(tail);
            prop_assert_eq!(read_head(&bytes), Ok(Reading::Whole(head, len)));
        }

        #[test]
        fn any_bytes_are_read_or_refused_within_the_bound(bytes in proptest::collection::vec(any::<u8>(), 0..(MAX_HEAD * 2))) {
            match read_head(&bytes) {
                Ok(Reading::Whole(_, taken)) => prop_assert!(taken <= MAX_HEAD.min(bytes.len())),
                Ok(Reading::Partial) => prop_assert!(bytes.len() < MAX_HEAD),
                Err(_) => {}
            }
        }
    }
}
