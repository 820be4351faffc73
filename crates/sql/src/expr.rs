//! Bound expressions: the expression tree binding builds from the AST, with
//! columns resolved to positions, literals, statement parameters and
//! aggregate calls; and the walks over it that binding and planning need.
//! Evaluation is the executor's (`exec::eval`).
//!
//! Booleans are integers 1/0, unknown is NULL (three-valued logic, as in MySQL).

use crate::types::Value;

/// A value's number as expressions see it (kept here, where the server has
/// always found it; it lives with the other conversions in `types`).
pub use crate::types::as_double;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Eq,
    NotEq,
    NullSafeEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
    Xor,
    Plus,
    Minus,
    Mul,
    Div,
    IntDiv,
    Mod,
}

/// Functions a plan can call on values (aggregates are not expressions:
/// the select plan computes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Concat,
    Length,
    CharLength,
    Upper,
    Lower,
    Abs,
    Coalesce,
    If,
    Round,
    Floor,
    Ceil,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Column(usize),
    Literal(Value),
    /// Statement parameter `i` (a `?` of a prepared statement, or a literal
    /// of a cached text statement).
    Param(usize),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    IsNull(Box<Expr>, bool),
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
    },
    Call(Func, Vec<Expr>),
    /// Result of aggregate `i` of the select (only after aggregation).
    Aggregate(usize),
    /// `DEFAULT` in a VALUES row: the column's default (the executor
    /// replaces it; evaluated elsewhere it is NULL).
    Default,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub kind: AggKind,
    /// `None`: COUNT(*).
    pub arg: Option<Expr>,
    pub distinct: bool,
}

impl Expr {
    /// Whether the expression reads no column (so it is a constant of the
    /// statement, given its parameters).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Column(_) | Expr::Aggregate(_) => false,
            Expr::Literal(_) | Expr::Param(_) | Expr::Default => true,
            Expr::Binary(_, l, r) => l.is_constant() && r.is_constant(),
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) => e.is_constant(),
            Expr::Between {
                expr, low, high, ..
            } => expr.is_constant() && low.is_constant() && high.is_constant(),
            Expr::InList { expr, list, .. } => {
                expr.is_constant() && list.iter().all(|e| e.is_constant())
            }
            Expr::Like { expr, pattern, .. } => expr.is_constant() && pattern.is_constant(),
            Expr::Call(_, args) => args.iter().all(|a| a.is_constant()),
        }
    }

    /// Sets `used[i]` for every column `i` the expression reads (so a
    /// statement fetches only the out-of-line values it needs).
    pub fn mark_columns(&self, used: &mut [bool]) {
        match self {
            Expr::Column(i) => {
                if let Some(u) = used.get_mut(*i) {
                    *u = true;
                }
            }
            Expr::Aggregate(_) | Expr::Literal(_) | Expr::Param(_) | Expr::Default => {}
            Expr::Binary(_, l, r) => {
                l.mark_columns(used);
                r.mark_columns(used);
            }
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) => e.mark_columns(used),
            Expr::Between {
                expr, low, high, ..
            } => {
                for e in [expr, low, high] {
                    e.mark_columns(used);
                }
            }
            Expr::InList { expr, list, .. } => {
                expr.mark_columns(used);
                list.iter().for_each(|e| e.mark_columns(used));
            }
            Expr::Like { expr, pattern, .. } => {
                expr.mark_columns(used);
                pattern.mark_columns(used);
            }
            Expr::Call(_, args) => args.iter().for_each(|e| e.mark_columns(used)),
        }
    }

    /// Whether a parameter occurs in the expression.
    pub fn has_param(&self) -> bool {
        match self {
            Expr::Param(_) => true,
            Expr::Column(_) | Expr::Aggregate(_) | Expr::Literal(_) | Expr::Default => false,
            Expr::Binary(_, l, r) => l.has_param() || r.has_param(),
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) => e.has_param(),
            Expr::Between {
                expr, low, high, ..
            } => expr.has_param() || low.has_param() || high.has_param(),
            Expr::InList { expr, list, .. } => {
                expr.has_param() || list.iter().any(|e| e.has_param())
            }
            Expr::Like { expr, pattern, .. } => expr.has_param() || pattern.has_param(),
            Expr::Call(_, args) => args.iter().any(|a| a.has_param()),
        }
    }

    /// Whether the expression reads a column of the row.
    pub fn uses_column(&self) -> bool {
        match self {
            Expr::Column(_) => true,
            Expr::Literal(_) | Expr::Param(_) | Expr::Aggregate(_) | Expr::Default => false,
            Expr::Binary(_, l, r) => l.uses_column() || r.uses_column(),
            Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => x.uses_column(),
            Expr::Between {
                expr, low, high, ..
            } => expr.uses_column() || low.uses_column() || high.uses_column(),
            Expr::InList { expr, list, .. } => {
                expr.uses_column() || list.iter().any(Expr::uses_column)
            }
            Expr::Like { expr, pattern, .. } => expr.uses_column() || pattern.uses_column(),
            Expr::Call(_, a) => a.iter().any(Expr::uses_column),
        }
    }
}

/// The conjuncts of a filter (its top-level ANDs).
pub fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    if let Expr::Binary(BinOp::And, l, r) = e {
        conjuncts(l, out);
        conjuncts(r, out);
    } else {
        out.push(e);
    }
}
