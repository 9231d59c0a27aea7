//! Historical constants, each from the source that sets it.

/// `tcp_sendspace` and `tcp_recvspace`, SunOS 4.1.3
/// `sys/netinet/in_proto.c` (and SunOS 3.4 `netinet/tcp_usrreq.c`):
/// `1024*4`.
pub const TCP_SPACE: u64 = 4096;
/// `MSIZE`, `sys/sys/mbuf.h`: the size of an mbuf.
pub const MSIZE: u64 = 128;
/// `MLEN = MSIZE - MMINOFF(12) - MTAIL(4)`, `sys/sys/mbuf.h`.
pub const MLEN: u64 = 112;
/// `MCLBYTES`, `sys/sys/mbuf.h`: 1024 where the page (`CLBYTES`, 8 KB
/// on a Sun-3) is larger.
pub const MCLBYTES: u64 = 1024;
/// `SEND_THRESH = MCLBYTES/2`, `sys/os/uipc_socket.c`: the least data
/// `sosend` puts in a cluster.
pub const SEND_THRESH: u64 = MCLBYTES / 2;
/// `SEND_CHUNK = MCLBYTES * 4`, `sys/os/uipc_socket.c`: the most
/// `sosend` copies before calling the protocol.
pub const SEND_CHUNK: u64 = MCLBYTES * 4;
/// `LOMTU = 1024+512`, `sys/netinet/if_loop.c`.
pub const LOOPBACK_MTU: u64 = 1536;
/// Ethernet's MTU (RFC 894).
pub const ETHERNET_MTU: u64 = 1500;
/// `sizeof(struct tcpiphdr)`: `tcp_mss` gives a peer on a local
/// network the interface MTU less this.
pub const TCPIP_HEADER: u64 = 40;
/// `PR_FASTHZ = 5`, `sys/sys/protosw.h`: `tcp_fasttimo` sends due
/// delayed ACKs every 200 ms.
pub const FASTTIMO_NS: u64 = 200_000_000;
/// `fix_buf_size`, `lib/libc/rpc/xdr_rec.c`: a send or receive buffer
/// of 0 (what `clnt_create` and `svctcp_create` pass) becomes 4000
/// bytes, the record mark included.
pub const XDRREC_BUFFER: u64 = 4000;
/// The record mark before each fragment (RFC 1057 section 10).
pub const RECORD_MARK: u64 = 4;
/// A call header with AUTH_NULL credentials and verifier (RFC 1057:
/// xid, type, rpcvers, prog, vers, proc, two 8-byte opaque_auth) and
/// the 4-byte length of the `opaque<>` argument.
pub const CALL_HEADER: u64 = 40 + 4;
/// An accepted reply with AUTH_NULL verifier and a void result: xid,
/// type, reply_stat, verifier (8), accept_stat.
pub const REPLY: u64 = 24;
/// Van Jacobson (1988) on a Sun-3/60: "800us per packet fixed costs"
/// (device setup, interrupt service, task handling, protocol), charged
/// to each end of every packet.
pub const PACKET_FIXED_NS: u64 = 800_000;
/// Van Jacobson (1988): Sun's checksum before his rewrite, "490us/KB",
/// over each segment and its 40-byte header, at each end.
pub const CHECKSUM_NS_PER_KB: u64 = 490_000;
/// Van Jacobson (1988): `copyin`/`copyout` before unrolling, "200us/KB".
pub const COPY_NS_PER_KB: u64 = 200_000;
/// 10 Mbit/s: 800 ns a byte.
pub const ETHERNET_NS_PER_BYTE: u64 = 800;
/// Preamble and start delimiter (8) and inter-frame gap (12), IEEE 802.3.
pub const ETHERNET_GAP_BYTES: u64 = 20;
/// Ethernet header and FCS.
pub const ETHERNET_FRAME_OVERHEAD: u64 = 18;
/// The least frame, header to FCS.
pub const ETHERNET_MIN_FRAME: u64 = 64;
