use tessera_model::{Label, Sample};

use super::*;
use crate::ingest::decode::{SeriesName, ValidSeries};
use crate::ingest::series_labels::SeriesLabels;

fn series(index: usize, name: &str, ts: &[i64]) -> ValidSeries {
    ValidSeries {
        index,
        name: SeriesName::Labels(SeriesLabels::from_labels(&[Label::new("__name__", name)]), None),
        samples: ts.iter().map(|&t| Sample { t, v: 1.0 }).collect(),
        wire: 0..0,
    }
}

const NOW: i64 = 1_700_000_000_000;

#[test]
fn samples_outside_the_window_are_refused_and_the_rest_kept() {
    let w = Window::at(NOW, Some(3_600_000), 600);
    let mut b = Batch {
        series: vec![
            series(0, "ok", &[NOW - 1000, NOW]),
            series(1, "mixed", &[NOW - 7_200_000, NOW, NOW + 3_600_000]),
            series(2, "ancient", &[-(1 << 62)]),
        ],
        ..Batch::default()
    };
    let r = filter(&mut b, w);
    assert_eq!(r, Refused { too_old: 2, too_new: 1 });
    let names: Vec<String> =
        b.series.iter().map(|s| s.name.labels().expect("labelled").to_labels()[0].value.to_string()).collect();
    assert_eq!(names, ["ok", "mixed"], "a series with no sample left is dropped");
    assert_eq!(b.series[1].samples[..], [Sample { t: NOW, v: 1.0 }]);
    let first = b.problems.first().expect("problems");
    assert_eq!(first.index, 1);
    assert_eq!(first.series, "mixed{}");
    assert!(first.reason.contains(&format!("t={} ms is too old", NOW - 7_200_000)), "{}", first.reason);
    assert!(first.reason.contains("3600 s"), "{}", first.reason);
    assert_eq!(b.problems.series_count(), 2);
    assert_eq!(b.problems.samples(), 3);
}

#[test]
fn future_samples_name_the_future_limit() {
    let mut b = Batch { series: vec![series(4, "f", &[NOW + 601_000])], ..Batch::default() };
    filter(&mut b, Window::at(NOW, None, 600));
    let p = b.problems.first().expect("problem");
    assert!(p.reason.contains("too far in the future") && p.reason.contains("limits.max_future_secs"), "{}", p.reason);
    assert!(b.series.is_empty());
}

#[test]
fn unbounded_window_keeps_everything() {
    let mut b = Batch { series: vec![series(0, "x", &[i64::MIN, i64::MAX])], ..Batch::default() };
    assert_eq!(filter(&mut b, Window::at(NOW, None, 0)), Refused::default());
    assert_eq!(b.series[0].samples.len(), 2);
    assert!(b.problems.is_empty());
}

/// 200,000 series each with only a refused sample used to take seconds (a linear
/// search per emptied series); one pass takes milliseconds even in a debug build. The
/// bound is loose so a busy machine does not fail it, yet far below the quadratic time.
#[test]
fn filtering_is_linear_in_the_number_of_series() {
    let n = 200_000;
    let mut b = Batch { series: (0..n).map(|i| series(i, "s", &[NOW + 86_400_000])).collect(), ..Batch::default() };
    let start = std::time::Instant::now();
    let r = filter(&mut b, Window::at(NOW, None, 600));
    let took = start.elapsed();
    assert_eq!(r.too_new, n as u64);
    assert!(b.series.is_empty());
    assert_eq!(b.problems.first().expect("problem").index, 0);
    assert!(took < std::time::Duration::from_secs(3), "filtering {n} series took {took:?}");
}
