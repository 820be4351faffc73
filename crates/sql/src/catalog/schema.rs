//! Table schemas: columns, primary key, secondary indexes, toast table; and
//! their versioned binary form, the value of a table's catalog row. The
//! decoder treats its input as hostile: damage is an error, never a panic.

use crate::codec::{decode_row, encode_key, encode_row};
use crate::types::{ColumnType, Value};
use millrace_io::bytes::ByteReader;
use millrace_trx::KeyPart;

/// Version 2 added the toast table id; version 1 schemas (tables made
/// before it, without a toast table) still decode.
const SCHEMA_VERSION: u8 = 2;

/// A column of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSchema {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    pub auto_increment: bool,
    /// The DEFAULT, coerced to the column's type; `None`: no DEFAULT clause.
    pub default: Option<Value>,
}

/// A secondary index: its columns (positions in the table), in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSchema {
    pub name: String,
    pub columns: Vec<usize>,
    pub unique: bool,
}

/// A table as the SQL layer sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub db: String,
    pub name: String,
    /// The engine table holding the rows.
    pub engine_table: u32,
    /// The engine table holding the chunks of values stored out of line
    /// (`toast.rs`); `None` for a table that cannot hold a long value, and
    /// for tables made before schema version 2 (their rows stay inline).
    /// A CREATE INDEX rebuild keeps it: the new rows point to the same
    /// values.
    pub toast_table: Option<u32>,
    pub columns: Vec<ColumnSchema>,
    /// Primary key columns; empty: a hidden 8-byte row id is the key.
    pub primary_key: Vec<usize>,
    /// Secondary indexes; index `i` is the engine table's secondary `i` and
    /// its key is segment `i` of the stored row.
    pub indexes: Vec<IndexSchema>,
}

impl TableSchema {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn types(&self) -> Vec<ColumnType> {
        self.columns.iter().map(|c| c.ty).collect()
    }

    /// The engine's secondary key specs: index `i` is segment `i`.
    pub fn engine_keys(&self) -> Vec<Vec<KeyPart>> {
        (0..self.indexes.len())
            .map(|i| vec![KeyPart::Segment(i as u16)])
            .collect()
    }

    /// The AUTO_INCREMENT column, if any.
    pub fn auto_increment_column(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.auto_increment)
    }

    /// The key of index `columns` for `row` (coerced values).
    pub fn key_of(&self, columns: &[usize], row: &[Value]) -> Vec<u8> {
        let vals: Vec<(Value, &ColumnType)> = columns
            .iter()
            .map(|&c| (row[c].clone(), &self.columns[c].ty))
            .collect();
        let mut out = Vec::new();
        encode_key(&vals, &mut out);
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![SCHEMA_VERSION];
        b.extend_from_slice(&self.engine_table.to_le_bytes());
        // Engine table ids are tablespace ids, never 0 (the system space).
        assert_ne!(self.toast_table, Some(0), "toast table id 0");
        b.extend_from_slice(&self.toast_table.unwrap_or(0).to_le_bytes());
        put_str(&mut b, &self.db);
        put_str(&mut b, &self.name);
        b.extend_from_slice(&(self.columns.len() as u16).to_le_bytes());
        for c in &self.columns {
            put_str(&mut b, &c.name);
            put_type(&mut b, &c.ty);
            let flags = u8::from(c.nullable)
                | u8::from(c.auto_increment) << 1
                | u8::from(c.default.is_some()) << 2;
            b.push(flags);
            if let Some(d) = &c.default {
                let mut row = Vec::new();
                encode_row(std::slice::from_ref(d), &[c.ty], &mut row)
                    .expect("defaults are coerced when the table is created");
                b.extend_from_slice(&(row.len() as u32).to_le_bytes());
                b.extend_from_slice(&row);
            }
        }
        put_cols(&mut b, &self.primary_key);
        b.push(self.indexes.len() as u8);
        for i in &self.indexes {
            put_str(&mut b, &i.name);
            b.push(u8::from(i.unique));
            put_cols(&mut b, &i.columns);
        }
        b
    }

    /// Decodes a schema; hostile input gives an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<TableSchema, String> {
        let mut r = Reader(ByteReader::new(bytes));
        let version = r.u8()?;
        if version != 1 && version != SCHEMA_VERSION {
            return Err(format!("table schema version {version} is not supported"));
        }
        let engine_table = r.u32()?;
        let toast_table = match version {
            1 => None,
            _ => Some(r.u32()?).filter(|&t| t != 0),
        };
        if toast_table == Some(engine_table) {
            return Err("the toast table is the table itself".into());
        }
        let db = r.str()?;
        let name = r.str()?;
        let n = r.u16()? as usize;
        let mut columns = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            let cname = r.str()?;
            let ty = r.ty()?;
            let flags = r.u8()?;
            let default = if flags & 4 != 0 {
                let len = r.u32()? as usize;
                let row = r.take(len)?;
                let mut v = decode_row(row, &[ty]).map_err(|e| e.to_string())?;
                v.pop()
            } else {
                None
            };
            columns.push(ColumnSchema {
                name: cname,
                ty,
                nullable: flags & 1 != 0,
                auto_increment: flags & 2 != 0,
                default,
            });
        }
        let primary_key = r.cols(n)?;
        let ni = r.u8()? as usize;
        let mut indexes = Vec::with_capacity(ni);
        for _ in 0..ni {
            let iname = r.str()?;
            let unique = r.u8()? != 0;
            let cols = r.cols(n)?;
            indexes.push(IndexSchema {
                name: iname,
                columns: cols,
                unique,
            });
        }
        if !r.is_empty() {
            return Err("trailing bytes after a table schema".into());
        }
        Ok(TableSchema {
            db,
            name,
            engine_table,
            toast_table,
            columns,
            primary_key,
            indexes,
        })
    }
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u16).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn put_cols(b: &mut Vec<u8>, cols: &[usize]) {
    b.push(cols.len() as u8);
    for &c in cols {
        b.extend_from_slice(&(c as u16).to_le_bytes());
    }
}

fn put_type(b: &mut Vec<u8>, ty: &ColumnType) {
    match *ty {
        ColumnType::TinyInt { unsigned } => b.extend_from_slice(&[1, u8::from(unsigned)]),
        ColumnType::SmallInt { unsigned } => b.extend_from_slice(&[2, u8::from(unsigned)]),
        ColumnType::Int { unsigned } => b.extend_from_slice(&[3, u8::from(unsigned)]),
        ColumnType::BigInt { unsigned } => b.extend_from_slice(&[4, u8::from(unsigned)]),
        ColumnType::Double => b.push(5),
        ColumnType::Decimal { precision, scale } => b.extend_from_slice(&[6, precision, scale]),
        ColumnType::Char(n) => {
            b.push(7);
            b.extend_from_slice(&n.to_le_bytes());
        }
        ColumnType::VarChar(n) => {
            b.push(8);
            b.extend_from_slice(&n.to_le_bytes());
        }
        ColumnType::Text => b.push(9),
        ColumnType::Blob => b.push(10),
        ColumnType::DateTime => b.push(11),
        ColumnType::Timestamp => b.push(12),
    }
}

/// The schema decoder's reads: the bounded byte reader plus the schema's
/// own compound fields.
struct Reader<'a>(ByteReader<'a>);

impl<'a> std::ops::Deref for Reader<'a> {
    type Target = ByteReader<'a>;
    fn deref(&self) -> &ByteReader<'a> {
        &self.0
    }
}

impl std::ops::DerefMut for Reader<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Reader<'_> {
    fn str(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a name is not UTF-8".into())
    }
    fn cols(&mut self, ncols: usize) -> Result<Vec<usize>, String> {
        let n = self.u8()? as usize;
        (0..n)
            .map(|_| {
                let c = self.u16()? as usize;
                if c >= ncols {
                    return Err(format!("index column {c} of {ncols}"));
                }
                Ok(c)
            })
            .collect()
    }
    fn ty(&mut self) -> Result<ColumnType, String> {
        let tag = self.u8()?;
        let ty = match tag {
            1..=4 => {
                let unsigned = self.u8()? != 0;
                match tag {
                    1 => ColumnType::TinyInt { unsigned },
                    2 => ColumnType::SmallInt { unsigned },
                    3 => ColumnType::Int { unsigned },
                    _ => ColumnType::BigInt { unsigned },
                }
            }
            5 => ColumnType::Double,
            6 => ColumnType::Decimal {
                precision: self.u8()?,
                scale: self.u8()?,
            },
            7 => ColumnType::Char(self.u32()?),
            8 => ColumnType::VarChar(self.u32()?),
            9 => ColumnType::Text,
            10 => ColumnType::Blob,
            11 => ColumnType::DateTime,
            12 => ColumnType::Timestamp,
            t => return Err(format!("unknown column type tag {t}")),
        };
        ty.validate().map_err(|e| e.to_string())?;
        Ok(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        TableSchema {
            db: "sbtest".into(),
            name: "sbtest1".into(),
            engine_table: 7,
            toast_table: Some(9),
            columns: vec![
                ColumnSchema {
                    name: "id".into(),
                    ty: ColumnType::Int { unsigned: false },
                    nullable: false,
                    auto_increment: true,
                    default: None,
                },
                ColumnSchema {
                    name: "c".into(),
                    ty: ColumnType::Char(120),
                    nullable: false,
                    auto_increment: false,
                    default: Some(Value::Bytes(b"x".to_vec())),
                },
                ColumnSchema {
                    name: "d".into(),
                    ty: ColumnType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                    nullable: true,
                    auto_increment: false,
                    default: None,
                },
            ],
            primary_key: vec![0],
            indexes: vec![IndexSchema {
                name: "k_1".into(),
                columns: vec![1, 2],
                unique: false,
            }],
        }
    }

    #[test]
    fn schema_round_trip() {
        let s = schema();
        assert_eq!(TableSchema::decode(&s.encode()).unwrap(), s);
        let none = TableSchema {
            toast_table: None,
            ..schema()
        };
        assert_eq!(TableSchema::decode(&none.encode()).unwrap(), none);
    }

    #[test]
    fn version_1_schemas_decode_without_a_toast_table() {
        // Version 1 is version 2 without the toast table id.
        let v2 = TableSchema {
            toast_table: None,
            ..schema()
        }
        .encode();
        assert_eq!(&v2[5..9], &[0, 0, 0, 0]);
        let mut v1 = vec![1];
        v1.extend_from_slice(&v2[1..5]);
        v1.extend_from_slice(&v2[9..]);
        let s = TableSchema::decode(&v1).unwrap();
        assert_eq!(s.toast_table, None);
        assert_eq!(s.columns, schema().columns);
        assert!(TableSchema::decode(&[3]).is_err());
        // A toast table that is the table itself is damage.
        let mut same = schema().encode();
        same[5..9].copy_from_slice(&7u32.to_le_bytes());
        assert!(TableSchema::decode(&same).is_err());
    }

    #[test]
    fn hostile_schema_bytes_give_errors() {
        let good = schema().encode();
        for cut in 0..good.len() {
            assert!(TableSchema::decode(&good[..cut]).is_err(), "cut {cut}");
        }
        let mut rng = 0x9e3779b97f4a7c15u64;
        for _ in 0..5000 {
            let mut b = good.clone();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let at = (rng % b.len() as u64) as usize;
            b[at] ^= (rng >> 32) as u8 | 1;
            let _ = TableSchema::decode(&b);
        }
    }
}
