//! `solo bench --svg FILE`: prefill and decode tok/s against context, drawn as an SVG (two panels,
//! a log-scaled context axis, one line per bench report: bf16 beside FP8 once both exist). From
//! the run just made, or from saved `--json` reports with `--from` (no GPU needed).

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One report's measurements: (context, prefill tok/s, decode tok/s) by context.
#[derive(Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64, f64)>,
}

const COLORS: [&str; 4] = ["#2f6fde", "#e07b39", "#2a9d8f", "#9b59b6"];
const WIDTH: f64 = 990.0;
const HEIGHT: f64 = 390.0;
const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 250.0;
/// Between a panel's frame and its first and last context, so that end labels stay clear.
const INSET: f64 = 30.0;
const TOP: f64 = 80.0;
const LEFT: [f64; 2] = [70.0, 560.0];

/// A `solo bench --json` report as a series; its label is the report's `precision`, else `fallback`.
pub fn series_of(report: &Value, fallback: &str) -> Result<Series> {
    let rows = report["results"].as_array().context("no `results` array: not a `solo bench --json` report")?;
    let mut points = Vec::new();
    for r in rows {
        let field = |k: &str| r[k].as_f64().with_context(|| format!("a result without a numeric `{k}`"));
        points.push((field("context")?, field("prefill_tok_s")?, field("decode_tok_s")?));
    }
    if points.is_empty() {
        bail!("the report has no results");
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let label = report["precision"].as_str().map(short_precision).unwrap_or_else(|| fallback.to_string());
    Ok(Series { label, points })
}

/// "bf16 weights, f32 recurrent state, bf16 KV cache" → "bf16 weights".
fn short_precision(p: &str) -> String {
    p.split(',').next().unwrap_or(p).trim().to_string()
}

/// The title line: GPU and commit of the first report.
pub fn title_of(report: &Value) -> String {
    let gpu = report["gpu"].as_str().unwrap_or("GPU");
    match report["commit"].as_str() {
        Some(c) => format!("solo bench — {gpu} — batch 1 — commit {c}"),
        None => format!("solo bench — {gpu} — batch 1"),
    }
}

/// Reads saved `--json` reports and draws them into `out`.
pub fn draw_files(reports: &[PathBuf], out: &Path) -> Result<()> {
    let mut values = Vec::new();
    for path in reports {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        values.push((path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default(), v));
    }
    write(&values, out)
}

/// Draws `(fallback label, report)` pairs into `out`.
pub fn write(reports: &[(String, Value)], out: &Path) -> Result<()> {
    let series = reports.iter().map(|(name, v)| series_of(v, name)).collect::<Result<Vec<_>>>()?;
    let title = reports.first().map(|(_, v)| title_of(v)).unwrap_or_default();
    std::fs::write(out, draw(&title, &series)).with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!("solo bench: drew {} report(s) into {}", series.len(), out.display());
    Ok(())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// 256 → "256", 4096 → "4K", 131072 → "128K".
fn context_label(c: f64) -> String {
    let c = c as u64;
    if c >= 1024 && c.is_multiple_of(1024) {
        format!("{}K", c / 1024)
    } else {
        c.to_string()
    }
}

/// 30912.4 → "30.9K", 476.2 → "476", 7.25 → "7.3".
fn rate_label(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v >= 10_000.0 {
        format!("{:.1}K", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The smallest 1, 2, 2.5 or 5 × 10^k at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * base).find(|&x| x >= v * 0.999_999).unwrap_or(10.0 * base)
}

/// The whole drawing.
pub fn draw(title: &str, series: &[Series]) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="system-ui, sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##);
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="24" font-size="15" font-weight="600" fill="#1d2330">{}</text>"##,
        LEFT[0],
        escape(title)
    );
    // The legend.
    let mut x = LEFT[0];
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(svg, r#"<rect x="{x}" y="36" width="14" height="4" fill="{color}"/>"#);
        let _ = writeln!(svg, r##"<text x="{}" y="42" fill="#1d2330">{}</text>"##, x + 20.0, escape(&s.label));
        x += 40.0 + 7.0 * s.label.chars().count() as f64;
    }
    let contexts: Vec<f64> = {
        let mut c: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
        c.sort_by(f64::total_cmp);
        c.dedup();
        c
    };
    let (lo, hi) = (contexts.first().copied().unwrap_or(1.0).log2(), contexts.last().copied().unwrap_or(2.0).log2());
    let span = if hi > lo { hi - lo } else { 1.0 };
    for (panel, name) in [(0, "prefill tok/s"), (1, "decode tok/s")] {
        let left = LEFT[panel];
        let value = |p: &(f64, f64, f64)| if panel == 0 { p.1 } else { p.2 };
        let max = nice_ceiling(series.iter().flat_map(|s| s.points.iter().map(value)).fold(0.0, f64::max));
        let inner = PANEL_W - 2.0 * INSET;
        let px = |c: f64| left + INSET + if hi > lo { (c.log2() - lo) / span * inner } else { inner / 2.0 };
        let py = |v: f64| TOP + PANEL_H - v / max * PANEL_H;
        let _ =
            writeln!(svg, r##"<text x="{left}" y="{}" font-weight="600" fill="#1d2330">{name}</text>"##, TOP - 16.0);
        for k in 0..=5 {
            let v = max * k as f64 / 5.0;
            let y = py(v);
            let _ = writeln!(
                svg,
                r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#e3e6eb"/><text x="{}" y="{:.1}" text-anchor="end" fill="#5f6b7a">{}</text>"##,
                left + PANEL_W,
                left - 6.0,
                y + 4.0,
                rate_label(v)
            );
        }
        for &c in &contexts {
            let x = px(c);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#e3e6eb"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#5f6b7a">{}</text>"##,
                TOP,
                TOP + PANEL_H,
                TOP + PANEL_H + 16.0,
                context_label(c)
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#5f6b7a">context (tokens)</text>"##,
            left + PANEL_W / 2.0,
            TOP + PANEL_H + 34.0
        );
        for (i, s) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let pts: Vec<String> = s.points.iter().map(|p| format!("{:.1},{:.1}", px(p.0), py(value(p)))).collect();
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2.5" points="{}"/>"#,
                pts.join(" ")
            );
            for p in &s.points {
                let (x, y) = (px(p.0), py(value(p)));
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="{color}">{}</text>"#,
                    y - 8.0,
                    rate_label(value(p))
                );
            }
        }
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"{"gpu": "NVIDIA H200", "commit": "abc1234", "precision": "bf16 weights, f32 recurrent state, bf16 KV cache",
        "results": [
          {"context": 4096, "prefill_tok_s": 30912.0, "decode_tok_s": 470.1},
          {"context": 256, "prefill_tok_s": 9000.0, "decode_tok_s": 476.0},
          {"context": 131072, "prefill_tok_s": 14400.0, "decode_tok_s": 362.0}]}"#;

    /// (x, y) pairs of the `n`-th polyline.
    fn polyline(svg: &str, n: usize) -> Vec<(f64, f64)> {
        let line = svg.lines().filter(|l| l.starts_with("<polyline")).nth(n).unwrap();
        let pts = line.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
        pts.split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn draws_a_saved_report() {
        let dir = tempfile::tempdir().unwrap();
        let (json, out) = (dir.path().join("bf16.json"), dir.path().join("bench.svg"));
        std::fs::write(&json, REPORT).unwrap();
        let mut fp8: Value = serde_json::from_str(REPORT).unwrap();
        fp8["precision"] = Value::from("fp8 weights, f32 recurrent state");
        let fp8_path = dir.path().join("fp8.json");
        std::fs::write(&fp8_path, fp8.to_string()).unwrap();
        draw_files(&[json, fp8_path], &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("solo bench — NVIDIA H200 — batch 1 — commit abc1234"), "{svg}");
        assert!(svg.contains(">bf16 weights</text>") && svg.contains(">fp8 weights</text>"), "the legend");
        for label in [">256</text>", ">4K</text>", ">128K</text>", ">30.9K</text>", ">476</text>", ">362</text>"] {
            assert!(svg.contains(label), "{label} missing");
        }
        // Two panels × two reports; the context axis is sorted and log-scaled (256 → 4K is 4 of
        // the 9 doublings to 128K).
        assert_eq!(svg.matches("<polyline").count(), 4);
        let prefill = polyline(&svg, 0);
        assert_eq!(prefill.len(), 3);
        let (x0, x1, x2) = (prefill[0].0, prefill[1].0, prefill[2].0);
        assert!(((x1 - x0) / (x2 - x0) - 4.0 / 9.0).abs() < 1e-3, "{prefill:?}");
        // Higher is faster: 4K's prefill is the highest point, 128K's decode the lowest.
        assert!(prefill[1].1 < prefill[2].1 && prefill[2].1 < prefill[0].1, "{prefill:?}");
        let decode = polyline(&svg, 2);
        assert!(decode[2].1 > decode[1].1 && decode[1].1 > decode[0].1, "{decode:?}");
        // The y axis tops out at a round number above the maximum (30.9K → 50K).
        assert!(svg.contains(">50.0K</text>"), "{svg}");
    }

    #[test]
    fn a_file_that_is_not_a_report_is_named() {
        let err = series_of(&serde_json::json!({"x": 1}), "f").unwrap_err();
        assert!(err.to_string().contains("not a `solo bench --json` report"), "{err}");
        assert_eq!(nice_ceiling(476.0), 500.0);
        assert_eq!(nice_ceiling(30912.0), 50000.0);
        assert_eq!(nice_ceiling(200.0), 200.0);
    }
}
