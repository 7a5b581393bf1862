//! The `loadgen-node` command line: flags ([`args`]), the commands
//! ([`run`], [`sysdesc`], [`submission`] and its `check`, the rules
//! demonstration [`audit`], and the
//! `accuracy` scorer in [`score`]), how
//! flags become the pieces of a test ([`setup`]), the embedded default
//! ([`embedded`]), the live progress line ([`progress`]), a run's
//! Prometheus endpoint ([`metrics`]) and the rules of
//! a submission run ([`submission_mode`]), the run record of every
//! network run ([`record`]), and the HTML report of a run ([`report`]).

pub mod args;
pub mod audit;
pub mod child;
pub mod embedded;
pub mod metrics;
pub mod progress;
pub mod record;
pub mod report;
pub mod run;
pub mod score;
pub mod setup;
pub mod submission;
pub mod submission_mode;
pub mod sysdesc;
