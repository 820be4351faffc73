//! Expressions: AST expressions to bound ones (columns by position, `?` and
//! lifted literals as parameters, session values as literals, aggregate
//! calls in the select list as `Expr::Aggregate`).

use super::binder::Binder;
use super::names::Scope;
use crate::error::{unsupported, SqlError};
use crate::expr::{AggKind, Aggregate, BinOp, Expr, Func};
use crate::parse::literal;
use crate::types::Value;
use millrace_errcode::{
    ER_INVALID_GROUP_FUNC_USE, ER_SP_DOES_NOT_EXIST, ER_STACK_OVERRUN_NEED_MORE,
    ER_UNKNOWN_SYSTEM_VARIABLE,
};

/// The deepest bound expression: every pass over bound expressions
/// (evaluation, planning, drop) recurses, on the connection's 2 MiB stack
/// when a cached plan runs. AND / OR chains are bound balanced, so a chain
/// of a million terms is 20 levels.
pub const MAX_EXPR_DEPTH: usize = 128;
use sqlparser::ast;

impl Binder<'_> {
    /// A select-list expression: aggregates become `Expr::Aggregate`.
    pub(crate) fn item_expr(
        &mut self,
        e: &ast::Expr,
        scope: &Scope<'_>,
        aggregates: &mut Vec<Aggregate>,
    ) -> Result<Expr, SqlError> {
        self.enter()?;
        let r = self.item_expr_inner(e, scope, aggregates);
        self.depth -= 1;
        r
    }

    /// One more level of expression; error 1436 past `MAX_EXPR_DEPTH`.
    fn enter(&mut self) -> Result<(), SqlError> {
        if self.depth >= MAX_EXPR_DEPTH {
            return Err(SqlError::new(
                ER_STACK_OVERRUN_NEED_MORE,
                format!(
                    "Thread stack overrun: expression nested deeper than {MAX_EXPR_DEPTH} levels"
                ),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn item_expr_inner(
        &mut self,
        e: &ast::Expr,
        scope: &Scope<'_>,
        aggregates: &mut Vec<Aggregate>,
    ) -> Result<Expr, SqlError> {
        if let ast::Expr::Function(f) = e {
            let name = f.name.to_string().to_ascii_lowercase();
            let kind = match name.as_str() {
                "count" => Some(AggKind::Count),
                "sum" => Some(AggKind::Sum),
                "avg" => Some(AggKind::Avg),
                "min" => Some(AggKind::Min),
                "max" => Some(AggKind::Max),
                _ => None,
            };
            if let Some(kind) = kind {
                let ast::FunctionArguments::List(list) = &f.args else {
                    return Err(unsupported(e));
                };
                let distinct = matches!(
                    list.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                );
                let arg = match list.args.as_slice() {
                    [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]
                        if kind == AggKind::Count =>
                    {
                        None
                    }
                    [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))] => {
                        Some(self.expr(a, scope)?)
                    }
                    _ => return Err(unsupported(e)),
                };
                aggregates.push(Aggregate {
                    kind,
                    arg,
                    distinct,
                });
                return Ok(Expr::Aggregate(aggregates.len() - 1));
            }
        }
        if let ast::Expr::Nested(inner) = e {
            return self.item_expr(inner, scope, aggregates);
        }
        if let ast::Expr::BinaryOp { left, op, right } = e {
            if contains_aggregate(e) {
                let l = self.item_expr(left, scope, aggregates)?;
                let r = self.item_expr(right, scope, aggregates)?;
                return Ok(Expr::Binary(binop(op)?, Box::new(l), Box::new(r)));
            }
        }
        self.expr(e, scope)
    }

    /// An expression that reads no column (SET values, DEFAULTs).
    pub fn expr_const(&mut self, e: &ast::Expr) -> Result<Expr, SqlError> {
        self.expr(e, &Scope::empty())
    }

    pub(crate) fn expr(&mut self, e: &ast::Expr, scope: &Scope<'_>) -> Result<Expr, SqlError> {
        self.enter()?;
        let r = self.expr_inner(e, scope);
        self.depth -= 1;
        r
    }

    /// A chain of one of AND, OR (`a OR b OR c ...`, parsed as a tree as
    /// deep as the chain): its operands gathered without recursion, bound
    /// one by one, and joined as a balanced tree (depth log2 of the terms;
    /// both operators are associative, and evaluation still goes left to
    /// right, stopping where the left-deep chain would).
    fn chain(
        &mut self,
        e: &ast::Expr,
        op: &ast::BinaryOperator,
        scope: &Scope<'_>,
    ) -> Result<Expr, SqlError> {
        let mut operands = Vec::new();
        let mut todo = vec![e];
        while let Some(x) = todo.pop() {
            match x {
                ast::Expr::BinaryOp { left, op: o, right } if o == op => {
                    todo.push(right);
                    todo.push(left);
                }
                ast::Expr::Nested(inner) if matches!(&**inner, ast::Expr::BinaryOp { op: o, .. } if o == op) => {
                    todo.push(inner)
                }
                x => operands.push(self.expr(x, scope)?),
            }
        }
        Ok(balanced(binop(op)?, operands))
    }

    fn expr_inner(&mut self, e: &ast::Expr, scope: &Scope<'_>) -> Result<Expr, SqlError> {
        let b = Box::new;
        Ok(match e {
            ast::Expr::Identifier(id) => {
                if let Some(var) = id.value.strip_prefix("@@") {
                    self.volatile = true;
                    let var = ["session.", "local.", "global."]
                        .iter()
                        .find_map(|p| var.to_ascii_lowercase().strip_prefix(p).map(String::from))
                        .unwrap_or_else(|| var.to_ascii_lowercase());
                    return self
                        .session
                        .variable(&var)
                        .map(Expr::Literal)
                        .ok_or_else(|| {
                            SqlError::new(
                                ER_UNKNOWN_SYSTEM_VARIABLE,
                                format!("Unknown system variable '{var}'"),
                            )
                        });
                }
                if id.quote_style == Some('"') || id.quote_style == Some('\'') {
                    return Ok(Expr::Literal(Value::Bytes(id.value.clone().into_bytes())));
                }
                let lower = id.value.to_ascii_lowercase();
                if scope
                    .names
                    .iter()
                    .all(|n| !n.eq_ignore_ascii_case(&id.value))
                {
                    if let Some(v) = self.session.function(&lower) {
                        // CURRENT_USER, CURRENT_TIMESTAMP, ... without ().
                        self.volatile = true;
                        return Ok(Expr::Literal(v));
                    }
                }
                self.column(&[&id.value], scope)?
            }
            ast::Expr::CompoundIdentifier(parts) => {
                // @@session.x arrives as a compound identifier.
                if parts.first().is_some_and(|p| p.value.starts_with("@@")) {
                    let joined: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                    let id = ast::Ident::new(joined.join("."));
                    return self.expr(&ast::Expr::Identifier(id), scope);
                }
                let p: Vec<&str> = parts.iter().map(|i| i.value.as_str()).collect();
                self.column(&p, scope)?
            }
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Placeholder(_) => {
                    self.params += 1;
                    Expr::Param(self.params - 1)
                }
                other => Expr::Literal(literal(other)?),
            },
            ast::Expr::Nested(inner) => self.expr(inner, scope)?,
            ast::Expr::BinaryOp {
                op: op @ (ast::BinaryOperator::And | ast::BinaryOperator::Or),
                ..
            } => self.chain(e, op, scope)?,
            ast::Expr::BinaryOp { left, op, right } => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                Expr::Binary(binop(op)?, b(l), b(r))
            }
            ast::Expr::UnaryOp { op, expr } => {
                let x = self.expr(expr, scope)?;
                match op {
                    ast::UnaryOperator::Minus => match x {
                        Expr::Literal(Value::Int(i)) if i != i64::MIN => {
                            Expr::Literal(Value::Int(-i))
                        }
                        x => Expr::Neg(b(x)),
                    },
                    ast::UnaryOperator::Plus => x,
                    ast::UnaryOperator::Not => Expr::Not(b(x)),
                    other => return Err(unsupported(other)),
                }
            }
            ast::Expr::IsNull(x) => Expr::IsNull(b(self.expr(x, scope)?), false),
            ast::Expr::IsNotNull(x) => Expr::IsNull(b(self.expr(x, scope)?), true),
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: b(self.expr(expr, scope)?),
                low: b(self.expr(low, scope)?),
                high: b(self.expr(high, scope)?),
                negated: *negated,
            },
            ast::Expr::InList {
                expr,
                list,
                negated,
            } => Expr::InList {
                expr: b(self.expr(expr, scope)?),
                list: list
                    .iter()
                    .map(|e| self.expr(e, scope))
                    .collect::<Result<_, _>>()?,
                negated: *negated,
            },
            ast::Expr::Like {
                negated,
                expr,
                pattern,
                escape_char: None,
                any: false,
            } => Expr::Like {
                expr: b(self.expr(expr, scope)?),
                pattern: b(self.expr(pattern, scope)?),
                negated: *negated,
            },
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                let args: Vec<Expr> = match &f.args {
                    ast::FunctionArguments::None => vec![],
                    ast::FunctionArguments::List(l) => l
                        .args
                        .iter()
                        .map(|a| match a {
                            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => {
                                self.expr(x, scope)
                            }
                            _ => Err(unsupported(e)),
                        })
                        .collect::<Result<_, _>>()?,
                    ast::FunctionArguments::Subquery(_) => return Err(unsupported(e)),
                };
                let func = match name.as_str() {
                    "concat" => Func::Concat,
                    "length" | "octet_length" => Func::Length,
                    "char_length" | "character_length" => Func::CharLength,
                    "upper" | "ucase" => Func::Upper,
                    "lower" | "lcase" => Func::Lower,
                    "abs" => Func::Abs,
                    "coalesce" | "ifnull" => Func::Coalesce,
                    "if" => Func::If,
                    "round" => Func::Round,
                    "floor" => Func::Floor,
                    "ceil" | "ceiling" => Func::Ceil,
                    "count" | "sum" | "avg" | "min" | "max" => {
                        return Err(SqlError::new(
                            ER_INVALID_GROUP_FUNC_USE,
                            "Invalid use of group function",
                        ))
                    }
                    _ => {
                        if args.is_empty() {
                            if let Some(v) = self.session.function(&name) {
                                self.volatile = true;
                                return Ok(Expr::Literal(v));
                            }
                        }
                        return Err(SqlError::new(
                            ER_SP_DOES_NOT_EXIST,
                            format!("FUNCTION {name} does not exist"),
                        ));
                    }
                };
                Expr::Call(func, args)
            }
            ast::Expr::Floor { expr, .. } => Expr::Call(Func::Floor, vec![self.expr(expr, scope)?]),
            ast::Expr::Ceil { expr, .. } => Expr::Call(Func::Ceil, vec![self.expr(expr, scope)?]),
            other => return Err(unsupported(other)),
        })
    }
}

/// `operands` joined by `op` as a balanced tree, in their order.
fn balanced(op: BinOp, mut operands: Vec<Expr>) -> Expr {
    // Pairs joined level by level: each round halves the count.
    while operands.len() > 1 {
        let mut next = Vec::with_capacity(operands.len().div_ceil(2));
        let mut it = operands.into_iter();
        while let Some(l) = it.next() {
            match it.next() {
                Some(r) => next.push(Expr::Binary(op, Box::new(l), Box::new(r))),
                None => next.push(l),
            }
        }
        operands = next;
    }
    operands.pop().unwrap_or(Expr::Literal(Value::Null))
}

fn binop(op: &ast::BinaryOperator) -> Result<BinOp, SqlError> {
    use ast::BinaryOperator as B;
    Ok(match op {
        B::Eq => BinOp::Eq,
        B::NotEq => BinOp::NotEq,
        B::Spaceship => BinOp::NullSafeEq,
        B::Lt => BinOp::Lt,
        B::LtEq => BinOp::LtEq,
        B::Gt => BinOp::Gt,
        B::GtEq => BinOp::GtEq,
        B::And => BinOp::And,
        B::Or => BinOp::Or,
        B::Xor => BinOp::Xor,
        B::Plus => BinOp::Plus,
        B::Minus => BinOp::Minus,
        B::Multiply => BinOp::Mul,
        B::Divide => BinOp::Div,
        B::MyIntegerDivide | B::DuckIntegerDivide => BinOp::IntDiv,
        B::Modulo => BinOp::Mod,
        other => return Err(unsupported(other)),
    })
}

pub(crate) fn contains_aggregate(e: &ast::Expr) -> bool {
    // Without recursion: operator chains make deep trees.
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        match e {
            ast::Expr::Function(f)
                if matches!(
                    f.name.to_string().to_ascii_lowercase().as_str(),
                    "count" | "sum" | "avg" | "min" | "max"
                ) =>
            {
                return true
            }
            ast::Expr::BinaryOp { left, right, .. } => {
                todo.push(right);
                todo.push(left);
            }
            ast::Expr::Nested(e) => todo.push(e),
            _ => {}
        }
    }
    false
}
