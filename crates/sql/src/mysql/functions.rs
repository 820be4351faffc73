//! Session functions: USER(), DATABASE(), CONNECTION_ID(), VERSION(),
//! LAST_INSERT_ID(), NOW() and their synonyms, whose values come from the
//! session (binding makes them literals; the plan is then not cached).

use super::variables::SERVER_VERSION;
use crate::types::{DateTime, Value};

/// What the session functions read of the session.
pub struct Caller<'a> {
    pub database: Option<&'a str>,
    pub user: &'a str,
    /// The client's host as MySQL names it in `USER()`.
    pub host: &'a str,
    pub connection_id: u32,
    pub last_insert_id: u64,
}

/// The value of session function `name` (called without arguments), if it
/// is one.
pub fn session_function(s: &Caller<'_>, name: &str) -> Option<Value> {
    let t = |s: String| Some(Value::Bytes(s.into_bytes()));
    match name {
        "database" | "schema" => Some(
            s.database
                .map_or(Value::Null, |d| Value::Bytes(d.as_bytes().to_vec())),
        ),
        "user" | "session_user" | "system_user" => t(format!("{}@{}", s.user, s.host)),
        "current_user" => t(format!("{}@%", s.user)),
        "connection_id" => Some(Value::Int(i64::from(s.connection_id))),
        "version" => t(SERVER_VERSION.into()),
        "last_insert_id" => Some(Value::UInt(s.last_insert_id)),
        "now" | "current_timestamp" | "sysdate" | "localtime" | "localtimestamp" => Some(now()),
        _ => None,
    }
}

/// The current UTC time as a DATETIME.
fn now() -> Value {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Days since the epoch to a civil date (Howard Hinnant's algorithm).
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
    Value::DateTime(DateTime {
        year,
        month,
        day,
        hour: (rem / 3600) as u8,
        minute: (rem / 60 % 60) as u8,
        second: (rem % 60) as u8,
        micro: 0,
    })
}
