//! The `loadgen-node` command line: flags ([`args`]), the commands
//! ([`run`], [`sysdesc`], and the `accuracy` scorer in [`score`]), how
//! flags become the pieces of a test ([`setup`]), the embedded default
//! ([`embedded`]), and the live progress line ([`progress`]).

pub mod args;
pub mod embedded;
pub mod progress;
pub mod run;
pub mod score;
pub mod setup;
pub mod sysdesc;
