//! `redquorum-model`: checks every instance of the suite and prints states explored, each
//! property's verdict and counterexample traces. Exits 1 when an instance does not conclude
//! what it must (a property fails, or a negative control finds no counterexample).
//!
//! ```text
//! redquorum-model [--large | --tiny] [--threads N] [--only NAME]...
//! ```

use std::process::ExitCode;

use std::time::Duration;

use redquorum_model::{Options, Size, Verdict, check_with, suite};

fn main() -> ExitCode {
    let mut size = match std::env::var("MODEL_SIZE").as_deref() {
        Ok("large") => Size::Large,
        Ok("tiny") => Size::Tiny,
        _ => Size::Default,
    };
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut only: Vec<String> = Vec::new();
    let mut bfs = false;
    let mut dfs = false;
    let mut symmetry = false;
    let mut timeout = None;
    let mut tweaks: Vec<(String, u8)> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--large" => size = Size::Large,
            "--tiny" => size = Size::Tiny,
            "--bfs" => bfs = true,
            "--dfs" => dfs = true,
            "--symmetry" => symmetry = true,
            "--timeout" => {
                timeout = args
                    .next()
                    .and_then(|t| t.parse().ok())
                    .map(Duration::from_secs)
            }
            "--atomic-reads" => tweaks.push((arg.clone(), 1)),
            "--spread-reads" => tweaks.push((arg.clone(), 0)),
            "--threads" => threads = args.next().and_then(|t| t.parse().ok()).unwrap_or(threads),
            "--only" => only.extend(args.next()),
            "--horizon" | "--losses" | "--duplicates" | "--data-losses" | "--acquisitions" => {
                let value = args.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                tweaks.push((arg.clone(), value));
            }
            other => {
                eprintln!(
                    "unknown argument {other}; usage: redquorum-model [--large | --tiny] [--threads N] [--only NAME]..."
                );
                return ExitCode::from(2);
            }
        }
    }
    let mut failed = Vec::new();
    for mut cfg in suite(size) {
        for (name, value) in &tweaks {
            match name.as_str() {
                "--horizon" => cfg.horizon = *value,
                "--losses" => cfg.net.losses = *value,
                "--duplicates" => cfg.net.duplicates = *value,
                "--data-losses" => cfg.faults.data_losses = *value,
                "--atomic-reads" | "--spread-reads" => {
                    if let redquorum_model::GuardMode::Epochs(g) = &mut cfg.guard {
                        g.atomic_reads = *value == 1;
                    }
                }
                _ => cfg.clients.iter_mut().for_each(|c| c.acquisitions = *value),
            }
        }
        if !only.is_empty() && !only.iter().any(|o| cfg.name.contains(o.as_str())) {
            continue;
        }
        println!("== {} — {}", cfg.name, cfg.about);
        let out = check_with(
            cfg,
            Options {
                threads,
                bfs,
                dfs,
                timeout,
                symmetry,
            },
        );
        let how = if out.complete {
            ", every reachable state".to_owned()
        } else if out.walks > 0 {
            format!(", {} random walks", out.walks)
        } else {
            String::new()
        };
        println!(
            "   {} states, depth {}, in {:.1} s{how}",
            out.states,
            out.depth,
            out.elapsed.as_secs_f64(),
        );
        for (name, v) in &out.verdicts {
            let word = match v {
                Verdict::Holds => "holds",
                Verdict::Fails(_) => "COUNTEREXAMPLE",
                Verdict::Witnessed => "witnessed",
                Verdict::NotWitnessed => "NOT WITNESSED",
                Verdict::Unsettled => "(not settled: stopped at the counterexample)",
            };
            println!("   {name}: {word}");
        }
        if let Some((name, trace)) = out.counterexample() {
            println!("   counterexample to \"{name}\":");
            for line in trace {
                println!("     {line}");
            }
        }
        let ok = out.as_expected();
        println!("   => {}", if ok { "as expected" } else { "UNEXPECTED" });
        println!();
        if !ok {
            failed.push(out.cfg.name);
        }
    }
    if failed.is_empty() {
        println!("every instance concluded as expected");
        ExitCode::SUCCESS
    } else {
        println!("unexpected: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}
