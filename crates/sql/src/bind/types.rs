//! The types of bound expressions: the result type a select-list item
//! announces to the client.

use crate::expr::{AggKind, Aggregate, BinOp, Expr};
use crate::types::{ResultKind, Value};

/// The result type of select-list item `x`; `col_kind`: the type of a
/// source column.
pub(crate) fn result_kind(
    x: &Expr,
    aggregates: &[Aggregate],
    col_kind: &dyn Fn(usize) -> ResultKind,
) -> ResultKind {
    match x {
        Expr::Column(i) => col_kind(*i),
        Expr::Aggregate(a) => match aggregates[*a] {
            Aggregate {
                kind: AggKind::Count,
                ..
            } => ResultKind::Int,
            Aggregate {
                kind: AggKind::Sum, ..
            } => ResultKind::Decimal,
            Aggregate {
                kind: AggKind::Avg, ..
            } => ResultKind::Double,
            Aggregate {
                arg: Some(Expr::Column(c)),
                ..
            } => col_kind(c),
            _ => ResultKind::Text,
        },
        Expr::Literal(Value::Int(_)) => ResultKind::Int,
        Expr::Literal(Value::UInt(_)) => ResultKind::UInt,
        Expr::Literal(Value::Double(_)) => ResultKind::Double,
        Expr::Literal(Value::Decimal { .. }) => ResultKind::Decimal,
        Expr::Binary(
            BinOp::Eq
            | BinOp::NotEq
            | BinOp::Lt
            | BinOp::LtEq
            | BinOp::Gt
            | BinOp::GtEq
            | BinOp::And
            | BinOp::Or,
            _,
            _,
        ) => ResultKind::Int,
        _ => ResultKind::Text,
    }
}
