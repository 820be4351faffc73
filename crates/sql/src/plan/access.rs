//! Access paths: how a statement finds the rows of its table, chosen from
//! the conjuncts of its WHERE filter.

use crate::catalog::TableEntry;
use crate::expr::{conjuncts, BinOp, Expr};

/// How a statement finds its rows. Bounds are inclusive and only narrow
/// the search: the full WHERE filter is applied to every row read.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    FullScan,
    /// Every primary key column by equality.
    PkPoint(Vec<Expr>),
    /// A range of the first primary key column.
    PkRange {
        low: Option<Expr>,
        high: Option<Expr>,
    },
    /// A range of the first column of secondary index `index`.
    Secondary {
        index: usize,
        low: Option<Expr>,
        high: Option<Expr>,
    },
}

/// What the filter says of column `col`: (equality value, low, high).
#[derive(Default)]
struct Bounds {
    eq: Option<Expr>,
    low: Option<Expr>,
    high: Option<Expr>,
}

fn bounds_of(col: usize, parts: &[&Expr]) -> Bounds {
    let mut b = Bounds::default();
    for p in parts {
        match p {
            Expr::Binary(op, l, r) => {
                let (op, other) = match (l.as_ref(), r.as_ref()) {
                    (Expr::Column(c), x) if *c == col && x.is_constant() => (*op, x),
                    (x, Expr::Column(c)) if *c == col && x.is_constant() => (flip(*op), x),
                    _ => continue,
                };
                match op {
                    BinOp::Eq => b.eq = Some(other.clone()),
                    BinOp::Gt | BinOp::GtEq => b.low = Some(other.clone()),
                    BinOp::Lt | BinOp::LtEq => b.high = Some(other.clone()),
                    _ => {}
                }
            }
            Expr::Between {
                expr,
                low,
                high,
                negated: false,
            } if matches!(expr.as_ref(), Expr::Column(c) if *c == col)
                && low.is_constant()
                && high.is_constant() =>
            {
                b.low = Some((**low).clone());
                b.high = Some((**high).clone());
            }
            _ => {}
        }
    }
    b
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::LtEq => BinOp::GtEq,
        BinOp::Gt => BinOp::Lt,
        BinOp::GtEq => BinOp::LtEq,
        o => o,
    }
}

/// Chooses how to find the rows `filter` can accept: all primary key
/// columns by equality, else a range of the first primary key column, else
/// a range of the first column of a secondary index, else a full scan.
pub fn access_path(table: &TableEntry, filter: Option<&Expr>) -> Access {
    let Some(filter) = filter else {
        return Access::FullScan;
    };
    let mut parts = Vec::new();
    conjuncts(filter, &mut parts);
    let s = &table.schema;
    if !s.primary_key.is_empty() {
        let eqs: Vec<Option<Expr>> = s
            .primary_key
            .iter()
            .map(|&c| bounds_of(c, &parts).eq)
            .collect();
        if eqs.iter().all(|e| e.is_some()) {
            return Access::PkPoint(eqs.into_iter().map(|e| e.expect("checked")).collect());
        }
        let b = bounds_of(s.primary_key[0], &parts);
        if let Some(eq) = b.eq {
            return Access::PkRange {
                low: Some(eq.clone()),
                high: Some(eq),
            };
        }
        if b.low.is_some() || b.high.is_some() {
            return Access::PkRange {
                low: b.low,
                high: b.high,
            };
        }
    }
    for (i, idx) in s.indexes.iter().enumerate() {
        let b = bounds_of(idx.columns[0], &parts);
        if let Some(eq) = b.eq {
            return Access::Secondary {
                index: i,
                low: Some(eq.clone()),
                high: Some(eq),
            };
        }
        if b.low.is_some() || b.high.is_some() {
            return Access::Secondary {
                index: i,
                low: b.low,
                high: b.high,
            };
        }
    }
    Access::FullScan
}
