//! `--plot FILE.svg`: latency CDFs of redquorum and the floor, one panel per workload and
//! profile, on a logarithmic latency axis. SVG only, drawn without system libraries.

use std::path::Path;

use plotters::prelude::*;

use super::result::{BenchResult, SystemResult};

/// Panel size in pixels.
const PANEL: (u32, u32) = (560, 360);

/// Draws every workload of every profile run of `result` into `path`.
pub(crate) fn write(result: &BenchResult, path: &Path) -> Result<(), String> {
    let rows = result.runs.len().max(1);
    let cols = result
        .runs
        .iter()
        .map(|r| r.workloads.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let size = (PANEL.0 * cols as u32, PANEL.1 * rows as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((rows, cols));
    for (r, run) in result.runs.iter().enumerate() {
        for (c, w) in run.workloads.iter().enumerate() {
            let title = format!("{} on {}: {} latency", w.workload, run.profile, w.headline);
            panel(&areas[r * cols + c], &title, &w.redquorum, &w.floor)?;
        }
    }
    root.present().map_err(|e| e.to_string())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    ours: &SystemResult,
    floor: &SystemResult,
) -> Result<(), String> {
    let all = ours.cdf.iter().chain(&floor.cdf).map(|p| p[0]);
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(0.0_f64, f64::max);
    if !(lo.is_finite() && hi > 0.0) {
        // Nothing was measured (every attempt failed): leave the panel with its title.
        return area
            .titled(&format!("{title} (no samples)"), ("sans-serif", 16))
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    // The axis is linear in log10(µs), labelled in time units: evenly spaced labels at
    // any range, which plotters' own log axis does not give for narrow ranges.
    let (lo, hi) = ((lo * 0.8).max(0.05).log10(), (hi * 1.25).log10());
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(lo..hi, 0.0_f64..1.0_f64)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(8)
        .x_label_formatter(&|x| label(10_f64.powf(*x)))
        .x_desc("latency (log scale)")
        .y_desc("fraction of operations")
        .draw()
        .map_err(|e| e.to_string())?;
    for (label, system, color) in [("redquorum", ours, RED), ("floor", floor, BLUE)] {
        if system.cdf.is_empty() {
            continue;
        }
        let points = system
            .cdf
            .iter()
            .map(|p| (p[0].max(1e-3).log10().max(lo), p[1]));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())
}

/// An axis label: `80µs`, `1.5ms`, `30ms`.
fn label(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0}µs")
    } else if us < 10_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else if us < 100_000.0 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{:.0}ms", us / 1e3)
    }
}
