//! Time per stage of `detect` over a corpus, the way `solo gate eval` calls it (one document at
//! a time): `cargo run --release -p solo-gate --example profile -- FILE.jsonl`. Each figure is
//! the best of `N` rounds (default 7), so that other work on the machine does not count.
use std::io::BufRead;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting allocations.
struct Counting;
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to the system allocator with the caller's arguments, so it
// keeps GlobalAlloc's contract; the counter is a relaxed atomic that allocates nothing.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's `layout`, as GlobalAlloc::alloc requires.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator (so from System) with `layout`.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (so from System) with `layout`; `size` is the caller's.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let path = std::env::args().nth(1).expect("corpus path");
    let rounds: usize = std::env::var("N").ok().and_then(|n| n.parse().ok()).unwrap_or(7);
    let d = solo_gate::Detector::new();
    let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(path).unwrap())
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()["text"].as_str().unwrap().to_string())
        .filter(|t: &String| {
            // BYTES=40-70: only documents of that size (the median one is about 54 bytes).
            let range = std::env::var("BYTES").unwrap_or_default();
            let (lo, hi) = range.split_once('-').unwrap_or(("0", "18446744073709551615"));
            (lo.parse().unwrap_or(0)..=hi.parse().unwrap_or(usize::MAX)).contains(&t.len())
        })
        .collect();
    let kb: f64 = texts.iter().map(|t| t.len() as f64).sum::<f64>() / 1024.0;
    for t in &texts {
        std::hint::black_box(d.detect(t));
    }
    let stages = solo_gate::Detector::STAGES;
    // Per stage: total time over total size, and the mean over documents of time over size
    // (what the median per document sees, roughly).
    let mut best = vec![f64::MAX; stages.len()];
    let mut best_doc = vec![f64::MAX; stages.len()];
    let (mut mean, mut p50, mut p99) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..rounds {
        let mut acc = [0.0; 14];
        let mut acc_doc = [0.0; 14];
        for t in &texts {
            let mut t0 = std::time::Instant::now();
            let doc_kb = t.len() as f64 / 1024.0;
            std::hint::black_box(d.profile(t, &mut |stage| {
                let secs = t0.elapsed().as_secs_f64();
                acc[stage] += secs;
                acc_doc[stage] += secs / doc_kb;
                t0 = std::time::Instant::now();
            }));
        }
        for (b, a) in best.iter_mut().zip(acc) {
            *b = b.min(a * 1e6 / kb);
        }
        for (b, a) in best_doc.iter_mut().zip(acc_doc) {
            *b = b.min(a * 1e6 / texts.len() as f64);
        }
        let mut per_kb = Vec::with_capacity(texts.len());
        let t0 = std::time::Instant::now();
        for t in &texts {
            let t1 = std::time::Instant::now();
            std::hint::black_box(d.detect(t));
            per_kb.push(t1.elapsed().as_secs_f64() * 1e6 / (t.len() as f64 / 1024.0));
        }
        mean = mean.min(t0.elapsed().as_secs_f64() * 1e6 / kb);
        per_kb.sort_by(f64::total_cmp);
        p50 = p50.min(per_kb[per_kb.len() / 2]);
        p99 = p99.min(per_kb[per_kb.len() * 99 / 100]);
    }
    let mut allocations = [0usize; 14];
    for t in &texts {
        let mut before = ALLOCATIONS.load(Ordering::Relaxed);
        std::hint::black_box(d.profile(t, &mut |stage| {
            let now = ALLOCATIONS.load(Ordering::Relaxed);
            allocations[stage] += now - before;
            before = now;
        }));
    }
    println!("{:<10} {:>8} {:>12} {:>12}", "stage", "µs/KB", "per doc", "allocations");
    for (((n, b), bd), a) in stages.iter().zip(&best).zip(&best_doc).zip(allocations) {
        println!("{n:<10} {b:>8.1} {bd:>12.1} {:>12.2}", a as f64 / texts.len() as f64);
    }
    println!("allocations per document: {:.1}", allocations.iter().sum::<usize>() as f64 / texts.len() as f64);
    println!(
        "sum        {:>8.1} {:>12.1} µs/KB (with the timer's own cost)",
        best.iter().sum::<f64>(),
        best_doc.iter().sum::<f64>()
    );
    println!("detect     {mean:>8.1} µs/KB mean, p50 {p50:.1}, p99 {p99:.1}");
}
