//! The `loadgen-node` command line: flags ([`args`]) and one module per
//! command: [`run`] (and everything that serves only it: the plan built
//! from its flags, the embedded default, progress, metrics, the run
//! record, the submission-mode rules), [`sysdesc`], [`submission`] and its
//! `check`, the rules demonstration [`audit`], the `accuracy` scorer
//! ([`accuracy`]) and the HTML [`report`]. [`child`] builds the child
//! `run` processes of `audit`, the embedded default and `submission`;
//! [`data_path`] resolves the interfaces each node's traffic crosses;
//! [`verdict`] reads a run's verdict from its logs.

pub mod accuracy;
pub mod args;
pub mod audit;
pub mod child;
pub mod data_path;
pub mod egress;
pub mod report;
pub mod run;
pub mod submission;
pub mod sysdesc;
pub mod verdict;
