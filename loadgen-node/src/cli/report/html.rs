//! The report page: one self-contained HTML file (style, plots and a
//! small self-check inline) laying out the verdict and why, the latency
//! numbers, the plots, and for network runs the Network-division checks
//! from the run record.

use std::fmt::Write;

use loadgen_node::run_record::{BandwidthCheck, NodeRecord, QdlRecord, RunRecord};

use qdl::LatencySummary;

use super::logs::RunLogs;
use super::plots::{Plot, PlotBody, Section};

/// Escapes text for HTML content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222}\
h1{margin-bottom:0}.sub{color:#666;margin-top:.2em}\
.verdict{font-size:2em;font-weight:bold;padding:.2em .6em;display:inline-block;border-radius:6px}\
.VALID{background:#d4f4d4;color:#0a5c0a}.INVALID{background:#fbd5d5;color:#8a1010}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums}.yes{color:#0a5c0a}.no{color:#8a1010;font-weight:bold}\
figure.plot{margin:1em 0}figure.missing{color:#8a5a00;background:#fff6e0;padding:.5em;border-radius:4px}\
figcaption{font-size:.85em;color:#666}";

/// Counts, for each plot, the data elements the browser laid out (non-
/// empty boxes in a colour: axes, grid and text are black or grey) into
/// `data-drawn`, and page errors into `data-errors`, so a headless
/// browser's `--dump-dom` shows what was really drawn.
const SELF_CHECK: &str = "(function(){var errors=0;window.addEventListener('error',function(){errors++;\
document.body.setAttribute('data-errors',errors);});\
function colored(c){c=(c||'').toLowerCase();if(c.length!==7||c[0]!=='#'){return false;}\
return !(c.substr(1,2)===c.substr(3,2)&&c.substr(3,2)===c.substr(5,2));}\
var figs=document.querySelectorAll('figure[data-plot]');figs.forEach(function(f){var n=0;\
var svg=f.querySelector('svg');if(svg){svg.querySelectorAll('circle,rect,polyline,path,line,polygon')\
.forEach(function(e){var b=e.getBBox();if((b.width>0||b.height>0)&&\
(colored(e.getAttribute('fill'))||colored(e.getAttribute('stroke')))){n++;}});}\
f.setAttribute('data-drawn',n);});document.body.setAttribute('data-errors',errors);\
document.body.setAttribute('data-checked',figs.length);})();";

fn row(out: &mut String, cells: &[String]) {
    out.push_str("<tr>");
    for c in cells {
        out.push_str(c);
    }
    out.push_str("</tr>\n");
}

fn td(text: impl AsRef<str>) -> String {
    format!("<td>{}</td>", escape(text.as_ref()))
}

fn num(text: impl AsRef<str>) -> String {
    format!("<td class=\"num\">{}</td>", escape(text.as_ref()))
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// Renders the page; `svg_dir` is the folder name the plot files are in,
/// relative to the page.
pub(crate) fn render(logs: &RunLogs, plots: &[Plot], svg_dir: &str) -> String {
    let s = &logs.summary;
    let field = |k: &str| s.fields.get(k).cloned().unwrap_or_default();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>netdiv report: {} {}</title><style>{STYLE}</style></head>\n<body>\n",
        escape(&field("SUT name")),
        escape(s.scenario())
    );
    let benchmark = logs.record.as_ref().map(|r| r.benchmark.clone());
    let _ = writeln!(
        out,
        "<h1>Run report</h1><p class=\"sub\">{}{} &middot; {} &middot; SUT {} &middot; {}</p>",
        benchmark
            .map(|b| escape(&b) + " &middot; ")
            .unwrap_or_default(),
        escape(s.scenario()),
        escape(&field("Mode")),
        escape(&field("SUT name")),
        escape(&logs.dir.display().to_string())
    );
    verdict(&mut out, logs);
    latency_table(&mut out, logs);
    plot_section(
        &mut out,
        "Latency and throughput",
        plots,
        Section::Latency,
        svg_dir,
    );
    plot_section(
        &mut out,
        "Tokens (TTFT and TPOT)",
        plots,
        Section::Tokens,
        svg_dir,
    );
    match &logs.record {
        Some(record) => {
            plot_section(&mut out, "Nodes", plots, Section::Network, svg_dir);
            network_checks(&mut out, record, &TokenBounds::of(&logs.detail));
        }
        None => out.push_str(
            "<section id=\"network\"><h2>Network</h2><p>No run record (netdiv_run.json): \
             not a network run, so there are no per-node or Network-division sections.</p></section>\n",
        ),
    }
    let notes: Vec<&Plot> = plots
        .iter()
        .filter(|p| matches!(p.body, PlotBody::Missing(_)))
        .collect();
    if !notes.is_empty() {
        out.push_str("<section id=\"not-plotted\"><h2>Not plotted</h2><ul>\n");
        for p in notes {
            if let PlotBody::Missing(why) = &p.body {
                let _ = writeln!(out, "<li>{}: {}</li>", escape(&p.title), escape(why));
            }
        }
        out.push_str("</ul></section>\n");
    }
    let _ = write!(
        out,
        "<p class=\"sub\">Written by loadgen-node {} from the logs in {}.</p>\n\
         <script>{SELF_CHECK}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&logs.dir.display().to_string())
    );
    out
}

fn verdict(out: &mut String, logs: &RunLogs) {
    let s = &logs.summary;
    let _ = writeln!(
        out,
        "<section id=\"verdict\"><h2>Verdict</h2>\
         <p id=\"verdict-result\" class=\"verdict {0}\" data-verdict=\"{0}\">{0}</p>",
        escape(&s.result)
    );
    if let Some((label, value)) = &s.headline {
        let _ = writeln!(out, "<p><b>{}</b>: {}</p>", escape(label), escape(value));
    }
    out.push_str("<table><tr><th>Constraint</th><th>Satisfied</th></tr>\n");
    for (what, ok) in &s.checks {
        let cell = if *ok {
            "<td class=\"yes\">Yes</td>".to_string()
        } else {
            "<td class=\"no\">NO</td>".to_string()
        };
        row(out, &[td(what), cell]);
    }
    out.push_str("</table>\n");
    if !s.recommendations.is_empty() {
        out.push_str("<h3>Why not VALID</h3><ul id=\"reasons\">\n");
        for r in &s.recommendations {
            let _ = writeln!(out, "<li>{}</li>", escape(r));
        }
        out.push_str("</ul>\n");
    }
    for (title, text) in &s.early_stopping {
        let _ = writeln!(out, "<h3>{}</h3><p>{}</p>", escape(title), escape(text));
    }
    let errors = logs.detail.texts("error_runtime");
    if !errors.is_empty() {
        out.push_str("<h3>Runtime errors (detail log)</h3><ul id=\"errors\">\n");
        for e in errors.iter().take(20) {
            let _ = writeln!(out, "<li>{}</li>", escape(e));
        }
        if errors.len() > 20 {
            let _ = writeln!(out, "<li>... and {} more</li>", errors.len() - 20);
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn latency_table(out: &mut String, logs: &RunLogs) {
    let d = &logs.detail;
    let mut rows: Vec<(String, f64)> = Vec::new();
    for (label, key) in [
        ("min", "result_min_latency_ns"),
        ("mean", "result_mean_latency_ns"),
        ("max", "result_max_latency_ns"),
    ] {
        if let Some(v) = d.number(key) {
            rows.push((label.into(), v));
        }
    }
    for (p, v) in d.percentiles("result_", "_percentile_latency_ns") {
        rows.push((format!("{p}th percentile"), v));
    }
    let ttft = d.percentiles("result_first_token_", "_percentile_latency_ns");
    if rows.is_empty() {
        return;
    }
    out.push_str("<section id=\"latency-numbers\"><h2>Latency (from the detail log)</h2><table>\n");
    let mut header = vec!["<th>per sample</th><th>latency</th>".to_string()];
    if !ttft.is_empty() {
        header.push("<th>first token</th>".into());
    }
    row(out, &header);
    for (label, v) in rows {
        let mut cells = vec![td(&label), num(ms(v))];
        if !ttft.is_empty() {
            let p = label
                .strip_suffix("th percentile")
                .and_then(|p| p.parse::<f64>().ok());
            let t = p
                .and_then(|p| ttft.iter().find(|t| t.0 == p))
                .map(|t| ms(t.1));
            cells.push(num(t.unwrap_or_default()));
        }
        row(out, &cells);
    }
    let _ = writeln!(
        out,
        "</table><p>{} samples in the trace; {} responses in the accuracy log.</p></section>",
        logs.trace.samples.len(),
        logs.accuracy_entries
    );
}

fn plot_section(out: &mut String, title: &str, plots: &[Plot], section: Section, svg_dir: &str) {
    let mine: Vec<&Plot> = plots.iter().filter(|p| p.section == section).collect();
    if mine.is_empty() {
        return;
    }
    let _ = writeln!(out, "<section class=\"plots\"><h2>{}</h2>", escape(title));
    for p in mine {
        match &p.body {
            PlotBody::Svg { svg, points } => {
                let _ = write!(
                    out,
                    "<figure class=\"plot\" id=\"plot-{id}\" data-plot=\"{id}\" data-points=\"{points}\">\n{svg}\n\
                     <figcaption>{} &middot; <a href=\"{svg_dir}/{id}.svg\">{id}.svg</a></figcaption></figure>\n",
                    escape(&p.title),
                    id = p.id,
                );
            }
            PlotBody::Missing(why) => {
                let _ = writeln!(
                    out,
                    "<figure class=\"plot missing\" id=\"plot-{id}\" data-missing=\"{w}\">\
                     <b>{}</b>: not plotted: {w}</figure>",
                    escape(&p.title),
                    id = p.id,
                    w = escape(why)
                );
            }
        }
    }
    out.push_str("</section>\n");
}

fn rate(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |b| format!("{:.2} MB/s", b / 1e6))
}

fn yes_no(v: Option<bool>) -> String {
    match v {
        Some(true) => "<td class=\"yes\">Yes</td>".to_string(),
        Some(false) => "<td class=\"no\">NO</td>".to_string(),
        None => td("unknown"),
    }
}

/// The record's nodes, failures, codecs, QDL counters and bandwidth.
fn network_checks(out: &mut String, r: &RunRecord, bounds: &TokenBounds) {
    out.push_str("<section id=\"network\"><h2>Network-division checks</h2>\n");
    failover_line(out, &r.qdl);
    node_table(out, &r.nodes);
    node_token_table(out, &r.nodes, bounds);
    out.push_str("<h3>Samples and QDL</h3><table>\n");
    let (q, samples) = (&r.qdl, &r.samples);
    for (label, v) in [
        ("LoadGen", r.loadgen.clone()),
        ("round", r.round.clone()),
        ("submission mode", r.submission_mode.to_string()),
        ("sample source", samples.source.clone()),
        ("sample codec", samples.codec.clone()),
        ("sample dtype", samples.dtype.clone()),
        ("completed", q.completed.to_string()),
        ("re-sent", q.resent.to_string()),
        ("nodes failed", q.nodes_failed.to_string()),
        ("late answers", q.late_answers.to_string()),
        ("first tokens", q.first_tokens.to_string()),
        ("late first tokens", q.late_first_tokens.to_string()),
        ("traffic seconds", format!("{:.3}", q.traffic_seconds)),
        ("dispatch policy", q.dispatch.clone()),
        (
            "QDL settings",
            q.settings
                .as_ref()
                .map_or_else(|| "not recorded".to_string(), ToString::to_string),
        ),
    ] {
        row(out, &[td(label), td(v)]);
    }
    out.push_str("</table>\n");
    bandwidth_table(out, &r.bandwidth);
    out.push_str("</section>\n");
}

/// Whether any node failed or any sample was re-sent.
fn failover_line(out: &mut String, q: &QdlRecord) {
    let clean = q.nodes_failed + q.resent == 0;
    let _ = writeln!(
        out,
        "<p id=\"failover\" class=\"{}\">{}</p>",
        if clean { "yes" } else { "no" },
        if clean {
            "No node failed; no sample was re-sent.".to_string()
        } else {
            format!(
                "{} node(s) failed; {} samples were re-sent to the others.",
                q.nodes_failed, q.resent
            )
        }
    );
}

/// One row per node: where it is, what it runs, its share and round trips.
fn node_table(out: &mut String, nodes: &[NodeRecord]) {
    out.push_str(
        "<table id=\"nodes\"><tr><th>node</th><th>address</th><th>host</th><th>backend</th>\
         <th>response codec</th><th>samples sent</th><th>completed</th><th>round trip p50</th>\
         <th>p99</th><th>failure</th></tr>\n",
    );
    for n in nodes {
        let latency = &n.traffic.latency;
        let ms = |us: u64| {
            if latency.count == 0 {
                "-".to_string()
            } else {
                format!("{:.3} ms", us as f64 / 1e3)
            }
        };
        let failure = match &n.failure {
            None => "<td class=\"yes\">none</td>".to_string(),
            Some(f) => format!("<td class=\"no\">{}</td>", escape(f)),
        };
        let host = match n.cpu_latency_us {
            // A machine setting that changes latency: shown where the
            // host is.
            Some(us) => format!("{} (CPU wake-ups ≤ {us} µs)", n.hostname),
            None => n.hostname.clone(),
        };
        row(
            out,
            &[
                td(&n.name),
                td(&n.url),
                td(host),
                td(format!("{} {}", n.backend, n.backend_detail)),
                td(&n.response_codec),
                num(n.traffic.samples_sent.to_string()),
                num(latency.count.to_string()),
                num(ms(latency.p50_us)),
                num(ms(latency.p99_us)),
                failure,
            ],
        );
    }
    out.push_str("</table>\n");
}

/// The run's TTFT and TPOT bounds (Server: the detail log's requested
/// latencies), in microseconds.
struct TokenBounds {
    ttft_us: Option<u64>,
    tpot_us: Option<u64>,
}

impl TokenBounds {
    fn of(detail: &loadgen_node::mlperf_logs::Detail) -> TokenBounds {
        let us = |key: &str| {
            detail
                .number(key)
                .filter(|ns| *ns > 0.0)
                .map(|ns| (ns / 1e3) as u64)
        };
        TokenBounds {
            ttft_us: us("requested_server_ttft_latency"),
            tpot_us: us("requested_server_tpot_latency"),
        }
    }
}

/// Token models: each node's TTFT and TPOT as the QDL measured them, its
/// share of the output tokens, and the share of its samples within the
/// run's bounds (overall too), so a slow or overloaded node shows.
fn node_token_table(out: &mut String, nodes: &[NodeRecord], bounds: &TokenBounds) {
    if nodes.iter().all(|n| n.traffic.first_token.count == 0) {
        return;
    }
    let total_tokens: u64 = nodes.iter().map(|n| n.traffic.output_tokens).sum();
    out.push_str(
        "<h3>Token latencies per node (QDL)</h3><table id=\"node-tokens\"><tr><th>node</th>\
         <th>output tokens</th><th>share</th><th>TTFT p50</th><th>TTFT p99</th>\
         <th>TPOT p50</th><th>TPOT p99</th><th>TTFT within bound</th>\
         <th>TPOT within bound</th></tr>\n",
    );
    let ms = |summary: &LatencySummary, us: u64| {
        if summary.count == 0 {
            "-".to_string()
        } else {
            format!("{:.3} ms", us as f64 / 1e3)
        }
    };
    let percent =
        |share: Option<f64>| share.map_or("-".to_string(), |s| format!("{:.1} %", s * 100.0));
    let within =
        |summary: &LatencySummary, bound: Option<u64>| bound.and_then(|b| summary.share_within(b));
    // Over every node: each node's share weighted by its samples.
    let overall = |pick: fn(&NodeRecord) -> &LatencySummary, bound: Option<u64>| {
        let (inside, count) = nodes.iter().fold((0.0, 0), |(w, c), n| {
            let summary = pick(n);
            let share = within(summary, bound).unwrap_or(0.0);
            (w + share * summary.count as f64, c + summary.count)
        });
        (bound.is_some() && count > 0).then(|| inside / count as f64)
    };
    for n in nodes {
        let (ttft, tpot) = (&n.traffic.first_token, &n.traffic.time_per_output_token);
        let share = if total_tokens == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.1} %",
                n.traffic.output_tokens as f64 * 100.0 / total_tokens as f64
            )
        };
        row(
            out,
            &[
                td(&n.name),
                num(n.traffic.output_tokens.to_string()),
                num(share),
                num(ms(ttft, ttft.p50_us)),
                num(ms(ttft, ttft.p99_us)),
                num(ms(tpot, tpot.p50_us)),
                num(ms(tpot, tpot.p99_us)),
                num(percent(within(ttft, bounds.ttft_us))),
                num(percent(within(tpot, bounds.tpot_us))),
            ],
        );
    }
    row(
        out,
        &[
            td("all nodes"),
            num(total_tokens.to_string()),
            num("100 %"),
            num("-"),
            num("-"),
            num("-"),
            num("-"),
            num(percent(overall(|n| &n.traffic.first_token, bounds.ttft_us))),
            num(percent(overall(
                |n| &n.traffic.time_per_output_token,
                bounds.tpot_us,
            ))),
        ],
    );
    out.push_str(
        "</table><p>Measured by the QDL from each sample's dispatch to its node; the \
         LoadGen's own TTFT and TPOT are above. Within bound: the share of samples at or \
         below the run's requested TTFT (TPOT) latency, counted in buckets 1/8 of a power of \
         two wide, never overstated; \"-\" when the run has no bound (Offline).</p>\n",
    );
}

/// The rules' bandwidth requirement against what was measured.
fn bandwidth_table(out: &mut String, b: &BandwidthCheck) {
    out.push_str("<h3>Bandwidth (rules, Datacenter)</h3><table id=\"bandwidth\">\n");
    row(out, &[td("rule"), td(&b.rule)]);
    if b.required_ingress_bytes_per_s.is_some() {
        let throughput = b
            .throughput_samples_per_s
            .map_or("-".to_string(), |t| format!("{t:.3}"));
        row(out, &[td("throughput (samples/s)"), num(throughput)]);
        for (label, value) in [
            ("required ingress", b.required_ingress_bytes_per_s),
            ("required egress", b.required_egress_bytes_per_s),
            (
                "measured ingress (wire)",
                b.measured_ingress_wire_bytes_per_s,
            ),
            (
                "measured ingress (decoded)",
                b.measured_ingress_decoded_bytes_per_s,
            ),
            ("measured egress (wire)", b.measured_egress_wire_bytes_per_s),
            ("LoadGen NIC rate", b.loadgen_nic_rate_bytes_per_s),
        ] {
            row(out, &[td(label), num(rate(value))]);
        }
        row(
            out,
            &[
                td("NIC rate covers the required ingress"),
                yes_no(b.nic_rate_covers_ingress),
            ],
        );
        row(out, &[td("egress above zero"), yes_no(b.egress_above_zero)]);
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            super::escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
