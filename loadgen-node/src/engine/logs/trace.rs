//! `mlperf_log_trace.json`: a Chrome trace (chrome://tracing, Perfetto) of
//! the run, written after it from what the run recorded, so tracing costs
//! nothing while samples are in flight.

use std::io::{self, Write};

use super::format::fixed;

/// Writes trace events; times are ns since the test origin.
#[derive(Debug)]
pub(crate) struct TraceLog<W: Write> {
    out: W,
    pid: u32,
}

fn micros(ns: u64) -> String {
    fixed(ns as f64 / 1000.0, 3)
}

impl<W: Write> TraceLog<W> {
    /// Starts the trace's JSON object in `out`.
    pub(crate) fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"traceEvents\":[\n")?;
        Ok(Self {
            out,
            pid: std::process::id(),
        })
    }

    /// A span on the LoadGen's own thread.
    pub(crate) fn span(&mut self, name: &str, start_ns: u64, end_ns: u64) -> io::Result<()> {
        writeln!(
            self.out,
            "{{\"name\":\"{name}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{}}}},",
            self.pid,
            self.pid,
            micros(start_ns),
            micros(end_ns.saturating_sub(start_ns))
        )
    }

    /// One sample from its scheduled time to its completion.
    pub(crate) fn sample(
        &mut self,
        seq: u64,
        query_seq: u64,
        sample_idx: usize,
        scheduled_ns: u64,
        issued_ns: u64,
        completed_ns: u64,
    ) -> io::Result<()> {
        self.sample_event(
            "Sample",
            seq,
            query_seq,
            sample_idx,
            scheduled_ns,
            issued_ns,
            completed_ns,
        )
    }

    /// A token model's sample from its scheduled time to its first token
    /// (the official `Token` event; not in Server, which has a counter).
    pub(crate) fn first_token(
        &mut self,
        seq: u64,
        query_seq: u64,
        sample_idx: usize,
        scheduled_ns: u64,
        issued_ns: u64,
        first_token_ns: u64,
    ) -> io::Result<()> {
        self.sample_event(
            "Token",
            seq,
            query_seq,
            sample_idx,
            scheduled_ns,
            issued_ns,
            first_token_ns,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn sample_event(
        &mut self,
        name: &str,
        seq: u64,
        query_seq: u64,
        sample_idx: usize,
        scheduled_ns: u64,
        issued_ns: u64,
        completed_ns: u64,
    ) -> io::Result<()> {
        writeln!(
            self.out,
            "{{\"name\":\"{name}\",\"cat\":\"default\",\"ph\":\"b\",\"pid\":{},\"id\":{seq},\"ts\":{},\"args\":{{\"sample_seq\":{seq},\"query_seq\":{query_seq},\"sample_idx\":{sample_idx},\"issue_start_ns\":{},\"complete_ns\":{}}}}},",
            self.pid,
            micros(scheduled_ns),
            issued_ns.saturating_sub(scheduled_ns),
            completed_ns.saturating_sub(scheduled_ns)
        )?;
        writeln!(
            self.out,
            "{{\"name\":\"{name}\",\"cat\":\"default\",\"ph\":\"e\", \"pid\":{},\"id\":{seq},\"ts\":{}}},",
            self.pid,
            micros(completed_ns)
        )
    }

    /// Server: how late each query was issued and how long it then took.
    pub(crate) fn latency_counter(
        &mut self,
        scheduled_ns: u64,
        issued_ns: u64,
        completed_ns: u64,
    ) -> io::Result<()> {
        self.counter("Latency", scheduled_ns, issued_ns, completed_ns)
    }

    /// Server, token models: the same up to each sample's first token.
    pub(crate) fn token_latency_counter(
        &mut self,
        scheduled_ns: u64,
        issued_ns: u64,
        first_token_ns: u64,
    ) -> io::Result<()> {
        self.counter("Token_Latency", scheduled_ns, issued_ns, first_token_ns)
    }

    fn counter(
        &mut self,
        name: &str,
        scheduled_ns: u64,
        issued_ns: u64,
        done_ns: u64,
    ) -> io::Result<()> {
        writeln!(
            self.out,
            "{{\"name\":\"{name}\",\"ph\": \"C\",\"pid\":{},\"ts\":{},\"args\":{{ \"issue_delay\":{},\"issue_to_done\":{}}}}},",
            self.pid,
            micros(scheduled_ns),
            issued_ns.saturating_sub(scheduled_ns),
            done_ns.saturating_sub(issued_ns)
        )
    }

    /// Closes the event list; `origin_wall_us` is the origin's Unix time.
    pub(crate) fn finish(mut self, origin_wall_us: f64) -> io::Result<()> {
        write!(
            self.out,
            "{{\"name\":\"LastTrace\"}}\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\n\"ts\":{},\n\"version\":\"netdiv LoadGen {}\"\n}}\n}}\n",
            fixed(origin_wall_us, 3),
            env!("CARGO_PKG_VERSION")
        )?;
        self.out.flush()
    }
}
