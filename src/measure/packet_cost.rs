//! The fixed CPU cost of one small TCP packet on this host, measured: a
//! one-byte ping-pong between two threads over loopback with TCP_NODELAY,
//! the process's exact CPU time (`CLOCK_PROCESS_CPUTIME_ID`) divided by the
//! packets. Each packet pays what a keystroke through a login server pays:
//! a send and a receive system call, TCP output and input, the loopback
//! device and its softirq, and the wake-up of a sleeping thread. It is the
//! figure a 1989 host's per-packet cost is scaled against (`--host-cpu
//! sun3`); docs/MEASUREMENT.md says where it is blind (work the kernel
//! does on behalf of the process in other contexts is not counted).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};

/// One calibration: the median batch and the spread of the batches.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PacketCost {
    /// CPU per packet, µs: the median of the batches.
    pub us_per_packet: f64,
    /// The cheapest and the dearest batch, µs per packet.
    pub min_us: f64,
    pub max_us: f64,
    /// Packets measured over all batches.
    pub packets: u64,
}

/// Round trips per batch: about 50 ms here, long enough for the CPU clock
/// (ns resolution) and short enough that nine fit in half a second. The
/// median of nine is the figure; the cheapest and dearest its spread.
const ROUND_TRIPS: u32 = 2_000;
const BATCHES: usize = 9;

/// Measures [`PacketCost`] on 127.0.0.1 (an ephemeral port, nothing else touched).
pub fn loopback_packet_cost() -> io::Result<PacketCost> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        let (mut peer, _) = listener.accept()?;
        peer.set_nodelay(true)?;
        let mut byte = [0u8; 1];
        // Echo until the client closes.
        while peer.read(&mut byte)? == 1 {
            peer.write_all(&byte)?;
        }
        Ok(())
    });
    let mut client = TcpStream::connect(addr)?;
    client.set_nodelay(true)?;
    let round_trip = |client: &mut TcpStream| -> io::Result<()> {
        let mut byte = [b'x'];
        client.write_all(&byte)?;
        client.read_exact(&mut byte)
    };
    // Warm the path (connection, caches, the scheduler's placement).
    for _ in 0..200 {
        round_trip(&mut client)?;
    }
    let cpu = || {
        super::rusage::process_cpu_ns()
            .ok_or_else(|| io::Error::other("CLOCK_PROCESS_CPUTIME_ID is unavailable"))
    };
    let mut batches = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let before = cpu()?;
        for _ in 0..ROUND_TRIPS {
            round_trip(&mut client)?;
        }
        let spent_ns = cpu()?.saturating_sub(before);
        batches.push(spent_ns as f64 / 1e3 / (2 * ROUND_TRIPS) as f64);
    }
    drop(client);
    echo.join()
        .map_err(|_| io::Error::other("the echo thread panicked"))??;
    batches.sort_by(f64::total_cmp);
    Ok(PacketCost {
        us_per_packet: batches[BATCHES / 2],
        min_us: batches[0],
        max_us: batches[BATCHES - 1],
        packets: (2 * ROUND_TRIPS) as u64 * BATCHES as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_costs_some_cpu_and_the_batches_bracket_the_median() {
        let cost = loopback_packet_cost().unwrap();
        assert!(cost.us_per_packet > 0.0, "{cost:?}");
        assert!(cost.min_us <= cost.us_per_packet && cost.us_per_packet <= cost.max_us);
        assert_eq!(cost.packets, 36_000);
    }
}
