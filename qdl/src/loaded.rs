//! What the QDL reads of the QSL: the samples LoadSamplesToRam loaded, in
//! the form they travel. The QSL itself (where samples come from, how
//! they are read and compressed) belongs to the LoadGen node; the QDL only
//! forwards its bytes, unchanged.

use std::fmt;

use bytes::Bytes;
use netdiv_proto::benchmark::Benchmark;
use netdiv_proto::codec::Codec;

/// One sample as it is held in DRAM and sent on the wire, unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSample {
    /// The bytes as they travel.
    pub data: Bytes,
    /// How they are encoded.
    pub codec: Codec,
    /// Their size once decoded.
    pub decoded_size: u64,
}

/// The samples loaded now, looked up by QSL index.
pub trait LoadedView {
    /// The sample at `index`, if it is loaded.
    fn get(&self, index: usize) -> Option<&StoredSample>;
}

/// The QSL's samples as the QDL reads them.
pub trait QslBytes: Send + Sync + fmt::Debug {
    /// The benchmark whose samples these are.
    fn benchmark(&self) -> &Benchmark;

    /// The codec samples are stored in (some may stay uncompressed).
    fn codec(&self) -> Codec;

    /// Runs `read` over the samples loaded now, all under one look at the
    /// store, so that a query's samples are read in one state (a load
    /// waits for `read` to return: keep it to copying out references).
    fn with_loaded(&self, read: &mut dyn FnMut(&dyn LoadedView));
}
