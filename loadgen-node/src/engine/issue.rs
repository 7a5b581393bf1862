//! The timed part of a run: issuing pre-generated queries to the SUT on
//! schedule and waiting for their completions.
//!
//! Scheduling follows the official scenarios: SingleStream and MultiStream
//! issue each query when the previous one is done, Server issues each at
//! its scheduled time (optionally coalescing those already due), Offline
//! issues its one query at once.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::engine::completion::{Completer, SampleTable, SutAborted, WaitFor};
use crate::engine::generate::{GeneratedQueries, Pass};
use crate::engine::settings::{EffectiveSettings, Scenario};
use crate::sut::{SharedResponder, SystemUnderTest};

/// Why issuing stopped before the generated queries ran out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum StopReason {
    /// All generated queries were issued.
    Exhausted,
    /// Minimum query count and duration met.
    Natural,
    /// Server: more queries outstanding than `max_async_queries`.
    TooManyOutstanding {
        /// Queries issued so far.
        issued: u64,
        /// Queries issued but not yet completed.
        outstanding: u64,
    },
    /// `max_query_count` queries were issued.
    MaxQueryCount {
        /// Queries issued so far.
        issued: u64,
    },
    /// Issuing ran past `max_duration_ms`.
    MaxDuration {
        /// Time from the start of issuing to the last issue, in ns.
        duration_ns: u64,
    },
}

/// What happened while issuing (times in ns since the test origin).
#[derive(Debug)]
pub(super) struct IssueRecord {
    /// When issuing started, in ns since the test origin.
    pub start_ns: u64,
    /// Wall-clock time issuing started (for the power log).
    pub start_wall: SystemTime,
    /// Queries handed to the SUT.
    pub queries_issued: usize,
    /// Samples handed to the SUT.
    pub samples_issued: usize,
    /// Per issued query: when it was due (Server's schedule; the issue time
    /// in SingleStream and MultiStream; the start in Offline).
    pub scheduled_ns: Vec<u64>,
    /// Per issued query: when it was handed to the SUT.
    pub issued_ns: Vec<u64>,
    /// When each IssueQuery call returned (per leading query).
    pub issue_returned_ns: Vec<u64>,
    /// Why issuing stopped.
    pub stop: StopReason,
    /// Performance pass ended without meeting min count and duration.
    pub ran_out_of_generated_queries: bool,
}

/// Issues `queries` to `sut` and waits until every issued sample completed
/// (or the SUT aborted the run).
pub(super) fn issue_queries(
    sut: &dyn SystemUnderTest,
    settings: &EffectiveSettings,
    pass: Pass,
    queries: &GeneratedQueries,
    table: &Arc<SampleTable>,
) -> Result<IssueRecord, SutAborted> {
    let completer = Completer::new(table.clone());
    let responder: SharedResponder = Arc::new(completer.clone()); // the SUT's way in
    let scenario = settings.scenario;
    let n = queries.query_count;
    let mut rec = IssueRecord {
        start_wall: SystemTime::now(),
        start_ns: table.now_ns(),
        queries_issued: 0,
        samples_issued: 0,
        scheduled_ns: Vec::with_capacity(n),
        issued_ns: Vec::with_capacity(n),
        issue_returned_ns: Vec::with_capacity(if scenario == Scenario::Offline { 1 } else { n }),
        stop: StopReason::Exhausted,
        ran_out_of_generated_queries: scenario != Scenario::Server,
    };
    let start = rec.start_ns;
    let coalesce = scenario == Scenario::Server && settings.requested.server_coalesce_queries;
    let target_duration_ns = settings.target_duration_ms * 1_000_000;

    let mut q = 0;
    while q < n {
        let (scheduled, now) = match scenario {
            Scenario::SingleStream | Scenario::MultiStream => {
                if q > 0 {
                    table.wait(WaitFor::Query(q - 1))?;
                }
                let now = table.now_ns();
                (now, now)
            }
            Scenario::Server => {
                let due = start + queries.scheduled_ns[q] as u64;
                wait_until(table, due);
                (due, table.now_ns())
            }
            Scenario::Offline => (start, table.now_ns()),
        };
        rec.scheduled_ns.push(scheduled);
        rec.issued_ns.push(now);
        let mut last = q;
        if coalesce {
            while last + 1 < n && now >= start + queries.scheduled_ns[last + 1] as u64 {
                last += 1;
                rec.scheduled_ns
                    .push(start + queries.scheduled_ns[last] as u64);
                rec.issued_ns.push(now);
            }
        }
        let samples = queries.queries(q, last);
        table.mark_issued(rec.samples_issued + samples.len());
        sut.issue_query(samples, &responder);
        rec.issue_returned_ns.push(table.now_ns());
        rec.samples_issued += samples.len();
        rec.queries_issued += last - q + 1;
        q = last + 1;

        if pass == Pass::Accuracy {
            continue;
        }
        let issued = rec.queries_issued as u64;
        let duration = now - start;
        if scenario == Scenario::Server {
            if settings.max_async_queries != 0 {
                let outstanding = issued - table.queries_completed();
                if outstanding > settings.max_async_queries {
                    rec.stop = StopReason::TooManyOutstanding {
                        issued,
                        outstanding,
                    };
                    break;
                }
            }
        } else if issued >= settings.min_query_count && duration >= target_duration_ns {
            rec.stop = StopReason::Natural;
            rec.ran_out_of_generated_queries = false;
            break;
        }
        if settings.max_query_count != 0 && issued >= settings.max_query_count {
            rec.stop = StopReason::MaxQueryCount { issued };
            rec.ran_out_of_generated_queries = false;
            break;
        }
        if settings.max_duration_ms != 0 && duration > settings.max_duration_ms * 1_000_000 {
            rec.stop = StopReason::MaxDuration {
                duration_ns: duration,
            };
            rec.ran_out_of_generated_queries = false;
            break;
        }
    }
    sut.flush_queries();
    table.wait(WaitFor::Samples(rec.samples_issued as u64))?;
    Ok(rec)
}

/// Sleeps while the deadline is far, then spins: sleeping alone overshoots
/// by tens of microseconds, which would show up as latency.
fn wait_until(table: &SampleTable, due_ns: u64) {
    const SPIN_NS: u64 = 200_000;
    loop {
        let now = table.now_ns();
        if now >= due_ns {
            return;
        }
        let remaining = due_ns - now;
        if remaining > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(remaining - SPIN_NS / 2));
        } else {
            std::hint::spin_loop();
        }
    }
}
