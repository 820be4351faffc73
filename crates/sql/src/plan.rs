//! Planning: a parsed statement (sqlparser's AST) becomes a plan resolved
//! against the catalog: column positions, the access path (primary key
//! point or range, secondary index range, full scan), the filter, and
//! parameters for every `?` (and, for cached text statements, every
//! literal). Plans hold no values of a particular execution, so one plan
//! serves every execution of a prepared statement or of a statement shape.

use crate::catalog::{Catalog, TableEntry};
use crate::expr::{BinOp, Expr, Func};
use crate::types::{ColumnType, Value};
use crate::SqlError;
use millrace_errcode::{
    ER_BAD_FIELD_ERROR, ER_FIELD_SPECIFIED_TWICE, ER_INVALID_GROUP_FUNC_USE,
    ER_MIX_OF_GROUP_FUNC_AND_FIELDS, ER_NOT_SUPPORTED_YET, ER_NO_DB_ERROR, ER_NO_SUCH_TABLE,
    ER_PARSE_ERROR, ER_SP_DOES_NOT_EXIST, ER_UNKNOWN_SYSTEM_VARIABLE, ER_WRONG_VALUE_COUNT_ON_ROW,
};
use sqlparser::ast;
use std::sync::Arc;

/// What the planner needs of the session: values fixed for the statement
/// (a plan that uses them is `volatile` and never cached).
pub trait SessionInfo {
    fn database(&self) -> Option<&str>;
    fn variable(&self, name: &str) -> Option<Value>;
    fn function(&self, name: &str) -> Option<Value>;
}

/// The type of a result column, as the protocol announces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    Int,
    UInt,
    Double,
    Decimal,
    Text,
    Blob,
    DateTime,
}

impl ResultKind {
    pub fn of(ty: &ColumnType) -> ResultKind {
        match ty {
            ColumnType::TinyInt { unsigned }
            | ColumnType::SmallInt { unsigned }
            | ColumnType::Int { unsigned }
            | ColumnType::BigInt { unsigned } => {
                if *unsigned {
                    ResultKind::UInt
                } else {
                    ResultKind::Int
                }
            }
            ColumnType::Double => ResultKind::Double,
            ColumnType::Decimal { .. } => ResultKind::Decimal,
            ColumnType::Blob => ResultKind::Blob,
            ColumnType::DateTime | ColumnType::Timestamp => ResultKind::DateTime,
            _ => ResultKind::Text,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutColumn {
    pub name: String,
    pub table: String,
    pub kind: ResultKind,
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

/// A table a statement reads: a stored table or a virtual one.
#[derive(Debug, Clone)]
pub enum Source {
    /// SELECT without FROM: one empty row.
    Nothing,
    Table(Arc<TableEntry>),
    /// information_schema / performance_schema tables, made at execution.
    Virtual(crate::vtab::VirtualTable),
}

#[derive(Debug, Clone)]
pub struct SelectPlan {
    pub source: Source,
    pub access: Access,
    pub filter: Option<Expr>,
    pub columns: Vec<OutColumn>,
    pub items: Vec<Expr>,
    pub aggregates: Vec<Aggregate>,
    pub distinct: bool,
    /// (key, ascending), evaluated on the source row (or, with aggregates,
    /// on the aggregated row).
    pub order_by: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
    pub for_update: bool,
}

#[derive(Debug, Clone)]
pub struct InsertPlan {
    pub table: Arc<TableEntry>,
    /// For each table column: the position of its value in a VALUES row.
    pub targets: Vec<Option<usize>>,
    pub rows: Vec<Vec<Expr>>,
}

#[derive(Debug, Clone)]
pub struct UpdatePlan {
    pub table: Arc<TableEntry>,
    pub access: Access,
    pub filter: Option<Expr>,
    pub sets: Vec<(usize, Expr)>,
    pub limit: Option<Expr>,
}

#[derive(Debug, Clone)]
pub struct DeletePlan {
    pub table: Arc<TableEntry>,
    pub access: Access,
    pub filter: Option<Expr>,
    pub limit: Option<Expr>,
}

#[derive(Debug, Clone)]
pub enum PlanKind {
    Select(SelectPlan),
    Insert(InsertPlan),
    Update(UpdatePlan),
    Delete(DeletePlan),
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: PlanKind,
    pub params: usize,
    /// Uses session values (DATABASE(), @@vars, ...): plan again each time.
    pub volatile: bool,
    /// Literals made parameters would change its meaning or its column
    /// names (a parameter in the select list or ORDER BY).
    pub shape_sensitive: bool,
    /// The catalog version it was planned against.
    pub catalog_version: u64,
}

impl Plan {
    pub fn columns(&self) -> &[OutColumn] {
        match &self.kind {
            PlanKind::Select(s) => &s.columns,
            _ => &[],
        }
    }
}

pub fn err_parse(msg: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        ER_PARSE_ERROR,
        format!("You have an error in your SQL syntax: {msg}"),
    )
}

pub fn unsupported(what: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        ER_NOT_SUPPORTED_YET,
        format!("This version of millrace doesn't yet support '{what}'"),
    )
}

pub fn no_table(db: &str, name: &str) -> SqlError {
    SqlError::new(
        ER_NO_SUCH_TABLE,
        format!("Table '{db}.{name}' doesn't exist"),
    )
}

fn unknown_column(name: &str, clause: &str) -> SqlError {
    SqlError::new(
        ER_BAD_FIELD_ERROR,
        format!("Unknown column '{name}' in '{clause}'"),
    )
}

/// `db.name` or `name` (in the session's database).
pub fn object_name(
    name: &ast::ObjectName,
    session: &dyn SessionInfo,
) -> Result<(String, String), SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            _ => Err(unsupported(name)),
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [t] => match session.database() {
            Some(db) => Ok((db.to_string(), t.clone())),
            None => Err(SqlError::new(ER_NO_DB_ERROR, "No database selected")),
        },
        [d, t] => Ok((d.clone(), t.clone())),
        _ => Err(unsupported(name)),
    }
}

/// Converts a literal of the AST to a value.
pub fn literal(v: &ast::Value) -> Result<Value, SqlError> {
    Ok(match v {
        ast::Value::Number(s, _) => number(s)?,
        ast::Value::SingleQuotedString(s)
        | ast::Value::DoubleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::NationalStringLiteral(s) => Value::Bytes(s.clone().into_bytes()),
        ast::Value::HexStringLiteral(h) => {
            let bytes: Option<Vec<u8>> = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                .collect();
            Value::Bytes(bytes.ok_or_else(|| err_parse(format!("bad hex literal {h}")))?)
        }
        ast::Value::Boolean(b) => Value::Int(i64::from(*b)),
        ast::Value::Null => Value::Null,
        other => return Err(unsupported(other)),
    })
}

/// A numeric literal: an integer if it is one (BIGINT, or BIGINT UNSIGNED
/// beyond), an exact decimal if it has a point, a double with an exponent.
pub fn number(s: &str) -> Result<Value, SqlError> {
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    if !s.contains(['e', 'E']) {
        if let Some((int, frac)) = s.split_once('.') {
            let digits = format!("{int}{frac}");
            if frac.len() <= 30 {
                if let Ok(unscaled) = digits.parse::<i128>() {
                    return Ok(Value::Decimal {
                        unscaled,
                        scale: frac.len() as u8,
                    });
                }
            }
        }
    }
    s.parse::<f64>()
        .map(Value::Double)
        .map_err(|_| err_parse(format!("bad number {s}")))
}

pub struct Planner<'a> {
    pub catalog: &'a Catalog,
    pub session: &'a dyn SessionInfo,
    pub params: usize,
    pub volatile: bool,
    pub shape_sensitive: bool,
}

/// Columns in scope for name resolution.
struct Scope<'a> {
    names: Vec<&'a str>,
    table: &'a str,
    alias: Option<String>,
}

impl<'a> Planner<'a> {
    pub fn new(catalog: &'a Catalog, session: &'a dyn SessionInfo) -> Self {
        Planner {
            catalog,
            session,
            params: 0,
            volatile: false,
            shape_sensitive: false,
        }
    }

    fn finish(self, kind: PlanKind) -> Plan {
        Plan {
            kind,
            params: self.params,
            volatile: self.volatile,
            shape_sensitive: self.shape_sensitive,
            catalog_version: self.catalog.version(),
        }
    }

    fn table(&self, name: &ast::ObjectName) -> Result<Arc<TableEntry>, SqlError> {
        let (db, t) = object_name(name, self.session)?;
        self.catalog.table(&db, &t).ok_or_else(|| no_table(&db, &t))
    }

    /// Plans a DML or SELECT statement; `None` for statements the session
    /// executes directly (DDL, SET, SHOW, transaction control).
    pub fn plan(mut self, stmt: &ast::Statement) -> Result<Option<Plan>, SqlError> {
        let kind = match stmt {
            ast::Statement::Query(q) => PlanKind::Select(self.select(q)?),
            ast::Statement::Insert(i) => PlanKind::Insert(self.insert(i)?),
            ast::Statement::Update {
                table,
                assignments,
                from,
                selection,
                returning,
                limit,
                ..
            } => {
                if from.is_some() || returning.is_some() || !table.joins.is_empty() {
                    return Err(unsupported("UPDATE with joins"));
                }
                let entry = self.table_factor(&table.relation)?;
                let schema = entry.schema.clone();
                let scope = Scope {
                    names: schema.columns.iter().map(|c| c.name.as_str()).collect(),
                    table: &schema.name,
                    alias: None,
                };
                let mut sets = Vec::new();
                for a in assignments {
                    let ast::AssignmentTarget::ColumnName(name) = &a.target else {
                        return Err(unsupported("UPDATE of a tuple"));
                    };
                    let col = name
                        .0
                        .last()
                        .and_then(|p| p.as_ident())
                        .map(|i| i.value.as_str())
                        .unwrap_or_default();
                    let pos = schema
                        .column(col)
                        .ok_or_else(|| unknown_column(col, "field list"))?;
                    sets.push((pos, self.expr(&a.value, &scope)?));
                }
                let filter = selection
                    .as_ref()
                    .map(|e| self.expr(e, &scope))
                    .transpose()?;
                let limit = limit.as_ref().map(|e| self.expr(e, &scope)).transpose()?;
                let access = access_path(&entry, filter.as_ref());
                PlanKind::Update(UpdatePlan {
                    table: entry,
                    access,
                    filter,
                    sets,
                    limit,
                })
            }
            ast::Statement::Delete(d) => {
                let from = match &d.from {
                    ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
                };
                if from.len() != 1 || !from[0].joins.is_empty() || d.using.is_some() {
                    return Err(unsupported("DELETE with joins"));
                }
                if !d.order_by.is_empty() {
                    return Err(unsupported("DELETE ... ORDER BY"));
                }
                let entry = self.table_factor(&from[0].relation)?;
                let schema = entry.schema.clone();
                let scope = Scope {
                    names: schema.columns.iter().map(|c| c.name.as_str()).collect(),
                    table: &schema.name,
                    alias: None,
                };
                let filter = d
                    .selection
                    .as_ref()
                    .map(|e| self.expr(e, &scope))
                    .transpose()?;
                let limit = d.limit.as_ref().map(|e| self.expr(e, &scope)).transpose()?;
                let access = access_path(&entry, filter.as_ref());
                PlanKind::Delete(DeletePlan {
                    table: entry,
                    access,
                    filter,
                    limit,
                })
            }
            _ => return Ok(None),
        };
        Ok(Some(self.finish(kind)))
    }

    fn table_factor(&self, f: &ast::TableFactor) -> Result<Arc<TableEntry>, SqlError> {
        match f {
            ast::TableFactor::Table { name, .. } => self.table(name),
            other => Err(unsupported(other)),
        }
    }

    fn insert(&mut self, i: &ast::Insert) -> Result<InsertPlan, SqlError> {
        if i.on.is_some() || i.replace_into || i.returning.is_some() {
            return Err(unsupported("INSERT ... ON DUPLICATE KEY / REPLACE"));
        }
        let ast::TableObject::TableName(name) = &i.table else {
            return Err(unsupported(&i.table));
        };
        let entry = self.table(name)?;
        let schema = entry.schema.clone();
        let mut targets = vec![None; schema.columns.len()];
        let width;
        if i.columns.is_empty() {
            for (n, t) in targets.iter_mut().enumerate() {
                *t = Some(n);
            }
            width = schema.columns.len();
        } else {
            for (n, c) in i.columns.iter().enumerate() {
                let pos = schema
                    .column(&c.value)
                    .ok_or_else(|| unknown_column(&c.value, "field list"))?;
                if targets[pos].is_some() {
                    return Err(SqlError::new(
                        ER_FIELD_SPECIFIED_TWICE,
                        format!("Column '{}' specified twice", c.value),
                    ));
                }
                targets[pos] = Some(n);
            }
            width = i.columns.len();
        }
        let Some(source) = &i.source else {
            return Err(unsupported("INSERT ... SET"));
        };
        let ast::SetExpr::Values(values) = source.body.as_ref() else {
            return Err(unsupported("INSERT ... SELECT"));
        };
        let scope = Scope {
            names: vec![],
            table: &schema.name,
            alias: None,
        };
        let mut rows = Vec::with_capacity(values.rows.len());
        for (n, row) in values.rows.iter().enumerate() {
            if row.len() != width {
                return Err(SqlError::new(
                    ER_WRONG_VALUE_COUNT_ON_ROW,
                    format!("Column count doesn't match value count at row {}", n + 1),
                ));
            }
            rows.push(
                row.iter()
                    .map(|e| match e {
                        // DEFAULT in VALUES: the column's default.
                        ast::Expr::Identifier(id) if id.value.eq_ignore_ascii_case("default") => {
                            Ok(Expr::Default)
                        }
                        e => self.expr(e, &scope),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok(InsertPlan {
            table: entry,
            targets,
            rows,
        })
    }

    fn select(&mut self, q: &ast::Query) -> Result<SelectPlan, SqlError> {
        if q.with.is_some() || q.fetch.is_some() {
            return Err(unsupported("WITH / FETCH"));
        }
        let ast::SetExpr::Select(s) = q.body.as_ref() else {
            return Err(unsupported("UNION or a subquery"));
        };
        let (source, names, table_name, alias): (Source, Vec<String>, String, Option<String>) =
            match s.from.as_slice() {
                [] => (Source::Nothing, vec![], String::new(), None),
                [twj] if twj.joins.is_empty() => {
                    let ast::TableFactor::Table { name, alias, .. } = &twj.relation else {
                        return Err(unsupported("a derived table"));
                    };
                    let alias = alias.as_ref().map(|a| a.name.value.clone());
                    let (db, t) = object_name(name, self.session)?;
                    if let Some(v) = crate::vtab::VirtualTable::find(&db, &t) {
                        let names = v.column_names();
                        (Source::Virtual(v), names, t, alias)
                    } else {
                        let entry = self
                            .catalog
                            .table(&db, &t)
                            .ok_or_else(|| no_table(&db, &t))?;
                        let names = entry
                            .schema
                            .columns
                            .iter()
                            .map(|c| c.name.clone())
                            .collect();
                        (Source::Table(entry), names, t, alias)
                    }
                }
                _ => return Err(unsupported("joins")),
            };
        let scope = Scope {
            names: names.iter().map(|s| s.as_str()).collect(),
            table: &table_name,
            alias,
        };
        let col_kind = |i: usize| match &source {
            Source::Table(t) => ResultKind::of(&t.schema.columns[i].ty),
            Source::Virtual(v) => v.kinds()[i],
            Source::Nothing => ResultKind::Text,
        };
        let mut columns = Vec::new();
        let mut items = Vec::new();
        let mut aggregates = Vec::new();
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    for (i, n) in names.iter().enumerate() {
                        columns.push(OutColumn {
                            name: n.clone(),
                            table: table_name.clone(),
                            kind: col_kind(i),
                        });
                        items.push(Expr::Column(i));
                    }
                }
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    let before = self.params;
                    let x = self.item_expr(e, &scope, &mut aggregates)?;
                    if self.params != before {
                        self.shape_sensitive = true;
                    }
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                        _ => match e {
                            ast::Expr::Identifier(i) => i.value.clone(),
                            ast::Expr::CompoundIdentifier(p) => {
                                p.last().map(|i| i.value.clone()).unwrap_or_default()
                            }
                            e => e.to_string(),
                        },
                    };
                    let kind = match &x {
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
                    };
                    columns.push(OutColumn {
                        name,
                        table: table_name.clone(),
                        kind,
                    });
                    items.push(x);
                }
            }
        }
        let filter = s
            .selection
            .as_ref()
            .map(|e| self.expr(e, &scope))
            .transpose()?;
        if !matches!(&s.group_by, ast::GroupByExpr::Expressions(v, _) if v.is_empty()) {
            return Err(unsupported("GROUP BY"));
        }
        if s.having.is_some() {
            return Err(unsupported("HAVING"));
        }
        let distinct = match &s.distinct {
            None => false,
            Some(ast::Distinct::Distinct) => true,
            Some(d) => return Err(unsupported(d)),
        };
        let mut order_by = Vec::new();
        if let Some(ob) = &q.order_by {
            let ast::OrderByKind::Expressions(exprs) = &ob.kind else {
                return Err(unsupported("ORDER BY ALL"));
            };
            for o in exprs {
                let asc = o.options.asc != Some(false);
                let before = self.params;
                let key = match &o.expr {
                    // ORDER BY <position>
                    ast::Expr::Value(v) => match &v.value {
                        ast::Value::Number(n, _) => {
                            let p: usize = n.parse().unwrap_or(0);
                            items
                                .get(p.wrapping_sub(1))
                                .cloned()
                                .ok_or_else(|| unknown_column(n, "order clause"))?
                        }
                        ast::Value::Placeholder(_) => {
                            self.params += 1;
                            self.shape_sensitive = true;
                            Expr::Param(self.params - 1)
                        }
                        _ => self.expr(&o.expr, &scope)?,
                    },
                    // ORDER BY <alias>
                    ast::Expr::Identifier(id)
                        if scope
                            .names
                            .iter()
                            .all(|n| !n.eq_ignore_ascii_case(&id.value)) =>
                    {
                        let at = columns
                            .iter()
                            .position(|c| c.name.eq_ignore_ascii_case(&id.value))
                            .ok_or_else(|| unknown_column(&id.value, "order clause"))?;
                        items[at].clone()
                    }
                    e => self.item_expr(e, &scope, &mut aggregates)?,
                };
                if self.params != before {
                    self.shape_sensitive = true;
                }
                order_by.push((key, asc));
            }
        }
        let (mut limit, mut offset) = (None, None);
        match &q.limit_clause {
            None => {}
            Some(ast::LimitClause::LimitOffset {
                limit: l,
                offset: o,
                ..
            }) => {
                limit = l.as_ref().map(|e| self.expr(e, &scope)).transpose()?;
                offset = o
                    .as_ref()
                    .map(|o| self.expr(&o.value, &scope))
                    .transpose()?;
            }
            Some(ast::LimitClause::OffsetCommaLimit {
                offset: o,
                limit: l,
            }) => {
                offset = Some(self.expr(o, &scope)?);
                limit = Some(self.expr(l, &scope)?);
            }
        }
        let for_update = match q.locks.as_slice() {
            [] => false,
            [l] if l.lock_type == ast::LockType::Update => true,
            [_] => false, // LOCK IN SHARE MODE / FOR SHARE: a consistent read here
            _ => return Err(unsupported("several lock clauses")),
        };
        if !aggregates.is_empty() && items.iter().any(uses_column) {
            return Err(SqlError::new(
                ER_MIX_OF_GROUP_FUNC_AND_FIELDS,
                "In aggregated query without GROUP BY, a nonaggregated column is \
                 not allowed (only_full_group_by)",
            ));
        }
        let access = match &source {
            Source::Table(t) => access_path(t, filter.as_ref()),
            _ => Access::FullScan,
        };
        Ok(SelectPlan {
            source,
            access,
            filter,
            columns,
            items,
            aggregates,
            distinct,
            order_by,
            limit,
            offset,
            for_update,
        })
    }

    /// A select-list expression: aggregates become `Expr::Aggregate`.
    fn item_expr(
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

    fn column(&self, parts: &[&str], scope: &Scope<'_>) -> Result<Expr, SqlError> {
        let (qual, name) = match parts {
            [n] => (None, *n),
            [t, n] => (Some(*t), *n),
            [_, t, n] => (Some(*t), *n),
            _ => return Err(unsupported(parts.join("."))),
        };
        if let Some(q) = qual {
            let ok = q.eq_ignore_ascii_case(scope.table)
                || scope
                    .alias
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(q));
            if !ok {
                return Err(unknown_column(&parts.join("."), "field list"));
            }
        }
        scope
            .names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(Expr::Column)
            .ok_or_else(|| unknown_column(name, "field list"))
    }

    pub fn expr_const(&mut self, e: &ast::Expr) -> Result<Expr, SqlError> {
        let scope = Scope {
            names: vec![],
            table: "",
            alias: None,
        };
        self.expr(e, &scope)
    }

    fn expr(&mut self, e: &ast::Expr, scope: &Scope<'_>) -> Result<Expr, SqlError> {
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

fn contains_aggregate(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Function(f) => matches!(
            f.name.to_string().to_ascii_lowercase().as_str(),
            "count" | "sum" | "avg" | "min" | "max"
        ),
        ast::Expr::BinaryOp { left, right, .. } => {
            contains_aggregate(left) || contains_aggregate(right)
        }
        ast::Expr::Nested(e) => contains_aggregate(e),
        _ => false,
    }
}

fn uses_column(e: &Expr) -> bool {
    match e {
        Expr::Column(_) => true,
        Expr::Literal(_) | Expr::Param(_) | Expr::Aggregate(_) | Expr::Default => false,
        Expr::Binary(_, l, r) => uses_column(l) || uses_column(r),
        Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => uses_column(x),
        Expr::Between {
            expr, low, high, ..
        } => uses_column(expr) || uses_column(low) || uses_column(high),
        Expr::InList { expr, list, .. } => uses_column(expr) || list.iter().any(uses_column),
        Expr::Like { expr, pattern, .. } => uses_column(expr) || uses_column(pattern),
        Expr::Call(_, a) => a.iter().any(uses_column),
    }
}

/// The conjuncts of a filter (its top-level ANDs).
fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    if let Expr::Binary(BinOp::And, l, r) = e {
        conjuncts(l, out);
        conjuncts(r, out);
    } else {
        out.push(e);
    }
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
