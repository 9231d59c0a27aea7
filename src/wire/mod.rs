//! Byte formats, each a parse/emit pair with no I/O of its own.
//!
//! - [`control`]: framing of the controller ↔ endpoint channel.
//! - [`xdr`]: XDR (RFC 4506), the subset ONC RPC uses.
//! - [`rpc`]: ONC RPC v2 call and reply messages (RFC 5531).
//! - [`recmark`]: RPC record marking over TCP (RFC 5531 §11).
//! - [`tcpseg`]: IPv4 and TCP header fields of captured frames.

pub mod control;
pub mod recmark;
pub mod rpc;
pub mod tcpseg;
pub mod xdr;
