//! Fuzz targets of the SQL layer (docs/design.md, "Fuzzing"):
//! `sql_codec` (key and row decoders on hostile bytes: an error, never a
//! panic, and whatever they accept re-encodes) and `sql_statements` (text
//! through `Session`: parse, bind, plan and execute on an in-memory engine).
//! `MILLRACE_FUZZ_SECS=300 cargo test -p millrace-sql --test fuzz -- --nocapture`

use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_sql::codec::{
    decode_column, decode_key, decode_key_prefix, decode_row, decode_row_external, encode_row,
    try_encode_key,
};
use millrace_sql::{ColumnType, ConnInfo, DateTime, Instance, Session, Value};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::fuzz::{corpus_dir, fuzz_target, fuzz_target_with, write_seeds, Options};
use millrace_trx::{Durability, Engine, TrxConfig};
use std::sync::Arc;

/// Column type `kind` (mod 16) with parameter `p`.
fn column_type(kind: u8, p: u8) -> ColumnType {
    let unsigned = p & 1 == 1;
    match kind % 16 {
        0 => ColumnType::TinyInt { unsigned },
        1 => ColumnType::SmallInt { unsigned },
        2 => ColumnType::Int { unsigned },
        3 => ColumnType::BigInt { unsigned },
        4 => ColumnType::Double,
        5 => {
            let precision = 1 + p % 65;
            ColumnType::Decimal {
                precision,
                scale: (p / 65).min(precision).min(30),
            }
        }
        6 => ColumnType::Char(p as u32),
        7 => ColumnType::VarChar(p as u32 * 4),
        8 => ColumnType::Text,
        9 => ColumnType::Blob,
        10 => ColumnType::DateTime,
        11 => ColumnType::Timestamp,
        12 => ColumnType::VarChar(65535 / 4),
        13 => ColumnType::BigInt { unsigned: true },
        14 => ColumnType::Decimal {
            precision: 65,
            scale: 30,
        },
        _ => ColumnType::Char(255),
    }
}

/// Input: n (1 + byte % 8), n (kind, param) pairs, then the bytes to decode.
fn split(input: &[u8]) -> (Vec<ColumnType>, &[u8]) {
    let n = 1 + input.first().map_or(0, |&b| b as usize % 8);
    let mut types = Vec::with_capacity(n);
    for i in 0..n {
        let at = 1 + 2 * i;
        let kind = input.get(at).copied().unwrap_or(0);
        let p = input.get(at + 1).copied().unwrap_or(0);
        types.push(column_type(kind, p));
    }
    (types, input.get(1 + 2 * n..).unwrap_or(&[]))
}

fn codec_target(input: &[u8]) {
    let (types, bytes) = split(input);
    if let Ok(values) = decode_key(bytes, &types) {
        let pairs: Vec<(Value, &ColumnType)> = values.iter().cloned().zip(&types).collect();
        let mut again = Vec::new();
        if let Err(e) = try_encode_key(&pairs, &mut again) {
            panic!("decode_key accepted {values:?}, which the key encoder refuses: {e}");
        }
        let back = decode_key(&again, &types).expect("a key the encoder wrote decodes");
        assert_eq!(format!("{back:?}"), format!("{values:?}"), "key round trip");
    }
    let _ = decode_key_prefix(bytes, &types);
    if let Ok(values) = decode_row(bytes, &types) {
        let mut again = Vec::new();
        if let Err(e) = encode_row(&values, &types, &mut again) {
            panic!("decode_row accepted {values:?}, which the row encoder refuses: {e}");
        }
        let back = decode_row(&again, &types).expect("a row the encoder wrote decodes");
        assert_eq!(format!("{back:?}"), format!("{values:?}"), "row round trip");
    }
    let _ = decode_row_external(bytes, &types);
    for i in 0..=types.len() {
        let _ = decode_column(bytes, &types, i);
    }
}

/// Column (kind, param) pairs and one value per column.
type SeedRow = (Vec<(u8, u8)>, Vec<Value>);

fn codec_seeds() -> Vec<(String, Vec<u8>)> {
    let dt = DateTime {
        year: 2024,
        month: 2,
        day: 29,
        hour: 23,
        minute: 59,
        second: 58,
        micro: 123_456,
    };
    // (kind, param) pairs and one value per column.
    let rows: Vec<SeedRow> = vec![
        (
            vec![(2, 0), (6, 120), (6, 60)],
            vec![
                Value::Int(-7),
                Value::Bytes(b"c-value".to_vec()),
                Value::Bytes(b"".to_vec()),
            ],
        ),
        (
            vec![(13, 1), (4, 0), (5, 10 + 65 * 2), (10, 0)],
            vec![
                Value::UInt(u64::MAX),
                Value::Double(-0.5),
                Value::Decimal {
                    unscaled: -12345,
                    scale: 2,
                },
                Value::DateTime(dt),
            ],
        ),
        (
            vec![(8, 0), (9, 0), (0, 0), (1, 1), (11, 0)],
            vec![
                Value::Bytes("näive text".as_bytes().to_vec()),
                Value::Bytes(vec![0, 1, 0xff, 0]),
                Value::Int(-128),
                Value::Null,
                Value::DateTime(dt),
            ],
        ),
        (
            vec![(7, 10), (3, 0)],
            vec![Value::Bytes(b"varchar".to_vec()), Value::Int(i64::MIN)],
        ),
    ];
    let mut seeds = Vec::new();
    for (i, (cols, values)) in rows.iter().enumerate() {
        let mut head = vec![(cols.len() - 1) as u8];
        for &(k, p) in cols {
            head.extend_from_slice(&[k, p]);
        }
        let types: Vec<ColumnType> = cols.iter().map(|&(k, p)| column_type(k, p)).collect();
        let mut row = head.clone();
        encode_row(values, &types, &mut row).expect("a seed row encodes");
        seeds.push((format!("row-{i}"), row));
        let pairs: Vec<(Value, &ColumnType)> = values.iter().cloned().zip(&types).collect();
        let mut key = head;
        try_encode_key(&pairs, &mut key).expect("a seed key encodes");
        seeds.push((format!("key-{i}"), key));
    }
    seeds
}

#[test]
fn fuzz_sql_codec() {
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "sql_codec");
    let seeds = codec_seeds();
    let named: Vec<(&str, Vec<u8>)> = seeds.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    write_seeds(&dir, &named);
    fuzz_target("sql_codec", &dir, 100_000, codec_target);
}

/// The schema every statement runs against (sysbench's table and one with
/// every column type); re-created when a statement dropped it.
const SETUP: &[&str] = &[
    "CREATE DATABASE IF NOT EXISTS test",
    "USE test",
    "CREATE TABLE IF NOT EXISTS sbtest1(id INTEGER NOT NULL AUTO_INCREMENT, \
     k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, \
     pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))",
    "CREATE TABLE IF NOT EXISTS t(a TINYINT, b SMALLINT UNSIGNED, i INT PRIMARY KEY, \
     g BIGINT, d DOUBLE, m DECIMAL(10,2), v VARCHAR(20), x TEXT, y BLOB, \
     t DATETIME, s TIMESTAMP NULL, UNIQUE KEY (g), KEY (v))",
];

fn session() -> Session {
    let mut cfg = TrxConfig::default();
    cfg.store.buf.page_size = 4096;
    cfg.store.buf.pool_bytes = 4 << 20;
    cfg.store.log.capacity_bytes = 4 << 20;
    cfg.store.log.buffer_bytes = 256 << 10;
    cfg.store.log.writer_threads = "off".parse().expect("a writer mode");
    cfg.store.log.durability = Durability::Write;
    cfg.undo_spaces = Some(1);
    cfg.rsegs = Some(2);
    cfg.lock_wait_timeout_ms = 100;
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let engine = Engine::open(Arc::new(SimStorage::new()), cfg, cpu, Registry::new()).unwrap();
    let server = Instance::open(engine).unwrap();
    let mut s = Session::new(
        server,
        ConnInfo {
            connection_id: 1,
            user: "root".into(),
            host: "localhost".into(),
        },
    );
    for sql in SETUP {
        s.query(sql).unwrap();
    }
    s.query("INSERT INTO sbtest1(k, c, pad) VALUES (1,'a','p'),(2,'bb','q'),(3,'ccc','r')")
        .unwrap();
    s.query(
        "INSERT INTO t VALUES (1, 2, 3, 4, 5.5, 6.25, 'v', 'text', 'blob', \
         '2024-01-02 03:04:05', NULL)",
    )
    .unwrap();
    s
}

/// Runs the input (text, statements split at ';', at most 8) inside a
/// transaction that is rolled back, and as a prepared statement when it
/// has placeholders; then restores the schema for the next input.
fn statement_target(s: &mut Session, input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let _ = s.query("BEGIN");
    for sql in text.split(';').take(8) {
        let _ = s.query(sql);
        if sql.contains('?') {
            if let Ok((id, params, _)) = s.prepare(sql) {
                let values = (0..params)
                    .map(|i| match i % 4 {
                        0 => Value::Int(i as i64),
                        1 => Value::Bytes(b"x%".to_vec()),
                        2 => Value::Null,
                        _ => Value::Double(1.5),
                    })
                    .collect();
                let _ = s.execute(id, values);
                s.close(id);
            }
        }
    }
    let _ = s.query("ROLLBACK");
    for sql in SETUP {
        let _ = s.query(sql);
    }
}

/// SQL tokens the mutator inserts whole.
const SQL_TOKENS: &[&str] = &[
    " SELECT ",
    " FROM ",
    " WHERE ",
    " AND ",
    " OR ",
    " NOT ",
    " NULL ",
    " IS ",
    " IN (1,2) ",
    " BETWEEN 1 AND 2 ",
    " LIKE 'a%' ",
    " ORDER BY 1 ",
    " GROUP BY 1 ",
    " HAVING ",
    " LIMIT 1 ",
    " OFFSET 2 ",
    " DISTINCT ",
    " COUNT(*) ",
    " SUM(",
    " MIN(",
    " MAX(",
    " AVG(",
    " CAST(",
    " AS ",
    " CASE WHEN 1 THEN 2 ELSE 3 END ",
    " COALESCE(",
    " CONCAT(",
    " UNION ",
    " JOIN ",
    " ON ",
    " INSERT INTO t ",
    " VALUES ",
    " UPDATE t SET ",
    " DELETE FROM ",
    " CREATE TABLE ",
    " DROP TABLE ",
    " ALTER TABLE ",
    " ADD COLUMN ",
    " INDEX ",
    " PRIMARY KEY ",
    " UNIQUE ",
    " DEFAULT ",
    " AUTO_INCREMENT ",
    " FOR UPDATE ",
    " FOR SHARE ",
    " SET ",
    " @@",
    " @x ",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "%",
    "=",
    "<>",
    "<=",
    ">=",
    "<",
    ">",
    "||",
    "&&",
    "!",
    "~",
    "^",
    "<<",
    ">>",
    "'",
    "\"",
    "`",
    "?",
    "0",
    "-1",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "0.000001",
    "99999999999999999999.99",
    "'2024-02-30 25:61:61'",
    "X'ff00'",
    "0x41",
    "b'101'",
    "_utf8mb4'x'",
    "N'x'",
    "''",
    "'\\''",
    " sbtest1 ",
    " t ",
    " id ",
    " k ",
    " c ",
    " pad ",
    " v ",
    " m ",
    " TINYINT ",
    " DECIMAL(65,30) ",
    " VARCHAR(65535) ",
    " CHAR(255) ",
    " DATETIME(6) ",
    " TIMESTAMP ",
    " BLOB ",
    " TEXT ",
];

fn statement_seeds() -> Vec<(String, Vec<u8>)> {
    let statements = [
        // sysbench oltp_read_write and friends.
        "SELECT c FROM sbtest1 WHERE id=1",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 100",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c",
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c",
        "UPDATE sbtest1 SET k=k+1 WHERE id=2",
        "UPDATE sbtest1 SET c='new' WHERE id=3",
        "DELETE FROM sbtest1 WHERE id=1",
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (10, 5, 'c', 'pad')",
        "SELECT c FROM sbtest1 WHERE id=?",
        // DDL.
        "CREATE TABLE u (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL DEFAULT 'x', KEY (name))",
        "CREATE INDEX k_1 ON sbtest1(k)",
        "ALTER TABLE t ADD COLUMN z INT DEFAULT 7",
        "DROP TABLE IF EXISTS u",
        "CREATE DATABASE d2",
        // Expressions and functions.
        "SELECT 1+2*3-4/5, 7 DIV 2, 7 % 3, -(-1), ~0, 1 << 63, NOT 0, 1 XOR 1",
        "SELECT CONCAT('a', NULL), COALESCE(NULL, 2), IFNULL(NULL, 'x'), LENGTH('abc'), UPPER('q')",
        "SELECT CAST('12abc' AS SIGNED), CAST(-1 AS UNSIGNED), CAST(1.5 AS DECIMAL(5,2))",
        "SELECT CASE WHEN k > 1 THEN 'big' ELSE 'small' END, k IN (1, 2, 3) FROM sbtest1",
        "SELECT 'abc' LIKE 'a%', 'abc' LIKE '_b_', 'a' BETWEEN 'a' AND 'b', NULL IS NULL",
        "SELECT COUNT(*), MIN(k), MAX(c), AVG(k) FROM sbtest1 GROUP BY k HAVING COUNT(*) > 0",
        "SELECT a, b, i, g, d, m, v, x, y, t, s FROM t WHERE v = 'v' ORDER BY i DESC LIMIT 1, 1",
        "INSERT INTO t (i, g, m, t) VALUES (9, -1, 12345678.99, '2000-02-29 00:00:00.5')",
        "UPDATE t SET d = d * 1e300, m = m + 0.01 WHERE i = 3",
        "SELECT * FROM sbtest1 WHERE k = 2 FOR UPDATE",
        "SELECT @@version, @@autocommit, DATABASE(), USER(), CONNECTION_ID()",
        "SET autocommit = 0",
        "SHOW TABLES",
        "SHOW CREATE TABLE t",
        "DESCRIBE sbtest1",
        "SELECT ((((((1))))))",
        "SELECT 1 OR 2 OR 3 OR 4 OR 5 OR 6 OR 7 OR 8",
        "SELECT * FROM t WHERE i = ? AND v LIKE ?",
    ];
    statements
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("stmt-{i:02}"), s.as_bytes().to_vec()))
        .collect()
}

#[test]
fn fuzz_sql_statements() {
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "sql_statements");
    let seeds = statement_seeds();
    let named: Vec<(&str, Vec<u8>)> = seeds.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    write_seeds(&dir, &named);
    let mut s = session();
    let mut opts = Options::new(3000).dictionary(SQL_TOKENS);
    // Statements stay under 8 KiB, so a repeated chunk makes chains of at
    // most a few thousand terms.
    opts.max_len = 8 << 10;
    fuzz_target_with("sql_statements", &dir, opts, move |input: &[u8]| {
        statement_target(&mut s, input)
    });
}
