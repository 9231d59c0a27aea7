//! Physical lower bounds of a measured figure in its own configuration,
//! and the check that no figure, then or now, claims to beat them.
//!
//! The bound of an RPC call over an Ethernet is the time its bytes need on
//! the wire: the request (the argument, the RPC call header, and for TCP
//! the record mark) cut into frames of the link's MTU, each frame carrying
//! its IP and transport headers and Ethernet's own overhead (header, FCS,
//! preamble and inter-frame gap, at least the minimum frame), and one
//! minimum frame for the null reply. Nothing else is counted (no CPU, no
//! propagation, no ACKs), so it is a true lower bound: a figure below it is
//! wrong, or read in the wrong unit.
//!
//! This is how the unit of the 1989 RPC table was derived
//! (`reference/historical-figures.toml`, `unit_derivation`): read as ms per
//! 100 calls, its remote figures fall below the wire time of their own
//! 10 Mbit/s Ethernet; read as ms per call (seconds per 100 calls) none
//! does.

use crate::endpoint::rpc::Proto;

/// Ethernet's per-frame overhead on the wire: 14-byte header, 4-byte FCS,
/// 8-byte preamble and start delimiter, 12-byte inter-frame gap (IEEE
/// 802.3).
pub const ETHERNET_OVERHEAD: u64 = 14 + 4 + 8 + 12;
/// The smallest Ethernet frame (header to FCS), padded up to if shorter.
pub const ETHERNET_MIN_FRAME: u64 = 64;
/// An ONC RPC call header with AUTH_NONE credentials and verifier (RFC 5531:
/// xid, type, rpcvers, prog, vers, proc, two opaque_auth of 8 bytes each).
pub const RPC_CALL_HEADER: u64 = 40;
/// IPv4 header without options (RFC 791).
pub const IP_HEADER: u64 = 20;

/// Bytes on the wire for `payload` bytes of `proto` at `mtu`.
fn wire_bytes(payload: u64, proto: Proto, mtu: u64) -> u64 {
    let transport = match proto {
        Proto::Tcp => 20,
        Proto::Udp => 8,
    };
    // TCP segments carry their header in every frame; a UDP datagram's
    // header rides in the first IP fragment only.
    let per_frame = match proto {
        Proto::Tcp => mtu - IP_HEADER - transport,
        Proto::Udp => mtu - IP_HEADER,
    };
    let data = match proto {
        Proto::Tcp => payload,
        Proto::Udp => payload + transport,
    };
    let frames = data.div_ceil(per_frame).max(1);
    let mut bytes = 0;
    let mut left = data;
    for _ in 0..frames {
        let here = left.min(per_frame);
        left -= here;
        let ip = here
            + IP_HEADER
            + match proto {
                Proto::Tcp => transport,
                Proto::Udp => 0,
            };
        bytes += (ip + 14 + 4).max(ETHERNET_MIN_FRAME) + 8 + 12;
    }
    bytes
}

/// The least time (ms) one call of `arg_bytes` can take over a link of
/// `bits_per_s` and `mtu`: its request and a null reply on the wire.
pub fn rpc_call_wire_ms(arg_bytes: u64, proto: Proto, mtu: u64, bits_per_s: f64) -> f64 {
    let record_mark = match proto {
        Proto::Tcp => 4,
        Proto::Udp => 0,
    };
    let request = wire_bytes(arg_bytes + RPC_CALL_HEADER + record_mark, proto, mtu);
    // The reply: a minimum frame at least.
    let reply = ETHERNET_MIN_FRAME + 8 + 12;
    (request + reply) as f64 * 8.0 / bits_per_s * 1e3
}

/// A figure below its physical bound.
#[derive(Debug, Clone, PartialEq)]
pub struct BelowBound {
    pub column: String,
    pub arg_bytes: u64,
    /// The figure, in ms per call as read.
    pub ms_per_call: f64,
    pub bound_ms_per_call: f64,
}

/// The remote (over-the-link) cells of an RPC table whose figures, read as
/// `ms_per_call_of(figure)`, are below the wire time of their call.
/// `rows` are `[arg_bytes, figure per column...]`, `columns` name them
/// (`tcp_remote`, `udp_local`, ...); local columns have no wire and no bound.
pub fn rpc_below_bound(
    columns: &[String],
    rows: &[Vec<f64>],
    ms_per_call_of: impl Fn(f64) -> f64,
    mtu: u64,
    bits_per_s: f64,
) -> Vec<BelowBound> {
    let mut found = Vec::new();
    for row in rows {
        let Some(&size) = row.first() else { continue };
        for (column, &figure) in columns.iter().zip(row).skip(1) {
            let proto = match column.as_str() {
                c if c.starts_with("tcp") => Proto::Tcp,
                c if c.starts_with("udp") => Proto::Udp,
                _ => continue,
            };
            if !column.ends_with("remote") {
                continue;
            }
            let bound = rpc_call_wire_ms(size as u64, proto, mtu, bits_per_s);
            let read = ms_per_call_of(figure);
            if read < bound {
                found.push(BelowBound {
                    column: column.clone(),
                    arg_bytes: size as u64,
                    ms_per_call: read,
                    bound_ms_per_call: bound,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const ETHER10: f64 = 10e6;

    #[test]
    fn an_8192_byte_call_needs_its_bytes_on_the_wire() {
        // 8236 bytes of TCP payload in 6 frames of at most 1460, each with
        // 40 bytes of IP and TCP and 38 of Ethernet, plus an 84-byte reply:
        // 8236 + 6 * 78 + 84 = 8788 bytes = 7.03 ms at 10 Mbit/s.
        let ms = rpc_call_wire_ms(8192, Proto::Tcp, 1500, ETHER10);
        assert!((ms - 8788.0 * 8.0 / 1e4).abs() < 1e-9, "{ms}");
        assert!(
            ms > 8192.0 * 8.0 / ETHER10 * 1e3,
            "above the argument alone"
        );
        // A null call over UDP: 40 bytes of RPC header and 8 of UDP in one
        // 68-byte IP packet (86 bytes framed, 106 with preamble and gap),
        // and an 84-byte minimum reply.
        let null = rpc_call_wire_ms(0, Proto::Udp, 1500, ETHER10);
        assert!((null - 190.0 * 8.0 / 1e4).abs() < 1e-9, "{null}");
    }

    #[test]
    fn udp_fragments_carry_the_udp_header_once() {
        // 8192 + 40 + 8 = 8240 bytes of IP payload in fragments of 1480.
        let ms = rpc_call_wire_ms(8192, Proto::Udp, 1500, ETHER10);
        let frames = 8240u64.div_ceil(1480);
        let expected = (8240 + frames * (20 + 38) + 84) as f64 * 8.0 / 1e4;
        assert!((ms - expected).abs() < 1e-9, "{ms} vs {expected}");
    }

    #[test]
    fn the_1989_table_is_physical_only_as_ms_per_call() {
        // The reference file's rows (the report layer reads it; test code may).
        let h = &crate::report::historical::figures().rpc_size_sweep;
        let (columns, rows) = (&h.columns, &h.rows);
        let as_ms_per_100 = rpc_below_bound(columns, rows, |v| v / 100.0, 1500, ETHER10);
        // Every remote figure, TCP and UDP, at every size.
        assert_eq!(as_ms_per_100.len(), 16, "{as_ms_per_100:?}");
        let as_ms_per_call = rpc_below_bound(columns, rows, |v| v, 1500, ETHER10);
        assert!(as_ms_per_call.is_empty(), "{as_ms_per_call:?}");
    }
}
