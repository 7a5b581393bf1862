//! `aead-bench`: the TLS record layer's cipher, ring's AES-128-GCM against
//! AWS-LC's (aws-lc-rs), side by side in one run on this CPU.
//!
//! Each case seals (and opens) records of the given size, the nonce
//! changing per record as TLS 1.3's does, and prints GB per CPU-second of
//! one thread and AWS-LC's ratio to ring. Two ways to seal a record whose
//! content lies in memory not in cache (a sample in the loaded set):
//! copied into the record first and sealed in place (ring can do only
//! that), or sealed from where it lies (AWS-LC's out-of-place seal, what
//! `netdiv_proto::tls_stream` does for a large part of a write).
//!
//!     cargo run --release -p netdiv-tests --bin aead-bench

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use netdiv_tests::bench::median;

#[derive(Parser)]
#[command(about = "ring's and AWS-LC's AES-128-GCM on TLS records, side by side")]
struct Args {
    /// Seconds of each case.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Runs of each case; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
}

const KEY: [u8; 16] = [7; 16];
const AAD: [u8; 5] = [23, 3, 3, 0x40, 0x11];
/// Larger than any cache here: each record's content is read from memory.
const COLD_SET: usize = 256 << 20;

fn nonce(i: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&i.to_be_bytes());
    n
}

/// Runs `step(i)` for `seconds` and returns bytes per CPU-second of this
/// thread, `bytes` per step.
fn rate(seconds: f64, bytes: usize, mut step: impl FnMut(u64)) -> f64 {
    let start = Instant::now();
    let cpu = thread_cpu_seconds();
    let mut i = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        for _ in 0..64 {
            step(i);
            i += 1;
        }
    }
    let cpu = thread_cpu_seconds() - cpu;
    (i as f64 * bytes as f64) / cpu / 1e9
}

/// CPU time of this thread so far, seconds.
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// One library's AES-128-GCM, as the record layer calls it.
trait Cipher {
    /// Seals `in_out` in place and returns the tag.
    fn seal(&self, i: u64, in_out: &mut [u8]) -> [u8; 16];
    /// Opens ciphertext-and-tag `in_out` in place; false if it fails.
    fn open(&self, i: u64, in_out: &mut [u8]) -> bool;
}

/// The two libraries' AEAD APIs are the same, module for module.
macro_rules! cipher {
    ($name:ident, $lib:ident) => {
        struct $name($lib::aead::LessSafeKey);

        impl $name {
            fn new() -> $name {
                use $lib::aead::{LessSafeKey, UnboundKey, AES_128_GCM};
                $name(LessSafeKey::new(
                    UnboundKey::new(&AES_128_GCM, &KEY).unwrap(),
                ))
            }
        }

        impl Cipher for $name {
            fn seal(&self, i: u64, in_out: &mut [u8]) -> [u8; 16] {
                use $lib::aead::{Aad, Nonce};
                let n = Nonce::assume_unique_for_key(nonce(i));
                let tag = self.0.seal_in_place_separate_tag(n, Aad::from(AAD), in_out);
                tag.unwrap().as_ref().try_into().unwrap()
            }

            fn open(&self, i: u64, in_out: &mut [u8]) -> bool {
                use $lib::aead::{Aad, Nonce};
                let n = Nonce::assume_unique_for_key(nonce(i));
                self.0.open_in_place(n, Aad::from(AAD), in_out).is_ok()
            }
        }
    };
}

cipher!(Ring, ring);
cipher!(AwsLc, aws_lc_rs);

impl AwsLc {
    /// Seals `content` from where it lies into `out` (content, type, tag).
    fn seal_from(&self, i: u64, content: &[u8], out: &mut [u8]) {
        use aws_lc_rs::aead::{Aad, Nonce};
        let n = Nonce::assume_unique_for_key(nonce(i));
        let (ciphertext, type_and_tag) = out.split_at_mut(content.len());
        self.0
            .seal_out_of_place_scatter(n, Aad::from(AAD), content, ciphertext, &[23], type_and_tag)
            .unwrap();
    }
}

/// Bytes per CPU-second of each library in `ciphers` for `case`, median of
/// `args.repeat` runs.
fn each(args: &Args, ciphers: [&dyn Cipher; 2], len: usize, case: Case) -> [f64; 2] {
    ciphers.map(|c| {
        // Opening needs records that verify: 1,024 sealed by the cipher
        // itself, each copied into the working buffer before it is opened.
        let count = 1024u64;
        let records: Vec<Vec<u8>> = (0..count)
            .map(|i| {
                let mut r = vec![1u8; len];
                let tag = c.seal(i, &mut r);
                r.extend_from_slice(&tag);
                r
            })
            .collect();
        let mut work = vec![1u8; len + 16];
        let runs = (0..args.repeat).map(|_| match case {
            Case::Seal => rate(args.seconds, len, |i| {
                black_box(c.seal(i, &mut work[..len]));
            }),
            Case::Open => rate(args.seconds, len, |i| {
                work.copy_from_slice(&records[(i % count) as usize]);
                assert!(c.open(i % count, &mut work));
            }),
        });
        median(&runs.collect::<Vec<_>>())
    })
}

#[derive(Clone, Copy)]
enum Case {
    Seal,
    Open,
}

fn main() {
    let args = Args::parse();
    let (ring_key, aws_key) = (Ring::new(), AwsLc::new());
    let both: [&dyn Cipher; 2] = [&ring_key, &aws_key];
    println!("{}", netdiv_tests::bench::machine_description());
    println!(
        "AES-128-GCM, one thread, median of {} runs of {} s\n",
        args.repeat, args.seconds
    );
    println!("| case | record content | ring GB/CPU-s | AWS-LC GB/CPU-s | AWS-LC / ring |");
    println!("|---|---|---|---|---|");
    for (case, what) in [
        (Case::Seal, "seal in place, in cache"),
        (
            Case::Open,
            "open in place (the record copied in first, in cache)",
        ),
    ] {
        for len in [64usize, 1024, 16384] {
            let [r, a] = each(&args, both, len, case);
            println!("| {what} | {len} B | {r:.2} | {a:.2} | {:.2} |", a / r);
        }
    }
    let cold: Vec<u8> = (0..COLD_SET).map(|i| (i % 251) as u8).collect();
    let len = 16384;
    let mut record = vec![0u8; len + 17];
    let at = |i: u64| (i as usize * len) % (COLD_SET - len);
    let runs =
        |f: &mut dyn FnMut() -> f64| median(&(0..args.repeat).map(|_| f()).collect::<Vec<_>>());
    let [r, copied] = both.map(|c| {
        runs(&mut || {
            rate(args.seconds, len, |i| {
                record[..len].copy_from_slice(&cold[at(i)..at(i) + len]);
                black_box(c.seal(i, &mut record[..len]));
            })
        })
    });
    let from = runs(&mut || {
        rate(args.seconds, len, |i| {
            aws_key.seal_from(i, &cold[at(i)..at(i) + len], &mut record)
        })
    });
    for (what, a) in [
        ("content not in cache: copied, then sealed in place", copied),
        (
            "content not in cache: AWS-LC sealing from where it lies",
            from,
        ),
    ] {
        println!("| {what} | {len} B | {r:.2} | {a:.2} | {:.2} |", a / r);
    }
}
