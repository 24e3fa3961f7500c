use std::fmt::Write;
fn main() {
    // Values like a range query's: rates of an energy counter, gauges with decimals.
    let vals: Vec<f64> = (0..1_000_000u64).map(|i| ((i * 2654435761) % 10_000_000) as f64 / 1000.0 * 1.37).collect();
    for round in 0..3 {
        let mut out = String::with_capacity(32 << 20);
        let t = std::time::Instant::now();
        for &v in &vals { let _ = write!(out, "{v}"); }
        let a = t.elapsed();
        let n1 = out.len();
        out.clear();
        let t = std::time::Instant::now();
        for &v in &vals { let mut b = ryu::Buffer::new(); let s = b.format_finite(v); out.push_str(s.strip_suffix(".0").unwrap_or(s)); }
        let b = t.elapsed();
        println!("round {round}: Display {:.1} ns/value, ryu {:.1} ns/value ({} vs {} bytes)", a.as_nanos() as f64 / 1e6, b.as_nanos() as f64 / 1e6, n1, out.len());
    }
}
