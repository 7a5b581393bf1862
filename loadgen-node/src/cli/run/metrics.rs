//! `loadgen-node run --metrics-listen ADDR`: Prometheus metrics of a
//! network run while it lasts (and `--metrics-linger` seconds after, so
//! a scraper sees the final counts). Everything is read when scraped from
//! the counters the QDL and the LoadGen keep anyway: serving metrics adds
//! nothing to the timed path.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use loadgen_node::sut::Counters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use qdl::NetworkObserver;
use qdl::{LatencySummary, NodeTrafficReport};
use tokio::sync::watch;

/// What a scrape reads.
struct RunCollector {
    network: NetworkObserver,
    names: Vec<String>,
    loadgen: Arc<Counters>,
    finished: Arc<AtomicBool>,
}

impl std::fmt::Debug for RunCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCollector")
            .field("nodes", &self.names)
            .finish()
    }
}

type Labels = Vec<(&'static str, String)>;

/// One metric with a value per node.
fn per_node<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    values: impl Iterator<Item = (Labels, M)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in values {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One metric without labels.
fn single<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: M,
) -> Result<(), std::fmt::Error> {
    let kind = value.metric_type();
    value.encode(encoder.encode_descriptor(name, help, None, kind)?)
}

/// Upper bounds of the round-trip histogram: 50 µs doubling to about
/// 100 s, the same every scrape (Prometheus needs fixed buckets).
fn round_trip_bounds() -> impl Iterator<Item = f64> {
    (0..22).map(|k| 50e-6 * f64::from(1u32 << k))
}

/// A node's round trips or token latencies (the QDL's fine log buckets,
/// 1/8 of a power of two wide) in the fixed buckets: each fine bucket counts in the first
/// fixed one at or above its upper bound.
fn round_trip_histogram(latency: &LatencySummary) -> (f64, u64, Vec<(f64, u64)>) {
    let mut buckets: Vec<(f64, u64)> = round_trip_bounds().map(|b| (b, 0)).collect();
    buckets.push((f64::MAX, 0));
    for &(upper_us, count) in &latency.buckets {
        let upper = upper_us as f64 / 1e6;
        let slot = buckets
            .iter()
            .position(|(b, _)| *b >= upper)
            .unwrap_or(buckets.len() - 1);
        buckets[slot].1 += count;
    }
    let sum = latency.mean_us as f64 * latency.count as f64 / 1e6;
    (sum, latency.count, buckets)
}

/// Which of a node's latency distributions a histogram shows.
type PickLatency = fn(&NodeTrafficReport) -> &LatencySummary;

/// Each node's round trips and, for token models, its TTFT and TPOT, as
/// histograms with one series per node.
fn latency_histograms(
    e: &mut DescriptorEncoder,
    labels: &[Labels],
    traffic: &[(NodeTrafficReport, Option<String>)],
) -> Result<(), std::fmt::Error> {
    let histograms: [(&str, &str, PickLatency); 3] = [
        (
            "node_round_trip_seconds",
            "Sample round trips per node: sent by the QDL until its completion came back",
            |t| &t.latency,
        ),
        (
            "node_first_token_seconds",
            "Token models: time to first token per node, sent by the QDL until its first \
                 token came back",
            |t| &t.first_token,
        ),
        (
            "node_time_per_output_token_seconds",
            "Token models: time per output token per node, first token to completion over \
                 the tokens after the first",
            |t| &t.time_per_output_token,
        ),
    ];
    for (name, help, summary) in histograms {
        let mut metric = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (labels, (t, _)) in labels.iter().zip(traffic) {
            let (sum, count, buckets) = round_trip_histogram(summary(t));
            metric
                .encode_family(labels)?
                .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
    }
    Ok(())
}

impl Collector for RunCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.network.node_counts();
        let (traffic, _) = self.network.traffic();
        let stats = self.network.stats();
        let labels: Vec<Labels> = self
            .network
            .node_urls()
            .iter()
            .zip(&self.names)
            .map(|(url, name)| vec![("node", url.clone()), ("name", name.clone())])
            .collect();
        let nodes = || labels.iter().cloned().zip(counts.iter().zip(&traffic));
        let e = &mut encoder;
        single(
            e,
            "issued_samples",
            "Samples the LoadGen issued",
            ConstCounter::new(self.loadgen.issued.load(Ordering::Relaxed)),
        )?;
        single(
            e,
            "completed_samples",
            "Samples completed to the LoadGen",
            ConstCounter::new(self.loadgen.completed.load(Ordering::Relaxed)),
        )?;
        single(
            e,
            "resent_samples",
            "Samples taken back from a failed or declining node and sent again",
            ConstCounter::new(stats.resent),
        )?;
        single(
            e,
            "nodes_failed",
            "Nodes that failed or declined work during the run (failovers)",
            ConstGauge::new(stats.nodes_failed as i64),
        )?;
        single(
            e,
            "run_finished",
            "1 once the run has ended (the counts are final)",
            ConstGauge::new(i64::from(self.finished.load(Ordering::Acquire))),
        )?;
        per_node(
            e,
            "node_outstanding_samples",
            "Samples sent to the node and not yet completed",
            MetricType::Gauge,
            nodes().map(|(l, (c, _))| (l, ConstGauge::new(c.outstanding as i64))),
        )?;
        per_node(
            e,
            "node_sent_samples",
            "Samples sent to the node (re-sent ones count again)",
            MetricType::Counter,
            nodes().map(|(l, (_, (t, _)))| (l, ConstCounter::new(t.samples_sent))),
        )?;
        per_node(
            e,
            "node_completed_samples",
            "Samples the node completed (answers that counted)",
            MetricType::Counter,
            nodes().map(|(l, (c, _))| (l, ConstCounter::new(c.completed))),
        )?;
        per_node(
            e,
            "node_sent_bytes",
            "Sample bytes sent to the node, as they travelled",
            MetricType::Counter,
            nodes().map(|(l, (_, (t, _)))| (l, ConstCounter::new(t.bytes_sent))),
        )?;
        per_node(
            e,
            "node_received_bytes",
            "Answer bytes received from the node, as they travelled",
            MetricType::Counter,
            nodes().map(|(l, (_, (t, _)))| (l, ConstCounter::new(t.bytes_received))),
        )?;
        latency_histograms(e, &labels, &traffic)?;
        per_node(
            e,
            "node_output_tokens",
            "Token models: output tokens of the node's completions that counted",
            MetricType::Counter,
            nodes().map(|(l, (_, (t, _)))| (l, ConstCounter::new(t.output_tokens))),
        )?;
        per_node(
            e,
            "node_failed",
            "1 once the node failed or declined work (its samples went elsewhere)",
            MetricType::Gauge,
            nodes().map(|(l, (c, _))| (l, ConstGauge::new(i64::from(c.failed)))),
        )?;
        Ok(())
    }
}

/// The endpoint of one run; stops serving when dropped (after the
/// linger time).
pub(crate) struct RunMetrics {
    finished: Arc<AtomicBool>,
    linger: Duration,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunMetrics {
    /// Serves the run's metrics on `listen` from a thread of its own.
    pub(crate) fn start(
        listen: SocketAddr,
        linger: Duration,
        network: &qdl::NetworkSut,
        loadgen: Arc<Counters>,
    ) -> Result<RunMetrics> {
        let finished = Arc::new(AtomicBool::new(false));
        let mut registry = Registry::with_prefix("netdiv_loadgen");
        registry.register_collector(Box::new(RunCollector {
            network: network.observer(),
            names: network
                .node_infos()
                .iter()
                .map(|i| i.name.clone())
                .collect(),
            loadgen,
            finished: finished.clone(),
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("metrics endpoint runtime")?;
        let (stop, stopped) = watch::channel(false);
        let (addr, task) = runtime
            .block_on(sut_node::metrics::serve(
                listen,
                Arc::new(registry),
                stopped,
            ))
            .with_context(|| format!("--metrics-listen {listen}"))?;
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let _ = runtime.block_on(task);
            })
            .context("metrics endpoint thread")?;
        tracing::info!(event = "metrics_listening", addr = %addr, "metrics at http://{addr}/metrics");
        Ok(RunMetrics {
            finished,
            linger,
            stop,
            thread: Some(thread),
        })
    }

    /// The run has ended: the counts are final.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }
}

impl Drop for RunMetrics {
    fn drop(&mut self) {
        self.finish();
        if !self.linger.is_zero() {
            tracing::info!(
                "serving the final metrics for {:?} (--metrics-linger)",
                self.linger
            );
            std::thread::sleep(self.linger);
        }
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fine_round_trip_buckets_fold_into_the_fixed_ones() {
        let latency = LatencySummary {
            count: 3,
            mean_us: 100,
            buckets: vec![(40, 1), (60, 1), (200_000_000, 1)],
            ..LatencySummary::default()
        };
        let (sum, count, buckets) = round_trip_histogram(&latency);
        assert_eq!(count, 3);
        assert!((sum - 300e-6).abs() < 1e-12);
        assert_eq!(buckets[0], (50e-6, 1));
        assert_eq!(buckets[1], (100e-6, 1));
        // Beyond the last bound: +Inf.
        assert_eq!(buckets.last(), Some(&(f64::MAX, 1)));
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 3);
    }
}
