//! A large sample is not copied on its way into a message: encoding a
//! query as buffers ([`netdiv_proto::segments`]) allocates only the small
//! parts around the sample's bytes, where encoding it into one buffer
//! allocates (and copies) the whole sample. Measured with a counting
//! allocator, the only global one in this test binary.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use netdiv_proto::pb;
use prost::Message;

thread_local! {
    /// Bytes this thread allocated while counting, or `None`.
    static COUNTED: Cell<Option<usize>> = const { Cell::new(None) };
}

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; the
// count is a side effect on a thread-local cell.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNTED.try_with(|c| c.set(c.get().map(|n| n + layout.size())));
        // SAFETY: the caller's layout is passed on as it came.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size.saturating_sub(layout.size());
        let _ = COUNTED.try_with(|c| c.set(c.get().map(|n| n + grown)));
        // SAFETY: as for `alloc`, passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes allocated on this thread while `f` runs.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (usize, T) {
    COUNTED.with(|c| c.set(Some(0)));
    let out = f();
    let n = COUNTED.with(|c| c.replace(None)).unwrap_or(0);
    (n, out)
}

/// A query of one 3D-UNet-sized sample (the mean KiTS19 volume).
fn unet_query() -> pb::Query {
    pb::Query {
        query_id: 1,
        samples: vec![pb::Sample {
            response_id: 0x7f_ffff_ffff_ffff,
            data: Bytes::from(vec![3u8; 132 << 20]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_large_sample_is_not_copied_into_its_message() {
    let query = unet_query();
    let sample_bytes = query.samples[0].data.len();
    let (grpc, buffers) = allocated_by(|| netdiv_proto::segments::encode_grpc(&query));
    let (quic, _) = allocated_by(|| netdiv_proto::framing::encode_buffers(&query));
    let (whole, _) = allocated_by(|| query.encode_to_vec());
    let per_byte = |n: usize| n as f64 / sample_bytes as f64;
    eprintln!(
        "bytes allocated per sample byte: gRPC buffers {:.6}, QUIC buffers {:.6}, \
         one buffer {:.3}",
        per_byte(grpc),
        per_byte(quic),
        per_byte(whole)
    );
    assert!(grpc < 4096 && quic < 4096, "gRPC {grpc} B, QUIC {quic} B");
    assert!(whole >= sample_bytes, "the comparison copies: {whole} B");
    // And the sample's buffer is the sample's own memory.
    let data = &query.samples[0].data;
    assert!(buffers.iter().any(|b| b.as_ptr() == data.as_ptr()));
}
