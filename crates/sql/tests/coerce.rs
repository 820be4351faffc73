//! Coercion, text form and comparison of values.

use std::cmp::Ordering;

use millrace_sql::{compare, ColumnType, DateTime, Value, ValueError};

const TINY: ColumnType = ColumnType::TinyInt { unsigned: false };
const UTINY: ColumnType = ColumnType::TinyInt { unsigned: true };
const INT: ColumnType = ColumnType::Int { unsigned: false };
const BIG: ColumnType = ColumnType::BigInt { unsigned: false };
const UBIG: ColumnType = ColumnType::BigInt { unsigned: true };
const DEC52: ColumnType = ColumnType::Decimal {
    precision: 5,
    scale: 2,
};

fn s(x: &str) -> Value {
    Value::Bytes(x.as_bytes().to_vec())
}

fn code(v: Value, t: ColumnType) -> u16 {
    match v.clone().coerce(&t) {
        Ok(ok) => panic!("{v:?} as {t:?} gave {ok:?}, expected an error"),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e.mysql_code().number()
        }
    }
}

fn ok(v: Value, t: ColumnType) -> Value {
    v.coerce(&t).unwrap()
}

fn dt(year: u16, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Value {
    Value::DateTime(DateTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
        micro: 0,
    })
}

#[test]
fn null_stays_null() {
    for t in [
        TINY,
        ColumnType::Double,
        DEC52,
        ColumnType::Text,
        ColumnType::Timestamp,
    ] {
        assert_eq!(ok(Value::Null, t), Value::Null);
    }
}

#[test]
fn strings_to_integers() {
    assert_eq!(ok(s(" 42 "), INT), Value::Int(42));
    assert_eq!(ok(s("-3"), INT), Value::Int(-3));
    assert_eq!(ok(s("+7"), INT), Value::Int(7));
    assert_eq!(ok(s("1.5"), INT), Value::Int(2));
    assert_eq!(ok(s("-1.5"), INT), Value::Int(-2));
    assert_eq!(ok(s("1e3"), INT), Value::Int(1000));
    assert_eq!(ok(s("007"), UTINY), Value::UInt(7));
    assert_eq!(ok(s("18446744073709551615"), UBIG), Value::UInt(u64::MAX));
    for bad in ["", "abc", "12abc", "1e", "--1", "0x10", "inf", "NaN", "1 2"] {
        assert_eq!(code(s(bad), INT), 1366, "{bad:?}");
    }
}

#[test]
fn integer_ranges() {
    assert_eq!(ok(Value::Int(127), TINY), Value::Int(127));
    assert_eq!(ok(Value::Int(-128), TINY), Value::Int(-128));
    assert_eq!(code(Value::Int(128), TINY), 1264);
    assert_eq!(code(Value::Int(-129), TINY), 1264);
    assert_eq!(code(Value::Int(-1), UTINY), 1264);
    assert_eq!(ok(Value::Int(255), UTINY), Value::UInt(255));
    assert_eq!(ok(Value::UInt(5), TINY), Value::Int(5));
    assert_eq!(code(Value::UInt(u64::MAX), BIG), 1264);
    assert_eq!(code(s("9223372036854775808"), BIG), 1264);
    assert_eq!(code(s("18446744073709551616"), UBIG), 1264);
    assert_eq!(code(s("1e400"), BIG), 1264);
    assert_eq!(ok(s("1e-400"), BIG), Value::Int(0));
    assert_eq!(code(Value::Double(3e19), BIG), 1264);
    assert_eq!(ok(Value::Double(2.5), INT), Value::Int(3));
    assert_eq!(ok(Value::Double(-0.4), INT), Value::Int(0));
    assert_eq!(code(Value::Double(f64::NAN), INT), 1366);
    assert_eq!(code(Value::Double(f64::INFINITY), INT), 1264);
    assert_eq!(
        ok(
            Value::Decimal {
                unscaled: 12_345,
                scale: 2
            },
            INT
        ),
        Value::Int(123)
    );
    assert_eq!(
        ok(
            Value::Decimal {
                unscaled: -12_350,
                scale: 2
            },
            INT
        ),
        Value::Int(-124)
    );
    assert_eq!(ok(dt(2024, 1, 2, 3, 4, 5), BIG), Value::Int(20240102030405));
}

#[test]
fn numbers_to_strings() {
    assert_eq!(ok(Value::Int(-5), ColumnType::VarChar(3)), s("-5"));
    assert_eq!(
        ok(Value::UInt(u64::MAX), ColumnType::Text),
        s("18446744073709551615")
    );
    assert_eq!(ok(Value::Double(1.5), ColumnType::Text), s("1.5"));
    assert_eq!(
        ok(
            Value::Decimal {
                unscaled: -5,
                scale: 2
            },
            ColumnType::Char(10)
        ),
        s("-0.05")
    );
    assert_eq!(
        ok(dt(2024, 1, 2, 3, 4, 5), ColumnType::VarChar(19)),
        s("2024-01-02 03:04:05")
    );
    assert_eq!(code(Value::Int(12345), ColumnType::VarChar(3)), 1406);
}

#[test]
fn string_lengths_count_characters() {
    assert_eq!(ok(s("héé"), ColumnType::VarChar(3)), s("héé"));
    assert_eq!(code(s("abcd"), ColumnType::VarChar(3)), 1406);
    assert_eq!(code(s("éééé"), ColumnType::Char(3)), 1406);
    // Excess trailing spaces are cut off, as MySQL does.
    assert_eq!(ok(s("abc   "), ColumnType::VarChar(3)), s("abc"));
    assert_eq!(ok(s("ab "), ColumnType::VarChar(3)), s("ab "));
    assert_eq!(code(s("abc  x"), ColumnType::VarChar(3)), 1406);
    // CHAR drops trailing spaces.
    assert_eq!(ok(s("ab  "), ColumnType::Char(5)), s("ab"));
    assert_eq!(ok(s(""), ColumnType::Char(0)), s(""));
    assert_eq!(code(s("a"), ColumnType::Char(0)), 1406);
    // Text types need UTF-8; BLOB takes anything.
    assert_eq!(code(Value::Bytes(vec![0xFF]), ColumnType::VarChar(9)), 1366);
    assert_eq!(code(Value::Bytes(vec![0xC3]), ColumnType::Text), 1366);
    assert_eq!(
        ok(Value::Bytes(vec![0xFF, 0]), ColumnType::Blob),
        Value::Bytes(vec![0xFF, 0])
    );
    assert_eq!(
        code(Value::Bytes(vec![b'a'; 65_536]), ColumnType::Text),
        1406
    );
    assert_eq!(code(Value::Bytes(vec![0; 65_536]), ColumnType::Blob), 1406);
    assert!(Value::Bytes(vec![0; 65_535])
        .coerce(&ColumnType::Blob)
        .is_ok());
}

#[test]
fn strings_to_datetimes() {
    let t = ColumnType::DateTime;
    assert_eq!(ok(s("2024-02-29 12:34:56"), t), dt(2024, 2, 29, 12, 34, 56));
    assert_eq!(ok(s(" 2024-1-2 3:4:5 "), t), dt(2024, 1, 2, 3, 4, 5));
    assert_eq!(ok(s("2024-01-02T03:04:05"), t), dt(2024, 1, 2, 3, 4, 5));
    assert_eq!(ok(s("2024-01-02"), t), dt(2024, 1, 2, 0, 0, 0));
    assert_eq!(
        ok(s("2024-01-02 03:04:05.499999"), t),
        dt(2024, 1, 2, 3, 4, 5)
    );
    // Fractional seconds round into the next second, day and year.
    assert_eq!(ok(s("2023-12-31 23:59:59.5"), t), dt(2024, 1, 1, 0, 0, 0));
    assert_eq!(ok(s("2024-02-28 23:59:59.9"), t), dt(2024, 2, 29, 0, 0, 0));
    assert_eq!(ok(Value::Int(20240102), t), dt(2024, 1, 2, 0, 0, 0));
    assert_eq!(ok(Value::Int(20240102030405), t), dt(2024, 1, 2, 3, 4, 5));
    for bad in [
        "2023-02-29",
        "2024-13-01",
        "2024-04-31",
        "2024-01-01 24:00:00",
        "2024-01-01 00:60:00",
        "0000-00-00 00:00:00",
        "2024-01-01 00:00",
        "2024-01-01 00:00:00.",
        "2024-01-01x",
        "24-01-01",
        "hello",
        "",
        "9999-12-31 23:59:59.7",
    ] {
        assert_eq!(code(s(bad), t), 1292, "{bad:?}");
    }
    assert_eq!(code(Value::Int(2024), t), 1292);
    assert_eq!(code(Value::Int(20241301), t), 1292);
    assert_eq!(code(Value::Double(1.0), t), 1292);
    let mut bad = dt(2024, 1, 1, 0, 0, 0);
    if let Value::DateTime(ref mut d) = bad {
        d.day = 32;
    }
    assert_eq!(code(bad, t), 1292);
}

#[test]
fn timestamp_range() {
    let t = ColumnType::Timestamp;
    assert_eq!(ok(s("1970-01-01 00:00:01"), t), dt(1970, 1, 1, 0, 0, 1));
    assert_eq!(ok(s("2038-01-19 03:14:07"), t), dt(2038, 1, 19, 3, 14, 7));
    assert_eq!(code(s("1970-01-01 00:00:00"), t), 1292);
    assert_eq!(code(s("2038-01-19 03:14:08"), t), 1292);
    assert_eq!(code(s("1969-12-31 23:59:59"), t), 1292);
}

#[test]
fn doubles() {
    let t = ColumnType::Double;
    assert_eq!(ok(s("1.5e3"), t), Value::Double(1500.0));
    assert_eq!(ok(Value::Int(-3), t), Value::Double(-3.0));
    assert_eq!(
        ok(
            Value::Decimal {
                unscaled: 1,
                scale: 1
            },
            t
        ),
        Value::Double(0.1)
    );
    assert_eq!(code(Value::Double(f64::NAN), t), 1366);
    assert_eq!(code(Value::Double(f64::NEG_INFINITY), t), 1264);
    assert_eq!(code(s("1e400"), t), 1264);
    assert_eq!(code(s("abc"), t), 1366);
    for z in [Value::Double(-0.0), s("-0"), s("-0.0e5")] {
        let Value::Double(f) = ok(z, t) else { panic!() };
        assert!(f == 0.0 && f.is_sign_positive());
    }
}

#[test]
fn decimals() {
    let d = |u| Value::Decimal {
        unscaled: u,
        scale: 2,
    };
    assert_eq!(ok(s("123.456"), DEC52), d(12346));
    assert_eq!(ok(s("-123.455"), DEC52), d(-12346));
    assert_eq!(ok(s("999.994"), DEC52), d(99999));
    assert_eq!(code(s("999.995"), DEC52), 1264);
    assert_eq!(code(s("1234.5"), DEC52), 1264);
    assert_eq!(ok(Value::Int(999), DEC52), d(99900));
    assert_eq!(code(Value::Int(1000), DEC52), 1264);
    assert_eq!(ok(Value::Double(0.1), DEC52), d(10));
    assert_eq!(ok(Value::Double(1e-300), DEC52), d(0));
    assert_eq!(code(Value::Double(1e300), DEC52), 1264);
    assert_eq!(
        ok(
            Value::Decimal {
                unscaled: 5,
                scale: 3
            },
            DEC52
        ),
        d(1)
    );
    assert_eq!(code(s("x"), DEC52), 1366);
    let wide = ColumnType::Decimal {
        precision: 38,
        scale: 0,
    };
    let max = 10i128.pow(38) - 1;
    assert_eq!(
        ok(s(&max.to_string()), wide),
        Value::Decimal {
            unscaled: max,
            scale: 0
        }
    );
    assert_eq!(code(s(&(max + 1).to_string()), wide), 1264);
    // Unsupported column types.
    let bad = |precision, scale| {
        Value::Int(1)
            .coerce(&ColumnType::Decimal { precision, scale })
            .unwrap_err()
            .mysql_code()
    };
    assert_eq!(bad(38, 31), 1425);
    assert_eq!(bad(39, 0), 1426);
    assert_eq!(bad(0, 0), 1426);
    assert_eq!(bad(5, 6), 1427);
    assert!(matches!(
        Value::Int(1).coerce(&ColumnType::Decimal {
            precision: 39,
            scale: 0
        }),
        Err(ValueError::BadColumnType { .. })
    ));
}

#[test]
fn text_form() {
    let t = |v: Value| v.to_text().map(|b| String::from_utf8(b).unwrap());
    assert_eq!(t(Value::Null), None);
    assert_eq!(t(Value::Int(-42)).unwrap(), "-42");
    assert_eq!(t(Value::UInt(u64::MAX)).unwrap(), "18446744073709551615");
    assert_eq!(t(Value::Double(1.0)).unwrap(), "1");
    assert_eq!(t(Value::Double(0.1)).unwrap(), "0.1");
    assert_eq!(t(Value::Double(-1.25)).unwrap(), "-1.25");
    assert_eq!(t(Value::Double(1e20)).unwrap(), "1e20");
    assert_eq!(t(Value::Double(1e-7)).unwrap(), "1e-7");
    assert_eq!(t(Value::Double(0.0001)).unwrap(), "0.0001");
    assert_eq!(
        t(Value::Decimal {
            unscaled: 1050,
            scale: 2
        })
        .unwrap(),
        "10.50"
    );
    assert_eq!(
        t(Value::Decimal {
            unscaled: -1,
            scale: 3
        })
        .unwrap(),
        "-0.001"
    );
    assert_eq!(
        t(Value::Decimal {
            unscaled: 7,
            scale: 0
        })
        .unwrap(),
        "7"
    );
    assert_eq!(t(s("héllo")).unwrap(), "héllo");
    assert_eq!(t(dt(2024, 1, 2, 3, 4, 5)).unwrap(), "2024-01-02 03:04:05");
    let mut with_micro = dt(2024, 1, 2, 3, 4, 5);
    if let Value::DateTime(ref mut d) = with_micro {
        d.micro = 120;
    }
    assert_eq!(t(with_micro).unwrap(), "2024-01-02 03:04:05.000120");
}

#[test]
fn compare_orders_across_number_kinds() {
    use Ordering::*;
    let d = |u, s| Value::Decimal {
        unscaled: u,
        scale: s,
    };
    let cases = [
        (Value::Null, Value::Int(i64::MIN), Less),
        (Value::Null, Value::Null, Equal),
        (Value::Int(-1), Value::UInt(0), Less),
        (Value::Int(i64::MAX), Value::UInt(u64::MAX), Less),
        (
            Value::UInt(u64::MAX),
            Value::Double(1.8446744073709552e19),
            Less,
        ),
        (
            Value::Int((1 << 53) + 1),
            Value::Double(9007199254740992.0),
            Greater,
        ),
        (Value::Int(3), Value::Double(2.5), Greater),
        (Value::Int(-3), Value::Double(-2.5), Less),
        (Value::Double(-0.0), Value::Int(0), Equal),
        (Value::Double(0.1), d(1, 1), Greater), // 0.1 as a double is above 1/10
        (Value::Double(0.5), d(5, 1), Equal),
        (Value::Double(-0.5), d(-50, 2), Equal),
        (Value::Double(-0.1), d(-1, 1), Less),
        (Value::Double(1e30), d(10i128.pow(37), 0), Less),
        (Value::Double(1e300), d(i128::MAX, 0), Greater),
        (d(150, 2), d(15, 1), Equal),
        (d(151, 2), d(15, 1), Greater),
        (d(i128::MAX, 0), d(1, 30), Greater),
        (d(-i128::MAX, 0), d(1, 30), Less),
        (Value::Int(2), d(199, 2), Greater),
        (Value::Int(-2), d(-199, 2), Less),
        (
            Value::Double(f64::NAN),
            Value::Double(f64::INFINITY),
            Greater,
        ),
        (Value::Int(5), s(""), Less),
        (s("B"), s("a"), Less),
        (s("a"), s("a "), Less),
        (s("a "), s("ab"), Less),
        (s("a\u{0}"), s("a"), Greater),
        (
            dt(2024, 1, 1, 0, 0, 0),
            dt(2023, 12, 31, 23, 59, 59),
            Greater,
        ),
        (s("zzz"), dt(1, 1, 1, 0, 0, 0), Less),
    ];
    for (a, b, want) in cases {
        assert_eq!(compare(&a, &b), want, "{a:?} vs {b:?}");
        assert_eq!(compare(&b, &a), want.reverse(), "{b:?} vs {a:?}");
    }
}
