//! Result columns: their names and the type the protocol announces for them.

use super::column::ColumnType;

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
