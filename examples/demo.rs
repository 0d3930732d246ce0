//! A tour of a quorum lock on five local masters started by the test kit: acquire, the
//! votes, a second client refused, extend, release.
//!
//! Run with `cargo run --example demo` (needs `redis-server` on PATH).

use std::time::Duration;

use redquorum::{AttemptStats, Redlock, RetryPolicy, Vote};
use redquorum_testkit::LocalCluster;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let masters = LocalCluster::start(5)?;
    println!(
        "started 5 redis-server masters: {}",
        masters.urls().join(" ")
    );

    let client = |name: &str| {
        println!("client {name}: ttl 10 s, node timeout 50 ms, one attempt per call");
        Redlock::builder()
            .nodes(masters.urls())
            .ttl(Duration::from_secs(10))
            .retry(RetryPolicy::once())
            .build()
    };
    let a = client("A")?;
    let b = client("B")?;
    // The masters were started a moment ago: the restart guard would (rightly) keep them out
    // for a ttl after first sight, in case their data had just been deleted. They are new,
    // so an operator commissions them — once, for every client.
    for node in 0..a.nodes() {
        a.commission(node, false).await?;
    }
    println!("commissioned the 5 masters for the restart guard");
    a.connect().await;
    b.connect().await;

    let lock = a.try_lock("demo:stock:4711").await?;
    println!("\nA locked {:?} (key {:?})", lock.resources(), lock.keys());
    print_votes(&lock.stats());
    println!("validity left: {:?}", lock.remaining());

    match b.try_lock("demo:stock:4711").await {
        Ok(_) => println!("\nB also got the lock: this must never happen"),
        Err(e) => {
            println!("\nB refused: {e}");
            if let Some(stats) = e.stats() {
                print_votes(stats);
            }
        }
    }

    let extended = lock.extend().await?;
    println!(
        "\nA extended the lock; validity left: {:?}",
        lock.remaining()
    );
    print_votes(extended.stats());

    let outcome = lock.release().await?;
    println!(
        "\nA released the lock on {} of 5 masters",
        outcome.released()
    );
    let again = b.try_lock("demo:stock:4711").await?;
    println!("B locked it now, validity {:?}", again.remaining());
    again.release().await?;
    Ok(())
}

fn print_votes(stats: &AttemptStats) {
    println!(
        "  decided in {:?}: {} granted, {} taken, {} failed, {} pending (quorum {})",
        stats.elapsed(),
        stats.granted(),
        stats.taken(),
        stats.failed(),
        stats.pending_count(),
        stats.quorum()
    );
    for v in stats.votes() {
        let vote = match &v.vote {
            Vote::Granted => "granted".to_owned(),
            Vote::Taken => "taken".to_owned(),
            Vote::Failed(f) => format!("failed: {f}"),
            Vote::Pending => "pending".to_owned(),
            other => format!("{other:?}"),
        };
        let latency = v.latency.map_or_else(
            || "-".to_owned(),
            |l| format!("{:.3} ms", l.as_secs_f64() * 1e3),
        );
        println!("  node {}: {vote:<10} {latency}", v.node);
    }
}
