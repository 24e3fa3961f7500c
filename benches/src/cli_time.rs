//! Parsing of the command line's durations and timestamps.

use anyhow::{anyhow, bail};

/// `1500ms`, `30s`, `5m`, `24h`, `7d`, or a bare number of seconds → milliseconds.
pub fn parse_duration_ms(s: &str) -> anyhow::Result<i64> {
    let s = s.trim();
    let (num, unit_ms) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3_600_000.0)
    } else if let Some(n) = s.strip_suffix('d') {
        (n, 86_400_000.0)
    } else {
        (s, 1000.0)
    };
    let v: f64 = num.parse().map_err(|_| anyhow!("invalid duration {s:?} (use e.g. 30s, 5m, 24h)"))?;
    if !v.is_finite() || v < 0.0 {
        bail!("invalid duration {s:?}: must be a non-negative number");
    }
    Ok((v * unit_ms).round() as i64)
}

/// RFC 3339 or unix seconds (float) → milliseconds since the epoch.
pub fn parse_time_ms(s: &str) -> anyhow::Result<i64> {
    let s = s.trim();
    if let Ok(v) = s.parse::<f64>() {
        if !v.is_finite() {
            bail!("invalid timestamp {s:?}");
        }
        return Ok((v * 1000.0).round() as i64);
    }
    let t = chrono::DateTime::parse_from_rfc3339(s)
        .map_err(|e| anyhow!("invalid timestamp {s:?} (RFC 3339 or unix seconds): {e}"))?;
    Ok(t.timestamp_millis())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_prometheus_style_units() {
        assert_eq!(parse_duration_ms("30s").expect("valid"), 30_000);
        assert_eq!(parse_duration_ms("5m").expect("valid"), 300_000);
        assert_eq!(parse_duration_ms("24h").expect("valid"), 86_400_000);
        assert_eq!(parse_duration_ms("1500ms").expect("valid"), 1500);
        assert_eq!(parse_duration_ms("2").expect("valid"), 2000);
        assert!(parse_duration_ms("soon").is_err());
        assert!(parse_duration_ms("-5s").is_err());
    }

    #[test]
    fn timestamps_accept_rfc3339_and_unix_seconds() {
        assert_eq!(parse_time_ms("2026-11-30T00:00:00Z").expect("valid"), 1_795_996_800_000);
        assert_eq!(parse_time_ms("1795996800.5").expect("valid"), 1_795_996_800_500);
        assert!(parse_time_ms("yesterday").is_err());
    }
}
