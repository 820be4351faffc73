//! CREATE TABLE and DROP TABLE; column types from their SQL names.

use super::context::DdlContext;
use super::index::{add_index, check_key_sizes, index_columns};
use crate::bind::{object_name, Binder};
use crate::catalog::{ColumnSchema, TableSchema};
use crate::codec::toast;
use crate::error::{err_parse, unsupported, SqlError};
use crate::exec::Output;
use crate::types::ColumnType;
use millrace_errcode::{
    ER_BAD_DB_ERROR, ER_BAD_TABLE_ERROR, ER_DUP_FIELDNAME, ER_INVALID_DEFAULT, ER_MULTIPLE_PRI_KEY,
    ER_TABLE_EXISTS_ERROR, ER_TABLE_MUST_HAVE_COLUMNS, ER_WRONG_AUTO_KEY, ER_WRONG_FIELD_SPEC,
    ER_WRONG_TABLE_NAME,
};
use sqlparser::ast;

/// CREATE TABLE: the schema from the column definitions and constraints,
/// checked, then the engine tables and the catalog row.
pub fn create_table(cx: &DdlContext<'_>, ct: &ast::CreateTable) -> Result<Output, SqlError> {
    if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
        return Err(unsupported("CREATE TABLE ... AS / LIKE"));
    }
    let (db, name) = object_name(&ct.name, cx.session)?;
    let cat = cx.catalog;
    if !cat.has_database(&db) {
        return Err(SqlError::new(
            ER_BAD_DB_ERROR,
            format!("Unknown database '{db}'"),
        ));
    }
    if name.is_empty() || name.len() > 64 {
        return Err(SqlError::new(
            ER_WRONG_TABLE_NAME,
            format!("Incorrect table name '{name}'"),
        ));
    }
    let mut s = TableSchema {
        db: db.clone(),
        name: name.clone(),
        engine_table: 0,
        toast_table: None,
        columns: Vec::new(),
        primary_key: Vec::new(),
        indexes: Vec::new(),
    };
    let mut pending: Vec<(Option<String>, Vec<ast::IndexColumn>, bool, bool)> = Vec::new();
    for c in &ct.columns {
        if s.column(&c.name.value).is_some() {
            return Err(SqlError::new(
                ER_DUP_FIELDNAME,
                format!("Duplicate column name '{}'", c.name.value),
            ));
        }
        let ty = column_type(&c.data_type)?;
        let mut col = ColumnSchema {
            name: c.name.value.clone(),
            ty,
            nullable: true,
            auto_increment: false,
            default: None,
        };
        let mut default_expr = None;
        for o in &c.options {
            match &o.option {
                ast::ColumnOption::Null => col.nullable = true,
                ast::ColumnOption::NotNull => col.nullable = false,
                ast::ColumnOption::Default(e) => default_expr = Some(e.clone()),
                ast::ColumnOption::Unique { is_primary, .. } => {
                    let ic = vec![ast::IndexColumn {
                        column: ast::OrderByExpr {
                            expr: ast::Expr::Identifier(c.name.clone()),
                            options: ast::OrderByOptions {
                                asc: None,
                                nulls_first: None,
                            },
                            with_fill: None,
                        },
                        operator_class: None,
                    }];
                    pending.push((None, ic, true, *is_primary));
                }
                ast::ColumnOption::DialectSpecific(tokens)
                    if tokens
                        .iter()
                        .any(|t| t.to_string().eq_ignore_ascii_case("AUTO_INCREMENT")) =>
                {
                    col.auto_increment = true
                }
                ast::ColumnOption::CharacterSet(_)
                | ast::ColumnOption::Collation(_)
                | ast::ColumnOption::Comment(_)
                | ast::ColumnOption::OnUpdate(_) => {}
                other => return Err(unsupported(format!("column option {other}"))),
            }
        }
        if let Some(e) = default_expr {
            let mut planner = Binder::new(cat, cx.session);
            let v = planner.expr_const(&e)?.eval_const(&[])?;
            if v.is_null() {
                if !col.nullable {
                    return Err(SqlError::new(
                        ER_INVALID_DEFAULT,
                        format!("Invalid default value for '{}'", col.name),
                    ));
                }
            } else {
                col.default = Some(v.coerce(&ty).map_err(|_| {
                    SqlError::new(
                        ER_INVALID_DEFAULT,
                        format!("Invalid default value for '{}'", col.name),
                    )
                })?);
            }
        }
        if col.auto_increment
            && !matches!(
                ty,
                ColumnType::TinyInt { .. }
                    | ColumnType::SmallInt { .. }
                    | ColumnType::Int { .. }
                    | ColumnType::BigInt { .. }
            )
        {
            return Err(SqlError::new(
                ER_WRONG_FIELD_SPEC,
                format!("Incorrect column specifier for column '{}'", col.name),
            ));
        }
        s.columns.push(col);
    }
    if s.columns.is_empty() {
        return Err(SqlError::new(
            ER_TABLE_MUST_HAVE_COLUMNS,
            "A table must have at least 1 column",
        ));
    }
    for c in &ct.constraints {
        match c {
            ast::TableConstraint::PrimaryKey { columns, .. } => {
                pending.push((None, columns.clone(), true, true))
            }
            ast::TableConstraint::Unique {
                name,
                index_name,
                columns,
                ..
            } => pending.push((
                index_name
                    .as_ref()
                    .or(name.as_ref())
                    .map(|i| i.value.clone()),
                columns.clone(),
                true,
                false,
            )),
            ast::TableConstraint::Index { name, columns, .. } => pending.push((
                name.as_ref().map(|i| i.value.clone()),
                columns.clone(),
                false,
                false,
            )),
            other => return Err(unsupported(other)),
        }
    }
    for (iname, cols, unique, primary) in pending {
        let cols = index_columns(&s, &cols)?;
        if primary {
            if !s.primary_key.is_empty() {
                return Err(SqlError::new(
                    ER_MULTIPLE_PRI_KEY,
                    "Multiple primary key defined",
                ));
            }
            for &c in &cols {
                s.columns[c].nullable = false;
            }
            s.primary_key = cols;
        } else {
            add_index(&mut s, iname, cols, unique)?;
        }
    }
    if let Some(a) = s.auto_increment_column() {
        let keyed =
            s.primary_key.first() == Some(&a) || s.indexes.iter().any(|i| i.columns[0] == a);
        if !keyed || s.columns.iter().filter(|c| c.auto_increment).count() > 1 {
            return Err(SqlError::new(
                ER_WRONG_AUTO_KEY,
                "Incorrect table definition; there can be only one auto column and it \
                 must be defined as a key",
            ));
        }
    }
    check_key_sizes(&s, cx.catalog.engine().page_size())?;
    let _ddl = cx.ddl_mutex();
    if cat.table(&db, &name).is_some() {
        if ct.if_not_exists {
            return Ok(Output::ok());
        }
        return Err(SqlError::new(
            ER_TABLE_EXISTS_ERROR,
            format!("Table '{name}' already exists"),
        ));
    }
    let with_toast = toast::needs_toast(&s.types(), cx.catalog.engine().page_size());
    cat.create_table(s, with_toast)?;
    Ok(Output::ok())
}

/// DROP TABLE: each table under its exclusive metadata lock.
pub fn drop_tables(
    cx: &DdlContext<'_>,
    names: &[ast::ObjectName],
    if_exists: bool,
) -> Result<Output, SqlError> {
    let cat = cx.catalog;
    let _ddl = cx.ddl_mutex();
    let mut missing = Vec::new();
    for n in names {
        let (db, tn) = object_name(n, cx.session)?;
        let Some(e) = cat.table(&db, &tn) else {
            missing.push(format!("{db}.{tn}"));
            continue;
        };
        let _exclusive = e.mdl.exclusive(cx.lock_timeout)?;
        cat.drop_table(&e)?;
    }
    if !missing.is_empty() && !if_exists {
        return Err(SqlError::new(
            ER_BAD_TABLE_ERROR,
            format!("Unknown table '{}'", missing.join(",")),
        ));
    }
    Ok(Output::ok())
}

fn column_type(dt: &ast::DataType) -> Result<ColumnType, SqlError> {
    use ast::DataType as D;
    let len = |n: &Option<ast::CharacterLength>, default: u32| match n {
        Some(ast::CharacterLength::IntegerLength { length, .. }) => {
            u32::try_from(*length).unwrap_or(u32::MAX)
        }
        Some(ast::CharacterLength::Max) => 65_535,
        None => default,
    };
    let ty = match dt {
        D::TinyInt(_) | D::Int2(_) if matches!(dt, D::TinyInt(_)) => {
            ColumnType::TinyInt { unsigned: false }
        }
        D::TinyIntUnsigned(_) | D::UTinyInt => ColumnType::TinyInt { unsigned: true },
        D::Bool | D::Boolean => ColumnType::TinyInt { unsigned: false },
        D::SmallInt(_) | D::Int2(_) => ColumnType::SmallInt { unsigned: false },
        D::SmallIntUnsigned(_) | D::Int2Unsigned(_) => ColumnType::SmallInt { unsigned: true },
        D::MediumInt(_) | D::Int(_) | D::Integer(_) | D::Int4(_) => {
            ColumnType::Int { unsigned: false }
        }
        D::MediumIntUnsigned(_)
        | D::IntUnsigned(_)
        | D::IntegerUnsigned(_)
        | D::Int4Unsigned(_)
        | D::UnsignedInteger => ColumnType::Int { unsigned: true },
        D::BigInt(_) | D::Int8(_) | D::Int64 => ColumnType::BigInt { unsigned: false },
        D::BigIntUnsigned(_) | D::Int8Unsigned(_) => ColumnType::BigInt { unsigned: true },
        D::Double(_) | D::DoublePrecision | D::Float(_) | D::Real | D::Float8 | D::Float64 => {
            ColumnType::Double
        }
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (precision, scale) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
            };
            ColumnType::Decimal {
                precision: u8::try_from(precision).unwrap_or(u8::MAX),
                scale: u8::try_from(scale).unwrap_or(u8::MAX),
            }
        }
        D::Char(n) | D::Character(n) => ColumnType::Char(len(n, 1)),
        D::Varchar(n) | D::CharVarying(n) | D::CharacterVarying(n) | D::Nvarchar(n) => match n {
            None => return Err(err_parse("VARCHAR needs a length")),
            n => ColumnType::VarChar(len(n, 0)),
        },
        D::Text | D::TinyText | D::MediumText | D::LongText | D::String(_) => ColumnType::Text,
        D::Blob(_) | D::TinyBlob | D::MediumBlob | D::LongBlob | D::Bytea => ColumnType::Blob,
        D::Binary(_) | D::Varbinary(_) => ColumnType::Blob,
        D::Datetime(_) | D::Date => ColumnType::DateTime,
        D::Timestamp(_, _) => ColumnType::Timestamp,
        other => return Err(unsupported(format!("column type {other}"))),
    };
    ty.validate()
        .map_err(|e| SqlError::new(e.mysql_code(), e.to_string()))?;
    Ok(ty)
}
