//! The shapers on a host's own side of a path: the rate-limiting qdiscs
//! (tbf) and classes (htb) of an interface, with their counters, read
//! over rtnetlink (`RTM_GETQDISC`, `RTM_GETTCLASS` dumps, as `tc -s qdisc
//! show` does; no privilege needed) with the `netlink-packet-route` crate.
//!
//! The crate parses the messages, the statistics (`TCA_STATS2`: basic and
//! queue) and the kinds it knows; tbf's and htb's options it hands over as
//! raw attributes, and [`rate_of`] reads their rates from them:
//! `struct tc_tbf_qopt` (`TCA_TBF_PARMS`, its `rate.rate` a u32 of bytes
//! per second at offset 8) or `TCA_TBF_RATE64`; `struct tc_htb_opt`
//! (`TCA_HTB_PARMS`, `ceil.rate` at offset 20: what a class may borrow up
//! to) or `TCA_HTB_CEIL64` (include/uapi/linux/pkt_sched.h). Police
//! actions in filters are not read (named in what a reading lacks).

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NlaBuffer,
    NlasIterator,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::tc::{TcAttribute, TcMessage, TcOption, TcStats2};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use serde::{Deserialize, Serialize};

/// One rate-limiting qdisc or class of an interface, as read once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shaper {
    pub interface: String,
    /// `tbf 1:` or `htb class 1:10`.
    pub kind: String,
    /// Its rate (a class: its ceiling), bits/s.
    pub rate_bps: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub backlog_bytes: u64,
}

impl Shaper {
    /// What it did between `before` and this reading (the same qdisc).
    pub fn since(&self, before: Option<&Shaper>) -> Shaper {
        let b = before.cloned().unwrap_or_default();
        Shaper {
            drops: self.drops.saturating_sub(b.drops),
            overlimits: self.overlimits.saturating_sub(b.overlimits),
            ..self.clone()
        }
    }
}

/// Attribute numbers of the options read (include/uapi/linux/pkt_sched.h).
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_CEIL64: u16 = 7;

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The rate in bits/s a tbf qdisc or an htb class's options give (the
/// nested attributes of `TCA_OPTIONS`), `None` for any other kind or
/// options too short to hold one.
pub fn rate_of(kind: &str, options: &[u8]) -> Option<u64> {
    let (parms, parms_at, rate64) = match kind {
        "tbf" => (TCA_TBF_PARMS, 8, TCA_TBF_RATE64),
        "htb" => (TCA_HTB_PARMS, 20, TCA_HTB_CEIL64),
        _ => return None,
    };
    let (mut rate, mut wide) = (None, None);
    for nla in NlasIterator::new(options) {
        let nla: NlaBuffer<&[u8]> = nla.ok()?;
        match nla.kind() {
            k if k == parms => rate = u32_at(nla.value(), parms_at).map(u64::from),
            k if k == rate64 => wide = u64_at(nla.value(), 0),
            _ => {}
        }
    }
    // The u32 saturates at ~34 Gbit/s; the 64-bit attribute then holds it.
    wide.or(rate)
        .filter(|&bytes_per_s| bytes_per_s > 0)
        .map(|bytes_per_s| bytes_per_s.saturating_mul(8))
}

/// The shaper a qdisc or class message describes, if it limits a rate.
pub fn shaper_of(message: &TcMessage, interface: &str, class: bool) -> Option<Shaper> {
    let mut kind = None;
    let mut options = Vec::new();
    let (mut drops, mut overlimits, mut backlog) = (0, 0, 0);
    for attribute in &message.attributes {
        match attribute {
            TcAttribute::Kind(k) => kind = Some(k.clone()),
            TcAttribute::Options(opts) => {
                for opt in opts {
                    if let TcOption::Other(raw) = opt {
                        let mut value = vec![0; raw.value_len()];
                        raw.emit_value(&mut value);
                        options = value;
                    }
                }
            }
            TcAttribute::Stats2(stats) => {
                for s in stats {
                    if let TcStats2::Queue(q) = s {
                        drops = u64::from(q.drops);
                        overlimits = u64::from(q.overlimits);
                        backlog = u64::from(q.backlog);
                    }
                }
            }
            _ => {}
        }
    }
    let kind = kind?;
    let rate_bps = rate_of(&kind, &options)?;
    let handle = message.header.handle;
    Some(Shaper {
        interface: interface.to_string(),
        kind: if class {
            format!("{kind} class {}:{:x}", handle.major, handle.minor)
        } else {
            format!("{kind} {:x}:", handle.major)
        },
        rate_bps,
        drops,
        overlimits,
        backlog_bytes: backlog,
    })
}

/// Why a reading failed.
#[derive(Debug, thiserror::Error)]
pub enum QdiscError {
    #[error("no interface {0} in this namespace")]
    NoInterface(String),
    #[error("rtnetlink: {0}")]
    Netlink(#[from] std::io::Error),
    #[error("an rtnetlink answer did not parse: {0}")]
    Parse(String),
    #[error("the kernel refused the dump: error {0}")]
    Refused(i32),
}

/// Dumps `request` (qdiscs or classes of `index`) and returns each message.
fn dump(
    socket: &Socket,
    request: RouteNetlinkMessage,
    sequence: u32,
) -> Result<Vec<TcMessage>, QdiscError> {
    let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(request));
    packet.header.flags = NLM_F_DUMP | NLM_F_REQUEST;
    packet.header.sequence_number = sequence;
    packet.finalize();
    let mut out = vec![0; packet.buffer_len()];
    packet.serialize(&mut out);
    socket.send(&out, 0)?;
    let mut messages = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let size = socket.recv(&mut &mut buffer[..], 0)?;
        let mut offset = 0;
        while offset < size {
            let reply: NetlinkMessage<RouteNetlinkMessage> =
                NetlinkMessage::deserialize(&buffer[offset..size])
                    .map_err(|e| QdiscError::Parse(e.to_string()))?;
            let length = reply.header.length as usize;
            match reply.payload {
                NetlinkPayload::Done(_) => return Ok(messages),
                NetlinkPayload::Error(e) => {
                    return Err(QdiscError::Refused(e.code.map_or(0, |c| c.get())));
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(m))
                | NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewTrafficClass(m)) => {
                    messages.push(m)
                }
                _ => {}
            }
            if length == 0 {
                break;
            }
            offset += length;
        }
    }
}

/// An rtnetlink socket of this namespace, talking to the kernel.
fn route_socket() -> Result<Socket, QdiscError> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    Ok(socket)
}

/// The interface index of `name` in this namespace.
fn index_of(name: &str) -> Result<u32, QdiscError> {
    nix::net::if_::if_nametoindex(name).map_err(|_| QdiscError::NoInterface(name.to_string()))
}

/// The rate-limiting qdiscs and classes of `interfaces` (of this
/// namespace), with their counters now.
pub fn read(interfaces: &[String]) -> Result<Vec<Shaper>, QdiscError> {
    let indexes = interfaces
        .iter()
        .map(|name| Ok((index_of(name)? as i32, name)))
        .collect::<Result<Vec<_>, QdiscError>>()?;
    let socket = route_socket()?;
    // One dump gives every interface's qdiscs; classes are asked for by
    // interface.
    let qdiscs = dump(
        &socket,
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
        1,
    )?;
    let mut shapers = Vec::new();
    for (n, &(index, name)) in indexes.iter().enumerate() {
        let classes = dump(
            &socket,
            RouteNetlinkMessage::GetTrafficClass(TcMessage::with_index(index)),
            n as u32 + 2,
        )?;
        for (messages, class) in [(&qdiscs, false), (&classes, true)] {
            shapers.extend(
                messages
                    .iter()
                    .filter(|m| m.header.index == index)
                    .filter_map(|m| shaper_of(m, name, class)),
            );
        }
    }
    Ok(shapers)
}

/// The bytes queued now in the root qdisc of `interface` (its children's
/// included: a classful root counts what its classes hold), as
/// `tc -s qdisc show dev IFACE` prints its backlog. A device without a
/// qdisc (`noqueue`: loopback, veth by default) holds none.
pub fn root_backlog(interface: &str) -> Result<u64, QdiscError> {
    let index = index_of(interface)?;
    let socket = route_socket()?;
    let qdiscs = dump(
        &socket,
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
        1,
    )?;
    Ok(qdiscs
        .iter()
        .filter(|m| m.header.index == index as i32)
        .filter(|m| m.header.parent.major == 0xffff && m.header.parent.minor == 0xffff)
        .map(backlog_of)
        .sum())
}

/// A qdisc message's backlog in bytes (TCA_STATS2's queue statistics).
fn backlog_of(message: &TcMessage) -> u64 {
    message
        .attributes
        .iter()
        .filter_map(|a| match a {
            TcAttribute::Stats2(stats) => stats.iter().find_map(|s| match s {
                TcStats2::Queue(q) => Some(u64::from(q.backlog)),
                _ => None,
            }),
            _ => None,
        })
        .sum()
}

/// The interface of this namespace holding address `ip`.
pub fn interface_of(ip: std::net::IpAddr) -> Option<String> {
    nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
        let address = ifa.address?;
        let matches = match ip {
            std::net::IpAddr::V4(v4) => address.as_sockaddr_in().is_some_and(|sin| sin.ip() == v4),
            std::net::IpAddr::V6(v6) => address.as_sockaddr_in6().is_some_and(|sin| sin.ip() == v6),
        };
        matches.then_some(ifa.interface_name)
    })
}

/// This namespace's ifb devices: ingress shaping redirects to one, so
/// their qdiscs shape what the host receives.
pub fn ifb_devices() -> Vec<String> {
    nix::net::if_::if_nameindex()
        .map(|all| {
            all.iter()
                .map(|i| i.name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("ifb"))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod backlog_tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_its_address_and_holds_no_queue() {
        assert_eq!(
            interface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(root_backlog("lo").unwrap(), 0);
        assert!(matches!(
            root_backlog("no-such-if0"),
            Err(QdiscError::NoInterface(_))
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        while out.len() % 4 != 0 {
            out.push(0);
        }
        out
    }

    #[test]
    fn a_tbf_rate_and_an_htb_ceiling_are_read_from_their_options() {
        // struct tc_tbf_qopt: rate (tc_ratespec, its rate at 8), peakrate,
        // limit, buffer, mtu: 36 bytes.
        let mut qopt = vec![0u8; 36];
        qopt[8..12].copy_from_slice(&3_750_000u32.to_ne_bytes());
        assert_eq!(rate_of("tbf", &nla(1, &qopt)), Some(30_000_000));
        // Past u32's reach the 64-bit attribute holds the rate.
        let mut options = nla(1, &qopt);
        options.extend(nla(4, &5_000_000_000u64.to_ne_bytes()));
        assert_eq!(rate_of("tbf", &options), Some(40_000_000_000));
        // struct tc_htb_opt: rate at 8, ceil at 20.
        let mut htb = vec![0u8; 44];
        htb[8..12].copy_from_slice(&1_000_000u32.to_ne_bytes());
        htb[20..24].copy_from_slice(&2_000_000u32.to_ne_bytes());
        assert_eq!(rate_of("htb", &nla(1, &htb)), Some(16_000_000));
        // Another kind, or options cut short, give no rate.
        assert_eq!(rate_of("fq_codel", &nla(1, &qopt)), None);
        assert_eq!(rate_of("tbf", &nla(1, &qopt[..6])), None);
        assert_eq!(rate_of("tbf", &[1, 2, 3]), None);
    }

    #[test]
    fn loopback_reads_without_error_and_a_missing_interface_is_named() {
        // Whatever qdisc loopback has here, the dump itself works unprivileged.
        read(&["lo".to_string()]).unwrap();
        let err = read(&["no-such-if0".to_string()]).unwrap_err();
        assert!(err.to_string().contains("no-such-if0"), "{err}");
    }
}
