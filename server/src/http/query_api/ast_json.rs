//! `/api/v1/parse_query`: the PromQL syntax tree as Prometheus' web UI expects it.
//!
//! Prometheus builds this JSON in `web/api/v1/translate_ast.go` from Go maps, so every object
//! is written with sorted keys. We walk `promql-parser`'s tree and produce the node shapes of
//! the API documentation (`../shared/reference/docs/api.md`). The subset we can honestly give:
//! every node type, operators, grouping, vector matching, `offset`, `@`, ranges and subquery
//! steps. What promql-parser does not keep is left out rather than invented: the experimental
//! `anchored`/`smoothed` selector flags, `fill()` values, and a subquery's `alignEvalTime`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use promql_parser::label::Matcher;
use promql_parser::parser::value::ValueType;
use promql_parser::parser::{AtModifier, Expr, LabelModifier, Offset, VectorMatchCardinality, VectorSelector};

use crate::http::json::{format_float, write_str};

/// A JSON value whose objects are written with sorted keys, as Go writes maps.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<Node>),
    Object(BTreeMap<&'static str, Node>),
}

impl Node {
    pub fn write(&self, out: &mut String) {
        match self {
            Node::Null => out.push_str("null"),
            Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Node::Int(i) => out.push_str(&i.to_string()),
            Node::Str(s) => write_str(out, s),
            Node::List(items) => {
                out.push('[');
                for (i, n) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    n.write(out);
                }
                out.push(']');
            }
            Node::Object(map) => {
                out.push('{');
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn obj(entries: Vec<(&'static str, Node)>) -> Node {
    Node::Object(entries.into_iter().collect())
}

fn str_list(items: &[String]) -> Node {
    Node::List(items.iter().map(|s| Node::Str(s.clone())).collect())
}

fn millis(d: &Duration) -> Node {
    Node::Int(d.as_millis().min(i64::MAX as u128) as i64)
}

fn offset_ms(o: &Option<Offset>) -> Node {
    let ms = match o {
        None => 0,
        Some(Offset::Pos(d)) => d.as_millis().min(i64::MAX as u128) as i64,
        Some(Offset::Neg(d)) => -(d.as_millis().min(i64::MAX as u128) as i64),
    };
    Node::Int(ms)
}

/// `timestamp` (ms, or null) and `startOrEnd` ("start", "end" or null) of an `@` modifier.
fn at_fields(at: &Option<AtModifier>) -> (Node, Node) {
    match at {
        None => (Node::Null, Node::Null),
        Some(AtModifier::Start) => (Node::Null, Node::Str("start".into())),
        Some(AtModifier::End) => (Node::Null, Node::Str("end".into())),
        Some(AtModifier::At(t)) => {
            let ms = match t.duration_since(SystemTime::UNIX_EPOCH) {
                Ok(d) => d.as_millis() as i64,
                Err(e) => -(e.duration().as_millis() as i64),
            };
            (Node::Int(ms), Node::Null)
        }
    }
}

fn matchers(vs: &VectorSelector) -> Node {
    let one = |m: &Matcher| {
        obj(vec![
            ("name", Node::Str(m.name.clone())),
            ("type", Node::Str(m.op.to_string())),
            ("value", Node::Str(m.value.clone())),
        ])
    };
    let mut out: Vec<Node> = vs.matchers.matchers.iter().map(one).collect();
    // Prometheus' parser appends the metric name as a `__name__` matcher after the others;
    // promql-parser keeps the name apart, so add it back in the same place.
    if let Some(name) = &vs.name {
        out.push(obj(vec![
            ("name", Node::Str("__name__".into())),
            ("type", Node::Str("=".into())),
            ("value", Node::Str(name.clone())),
        ]));
    }
    Node::List(out)
}

fn selector_fields(vs: &VectorSelector, kind: &'static str) -> Vec<(&'static str, Node)> {
    let (timestamp, start_or_end) = at_fields(&vs.at);
    vec![
        ("type", Node::Str(kind.into())),
        ("name", Node::Str(vs.name.clone().unwrap_or_default())),
        ("offset", offset_ms(&vs.offset)),
        ("matchers", matchers(vs)),
        ("timestamp", timestamp),
        ("startOrEnd", start_or_end),
    ]
}

/// Translates a parsed expression into Prometheus' parse_query JSON tree.
pub fn translate(expr: &Expr) -> Node {
    match expr {
        Expr::Aggregate(a) => {
            let (grouping, without) = match &a.modifier {
                None => (Vec::new(), false),
                Some(LabelModifier::Include(l)) => (l.labels.clone(), false),
                Some(LabelModifier::Exclude(l)) => (l.labels.clone(), true),
            };
            obj(vec![
                ("type", Node::Str("aggregation".into())),
                ("op", Node::Str(a.op.to_string())),
                ("expr", translate(&a.expr)),
                ("param", a.param.as_ref().map(|p| translate(p)).unwrap_or(Node::Null)),
                ("grouping", str_list(&grouping)),
                ("without", Node::Bool(without)),
            ])
        }
        Expr::Binary(b) => {
            let return_bool = b.modifier.as_ref().map(|m| m.return_bool).unwrap_or(false);
            // Prometheus keeps vector matching only when both sides are instant vectors, and
            // set operators (`and`, `or`, `unless`) always match many-to-many; promql-parser
            // leaves the modifier empty when nothing was written, so rebuild those rules.
            let both_vectors = b.lhs.value_type() == ValueType::Vector && b.rhs.value_type() == ValueType::Vector;
            let op = b.op.to_string();
            let matching = if !both_vectors {
                Node::Null
            } else {
                let (mut card, include) = match b.modifier.as_ref().map(|m| &m.card) {
                    None | Some(VectorMatchCardinality::OneToOne) => ("one-to-one", Vec::new()),
                    Some(VectorMatchCardinality::ManyToOne(l)) => ("many-to-one", l.labels.clone()),
                    Some(VectorMatchCardinality::OneToMany(l)) => ("one-to-many", l.labels.clone()),
                    Some(VectorMatchCardinality::ManyToMany) => ("many-to-many", Vec::new()),
                };
                if matches!(op.as_str(), "and" | "or" | "unless") {
                    card = "many-to-many";
                }
                let (labels, on) = match b.modifier.as_ref().and_then(|m| m.matching.as_ref()) {
                    None => (Vec::new(), false),
                    Some(LabelModifier::Include(l)) => (l.labels.clone(), true),
                    Some(LabelModifier::Exclude(l)) => (l.labels.clone(), false),
                };
                obj(vec![
                    ("card", Node::Str(card.into())),
                    ("labels", str_list(&labels)),
                    ("on", Node::Bool(on)),
                    ("include", str_list(&include)),
                ])
            };
            obj(vec![
                ("type", Node::Str("binaryExpr".into())),
                ("op", Node::Str(op)),
                ("lhs", translate(&b.lhs)),
                ("rhs", translate(&b.rhs)),
                ("matching", matching),
                ("bool", Node::Bool(return_bool)),
            ])
        }
        Expr::Call(c) => obj(vec![
            ("type", Node::Str("call".into())),
            (
                "func",
                obj(vec![
                    ("name", Node::Str(c.func.name.to_string())),
                    ("argTypes", Node::List(c.func.arg_types.iter().map(|t| Node::Str(t.to_string())).collect())),
                    ("variadic", Node::Int(c.func.variadic as i64)),
                    ("returnType", Node::Str(c.func.return_type.to_string())),
                ]),
            ),
            ("args", Node::List(c.args.args.iter().map(|a| translate(a)).collect())),
        ]),
        Expr::MatrixSelector(m) => {
            let mut fields = selector_fields(&m.vs, "matrixSelector");
            fields.push(("range", millis(&m.range)));
            obj(fields)
        }
        Expr::Subquery(s) => {
            let (timestamp, start_or_end) = at_fields(&s.at);
            obj(vec![
                ("type", Node::Str("subquery".into())),
                ("expr", translate(&s.expr)),
                ("range", millis(&s.range)),
                ("offset", offset_ms(&s.offset)),
                ("step", s.step.as_ref().map(millis).unwrap_or(Node::Int(0))),
                ("timestamp", timestamp),
                ("startOrEnd", start_or_end),
            ])
        }
        Expr::NumberLiteral(n) => {
            obj(vec![("type", Node::Str("numberLiteral".into())), ("val", Node::Str(format_float(n.val)))])
        }
        Expr::Paren(p) => obj(vec![("type", Node::Str("parenExpr".into())), ("expr", translate(&p.expr))]),
        Expr::StringLiteral(s) => {
            obj(vec![("type", Node::Str("stringLiteral".into())), ("val", Node::Str(s.val.clone()))])
        }
        Expr::Unary(u) => obj(vec![
            ("type", Node::Str("unaryExpr".into())),
            ("op", Node::Str("-".into())),
            ("expr", translate(&u.expr)),
        ]),
        Expr::VectorSelector(vs) => obj(selector_fields(vs, "vectorSelector")),
        // The parser never produces extension nodes; they exist for embedders.
        Expr::Extension(e) => obj(vec![("type", Node::Str(format!("extension:{}", e.expr.name())))]),
    }
}

/// Whether the expression reads any series (Prometheus answers `query_exemplars` for a
/// selector-free expression with no content at all).
pub fn has_selector(expr: &Expr) -> bool {
    match expr {
        Expr::VectorSelector(_) | Expr::MatrixSelector(_) => true,
        Expr::Aggregate(a) => has_selector(&a.expr) || a.param.as_deref().is_some_and(has_selector),
        Expr::Binary(b) => has_selector(&b.lhs) || has_selector(&b.rhs),
        Expr::Call(c) => c.args.args.iter().any(|a| has_selector(a)),
        Expr::Subquery(s) => has_selector(&s.expr),
        Expr::Paren(p) => has_selector(&p.expr),
        Expr::Unary(u) => has_selector(&u.expr),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => false,
    }
}
