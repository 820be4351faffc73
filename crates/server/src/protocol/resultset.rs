//! Replies: OK, EOF and ERR packets, column definitions, and rows in the
//! text protocol (COM_QUERY) and the binary protocol (COM_STMT_EXECUTE).
//! With CLIENT_DEPRECATE_EOF the EOF packets after column definitions are
//! left out and a result set ends with an OK packet whose header is 0xfe.
//!
//! Values follow the columns' declared kinds: integers and doubles travel
//! as numbers in the binary protocol; decimals, strings, blobs and
//! datetimes travel as strings in both.

use super::flags::{caps, COLLATION_BINARY, COLLATION_UTF8MB4};
use super::packet::{put_lenenc_bytes, put_lenenc_int, PacketWriter};
use millrace_errcode::ErrorCode;
use millrace_sql::plan::{OutColumn, ResultKind};
use millrace_sql::Value;
use std::io::{self, Write};

const TYPE_DOUBLE: u8 = 0x05;
const TYPE_LONGLONG: u8 = 0x08;
const TYPE_NEWDECIMAL: u8 = 0xf6;
const TYPE_BLOB: u8 = 0xfc;
const TYPE_VAR_STRING: u8 = 0xfd;

const FLAG_BLOB: u16 = 0x10;
const FLAG_UNSIGNED: u16 = 0x20;
const FLAG_BINARY: u16 = 0x80;

/// An OK packet's payload.
pub fn ok(out: &mut Vec<u8>, affected_rows: u64, last_insert_id: u64, status: u16) {
    out.push(0x00);
    put_lenenc_int(out, affected_rows);
    put_lenenc_int(out, last_insert_id);
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
}

/// An ERR packet's payload (protocol 4.1: with '#' and the SQLSTATE from
/// millrace_errcode).
pub fn err(out: &mut Vec<u8>, code: ErrorCode, message: &str) {
    out.push(0xff);
    out.extend_from_slice(&code.number().to_le_bytes());
    out.push(b'#');
    out.extend_from_slice(code.sqlstate().as_bytes());
    out.extend_from_slice(message.as_bytes());
}

/// An EOF packet's payload (only without CLIENT_DEPRECATE_EOF).
fn eof(out: &mut Vec<u8>, status: u16) {
    out.push(0xfe);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&status.to_le_bytes());
}

/// The end of a column list: an EOF packet, unless CLIENT_DEPRECATE_EOF.
pub fn end_of_columns(w: &mut PacketWriter, client_caps: u32, status: u16) {
    if client_caps & caps::DEPRECATE_EOF == 0 {
        eof(w.begin(), status);
        w.end();
    }
}

/// The end of the rows: an EOF packet, or with CLIENT_DEPRECATE_EOF an OK
/// packet with the EOF header byte.
pub fn end_of_rows(w: &mut PacketWriter, client_caps: u32, status: u16) {
    let out = w.begin();
    if client_caps & caps::DEPRECATE_EOF == 0 {
        eof(out, status);
    } else {
        ok(out, 0, 0, status);
        let at = out.len() - 7;
        out[at] = 0xfe;
    }
    w.end();
}

/// The protocol type, flags and decimals of a result kind.
fn column_type(kind: ResultKind) -> (u8, u16, u8, u32) {
    // (type, flags, decimals, display length)
    match kind {
        ResultKind::Int => (TYPE_LONGLONG, FLAG_BINARY, 0, 20),
        ResultKind::UInt => (TYPE_LONGLONG, FLAG_BINARY | FLAG_UNSIGNED, 0, 20),
        ResultKind::Double => (TYPE_DOUBLE, FLAG_BINARY, 31, 22),
        ResultKind::Decimal => (TYPE_NEWDECIMAL, FLAG_BINARY, 31, 67),
        ResultKind::Blob => (TYPE_BLOB, FLAG_BINARY | FLAG_BLOB, 0, 65535),
        // Datetimes travel as text (also in the binary protocol).
        ResultKind::Text | ResultKind::DateTime => (TYPE_VAR_STRING, 0, 0, 1024),
    }
}

/// A ColumnDefinition41 payload.
pub fn column_definition(out: &mut Vec<u8>, table: &str, name: &str, kind: ResultKind) {
    let (ty, flags, decimals, length) = column_type(kind);
    put_lenenc_bytes(out, b"def");
    put_lenenc_bytes(out, b""); // schema
    put_lenenc_bytes(out, table.as_bytes());
    put_lenenc_bytes(out, table.as_bytes());
    put_lenenc_bytes(out, name.as_bytes());
    put_lenenc_bytes(out, name.as_bytes());
    out.push(0x0c);
    let collation = if flags & FLAG_BINARY != 0 {
        COLLATION_BINARY
    } else {
        COLLATION_UTF8MB4
    };
    out.extend_from_slice(&u16::from(collation).to_le_bytes());
    out.extend_from_slice(&length.to_le_bytes());
    out.push(ty);
    out.extend_from_slice(&flags.to_le_bytes());
    out.push(decimals);
    out.extend_from_slice(&[0, 0]);
}

/// Column count, definitions and their end.
pub fn columns(w: &mut PacketWriter, cols: &[OutColumn], client_caps: u32, status: u16) {
    put_lenenc_int(w.begin(), cols.len() as u64);
    w.end();
    for c in cols {
        column_definition(w.begin(), &c.table, &c.name, c.kind);
        w.end();
    }
    end_of_columns(w, client_caps, status);
}

/// Which protocol rows are encoded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    Text,
    Binary,
}

/// A whole result set, sent in pieces of about `FLUSH_BYTES` (the rows are
/// consumed as they are encoded).
pub fn result_set(
    w: &mut PacketWriter,
    dst: &mut impl Write,
    cols: &[OutColumn],
    rows: Vec<Vec<Value>>,
    format: RowFormat,
    client_caps: u32,
    status: u16,
) -> io::Result<()> {
    columns(w, cols, client_caps, status);
    let mut scratch = Vec::new();
    for row in rows {
        let out = w.begin();
        match format {
            RowFormat::Text => text_row(out, cols, row, &mut scratch),
            RowFormat::Binary => binary_row(out, cols, row, &mut scratch),
        }
        w.end();
        w.maybe_flush(dst)?;
    }
    end_of_rows(w, client_caps, status);
    Ok(())
}

/// A value's text form into `scratch` (cleared first); false for NULL.
/// Numeric columns print their values as numbers of the column's kind
/// (a value of another type is converted, as the SQL layer converts).
fn text_of(kind: ResultKind, v: &Value, scratch: &mut Vec<u8>) -> bool {
    use std::io::Write as _;
    scratch.clear();
    if v.is_null() {
        return false;
    }
    match (kind, v) {
        (ResultKind::Int | ResultKind::UInt, Value::Int(i)) => {
            let _ = write!(scratch, "{i}");
        }
        (ResultKind::Int | ResultKind::UInt, Value::UInt(u)) => {
            let _ = write!(scratch, "{u}");
        }
        (ResultKind::Int | ResultKind::UInt, v) => {
            let _ = write!(scratch, "{}", millrace_sql::expr::as_double(v) as i64);
        }
        (ResultKind::Double, Value::Double(_)) => {
            scratch.extend_from_slice(&v.to_text().unwrap_or_default());
        }
        (ResultKind::Double, v) => {
            let d = Value::Double(millrace_sql::expr::as_double(v));
            scratch.extend_from_slice(&d.to_text().unwrap_or_default());
        }
        (_, Value::Bytes(b)) => scratch.extend_from_slice(b),
        (_, v) => scratch.extend_from_slice(&v.to_text().unwrap_or_default()),
    }
    true
}

/// Whether a value goes out as it is stored (no conversion, no copy).
fn verbatim(kind: ResultKind, v: &Value) -> Option<&[u8]> {
    match (kind, v) {
        (
            ResultKind::Text | ResultKind::Blob | ResultKind::Decimal | ResultKind::DateTime,
            Value::Bytes(b),
        ) => Some(b),
        _ => None,
    }
}

fn text_row(out: &mut Vec<u8>, cols: &[OutColumn], row: Vec<Value>, scratch: &mut Vec<u8>) {
    for (v, c) in row.iter().zip(cols) {
        if let Some(b) = verbatim(c.kind, v) {
            put_lenenc_bytes(out, b);
        } else if text_of(c.kind, v, scratch) {
            put_lenenc_bytes(out, scratch);
        } else {
            out.push(0xfb);
        }
    }
}

fn binary_row(out: &mut Vec<u8>, cols: &[OutColumn], row: Vec<Value>, scratch: &mut Vec<u8>) {
    out.push(0x00);
    // The null bitmap starts at bit 2 in result rows.
    let bitmap_at = out.len();
    out.resize(bitmap_at + (cols.len() + 7 + 2) / 8, 0);
    for (i, (v, c)) in row.iter().zip(cols).enumerate() {
        if v.is_null() {
            out[bitmap_at + (i + 2) / 8] |= 1 << ((i + 2) % 8);
            continue;
        }
        match c.kind {
            ResultKind::Int | ResultKind::UInt => {
                let n: u64 = match v {
                    Value::Int(i) => *i as u64,
                    Value::UInt(u) => *u,
                    v => millrace_sql::expr::as_double(v) as i64 as u64,
                };
                out.extend_from_slice(&n.to_le_bytes());
            }
            ResultKind::Double => {
                let d = millrace_sql::expr::as_double(v);
                out.extend_from_slice(&d.to_le_bytes());
            }
            _ => {
                if let Some(b) = verbatim(c.kind, v) {
                    put_lenenc_bytes(out, b);
                } else {
                    text_of(c.kind, v, scratch);
                    put_lenenc_bytes(out, scratch);
                }
            }
        }
    }
}

/// COM_STMT_PREPARE's reply: the statement OK, parameter definitions and
/// column definitions, each list ended as `end_of_columns` says.
pub fn prepare_ok(
    w: &mut PacketWriter,
    stmt: u32,
    params: u16,
    cols: &[OutColumn],
    client_caps: u32,
    status: u16,
) {
    let out = w.begin();
    out.push(0x00);
    out.extend_from_slice(&stmt.to_le_bytes());
    out.extend_from_slice(&(cols.len().min(usize::from(u16::MAX)) as u16).to_le_bytes());
    out.extend_from_slice(&params.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&0u16.to_le_bytes());
    w.end();
    if params > 0 {
        for _ in 0..params {
            column_definition(w.begin(), "", "?", ResultKind::Text);
            w.end();
        }
        end_of_columns(w, client_caps, status);
    }
    if !cols.is_empty() {
        for c in cols {
            column_definition(w.begin(), &c.table, &c.name, c.kind);
            w.end();
        }
        end_of_columns(w, client_caps, status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_errcode::{ER_LOCK_DEADLOCK, ER_QUERY_TIMEOUT};

    #[test]
    fn err_keeps_any_code_and_its_sqlstate() {
        // Codes above 1885 (opensrv-mysql's last) keep their number.
        let mut out = Vec::new();
        err(&mut out, ER_QUERY_TIMEOUT, "timeout");
        assert_eq!(out, b"\xff\xd0\x0b#HY000timeout");
        out.clear();
        err(&mut out, ER_LOCK_DEADLOCK, "d");
        assert_eq!(out, b"\xff\xbd\x04#40001d");
        out.clear();
        err(&mut out, ErrorCode::from_number(65000), "x");
        assert_eq!(&out[..9], b"\xff\xe8\xfd#HY000");
    }

    fn col(kind: ResultKind) -> OutColumn {
        OutColumn {
            name: "c".into(),
            table: String::new(),
            kind,
        }
    }

    fn packets(w: &mut PacketWriter) -> Vec<Vec<u8>> {
        let mut bytes = Vec::new();
        w.flush(&mut bytes).unwrap();
        let mut out = Vec::new();
        let mut r = super::super::packet::PacketReader::new();
        let mut src = &bytes[..];
        let mut p = Vec::new();
        while r.read_message(&mut src, &mut p, 1 << 20).is_ok() {
            out.push(p.clone());
        }
        out
    }

    #[test]
    fn result_sets_in_both_protocols_and_eof_styles() {
        let cols = [
            col(ResultKind::Int),
            col(ResultKind::Text),
            col(ResultKind::Double),
        ];
        let rows = vec![
            vec![
                Value::Int(-5),
                Value::Bytes(b"hi".to_vec()),
                Value::Double(1e20),
            ],
            vec![Value::Null, Value::Null, Value::Int(2)],
        ];
        let mut w = PacketWriter::new();
        let mut sink = Vec::new();
        result_set(
            &mut w,
            &mut sink,
            &cols,
            rows.clone(),
            RowFormat::Text,
            0,
            2,
        )
        .unwrap();
        let p = packets(&mut w);
        // count, 3 columns, EOF, 2 rows, EOF
        assert_eq!(p.len(), 8);
        assert_eq!(p[0], [3]);
        assert_eq!(p[4], [0xfe, 0, 0, 2, 0]);
        assert_eq!(p[5], b"\x02-5\x02hi\x041e20");
        assert_eq!(p[6], b"\xfb\xfb\x012");
        assert_eq!(p[7], [0xfe, 0, 0, 2, 0]);

        let mut w = PacketWriter::new();
        let deprecate = caps::DEPRECATE_EOF;
        result_set(
            &mut w,
            &mut sink,
            &cols,
            rows,
            RowFormat::Binary,
            deprecate,
            3,
        )
        .unwrap();
        let p = packets(&mut w);
        // count, 3 columns, 2 rows, OK-as-EOF
        assert_eq!(p.len(), 7);
        let mut want = vec![0x00, 0x00];
        want.extend_from_slice(&(-5i64).to_le_bytes());
        want.extend_from_slice(b"\x02hi");
        want.extend_from_slice(&1e20f64.to_le_bytes());
        assert_eq!(p[4], want);
        let mut want = vec![0x00, 0b1100];
        want.extend_from_slice(&2f64.to_le_bytes());
        assert_eq!(p[5], want);
        assert_eq!(p[6], [0xfe, 0, 0, 3, 0, 0, 0]);
    }
}
