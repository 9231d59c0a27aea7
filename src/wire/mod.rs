//! Byte formats, each a parse/emit pair with no I/O of its own.
//!
//! - [`control`]: framing of the controller ↔ endpoint channel.
//! - [`xdr`]: XDR (RFC 4506), the subset ONC RPC uses.
//! - [`rpc`]: ONC RPC v2 call and reply messages (RFC 5531).
//! - [`recmark`]: RPC record marking over TCP (RFC 5531 §11).
//! - [`tcpseg`]: IPv4 and TCP header fields of captured frames.
//! - [`telnet`]: TELNET stream, Q-method negotiation, NAWS, TTYPE, LINEMODE (RFC 854/855/1143/1073/1091/1184).
//! - [`rlogin`]: rlogin startup, control bytes and window changes (RFC 1282).

pub mod control;
pub mod recmark;
pub mod rlogin;
pub mod rpc;
pub mod tcpseg;
pub mod telnet;
pub mod xdr;
