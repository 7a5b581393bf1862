//! The report's plots, drawn with plotters' SVG backend: each is an SVG
//! document (text left to the browser's fonts, so no font library is
//! needed), or the reason it could not be drawn from this run's logs.

use anyhow::{anyhow, Result};
use loadgen_node::run_record::NodeRecord;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::logs::RunLogs;

/// One figure of the report.
pub(crate) struct Plot {
    /// File stem (`report/ID.svg`) and HTML id.
    pub(crate) id: &'static str,
    pub(crate) title: String,
    /// What the report's section groups it under.
    pub(crate) section: Section,
    pub(crate) body: PlotBody,
}

/// Where a plot goes in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    Latency,
    Tokens,
    Network,
}

/// The plot, or why there is none.
pub(crate) enum PlotBody {
    /// An SVG document and the number of data points drawn.
    Svg { svg: String, points: usize },
    /// Not drawn: why.
    Missing(String),
}

const SIZE: (u32, u32) = (760, 360);
/// Scatter plots keep at most this many points (evenly strided), so the
/// page stays light for long runs.
const MAX_POINTS: usize = 4000;
const BINS: usize = 50;

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A padded range around `values` (never empty).
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        (lo, hi) = (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    lo..hi + (hi - lo) * 0.05
}

/// Draws one chart into an SVG string.
fn chart(
    title: &str,
    (x_desc, y_desc): (&str, &str),
    (x, y): (std::ops::Range<f64>, std::ops::Range<f64>),
    with_legend: bool,
    draw: impl FnOnce(&mut Chart<'_, '_>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x, y)
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        draw(&mut chart)?;
        if with_legend {
            legend(&mut chart)?;
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(svg)
}

/// Draws the series labels, if any series has one.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(|e| anyhow!("{e}"))
}

fn stride<T: Copy>(values: &[T]) -> impl Iterator<Item = T> + '_ {
    let step = values.len().div_ceil(MAX_POINTS).max(1);
    values.iter().step_by(step).copied()
}

/// The value at percentile `p` (0..1) of sorted `values`, as the LoadGen
/// picks it (the sample at index floor(n * p)).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len().checked_sub(1)?);
    Some(sorted[i])
}

/// A scatter of `(x, y)` points, with horizontal lines `marks`.
fn scatter(
    title: &str,
    descs: (&str, &str),
    points: &[(f64, f64)],
    marks: &[(String, f64)],
) -> Result<PlotBody> {
    let x = range(points.iter().map(|p| p.0), true);
    let y = range(
        points.iter().map(|p| p.1).chain(marks.iter().map(|m| m.1)),
        true,
    );
    let (x0, x1) = (x.start, x.end);
    let svg = chart(title, descs, (x, y), !marks.is_empty(), |c| {
        c.draw_series(stride(points).map(|p| Circle::new(p, 2, BLUE.mix(0.5).filled())))
            .map_err(|e| anyhow!("{e}"))?;
        for (i, (label, v)) in marks.iter().enumerate() {
            let color = Palette99::pick(i + 1).to_rgba();
            c.draw_series(LineSeries::new([(x0, *v), (x1, *v)], color.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
        }
        Ok(())
    })?;
    Ok(PlotBody::Svg {
        svg,
        points: points.len(),
    })
}

/// A histogram of `values` with a vertical line at `mark`.
fn histogram(
    title: &str,
    x_desc: &str,
    values: &[f64],
    mark: Option<(String, f64)>,
) -> Result<PlotBody> {
    let x = range(values.iter().copied(), false);
    let width = (x.end - x.start) / BINS as f64;
    let mut counts = vec![0u64; BINS];
    for v in values {
        let i = (((v - x.start) / width) as usize).min(BINS - 1);
        counts[i] += 1;
    }
    let y = 0.0..(*counts.iter().max().unwrap_or(&1) as f64 * 1.1).max(1.0);
    let top = y.end;
    let start = x.start;
    let svg = chart(title, (x_desc, "samples"), (x, y), mark.is_some(), |c| {
        c.draw_series(
            counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let x0 = start + i as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width, *n as f64)], BLUE.mix(0.6).filled())
                }),
        )
        .map_err(|e| anyhow!("{e}"))?;
        if let Some((label, v)) = mark {
            c.draw_series(LineSeries::new([(v, 0.0), (v, top)], RED.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?
                .label(label)
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
        }
        Ok(())
    })?;
    Ok(PlotBody::Svg {
        svg,
        points: values.len(),
    })
}

/// The empirical CDF of sorted `values`, with the percentile `mark`.
fn cdf(
    title: &str,
    x_desc: &str,
    sorted: &[f64],
    mark: Option<(String, f64, f64)>,
) -> Result<PlotBody> {
    let n = sorted.len() as f64;
    let points: Vec<(f64, f64)> = stride(sorted)
        .enumerate()
        .map(|(i, v)| {
            (
                v,
                ((i * sorted.len().div_ceil(MAX_POINTS).max(1)) as f64 + 1.0) / n,
            )
        })
        .chain(sorted.last().map(|v| (*v, 1.0)))
        .collect();
    let x = range(sorted.iter().copied(), false);
    let x0 = x.start;
    let svg = chart(
        title,
        (x_desc, "fraction of samples"),
        (x, 0.0..1.02),
        mark.is_some(),
        |c| {
            c.draw_series(LineSeries::new(
                points.iter().copied(),
                BLUE.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?;
            if let Some((label, p, v)) = mark {
                c.draw_series(LineSeries::new(
                    [(x0, p), (v, p), (v, 0.0)],
                    RED.stroke_width(2),
                ))
                .map_err(|e| anyhow!("{e}"))?
                .label(label)
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
                c.draw_series([Circle::new((v, p), 4, RED.filled())])
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Ok(())
        },
    )?;
    Ok(PlotBody::Svg {
        svg,
        points: sorted.len(),
    })
}

/// Bars, one per label.
fn bars(title: &str, y_desc: &str, bars: &[(String, f64)]) -> Result<PlotBody> {
    let n = bars.len() as f64;
    let y = range(bars.iter().map(|b| b.1), true);
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..n - 0.5, y)
            .map_err(|e| anyhow!("{e}"))?;
        c.configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE.mix(0.0))
            .x_labels(bars.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_desc)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        c.draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.3, 0.0), (x + 0.3, *v)],
                Palette99::pick(i).mix(0.8).filled(),
            )
        }))
        .map_err(|e| anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(PlotBody::Svg {
        svg,
        points: bars.len(),
    })
}

/// Lines, one per named series.
fn lines(
    title: &str,
    descs: (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<PlotBody> {
    let all = || series.iter().flat_map(|s| s.1.iter());
    let x = range(all().map(|p| p.0), true);
    let y = range(all().map(|p| p.1), true);
    let svg = chart(title, descs, (x, y), true, |c| {
        for (i, (name, points)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            c.draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?;
            c.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(|e| anyhow!("{e}"))?
                .label(name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
        }
        Ok(())
    })?;
    Ok(PlotBody::Svg {
        svg,
        points: series.iter().map(|s| s.1.len()).sum(),
    })
}

/// The latency percentile the scenario's verdict rests on (from the
/// detail log: SingleStream 90th, MultiStream and Server 99th by
/// default); Offline has none.
pub(crate) fn target_percentile(logs: &RunLogs) -> Option<f64> {
    if logs.summary.scenario() == "Offline" {
        return None;
    }
    logs.detail
        .number("effective_target_latency_percentile")
        .filter(|p| *p > 0.0 && *p < 1.0)
}

/// Latencies in ms the scenario is judged on: per query for MultiStream
/// (its slowest sample), per sample otherwise.
fn judged_latencies_ms(logs: &RunLogs) -> Vec<f64> {
    let samples = &logs.trace.samples;
    let mut values: Vec<f64> = if logs.summary.scenario() == "MultiStream" {
        let mut by_query: std::collections::BTreeMap<u64, f64> = Default::default();
        for s in samples {
            let v = by_query.entry(s.query_seq).or_insert(0.0);
            *v = v.max(s.latency_ns);
        }
        by_query.into_values().collect()
    } else {
        samples.iter().map(|s| s.latency_ns).collect()
    };
    for v in &mut values {
        *v /= 1e6;
    }
    values.sort_by(f64::total_cmp);
    values
}

fn node_label(node: &NodeRecord, i: usize) -> String {
    if node.name.is_empty() {
        format!("node {i}")
    } else {
        node.name.clone()
    }
}

fn missing(id: &'static str, title: &str, section: Section, why: String) -> Plot {
    Plot {
        id,
        title: title.into(),
        section,
        body: PlotBody::Missing(why),
    }
}

fn plot(id: &'static str, title: &str, section: Section, body: Result<PlotBody>) -> Plot {
    Plot {
        id,
        title: title.into(),
        section,
        body: body.unwrap_or_else(|e| PlotBody::Missing(format!("could not draw it: {e:#}"))),
    }
}

/// Every plot the run's logs allow, and for the rest why not.
pub(crate) fn all(logs: &RunLogs) -> Vec<Plot> {
    let mut out = Vec::new();
    latency_plots(logs, &mut out);
    token_plots(logs, &mut out);
    network_plots(logs, &mut out);
    out
}

fn latency_plots(logs: &RunLogs, out: &mut Vec<Plot>) {
    let s = Section::Latency;
    let samples = &logs.trace.samples;
    if let Some(why) = &logs.trace.missing {
        for (id, title) in [
            ("latency-over-time", "Latency over time"),
            ("latency-histogram", "Latency histogram"),
            ("latency-cdf", "Latency CDF"),
            ("throughput", "Throughput over time"),
        ] {
            out.push(missing(id, title, s, format!("no per-sample data: {why}")));
        }
        return;
    }
    let target_ms = logs
        .detail
        .number("effective_target_latency_ns")
        .filter(|v| *v > 0.0 && logs.summary.scenario() == "Server")
        .map(|v| v / 1e6);
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (s.scheduled_ns / 1e9, s.latency_ns / 1e6))
        .collect();
    let marks: Vec<(String, f64)> = target_ms
        .map(|t| vec![(format!("target latency {t:.3} ms"), t)])
        .unwrap_or_default();
    out.push(plot(
        "latency-over-time",
        "Latency over time",
        s,
        scatter(
            "Sample latency by scheduled time",
            ("time since start (s)", "latency (ms)"),
            &points,
            &marks,
        ),
    ));
    let judged = judged_latencies_ms(logs);
    let per = if logs.summary.scenario() == "MultiStream" {
        "query"
    } else {
        "sample"
    };
    let pct = target_percentile(logs);
    let mark = pct.and_then(|p| Some((p, percentile(&judged, p)?)));
    let label = |p: f64, v: f64| format!("{}th percentile: {v:.3} ms", p * 100.0);
    out.push(plot(
        "latency-histogram",
        "Latency histogram",
        s,
        histogram(
            &format!("Latency per {per}"),
            "latency (ms)",
            &judged,
            mark.map(|(p, v)| (label(p, v), v)),
        ),
    ));
    out.push(plot(
        "latency-cdf",
        "Latency CDF",
        s,
        cdf(
            &format!("Latency per {per}, cumulative"),
            "latency (ms)",
            &judged,
            mark.map(|(p, v)| (label(p, v), p, v)),
        ),
    ));
    out.push(plot(
        "throughput",
        "Throughput over time",
        s,
        throughput(samples),
    ));
}

/// Completions per second in ~60 bins over the run.
fn throughput(samples: &[super::logs::TraceSample]) -> Result<PlotBody> {
    let done: Vec<f64> = samples
        .iter()
        .map(|s| (s.scheduled_ns + s.latency_ns) / 1e9)
        .collect();
    let end = done.iter().copied().fold(0.0, f64::max);
    let width = (end / 60.0).max(0.01);
    let bins = (end / width).ceil() as usize + 1;
    let mut counts = vec![0u64; bins];
    for t in &done {
        counts[((t / width) as usize).min(bins - 1)] += 1;
    }
    let points: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(i, n)| ((i as f64 + 0.5) * width, *n as f64 / width))
        .collect();
    lines(
        "Completed samples per second",
        ("time since start (s)", "samples/s"),
        &[(format!("{:.0} ms bins", width * 1e3), points)],
    )
}

fn token_plots(logs: &RunLogs, out: &mut Vec<Plot>) {
    let token_model = logs
        .detail
        .value("result_first_token_mean_latency_ns")
        .is_some()
        || logs.detail.value("early_stopping_ttft_result").is_some()
        || logs
            .trace
            .samples
            .iter()
            .any(|s| s.first_token_ns.is_some());
    if !token_model {
        return;
    }
    ttft_plots(logs, out);
    tpot_plot(logs, out);
}

/// The histogram and cumulative curve of time to first token (from the
/// trace), or why they are missing.
fn ttft_plots(logs: &RunLogs, out: &mut Vec<Plot>) {
    let s = Section::Tokens;
    let mut ttft: Vec<f64> = logs
        .trace
        .samples
        .iter()
        .filter_map(|s| s.first_token_ns.map(|v| v / 1e6))
        .collect();
    ttft.sort_by(f64::total_cmp);
    if ttft.is_empty() {
        let why = logs.trace.missing.clone().unwrap_or_else(|| {
            "the trace has no first-token events (Offline does not time first tokens)".into()
        });
        out.push(missing(
            "ttft-histogram",
            "Time to first token",
            s,
            why.clone(),
        ));
    } else {
        let pct = target_percentile(logs);
        let mark = pct.and_then(|p| Some((p, percentile(&ttft, p)?)));
        let constraint = logs
            .detail
            .number("requested_server_ttft_latency")
            .filter(|v| *v > 0.0)
            .map(|v| v / 1e6);
        let title = match constraint {
            Some(c) => format!("Time to first token (TTFT constraint {c:.1} ms)"),
            None => "Time to first token".into(),
        };
        out.push(plot(
            "ttft-histogram",
            "Time to first token",
            s,
            histogram(
                &title,
                "TTFT (ms)",
                &ttft,
                mark.map(|(p, v)| (format!("{}th percentile: {v:.3} ms", p * 100.0), v)),
            ),
        ));
        out.push(plot(
            "ttft-cdf",
            "Time to first token, cumulative",
            s,
            cdf(
                "Time to first token, cumulative",
                "TTFT (ms)",
                &ttft,
                mark.map(|(p, v)| (format!("{}th percentile: {v:.3} ms", p * 100.0), p, v)),
            ),
        ));
    }
}

/// Time per output token by percentile, against its constraint. The trace
/// has no token counts, so TPOT comes from the detail log's percentiles.
fn tpot_plot(logs: &RunLogs, out: &mut Vec<Plot>) {
    let s = Section::Tokens;
    let tpot = logs
        .detail
        .percentiles("result_time_per_output_token_", "_percentile_ns");
    if tpot.is_empty() {
        out.push(missing(
            "tpot-percentiles",
            "Time per output token",
            s,
            "the detail log has no result_time_per_output_token_* keys (Offline, or not a token run)"
                .into(),
        ));
    } else {
        let mut series = vec![(
            "TPOT".to_string(),
            tpot.iter().map(|(p, v)| (*p, v / 1e6)).collect::<Vec<_>>(),
        )];
        if let Some(c) = logs
            .detail
            .number("requested_server_tpot_latency")
            .filter(|v| *v > 0.0)
        {
            let (lo, hi) = (tpot[0].0, tpot[tpot.len() - 1].0);
            series.push((
                format!("TPOT constraint {:.3} ms", c / 1e6),
                vec![(lo, c / 1e6), (hi, c / 1e6)],
            ));
        }
        out.push(plot(
            "tpot-percentiles",
            "Time per output token",
            s,
            lines(
                "Time per output token by percentile",
                ("percentile", "TPOT (ms)"),
                &series,
            ),
        ));
    }
}

fn network_plots(logs: &RunLogs, out: &mut Vec<Plot>) {
    let Some(record) = &logs.record else {
        return;
    };
    let nodes = &record.nodes;
    if nodes.is_empty() {
        return;
    }
    node_share_plot(nodes, out);
    node_latency_plot(nodes, out);
    name_round_trip_plot(nodes, out);
}

/// Each node's share of the completed samples.
fn node_share_plot(nodes: &[NodeRecord], out: &mut Vec<Plot>) {
    let s = Section::Network;
    // Older records counted answers only, not timed completions.
    let completed = |n: &NodeRecord| match n.traffic.latency.count {
        0 => n.traffic.answers,
        count => count,
    };
    let total: u64 = nodes.iter().map(completed).sum();
    let share: Vec<(String, f64)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let pct = if total > 0 {
                completed(n) as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            (node_label(n, i), pct)
        })
        .collect();
    out.push(plot(
        "node-share",
        "Share of samples per node",
        s,
        bars("Samples completed per node", "% of samples", &share),
    ));
}

/// Each node's sample round trips, cumulative.
fn node_latency_plot(nodes: &[NodeRecord], out: &mut Vec<Plot>) {
    let s = Section::Network;
    let curves: Vec<(String, Vec<(f64, f64)>)> = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let latency = &n.traffic.latency;
            let count = latency.count as f64;
            let mut seen = 0.0;
            let points = latency
                .buckets
                .iter()
                .map(|&(bound_us, completions)| {
                    seen += completions as f64;
                    (bound_us as f64 / 1e3, seen / count)
                })
                .collect::<Vec<_>>();
            (!points.is_empty()).then(|| (node_label(n, i), points))
        })
        .collect();
    if curves.is_empty() {
        out.push(missing(
            "node-latency",
            "Latency per node",
            s,
            "the run record has no per-node latency (nodes[].traffic.latency): an older netdiv, or no sample completed".into(),
        ));
    } else {
        out.push(plot(
            "node-latency",
            "Latency per node",
            s,
            lines(
                "Round trip per node (sent until completed), cumulative",
                ("round trip (ms, bucket bound)", "fraction of samples"),
                &curves,
            ),
        ));
    }
}

/// Each Name() round trip, per node.
fn name_round_trip_plot(nodes: &[NodeRecord], out: &mut Vec<Plot>) {
    let s = Section::Network;
    let name_trips: Vec<(String, Vec<(f64, f64)>)> = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let points: Vec<(f64, f64)> = n
                .traffic
                .name_round_trips_us
                .iter()
                .enumerate()
                .map(|(k, &us)| ((k + 1) as f64, us as f64 / 1e3))
                .collect();
            (!points.is_empty()).then(|| (node_label(n, i), points))
        })
        .collect();
    if name_trips.is_empty() {
        out.push(missing(
            "name-round-trips",
            "Name() round trips",
            s,
            "the LoadGen called Name() on no node".into(),
        ));
    } else {
        out.push(plot(
            "name-round-trips",
            "Name() round trips",
            s,
            lines(
                "Name() round trip per call",
                ("call", "round trip (ms)"),
                &name_trips,
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_the_loadgen_index() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), Some(100.0));
        assert_eq!(percentile(&v, 0.90), Some(91.0));
        assert_eq!(percentile(&[], 0.9), None);
    }

    #[test]
    fn a_histogram_draws_bars_and_its_mark() {
        let values: Vec<f64> = (0..1000).map(|i| f64::from(i % 97)).collect();
        let PlotBody::Svg { svg, points } =
            histogram("t", "x", &values, Some(("p99".into(), 95.0))).unwrap()
        else {
            panic!("no svg");
        };
        assert_eq!(points, 1000);
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.matches("<rect").count() > BINS / 2, "bars drawn");
        assert!(svg.contains("p99"), "legend drawn");
    }
}
