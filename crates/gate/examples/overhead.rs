//! Per-call cost of `detect` on small inputs.
fn main() {
    let d = solo_gate::Detector::new();
    for text in ["", "hello", "The quick brown fox jumps over the lazy dog near the river bank today.", "Order #12345678 shipped on 2024-01-05; call 555-123-4567 or mail a@b.co. Visit 12 Main Street, Springfield, IL 62704."] {
        let n = 20000;
        let t = std::time::Instant::now();
        let mut k = 0;
        for _ in 0..n {
            k += d.detect(text).len();
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!("{:>4} bytes: {:.2} µs/call ({} spans) = {:.0} µs/KB", text.len(), us, k / n, us / (text.len().max(1) as f64 / 1024.0));
    }
}
