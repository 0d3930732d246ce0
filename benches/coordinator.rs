//! The coordinator's own cost: one acquire round plus the release, against in-memory masters
//! that answer at once, so nothing but redquorum is measured (value generation, fan-out,
//! per-call timeouts, vote counting, validity arithmetic, stats).
//!
//! `RUSTFLAGS="--cfg redquorum_unsafe" CARGO_TARGET_DIR=target/unsafe cargo bench --bench
//! coordinator`: the in-memory masters are behind that cfg (see `redquorum::internals`);
//! without it this bench only says so.

#[cfg(redquorum_unsafe)]
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
#[cfg(redquorum_unsafe)]
use redquorum::internals::MemoryQuorum;

#[cfg(redquorum_unsafe)]
fn lock_and_release(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut group = c.benchmark_group("lock+release, in-memory masters");
    for n in [1usize, 3, 5, 7] {
        let masters = MemoryQuorum::new(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.to_async(&runtime).iter(|| async {
                assert!(masters.lock_and_release("bench").await);
            });
        });
    }
    group.finish();
}

#[cfg(redquorum_unsafe)]
criterion_group!(benches, lock_and_release);
#[cfg(redquorum_unsafe)]
criterion_main!(benches);

#[cfg(not(redquorum_unsafe))]
fn main() {
    eprintln!(
        "benches/coordinator.rs measures the coordinator over in-memory masters, built only with \
         RUSTFLAGS=\"--cfg redquorum_unsafe\" (use CARGO_TARGET_DIR=target/unsafe to keep the \
         normal build)"
    );
}
