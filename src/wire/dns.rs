//! DNS messages (RFC 1035 section 4), the part a mesh needs to find its
//! agents by SRV records (RFC 2782): a query with an EDNS(0) OPT record
//! (RFC 6891) offering a large UDP answer, and a response's answers read
//! as SRV, A and AAAA records (others are kept by type, unread).
//!
//! Invariants: parsing never panics and never loops (a compression
//! pointer must point backwards, at most [`MAX_POINTERS`] are followed a
//! name, and a name is at most 255 bytes); counts in the header are
//! believed only as far as the bytes go. Emitting writes names
//! uncompressed, so a response read then written reads back the same.

use std::net::{Ipv4Addr, Ipv6Addr};
use thiserror::Error;

/// Record types this module reads.
pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const TYPE_SRV: u16 = 33;
pub const TYPE_OPT: u16 = 41;
pub const CLASS_IN: u16 = 1;
/// The UDP answer size a query offers (EDNS(0)).
pub const UDP_PAYLOAD: u16 = 4096;
/// Compression pointers followed in one name at most.
pub const MAX_POINTERS: usize = 64;
const HEADER_LEN: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DnsError {
    #[error("the message ends inside {0}")]
    Short(&'static str),
    #[error("a name's label is longer than 63 bytes")]
    LongLabel,
    #[error("a name is longer than 255 bytes")]
    LongName,
    #[error("a compression pointer does not point backwards")]
    BadPointer,
    #[error("more than {MAX_POINTERS} compression pointers in one name")]
    PointerLoop,
    #[error("a label has the reserved prefix bits 01 or 10")]
    ReservedLabel,
    #[error("a label holds a byte that is not printable ASCII, or a dot")]
    OddLabel,
    #[error("{0:?} is not a name to ask for (labels of 1 to 63 bytes, 255 in all)")]
    BadQueryName(String),
    #[error("a {0} record's data is {1} bytes long")]
    BadRdata(&'static str, usize),
    #[error("not a response")]
    NotResponse,
}

/// An SRV record's data (RFC 2782).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    pub target: String,
}

/// A resource record's data, as far as it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RData {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Srv(Srv),
    /// Another type: its number and raw data.
    Other(u16, Vec<u8>),
}

/// One answer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub class: u16,
    pub ttl: u32,
    pub data: RData,
}

/// What a response says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub id: u16,
    /// TC: the answer did not fit (ask again over TCP).
    pub truncated: bool,
    /// RCODE: 0 no error, 3 no such name, ...
    pub rcode: u8,
    /// The question's name and type, when it had one.
    pub question: Option<(String, u16)>,
    pub answers: Vec<Record>,
}

/// Writes `name` as labels ending in the root.
fn emit_name(name: &str, out: &mut Vec<u8>) -> Result<(), DnsError> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let mut length = 1;
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(DnsError::BadQueryName(name.to_string()));
            }
            length += 1 + label.len();
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
    }
    if length > 255 {
        return Err(DnsError::BadQueryName(name.to_string()));
    }
    out.push(0);
    Ok(())
}

/// A recursive query for `name`'s records of `qtype`, offering
/// [`UDP_PAYLOAD`] bytes of answer.
pub fn query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, DnsError> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&id.to_be_bytes());
    // RD (recursion desired); one question, one additional (the OPT).
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
    emit_name(name, &mut out)?;
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    // OPT: root name, type 41, class = payload size, TTL 0, no options.
    out.push(0);
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&UDP_PAYLOAD.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    Ok(out)
}

/// Reads bytes off a message.
struct Reader<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DnsError> {
        let end = self.at.checked_add(n).ok_or(DnsError::Short(what))?;
        let bytes = self.msg.get(self.at..end).ok_or(DnsError::Short(what))?;
        self.at = end;
        Ok(bytes)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, DnsError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DnsError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A name at the cursor, following compression pointers (each to an
    /// earlier place), as dotted text (no trailing dot; the root is "").
    fn name(&mut self) -> Result<String, DnsError> {
        let mut labels: Vec<String> = Vec::new();
        let mut length = 1usize;
        let mut at = self.at;
        let mut resume = None;
        let mut pointers = 0;
        loop {
            let len = *self.msg.get(at).ok_or(DnsError::Short("a name"))? as usize;
            match len & 0xC0 {
                0x00 => {
                    at += 1;
                    if len == 0 {
                        break;
                    }
                    let label = self
                        .msg
                        .get(at..at + len)
                        .ok_or(DnsError::Short("a label"))?;
                    length += 1 + len;
                    if length > 255 {
                        return Err(DnsError::LongName);
                    }
                    // Host names are letters, digits, '-' and '_': a byte
                    // outside printable ASCII, or a dot inside a label,
                    // would not read back as the same name.
                    if label.iter().any(|&b| !b.is_ascii_graphic() || b == b'.') {
                        return Err(DnsError::OddLabel);
                    }
                    labels.push(label.iter().map(|&b| b as char).collect());
                    at += len;
                }
                0xC0 => {
                    let low = *self.msg.get(at + 1).ok_or(DnsError::Short("a pointer"))?;
                    let target = ((len & 0x3F) << 8) | low as usize;
                    if target >= at {
                        return Err(DnsError::BadPointer);
                    }
                    pointers += 1;
                    if pointers > MAX_POINTERS {
                        return Err(DnsError::PointerLoop);
                    }
                    resume.get_or_insert(at + 2);
                    at = target;
                }
                _ => return Err(DnsError::ReservedLabel),
            }
        }
        self.at = resume.unwrap_or(at);
        Ok(labels.join("."))
    }
}

/// Parses a response; answers of types other than A, AAAA and SRV are kept
/// raw, the authority and additional sections are not read.
pub fn parse_response(msg: &[u8]) -> Result<Response, DnsError> {
    let mut r = Reader { msg, at: 0 };
    let header = r.take(HEADER_LEN, "the header")?;
    let id = u16::from_be_bytes([header[0], header[1]]);
    if header[2] & 0x80 == 0 {
        return Err(DnsError::NotResponse);
    }
    let truncated = header[2] & 0x02 != 0;
    let rcode = header[3] & 0x0F;
    let questions = u16::from_be_bytes([header[4], header[5]]);
    let answers = u16::from_be_bytes([header[6], header[7]]);
    let mut question = None;
    for _ in 0..questions {
        let name = r.name()?;
        let qtype = r.u16("a question")?;
        let _class = r.u16("a question")?;
        question.get_or_insert((name, qtype));
    }
    let mut records = Vec::new();
    for _ in 0..answers {
        let name = r.name()?;
        let rtype = r.u16("a record")?;
        let class = r.u16("a record")?;
        let ttl = r.u32("a record")?;
        let len = r.u16("a record")? as usize;
        let start = r.at;
        let rdata = r.take(len, "a record's data")?;
        let data = match rtype {
            TYPE_A => RData::A(Ipv4Addr::from(
                <[u8; 4]>::try_from(rdata).map_err(|_| DnsError::BadRdata("A", len))?,
            )),
            TYPE_AAAA => RData::Aaaa(Ipv6Addr::from(
                <[u8; 16]>::try_from(rdata).map_err(|_| DnsError::BadRdata("AAAA", len))?,
            )),
            TYPE_SRV => {
                // The target may be compressed (RFC 2782 says not, some
                // servers do): read it in the whole message, within the data.
                let mut inner = Reader { msg, at: start };
                let priority = inner.u16("an SRV record")?;
                let weight = inner.u16("an SRV record")?;
                let port = inner.u16("an SRV record")?;
                let target = inner.name()?;
                if inner.at > start + len {
                    return Err(DnsError::BadRdata("SRV", len));
                }
                RData::Srv(Srv {
                    priority,
                    weight,
                    port,
                    target,
                })
            }
            other => RData::Other(other, rdata.to_vec()),
        };
        records.push(Record {
            name,
            class,
            ttl,
            data,
        });
    }
    Ok(Response {
        id,
        truncated,
        rcode,
        question,
        answers: records,
    })
}

/// Writes `response` (names uncompressed): what a test's server sends,
/// and the other half of the parser's round trip.
pub fn emit_response(response: &Response) -> Result<Vec<u8>, DnsError> {
    let mut out = Vec::new();
    out.extend_from_slice(&response.id.to_be_bytes());
    out.push(0x81 | if response.truncated { 0x02 } else { 0 });
    out.push(0x80 | (response.rcode & 0x0F));
    out.extend_from_slice(&u16::from(response.question.is_some()).to_be_bytes());
    let count = u16::try_from(response.answers.len()).map_err(|_| DnsError::LongName)?;
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    if let Some((name, qtype)) = &response.question {
        emit_name(name, &mut out)?;
        out.extend_from_slice(&qtype.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
    }
    for record in &response.answers {
        emit_name(&record.name, &mut out)?;
        let (rtype, data) = match &record.data {
            RData::A(ip) => (TYPE_A, ip.octets().to_vec()),
            RData::Aaaa(ip) => (TYPE_AAAA, ip.octets().to_vec()),
            RData::Srv(srv) => {
                let mut data = Vec::new();
                data.extend_from_slice(&srv.priority.to_be_bytes());
                data.extend_from_slice(&srv.weight.to_be_bytes());
                data.extend_from_slice(&srv.port.to_be_bytes());
                emit_name(&srv.target, &mut data)?;
                (TYPE_SRV, data)
            }
            RData::Other(rtype, data) => (*rtype, data.clone()),
        };
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&record.class.to_be_bytes());
        out.extend_from_slice(&record.ttl.to_be_bytes());
        let len = u16::try_from(data.len()).map_err(|_| DnsError::BadRdata("a", data.len()))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&data);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srv(target: &str, port: u16) -> Record {
        Record {
            name: "_control._tcp.netlab-agents.netlab.svc.cluster.local".into(),
            class: CLASS_IN,
            ttl: 30,
            data: RData::Srv(Srv {
                priority: 0,
                weight: 50,
                port,
                target: target.into(),
            }),
        }
    }

    #[test]
    fn a_query_reads_as_drawn_in_rfc_1035() {
        let q = query(0x1234, "_control._tcp.a.b", TYPE_SRV).unwrap();
        assert_eq!(&q[..12], &[0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&q[12..21], b"\x08_control");
        // The question ends with SRV, IN; the OPT offers 4096 bytes.
        let opt = q.len() - 11;
        assert_eq!(&q[opt - 4..opt], &[0, 33, 0, 1]);
        assert_eq!(&q[opt..], &[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        assert!(query(1, &"a".repeat(64), TYPE_A).is_err());
        assert!(query(1, "a..b", TYPE_A).is_err());
    }

    #[test]
    fn a_response_round_trips_and_compressed_targets_are_read() {
        let response = Response {
            id: 7,
            truncated: false,
            rcode: 0,
            question: Some((
                "_control._tcp.netlab-agents.netlab.svc.cluster.local".into(),
                TYPE_SRV,
            )),
            answers: vec![
                srv("10-0-0-1.netlab-agents.netlab.svc.cluster.local", 5310),
                srv("10-0-0-2.netlab-agents.netlab.svc.cluster.local", 5310),
                Record {
                    name: "x".into(),
                    class: CLASS_IN,
                    ttl: 1,
                    data: RData::A(Ipv4Addr::new(10, 0, 0, 1)),
                },
            ],
        };
        let bytes = emit_response(&response).unwrap();
        assert_eq!(parse_response(&bytes).unwrap(), response);
        // A target written as a pointer to the question's name.
        let mut compressed = emit_response(&Response {
            answers: vec![],
            ..response.clone()
        })
        .unwrap();
        compressed[7] = 1;
        compressed.extend_from_slice(&[0xC0, 12, 0, 33, 0, 1, 0, 0, 0, 30, 0, 8]);
        compressed.extend_from_slice(&[0, 1, 0, 2, 0x14, 0xBE, 0xC0, 12]);
        let read = parse_response(&compressed).unwrap();
        assert_eq!(
            read.answers[0].data,
            RData::Srv(Srv {
                priority: 1,
                weight: 2,
                port: 5310,
                target: "_control._tcp.netlab-agents.netlab.svc.cluster.local".into()
            })
        );
    }

    #[test]
    fn loops_forward_pointers_and_short_messages_are_refused() {
        let mut msg = vec![0, 1, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0];
        // A pointer to itself.
        msg.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        assert_eq!(parse_response(&msg), Err(DnsError::BadPointer));
        let mut short = vec![0, 1, 0x81, 0x80, 0, 0, 0, 5, 0, 0, 0, 0];
        assert!(matches!(parse_response(&short), Err(DnsError::Short(_))));
        short[2] = 0x01;
        assert_eq!(parse_response(&short), Err(DnsError::NotResponse));
        assert!(matches!(
            parse_response(&[1, 2, 3]),
            Err(DnsError::Short(_))
        ));
    }

    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        "[a-z0-9_-]{1,12}(\\.[a-z0-9-]{1,12}){0,4}"
    }

    fn record() -> impl Strategy<Value = Record> {
        let data = prop_oneof![
            any::<[u8; 4]>().prop_map(|b| RData::A(Ipv4Addr::from(b))),
            any::<[u8; 16]>().prop_map(|b| RData::Aaaa(Ipv6Addr::from(b))),
            (any::<u16>(), any::<u16>(), any::<u16>(), name()).prop_map(
                |(priority, weight, port, target)| RData::Srv(Srv {
                    priority,
                    weight,
                    port,
                    target
                })
            ),
            (100u16..200, proptest::collection::vec(any::<u8>(), 0..20))
                .prop_map(|(t, d)| RData::Other(t, d)),
        ];
        (name(), any::<u16>(), any::<u32>(), data).prop_map(|(name, class, ttl, data)| Record {
            name,
            class,
            ttl,
            data,
        })
    }

    proptest! {
        #[test]
        fn responses_round_trip(
            id in any::<u16>(),
            truncated in any::<bool>(),
            rcode in 0u8..16,
            question in proptest::option::of((name(), any::<u16>())),
            answers in proptest::collection::vec(record(), 0..8),
        ) {
            let response = Response { id, truncated, rcode, question, answers };
            let bytes = emit_response(&response).unwrap();
            prop_assert_eq!(parse_response(&bytes), Ok(response));
        }

        #[test]
        fn any_bytes_are_read_or_refused_and_what_is_read_writes_back(
            data in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            if let Ok(response) = parse_response(&data) {
                let written = emit_response(&response).unwrap();
                prop_assert_eq!(parse_response(&written), Ok(response));
            }
        }
    }
}
