//! The `loadgen-node` command line: flags ([`args`]) and one module per
//! command: [`run`] (and everything that serves only it: the plan built
//! from its flags, the embedded default, progress, metrics, the run
//! record, the submission-mode rules), [`sysdesc`], [`submission`] and its
//! `check`, the rules demonstration [`audit`], the `accuracy` scorer
//! ([`accuracy`]) and the HTML [`report`]. [`child`] builds the child
//! `run` processes of `audit`, the embedded default and `submission`;
//! [`data_path`] resolves the interfaces each node's traffic crosses;
//! [`verdict`] reads a run's verdict from its logs.

pub(crate) mod accuracy;
pub(crate) mod args;
pub(crate) mod audit;
pub(crate) mod child;
pub(crate) mod data_path;
pub(crate) mod egress;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod submission;
pub(crate) mod sysdesc;
pub(crate) mod verdict;
