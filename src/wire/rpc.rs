//! ONC RPC version 2 messages (RFC 5531 §9, in XDR per RFC 4506).
//!
//! ```text
//! rpc_msg      = xid:u32, CALL(0) call_body | REPLY(1) reply_body
//! call_body    = rpcvers:u32 (=2), prog:u32, vers:u32, proc:u32, cred:opaque_auth, verf:opaque_auth, args...
//! opaque_auth  = flavor:u32, body:opaque<400>
//! reply_body   = MSG_ACCEPTED(0) verf:opaque_auth accept_stat [mismatch_info | results...]
//!              | MSG_DENIED(1) RPC_MISMATCH(0) low high | AUTH_ERROR(1) auth_stat
//! ```
//!
//! [`Call`] and [`Reply`] hold the header; the procedure's arguments and
//! results follow it in the same record and are returned as the remaining
//! bytes by [`parse`]. AUTH_SYS credentials (§A.1 of RFC 5531) parse into
//! [`AuthSys`]. No parser here panics or allocates beyond the message's own
//! size: lengths are checked against the data and against RFC bounds.

use super::xdr::{Reader, Writer, XdrError};
use thiserror::Error;

pub const RPC_VERSION: u32 = 2;
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
/// Largest opaque_auth body (RFC 5531 §8.2).
pub const MAX_AUTH_BYTES: u32 = 400;
/// Largest AUTH_SYS machine name and group count (RFC 5531 §A.1).
pub const MAX_MACHINE_NAME: u32 = 255;
pub const MAX_GIDS: u32 = 16;

code_table! {
    /// msg_type (RFC 5531 §9).
    pub enum MsgType {
        Call = 0,
        Reply = 1,
    }
}

code_table! {
    /// reply_stat (RFC 5531 §9).
    pub enum ReplyStat {
        MsgAccepted = 0,
        MsgDenied = 1,
    }
}

code_table! {
    /// accept_stat (RFC 5531 §9): how an accepted call fared.
    pub enum AcceptCode {
        Success = 0,
        ProgUnavail = 1,
        ProgMismatch = 2,
        ProcUnavail = 3,
        GarbageArgs = 4,
        SystemErr = 5,
    }
}

code_table! {
    /// reject_stat (RFC 5531 §9): why a call was denied.
    pub enum RejectCode {
        RpcMismatch = 0,
        AuthError = 1,
    }
}

code_table! {
    /// auth_stat (RFC 5531 §9): why authentication failed.
    pub enum AuthStat {
        Ok = 0,
        BadCred = 1,
        RejectedCred = 2,
        BadVerf = 3,
        RejectedVerf = 4,
        TooWeak = 5,
        InvalidResp = 6,
        Failed = 7,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RpcError {
    #[error(transparent)]
    Xdr(#[from] XdrError),
    #[error("message type {0} is neither CALL (0) nor REPLY (1)")]
    MessageType(u32),
    #[error("reply status {0} is neither MSG_ACCEPTED (0) nor MSG_DENIED (1)")]
    ReplyStat(u32),
    #[error("accept status {0} is unknown")]
    AcceptStat(u32),
    #[error("reject status {0} is unknown")]
    RejectStat(u32),
}

/// A credential or verifier.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpaqueAuth {
    pub flavor: u32,
    pub body: Vec<u8>,
}

impl OpaqueAuth {
    pub fn none() -> OpaqueAuth {
        OpaqueAuth::default()
    }

    fn parse(r: &mut Reader<'_>) -> Result<OpaqueAuth, XdrError> {
        let flavor = r.u32()?;
        let body = r.opaque(MAX_AUTH_BYTES)?.to_vec();
        Ok(OpaqueAuth { flavor, body })
    }

    fn emit(&self, w: &mut Writer) {
        w.u32(self.flavor).opaque(&self.body);
    }
}

/// The AUTH_SYS credential body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSys {
    pub stamp: u32,
    pub machine_name: String,
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
}

impl AuthSys {
    pub fn parse(body: &[u8]) -> Result<AuthSys, XdrError> {
        let mut r = Reader::new(body);
        let stamp = r.u32()?;
        let machine_name = r.string(MAX_MACHINE_NAME)?;
        let uid = r.u32()?;
        let gid = r.u32()?;
        let n = r.array_len(MAX_GIDS)?;
        let gids = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
        Ok(AuthSys {
            stamp,
            machine_name,
            uid,
            gid,
            gids,
        })
    }

    pub fn to_auth(&self) -> OpaqueAuth {
        let mut w = Writer::new();
        w.u32(self.stamp)
            .string(&self.machine_name)
            .u32(self.uid)
            .u32(self.gid)
            .u32(self.gids.len() as u32);
        for g in &self.gids {
            w.u32(*g);
        }
        OpaqueAuth {
            flavor: AUTH_SYS,
            body: w.into_bytes(),
        }
    }
}

/// A call's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub xid: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: OpaqueAuth,
    pub verf: OpaqueAuth,
}

impl Call {
    /// A version-2 call with AUTH_NONE credentials.
    pub fn new(xid: u32, prog: u32, vers: u32, proc_: u32) -> Call {
        Call {
            xid,
            rpcvers: RPC_VERSION,
            prog,
            vers,
            proc_,
            cred: OpaqueAuth::none(),
            verf: OpaqueAuth::none(),
        }
    }

    /// Appends the header; the caller appends the arguments.
    pub fn emit(&self, w: &mut Writer) {
        w.u32(self.xid)
            .u32(MsgType::Call.code())
            .u32(self.rpcvers)
            .u32(self.prog)
            .u32(self.vers)
            .u32(self.proc_);
        self.cred.emit(w);
        self.verf.emit(w);
    }

    /// Bytes [`Call::emit`] produces.
    pub fn header_len(&self) -> usize {
        24 + 8 + padded(self.cred.body.len()) + 8 + padded(self.verf.body.len())
    }
}

fn padded(len: usize) -> usize {
    len + super::xdr::padding(len)
}

/// Why a call was not accepted, or how it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    /// The results follow.
    Success,
    ProgUnavail,
    ProgMismatch {
        low: u32,
        high: u32,
    },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

/// Authentication failures as numbers, from the [`AuthStat`] table.
pub mod auth_stat {
    use super::AuthStat;
    pub const BADCRED: u32 = AuthStat::BadCred.code();
    pub const REJECTEDCRED: u32 = AuthStat::RejectedCred.code();
    pub const BADVERF: u32 = AuthStat::BadVerf.code();
    pub const REJECTEDVERF: u32 = AuthStat::RejectedVerf.code();
    pub const TOOWEAK: u32 = AuthStat::TooWeak.code();
}

impl AcceptStat {
    /// This status's entry in the accept_stat table.
    pub fn code(self) -> AcceptCode {
        match self {
            AcceptStat::Success => AcceptCode::Success,
            AcceptStat::ProgUnavail => AcceptCode::ProgUnavail,
            AcceptStat::ProgMismatch { .. } => AcceptCode::ProgMismatch,
            AcceptStat::ProcUnavail => AcceptCode::ProcUnavail,
            AcceptStat::GarbageArgs => AcceptCode::GarbageArgs,
            AcceptStat::SystemErr => AcceptCode::SystemErr,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectStat {
    RpcMismatch {
        low: u32,
        high: u32,
    },
    /// An auth_stat number ([`AuthStat`]; kept as sent, known or not).
    AuthError(u32),
}

impl RejectStat {
    /// This status's entry in the reject_stat table.
    pub fn code(self) -> RejectCode {
        match self {
            RejectStat::RpcMismatch { .. } => RejectCode::RpcMismatch,
            RejectStat::AuthError(_) => RejectCode::AuthError,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyBody {
    Accepted { verf: OpaqueAuth, stat: AcceptStat },
    Denied(RejectStat),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub xid: u32,
    pub body: ReplyBody,
}

impl Reply {
    pub fn accepted(xid: u32, stat: AcceptStat) -> Reply {
        Reply {
            xid,
            body: ReplyBody::Accepted {
                verf: OpaqueAuth::none(),
                stat,
            },
        }
    }

    pub fn denied(xid: u32, stat: RejectStat) -> Reply {
        Reply {
            xid,
            body: ReplyBody::Denied(stat),
        }
    }

    /// Appends the reply header; for `Success` the caller appends the results.
    pub fn emit(&self, w: &mut Writer) {
        w.u32(self.xid).u32(MsgType::Reply.code());
        match &self.body {
            ReplyBody::Accepted { verf, stat } => {
                w.u32(ReplyStat::MsgAccepted.code());
                verf.emit(w);
                w.u32(stat.code().code());
                if let AcceptStat::ProgMismatch { low, high } = *stat {
                    w.u32(low).u32(high);
                }
            }
            ReplyBody::Denied(stat) => {
                w.u32(ReplyStat::MsgDenied.code());
                w.u32(stat.code().code());
                match *stat {
                    RejectStat::RpcMismatch { low, high } => w.u32(low).u32(high),
                    RejectStat::AuthError(why) => w.u32(why),
                };
            }
        }
    }
}

/// A parsed message header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Call(Call),
    Reply(Reply),
}

/// Reads just the xid and message type, for answering a call whose body is
/// too broken to parse.
pub fn peek_xid(record: &[u8]) -> Option<(u32, u32)> {
    let mut r = Reader::new(record);
    Some((r.u32().ok()?, r.u32().ok()?))
}

/// Parses one message; returns it and the bytes after its header (a call's
/// arguments or a successful reply's results).
pub fn parse(record: &[u8]) -> Result<(Message, &[u8]), RpcError> {
    let mut r = Reader::new(record);
    let xid = r.u32()?;
    let message_type = r.u32()?;
    let message = match MsgType::from_code(message_type) {
        Some(MsgType::Call) => {
            let rpcvers = r.u32()?;
            let prog = r.u32()?;
            let vers = r.u32()?;
            let proc_ = r.u32()?;
            let cred = OpaqueAuth::parse(&mut r)?;
            let verf = OpaqueAuth::parse(&mut r)?;
            Message::Call(Call {
                xid,
                rpcvers,
                prog,
                vers,
                proc_,
                cred,
                verf,
            })
        }
        Some(MsgType::Reply) => {
            let reply_stat = r.u32()?;
            let body = match ReplyStat::from_code(reply_stat) {
                Some(ReplyStat::MsgAccepted) => {
                    let verf = OpaqueAuth::parse(&mut r)?;
                    let code = r.u32()?;
                    let stat = match AcceptCode::from_code(code) {
                        Some(AcceptCode::Success) => AcceptStat::Success,
                        Some(AcceptCode::ProgUnavail) => AcceptStat::ProgUnavail,
                        Some(AcceptCode::ProgMismatch) => AcceptStat::ProgMismatch {
                            low: r.u32()?,
                            high: r.u32()?,
                        },
                        Some(AcceptCode::ProcUnavail) => AcceptStat::ProcUnavail,
                        Some(AcceptCode::GarbageArgs) => AcceptStat::GarbageArgs,
                        Some(AcceptCode::SystemErr) => AcceptStat::SystemErr,
                        None => return Err(RpcError::AcceptStat(code)),
                    };
                    ReplyBody::Accepted { verf, stat }
                }
                Some(ReplyStat::MsgDenied) => {
                    let code = r.u32()?;
                    ReplyBody::Denied(match RejectCode::from_code(code) {
                        Some(RejectCode::RpcMismatch) => RejectStat::RpcMismatch {
                            low: r.u32()?,
                            high: r.u32()?,
                        },
                        Some(RejectCode::AuthError) => RejectStat::AuthError(r.u32()?),
                        None => return Err(RpcError::RejectStat(code)),
                    })
                }
                None => return Err(RpcError::ReplyStat(reply_stat)),
            };
            Message::Reply(Reply { xid, body })
        }
        None => return Err(RpcError::MessageType(message_type)),
    };
    Ok((message, r.remaining()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NULL call to program 0x20051989 version 1, AUTH_NONE, xid 0x12345678,
    /// laid out by hand from RFC 5531 §9.
    const NULL_CALL: [u8; 40] = [
        0x12, 0x34, 0x56, 0x78, // xid
        0, 0, 0, 0, // CALL
        0, 0, 0, 2, // rpcvers
        0x20, 0x05, 0x19, 0x89, // prog
        0, 0, 0, 1, // vers
        0, 0, 0, 0, // proc NULL
        0, 0, 0, 0, 0, 0, 0, 0, // cred AUTH_NONE, empty
        0, 0, 0, 0, 0, 0, 0, 0, // verf AUTH_NONE, empty
    ];

    #[test]
    fn call_round_trips_against_bytes() {
        let call = Call::new(0x1234_5678, 0x2005_1989, 1, 0);
        let mut w = Writer::new();
        call.emit(&mut w);
        assert_eq!(w.buf, NULL_CALL);
        assert_eq!(call.header_len(), 40);
        let (message, rest) = parse(&NULL_CALL).unwrap();
        assert_eq!(message, Message::Call(call));
        assert!(rest.is_empty());
    }

    #[test]
    fn replies_round_trip() {
        let cases = [
            (
                Reply::accepted(7, AcceptStat::Success),
                vec![
                    0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                ],
            ),
            (
                Reply::accepted(7, AcceptStat::ProgMismatch { low: 1, high: 1 }),
                vec![
                    0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0,
                    0, 1, 0, 0, 0, 1,
                ],
            ),
            (
                Reply::denied(7, RejectStat::RpcMismatch { low: 2, high: 2 }),
                vec![
                    0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2,
                ],
            ),
            (
                Reply::denied(7, RejectStat::AuthError(auth_stat::BADCRED)),
                vec![0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1],
            ),
        ];
        for (reply, bytes) in cases {
            let mut w = Writer::new();
            reply.emit(&mut w);
            assert_eq!(w.buf, bytes, "{reply:?}");
            assert_eq!(parse(&bytes).unwrap().0, Message::Reply(reply));
        }
        for stat in [
            AcceptStat::ProgUnavail,
            AcceptStat::ProcUnavail,
            AcceptStat::GarbageArgs,
            AcceptStat::SystemErr,
        ] {
            let mut w = Writer::new();
            Reply::accepted(9, stat).emit(&mut w);
            assert_eq!(
                parse(&w.buf).unwrap().0,
                Message::Reply(Reply::accepted(9, stat))
            );
        }
    }

    #[test]
    fn auth_sys_round_trips() {
        let cred = AuthSys {
            stamp: 0x5f5e100,
            machine_name: "vax750".into(),
            uid: 1000,
            gid: 100,
            gids: vec![100, 10],
        };
        let auth = cred.to_auth();
        assert_eq!(auth.flavor, AUTH_SYS);
        assert_eq!(auth.body.len(), 4 + 4 + 8 + 4 + 4 + 4 + 8);
        assert_eq!(AuthSys::parse(&auth.body).unwrap(), cred);
        let mut call = Call::new(1, 2, 3, 4);
        call.cred = auth;
        let mut w = Writer::new();
        call.emit(&mut w);
        assert_eq!(w.buf.len(), call.header_len());
        assert_eq!(parse(&w.buf).unwrap().0, Message::Call(call));
        // 17 groups is over the limit.
        let mut too_many = cred.clone();
        too_many.gids = vec![0; 17];
        assert!(AuthSys::parse(&too_many.to_auth().body).is_err());
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert!(matches!(parse(&NULL_CALL[..30]), Err(RpcError::Xdr(_))));
        let mut bad = NULL_CALL;
        bad[7] = 5;
        assert_eq!(parse(&bad).unwrap_err(), RpcError::MessageType(5));
        // A credential body announcing 1000 bytes.
        let mut huge = NULL_CALL.to_vec();
        huge[28..32].copy_from_slice(&1000u32.to_be_bytes());
        assert!(matches!(
            parse(&huge),
            Err(RpcError::Xdr(XdrError::TooLong { .. }))
        ));
        assert_eq!(peek_xid(&NULL_CALL), Some((0x1234_5678, 0)));
        assert_eq!(peek_xid(&NULL_CALL[..6]), None);
    }

    #[test]
    fn every_code_reads_back_as_itself_and_only_table_numbers_read() {
        for &code in AcceptCode::ALL {
            assert_eq!(AcceptCode::from_code(code.code()), Some(code));
        }
        for &code in RejectCode::ALL {
            assert_eq!(RejectCode::from_code(code.code()), Some(code));
        }
        for &code in AuthStat::ALL {
            assert_eq!(AuthStat::from_code(code.code()), Some(code));
        }
        assert_eq!(AcceptCode::from_code(6), None);
        assert_eq!(RejectCode::from_code(2), None);
        assert_eq!(AuthStat::from_code(8), None);
        // RFC 5531 §9's numbers.
        assert_eq!(AcceptCode::GarbageArgs.code(), 4);
        assert_eq!(AuthStat::TooWeak.code(), 5);
        assert_eq!(auth_stat::REJECTEDCRED, 2);
    }
}
