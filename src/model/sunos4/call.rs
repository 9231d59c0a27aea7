//! A call as the model sees it: where the two ends run, and the writes
//! Sun's `xdrrec` makes of it.

use super::consts;

/// Where the two processes run, as in the 1989 table's two columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Client and server on one Sun-3/60, over the loopback interface.
    Local,
    /// Two Sun-3/60s on a 10 Mbit/s Ethernet.
    Remote,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Local => "local",
            Placement::Remote => "remote",
        }
    }

    /// `tcp_mss` (SunOS 4.1.3): the interface MTU less the headers for a
    /// peer on a local network; the loopback interface for one's own
    /// address.
    pub fn maxseg(self) -> u64 {
        match self {
            Placement::Local => consts::LOOPBACK_MTU - consts::TCPIP_HEADER,
            Placement::Remote => consts::ETHERNET_MTU - consts::TCPIP_HEADER,
        }
    }
}

/// The writes `xdrrec` makes for a call with an `opaque<>` argument of
/// `arg_bytes`: full 4000-byte fragments, then the rest, each with its
/// record mark (`xdrrec_putbytes` flushes a full buffer; `endofrecord`
/// flushes the last fragment).
pub fn call_writes(arg_bytes: u64) -> Vec<u64> {
    let mut payload = consts::CALL_HEADER + arg_bytes.div_ceil(4) * 4;
    let per_fragment = consts::XDRREC_BUFFER - consts::RECORD_MARK;
    let mut writes = Vec::new();
    loop {
        let here = payload.min(per_fragment);
        writes.push(here + consts::RECORD_MARK);
        payload -= here;
        if payload == 0 {
            return writes;
        }
    }
}

/// The largest argument the model is asked about: a call of 64 KB is
/// already sixteen fragments; beyond it nothing new happens.
pub const MAX_ARG_BYTES: u64 = 65_536;
