//! The coordinator's own cost: one acquire round plus the release, against in-memory masters
//! that answer at once, so nothing but redquorum is measured (value generation, fan-out,
//! per-call timeouts, vote counting, validity arithmetic, stats).
//!
//! `cargo bench --features internals --bench coordinator`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use redquorum::internals::MemoryQuorum;

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

criterion_group!(benches, lock_and_release);
criterion_main!(benches);
