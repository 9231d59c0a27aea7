//! Criterion benches of netlab's checksum and copy variants, side by side
//! with the `internet-checksum` crate (v0.2, from the Fuchsia networking
//! stack's authors), on page-aligned buffers.
//!
//!     cargo bench --bench cksum

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use netlab::checksum::{self, copy};
use netlab::endpoint::pattern::AlignedBuf;
use std::hint::black_box;

fn buffer(len: usize) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ (i >> 11) as u8;
    }
    buf
}

fn checksums(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for size in [64usize, 1408, 65536, 1 << 20] {
        let data = buffer(size);
        let data = data.as_slice();
        group.throughput(Throughput::Bytes(size as u64));
        for (name, f) in checksum::VARIANTS {
            group.bench_with_input(BenchmarkId::new(name, size), data, |b, d| {
                b.iter(|| f(black_box(d)))
            });
        }
        group.bench_with_input(
            BenchmarkId::new("internet-checksum crate", size),
            data,
            |b, d| b.iter(|| internet_checksum::checksum(black_box(d))),
        );
    }
    group.finish();
}

fn copies(c: &mut Criterion) {
    let mut group = c.benchmark_group("copy");
    for size in [1408usize, 1 << 20] {
        let src = buffer(size);
        let mut dst = buffer(size);
        group.throughput(Throughput::Bytes(size as u64));
        for (name, f) in checksum::FUSED {
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| f(dst.as_mut_slice(), black_box(src.as_slice())))
            });
        }
        for (name, f) in copy::VARIANTS {
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| f(dst.as_mut_slice(), black_box(src.as_slice())))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, checksums, copies);
criterion_main!(benches);
