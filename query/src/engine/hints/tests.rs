use super::*;

// The function and grouping each selector of a query is found under.

fn contexts(q: &str) -> Vec<SelectorContext> {
    let e = promql_parser::parser::parse(q).expect("parse");
    let map = collect(&e);
    // In the order the selectors appear in the text.
    let mut found = Vec::new();
    fn order(e: &Expr, out: &mut Vec<usize>) {
        match e {
            Expr::VectorSelector(vs) => out.push(key(vs)),
            Expr::MatrixSelector(ms) => out.push(key(&ms.vs)),
            Expr::Aggregate(a) => {
                if let Some(p) = &a.param {
                    order(p, out);
                }
                order(&a.expr, out);
            }
            Expr::Call(c) => c.args.args.iter().for_each(|a| order(a, out)),
            Expr::Binary(b) => {
                order(&b.lhs, out);
                order(&b.rhs, out);
            }
            Expr::Unary(u) => order(&u.expr, out),
            Expr::Paren(p) => order(&p.expr, out),
            Expr::Subquery(s) => order(&s.expr, out),
            _ => {}
        }
    }
    order(&e, &mut found);
    found.into_iter().map(|k| map[&k].clone()).collect()
}

fn ctx(func: Option<&str>, grouping: &[&str], by: bool) -> SelectorContext {
    SelectorContext { func: func.map(str::to_owned), grouping: grouping.iter().map(|s| (*s).to_owned()).collect(), by }
}

#[test]
fn a_selector_under_a_function_in_an_aggregation_names_the_function_and_the_grouping() {
    assert_eq!(contexts("sum by (node) (rate(x[5m]))"), vec![ctx(Some("rate"), &["node"], true)]);
    assert_eq!(contexts("max without (gpu) (y)"), vec![ctx(Some("max"), &["gpu"], false)]);
    assert_eq!(contexts("up"), vec![ctx(None, &[], false)]);
}

#[test]
fn a_binary_operator_hides_the_function_but_not_the_grouping() {
    assert_eq!(
        contexts("sum by (job) (a / rate(b[1m]))"),
        vec![ctx(None, &["job"], true), ctx(Some("rate"), &["job"], true)]
    );
}

#[test]
fn subqueries_and_parentheses_are_transparent() {
    assert_eq!(contexts("max_over_time((deriv(x[1m]))[10m:1m])"), vec![ctx(Some("deriv"), &[], false)]);
    assert_eq!(contexts("count(-(z))"), vec![ctx(Some("count"), &[], false)]);
}
