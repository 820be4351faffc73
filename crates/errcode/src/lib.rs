//! millrace-errcode: the MySQL error codes millrace reports, by name.
//!
//! Owns: one table of every MySQL server error number millrace uses, with
//! MySQL's symbolic name (`ER_DUP_ENTRY`) and the SQLSTATE MySQL 8.0 sends
//! with it. Code anywhere in millrace says `ER_NO_SUCH_TABLE`, never `1146`.
//! Must not know about: anything of millrace; it is a leaf every layer that
//! reports errors to a MySQL client (trx, sql, server) may depend on.
//!
//! The names and SQLSTATEs are MySQL 8.0's (its `mysqld_error.h` and the
//! "Server Error Message Reference"); a code MySQL gives no SQLSTATE has
//! `HY000`. A number not in the table still has a SQLSTATE: `HY000`.

use std::fmt;

/// A MySQL server error number. Construct it only through the named
/// constants below (or [`ErrorCode::from_number`] for numbers that come
/// from outside, e.g. a test's expectation read from a file).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(u16);

impl ErrorCode {
    /// The number sent in the ERR packet.
    pub const fn number(self) -> u16 {
        self.0
    }

    /// The code for a number, whether or not it is in the table.
    pub const fn from_number(number: u16) -> ErrorCode {
        ErrorCode(number)
    }

    /// MySQL's symbolic name, or `"ER_UNKNOWN"` for a number not in the table.
    pub fn name(self) -> &'static str {
        lookup(self.0).map_or("ER_UNKNOWN", |e| e.1)
    }

    /// The five-character SQLSTATE MySQL sends with this code.
    pub fn sqlstate(self) -> &'static str {
        lookup(self.0).map_or("HY000", |e| e.2)
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<ErrorCode> for u16 {
    fn from(c: ErrorCode) -> u16 {
        c.0
    }
}

impl PartialEq<u16> for ErrorCode {
    fn eq(&self, other: &u16) -> bool {
        self.0 == *other
    }
}

fn lookup(number: u16) -> Option<&'static (u16, &'static str, &'static str)> {
    TABLE
        .binary_search_by_key(&number, |e| e.0)
        .ok()
        .map(|i| &TABLE[i])
}

macro_rules! codes {
    ($($name:ident = $number:literal, $state:literal;)*) => {
        $(pub const $name: ErrorCode = ErrorCode($number);)*
        /// (number, name, SQLSTATE), sorted by number.
        static TABLE: &[(u16, &str, &str)] = &[$(($number, stringify!($name), $state)),*];
    };
}

codes! {
    ER_DB_CREATE_EXISTS = 1007, "HY000";
    ER_DB_DROP_EXISTS = 1008, "HY000";
    ER_GET_ERRNO = 1030, "HY000";
    ER_OUT_OF_SORTMEMORY = 1038, "HY001";
    ER_CON_COUNT_ERROR = 1040, "08004";
    ER_HANDSHAKE_ERROR = 1043, "08S01";
    ER_DBACCESS_DENIED_ERROR = 1044, "42000";
    ER_ACCESS_DENIED_ERROR = 1045, "28000";
    ER_NO_DB_ERROR = 1046, "3D000";
    ER_UNKNOWN_COM_ERROR = 1047, "08S01";
    ER_BAD_NULL_ERROR = 1048, "23000";
    ER_BAD_DB_ERROR = 1049, "42000";
    ER_TABLE_EXISTS_ERROR = 1050, "42S01";
    ER_BAD_TABLE_ERROR = 1051, "42S02";
    ER_NON_UNIQ_ERROR = 1052, "23000";
    ER_SERVER_SHUTDOWN = 1053, "08S01";
    ER_BAD_FIELD_ERROR = 1054, "42S22";
    ER_WRONG_FIELD_WITH_GROUP = 1055, "42000";
    ER_WRONG_VALUE_COUNT = 1058, "21S01";
    ER_TOO_LONG_IDENT = 1059, "42000";
    ER_DUP_FIELDNAME = 1060, "42S21";
    ER_DUP_KEYNAME = 1061, "42000";
    ER_DUP_ENTRY = 1062, "23000";
    ER_WRONG_FIELD_SPEC = 1063, "42000";
    ER_PARSE_ERROR = 1064, "42000";
    ER_EMPTY_QUERY = 1065, "42000";
    ER_NONUNIQ_TABLE = 1066, "42000";
    ER_INVALID_DEFAULT = 1067, "42000";
    ER_MULTIPLE_PRI_KEY = 1068, "42000";
    ER_TOO_MANY_KEYS = 1069, "42000";
    ER_TOO_MANY_KEY_PARTS = 1070, "42000";
    ER_TOO_LONG_KEY = 1071, "42000";
    ER_KEY_COLUMN_DOES_NOT_EXITS = 1072, "42000";
    ER_TOO_BIG_FIELDLENGTH = 1074, "42000";
    ER_WRONG_AUTO_KEY = 1075, "42000";
    ER_NO_SUCH_THREAD = 1094, "HY000";
    ER_WRONG_DB_NAME = 1102, "42000";
    ER_WRONG_TABLE_NAME = 1103, "42000";
    ER_FIELD_SPECIFIED_TWICE = 1110, "42000";
    ER_INVALID_GROUP_FUNC_USE = 1111, "HY000";
    ER_TABLE_MUST_HAVE_COLUMNS = 1113, "42000";
    ER_RECORD_FILE_FULL = 1114, "HY000";
    ER_TOO_BIG_ROWSIZE = 1118, "42000";
    ER_WRONG_VALUE_COUNT_ON_ROW = 1136, "21S01";
    ER_MIX_OF_GROUP_FUNC_AND_FIELDS = 1140, "42000";
    ER_NO_SUCH_TABLE = 1146, "42S02";
    ER_SYNTAX_ERROR = 1149, "42000";
    ER_NET_PACKET_TOO_LARGE = 1153, "08S01";
    ER_NET_READ_ERROR = 1158, "08S01";
    ER_NET_READ_INTERRUPTED = 1159, "08S01";
    ER_NET_ERROR_ON_WRITE = 1160, "08S01";
    ER_NET_WRITE_INTERRUPTED = 1161, "08S01";
    ER_UNKNOWN_SYSTEM_VARIABLE = 1193, "HY000";
    ER_LOCK_WAIT_TIMEOUT = 1205, "HY000";
    ER_WRONG_ARGUMENTS = 1210, "HY000";
    ER_LOCK_DEADLOCK = 1213, "40001";
    ER_SPECIFIC_ACCESS_DENIED_ERROR = 1227, "42000";
    ER_GLOBAL_VARIABLE = 1229, "HY000";
    ER_WRONG_VALUE_FOR_VAR = 1231, "42000";
    ER_WRONG_TYPE_FOR_VAR = 1232, "42000";
    ER_WRONG_USAGE = 1234, "HY000";
    ER_NOT_SUPPORTED_YET = 1235, "42000";
    ER_INCORRECT_GLOBAL_LOCAL_VAR = 1238, "HY000";
    ER_SUBQUERY_NO_1_ROW = 1242, "21000";
    ER_UNKNOWN_STMT_HANDLER = 1243, "HY000";
    ER_WARN_DATA_OUT_OF_RANGE = 1264, "22003";
    WARN_DATA_TRUNCATED = 1265, "01000";
    ER_TRUNCATED_WRONG_VALUE = 1292, "22007";
    ER_UNSUPPORTED_PS = 1295, "HY000";
    ER_SP_DOES_NOT_EXIST = 1305, "42000";
    ER_QUERY_INTERRUPTED = 1317, "70100";
    ER_NO_DEFAULT_FOR_FIELD = 1364, "HY000";
    ER_TRUNCATED_WRONG_VALUE_FOR_FIELD = 1366, "HY000";
    ER_PS_MANY_PARAM = 1390, "HY000";
    ER_DATA_TOO_LONG = 1406, "22001";
    ER_TABLE_DEF_CHANGED = 1412, "HY000";
    ER_STMT_HAS_NO_OPEN_CURSOR = 1421, "HY000";
    ER_TOO_BIG_SCALE = 1425, "42000";
    ER_TOO_BIG_PRECISION = 1426, "42000";
    ER_M_BIGGER_THAN_D = 1427, "42000";
    ER_STACK_OVERRUN_NEED_MORE = 1436, "HY000";
    ER_MAX_PREPARED_STMT_COUNT_REACHED = 1461, "42000";
    ER_AUTOINC_READ_FAILED = 1467, "HY000";
    ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT = 1582, "42000";
    ER_NEED_REPREPARE = 1615, "HY000";
    ER_TOO_MANY_CONCURRENT_TRXS = 1637, "HY000";
    ER_DATA_OUT_OF_RANGE = 1690, "22003";
    ER_ACCESS_DENIED_NO_PASSWORD_ERROR = 1698, "28000";
    ER_MALFORMED_PACKET = 1835, "HY000";
    ER_TABLE_CORRUPT = 1877, "HY000";
    ER_QUERY_TIMEOUT = 3024, "HY000";
    ER_SECURE_TRANSPORT_REQUIRED = 3159, "HY000";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique_so_lookups_find_every_code() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
        for &(number, name, state) in TABLE {
            let code = ErrorCode::from_number(number);
            assert_eq!(code.name(), name);
            assert_eq!(code.sqlstate(), state);
            assert_eq!(state.len(), 5, "{name}");
        }
    }

    #[test]
    fn names_and_states_match_mysql() {
        assert_eq!(ER_DUP_ENTRY.number(), 1062);
        assert_eq!(ER_DUP_ENTRY.sqlstate(), "23000");
        assert_eq!(ER_NO_SUCH_TABLE.sqlstate(), "42S02");
        assert_eq!(ER_LOCK_DEADLOCK.sqlstate(), "40001");
        assert_eq!(ER_BAD_FIELD_ERROR.name(), "ER_BAD_FIELD_ERROR");
        assert_eq!(format!("{ER_PARSE_ERROR:?}"), "ER_PARSE_ERROR(1064)");
    }

    #[test]
    fn a_number_outside_the_table_is_hy000() {
        let c = ErrorCode::from_number(9999);
        assert_eq!(c.sqlstate(), "HY000");
        assert_eq!(c.name(), "ER_UNKNOWN");
    }
}
