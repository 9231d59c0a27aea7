//! Byte formats, each a parse/emit pair with no I/O of its own.
//!
//! - [`control`]: framing of the controller ↔ endpoint channel.
//! - [`xdr`]: XDR (RFC 4506), the subset ONC RPC uses.
//! - [`rpc`]: ONC RPC v2 call and reply messages (RFC 5531).
//! - [`recmark`]: RPC record marking over TCP (RFC 5531 §11).
//! - [`ipv4`]: the one checked IPv4 header view (RFC 791), read and written.
//! - [`tcpseg`]: TCP header fields of captured frames (over [`ipv4`]).
//! - [`telnet`]: TELNET stream, Q-method negotiation, NAWS, TTYPE, LINEMODE (RFC 854/855/1143/1073/1091/1184).
//! - [`rlogin`]: rlogin startup, control bytes and window changes (RFC 1282).
//! - [`dns`]: DNS queries and responses, SRV, A and AAAA (RFC 1035, 2782, 6891).
//! - [`iperf3`]: iperf3's control protocol (states, cookie, JSON parameters and results).
//! - [`http`]: the head of an HTTP/1.x request, bounded (RFC 9112), as the metrics endpoints read it.
//! - [`probe`]: the fleet's probe calls and answers over UDP, each with a keyed MAC.
//! - [`ether`]: Ethernet II frames, ARP (RFC 826), IPv4 (RFC 791) and UDP (RFC 768) headers.

/// Writes a protocol's table of codes once, as an enum with `code()` for
/// emitting and `from_code()` for parsing (smoltcp's `enum_with_unknown!`
/// idea): a number cannot be written one way and read another.
macro_rules! code_table {
    (
        $(#[$attr:meta])*
        pub enum $name:ident {
            $( $(#[$variant_attr:meta])* $variant:ident = $code:expr ),+ $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant ),+
        }

        impl $name {
            /// Every code, in the table's order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The number on the wire.
            pub const fn code(self) -> u32 {
                match self {
                    $( $name::$variant => $code ),+
                }
            }

            /// The entry for a number read from the wire, if it has one.
            pub const fn from_code(code: u32) -> Option<$name> {
                match code {
                    $( $code => Some($name::$variant), )+
                    _ => None,
                }
            }
        }
    };
}

pub mod control;
pub mod dns;
pub mod ether;
pub mod http;
pub mod iperf3;
pub mod ipv4;
pub mod probe;
pub mod recmark;
pub mod rlogin;
pub mod rpc;
pub mod tcpseg;
pub mod telnet;
pub mod udpstream;
pub mod xdr;
