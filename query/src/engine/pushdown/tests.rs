use super::*;
use crate::engine::parse;

/// The planner's choice for `q`: every pushed node as (path, mode), sorted by path.
fn planned(q: &str) -> Vec<(Vec<u32>, FragmentMode)> {
    planned_for(q, true)
}

/// As [`planned`], for a range query (`instant` false) or an instant query.
fn planned_for(q: &str, instant: bool) -> Vec<(Vec<u32>, FragmentMode)> {
    let ast = parse(q).expect("query parses");
    let mut v: Vec<(Vec<u32>, FragmentMode)> = plan(&ast, instant).into_values().map(|p| (p.path, p.mode)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

use FragmentMode::{Concat, Partial};

#[test]
fn mergeable_aggregations_over_per_series_chains_are_pushed_whole() {
    for q in [
        "sum(rate(x_total[5m]))",
        "sum by (a) (rate(x_total[5m]) * 2)",
        "avg without (b) (x)",
        "count(x > 3)",
        "group(x)",
        "min(-x)",
        "max(abs(x))",
        "topk(3, x)",
        "bottomk(scalar(y), x)",
        "quantile(0.9, rate(x_total[5m]))",
        "quantile by (a) (scalar(y), x)",
        "count_values(\"v\", x)",
        "sum(max_over_time(rate(x_total[5m])[1h:1m]))",
        "sum(x - x offset 1d)",
        "sum(quantile_over_time(0.9, x[10m]))",
    ] {
        assert_eq!(planned(q), vec![(vec![], Partial)], "{q}");
    }
}

#[test]
fn per_series_expressions_are_pushed_as_concatenations() {
    for q in [
        "x",
        "rate(x_total[5m] offset 1h)",
        "x @ 100",
        "clamp(x, 0, time())",
        "hour(x)",
        "timestamp(x)",
        "x > bool 5",
        "rate(x_total[5m]) / rate(x_total[5m] offset 1d)",
        "x and x offset 5m",
        "max_over_time(rate(x_total[5m])[1h:1m])",
        "predict_linear(x[1h], 3600)",
    ] {
        assert_eq!(planned(q), vec![(vec![], Concat)], "{q}");
    }
}

#[test]
fn vector_operations_are_pushed_whole_only_on_one_step_grids() {
    // A range query, or a subquery, evaluates them over many steps: sides pushed.
    assert_eq!(planned_for("x - x offset 1d", false), vec![(vec![0], Concat), (vec![1], Concat)]);
    assert_eq!(planned_for("sum(x - x offset 1d)", false), vec![(vec![0, 0], Concat), (vec![0, 1], Concat)]);
    assert_eq!(
        planned("max_over_time((x > x offset 1m)[5m:1m])"),
        vec![(vec![0, 0, 0, 0], Concat), (vec![0, 0, 0, 1], Concat)]
    );
    // Per-series chains are pushed whole everywhere.
    assert_eq!(planned_for("sum(rate(x_total[5m]))", false), vec![(vec![], Partial)]);
    assert_eq!(planned_for("max_over_time(rate(x_total[5m])[1h:1m])", false), vec![(vec![], Concat)]);
}

#[test]
fn what_cannot_be_pushed_gets_its_inputs_pushed() {
    assert_eq!(planned("stddev(x)"), vec![(vec![0], Concat)]);
    assert_eq!(planned("histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))"), vec![(vec![1], Partial)]);
    assert_eq!(planned("label_replace(x, \"a\", \"$1\", \"b\", \"(.*)\")"), vec![(vec![0], Concat)]);
    assert_eq!(planned("sum(x) / sum(y)"), vec![(vec![0], Partial), (vec![1], Partial)]);
    assert_eq!(planned("max(sum by (a) (x))"), vec![(vec![0], Partial)]);
    assert_eq!(planned("sum(label_replace(x, \"a\", \"$1\", \"b\", \"(.*)\"))"), vec![(vec![0, 0], Concat)]);
    // A scalar argument that reads data is evaluated at the querier.
    assert_eq!(planned("x * scalar(y)"), vec![(vec![0], Concat), (vec![1, 0], Concat)]);
    assert_eq!(planned("clamp_max(x, scalar(y))"), vec![(vec![0], Concat), (vec![1, 0], Concat)]);
    // A subquery over something that is not shard-local: its inside is pushed.
    assert_eq!(planned("max_over_time(sum(x)[1h:1m])"), vec![(vec![0, 0], Partial)]);
    // A range vector is never a fragment.
    assert!(planned("absent_over_time(x[5m])").is_empty());
    assert!(planned("x[5m]").is_empty());
}

#[test]
fn vector_operations_are_pushed_only_when_matched_pairs_share_a_shard() {
    // Different metrics: a matched pair is two series, in two shards.
    assert_eq!(planned("x / y"), vec![(vec![0], Concat), (vec![1], Concat)]);
    // Matching modifiers change which series pair up.
    assert_eq!(planned("x - on(a) x offset 1d"), vec![(vec![0], Concat), (vec![1], Concat)]);
    assert_eq!(planned("x - ignoring(a) x offset 1d"), vec![(vec![0], Concat), (vec![1], Concat)]);
    assert_eq!(planned("x * on(a) group_left x"), vec![(vec![0], Concat), (vec![1], Concat)]);
    // No provable single name.
    assert_eq!(planned("{__name__=~\"x|y\"} - x"), vec![(vec![0], Concat), (vec![1], Concat)]);
    assert_eq!(planned("x or vector(1)"), vec![(vec![0], Concat)]);
    assert_eq!(planned("x or x offset 1m"), vec![(vec![0], Concat), (vec![1], Concat)]);
    // `__name__` equality written as a matcher is as good as the name.
    assert_eq!(planned("{__name__=\"x\"} - x offset 1m"), vec![(vec![], Concat)]);
}

#[test]
fn paths_name_the_node_in_child_order() {
    let ast = parse("histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))").expect("parses");
    let node = node_at(&ast, &[1]).expect("path is valid");
    assert!(matches!(node, Expr::Aggregate(_)));
    assert!(node_at(&ast, &[2]).is_none());
    assert!(node_at(&ast, &[1, 0, 0, 5]).is_none());
}
