//! Rejects times and durations so large that the engine's i64 millisecond arithmetic
//! could overflow.
//!
//! Evaluation adds and subtracts evaluation times, offsets, `@` times, ranges, subquery
//! steps and the lookback delta. Bounding each of them by 2^53 ms (about 285,000 years,
//! also the largest integer a float64 timestamp holds exactly) leaves room for a
//! thousand such terms before an i64 overflows, far beyond any expression the parser
//! accepts. Prometheus silently wraps in these cases; we answer `bad_data` instead.

use std::time::{Duration, UNIX_EPOCH};

use promql_parser::parser::{AtModifier, Expr, Offset};

use crate::QueryError;

/// The largest absolute time or duration, in milliseconds, a query may use.
pub(crate) const MAX_ABS_MS: i64 = 1 << 53;

/// Checks an evaluation time (query `time`, `start` or `end`), in milliseconds.
pub(crate) fn check_time(what: &str, t_ms: i64) -> Result<(), QueryError> {
    if t_ms.unsigned_abs() > MAX_ABS_MS as u64 {
        return Err(QueryError::bad_data(format!(
            "{what} {t_ms} ms is out of range: times must be within ±{MAX_ABS_MS} ms of the Unix epoch"
        )));
    }
    Ok(())
}

/// Checks every offset, range, step and `@` time in `e`.
pub(crate) fn check_expr(e: &Expr) -> Result<(), QueryError> {
    match e {
        Expr::Aggregate(a) => {
            check_expr(&a.expr)?;
            a.param.as_deref().map_or(Ok(()), check_expr)
        }
        Expr::Unary(u) => check_expr(&u.expr),
        Expr::Binary(b) => {
            check_expr(&b.lhs)?;
            check_expr(&b.rhs)
        }
        Expr::Paren(p) => check_expr(&p.expr),
        Expr::Subquery(s) => {
            check_duration("subquery range", &s.range)?;
            if let Some(step) = &s.step {
                check_duration("subquery step", step)?;
            }
            check_offset(&s.offset)?;
            check_at(&s.at)?;
            check_expr(&s.expr)
        }
        Expr::VectorSelector(vs) => {
            check_offset(&vs.offset)?;
            check_at(&vs.at)
        }
        Expr::MatrixSelector(ms) => {
            check_duration("range", &ms.range)?;
            check_offset(&ms.vs.offset)?;
            check_at(&ms.vs.at)
        }
        Expr::Call(c) => c.args.args.iter().try_for_each(|a| check_expr(a)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => Ok(()),
    }
}

fn check_duration(what: &str, d: &Duration) -> Result<(), QueryError> {
    if d.as_millis() > MAX_ABS_MS as u128 {
        return Err(QueryError::bad_data(format!("{what} {d:?} is out of range (at most {MAX_ABS_MS} ms)")));
    }
    Ok(())
}

fn check_offset(o: &Option<Offset>) -> Result<(), QueryError> {
    match o {
        None => Ok(()),
        Some(Offset::Pos(d)) | Some(Offset::Neg(d)) => check_duration("offset", d),
    }
}

fn check_at(at: &Option<AtModifier>) -> Result<(), QueryError> {
    if let Some(AtModifier::At(t)) = at {
        let ms = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis(),
            Err(e) => e.duration().as_millis(),
        };
        if ms > MAX_ABS_MS as u128 {
            return Err(QueryError::bad_data(format!(
                "@ modifier time {t:?} is out of range (at most {MAX_ABS_MS} ms from the Unix epoch)"
            )));
        }
    }
    Ok(())
}
