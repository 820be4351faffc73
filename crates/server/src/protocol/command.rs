//! The command phase: one client message is one command, its first byte
//! the command number. `decode_command` turns a payload into a `Command`,
//! checking every length; the parameters of COM_STMT_EXECUTE depend on the
//! statement, so they stay raw here and `prepared::decode_execute` reads
//! them.

use super::handshake::{decode_change_user, ChangeUser};
use super::packet::{ProtocolError, Reader};

pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_STATISTICS: u8 = 0x09;
pub const COM_PROCESS_KILL: u8 = 0x0c;
pub const COM_PING: u8 = 0x0e;
pub const COM_CHANGE_USER: u8 = 0x11;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_STMT_RESET: u8 = 0x1a;
pub const COM_STMT_FETCH: u8 = 0x1c;
pub const COM_RESET_CONNECTION: u8 = 0x1f;

/// One decoded command; byte fields borrow the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    Quit,
    InitDb(&'a [u8]),
    Query(&'a [u8]),
    Statistics,
    ProcessKill(u32),
    Ping,
    ChangeUser(ChangeUser<'a>),
    StmtPrepare(&'a [u8]),
    StmtExecute(Execute<'a>),
    StmtSendLongData {
        stmt: u32,
        param: u16,
        data: &'a [u8],
    },
    StmtClose(u32),
    StmtReset(u32),
    StmtFetch {
        stmt: u32,
        rows: u32,
    },
    ResetConnection,
    /// A command millrace does not implement (COM_FIELD_LIST, COM_DEBUG,
    /// COM_SET_OPTION, ...), or no command number at all.
    Unknown(u8),
}

/// COM_STMT_EXECUTE up to its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute<'a> {
    pub stmt: u32,
    /// Cursor type flags (CURSOR_TYPE_READ_ONLY = 1, ...).
    pub flags: u8,
    /// The null bitmap, the new-params-bound flag, types and values; read
    /// with `prepared::decode_execute` once the parameter count is known.
    pub params: &'a [u8],
}

/// Decodes one command payload. `client_caps` are the connection's
/// negotiated capability flags (COM_CHANGE_USER's layout depends on them).
pub fn decode_command(payload: &[u8], client_caps: u32) -> Result<Command<'_>, ProtocolError> {
    let mut r = Reader::new(payload);
    let Ok(cmd) = r.u8("command") else {
        return Ok(Command::Unknown(0));
    };
    Ok(match cmd {
        COM_QUIT => Command::Quit,
        COM_INIT_DB => Command::InitDb(r.rest()),
        COM_QUERY => Command::Query(r.rest()),
        COM_STATISTICS => Command::Statistics,
        COM_PROCESS_KILL => Command::ProcessKill(r.u32("connection id")?),
        COM_PING => Command::Ping,
        COM_CHANGE_USER => Command::ChangeUser(decode_change_user(r.rest(), client_caps)?),
        COM_STMT_PREPARE => Command::StmtPrepare(r.rest()),
        COM_STMT_EXECUTE => {
            let stmt = r.u32("statement id")?;
            let flags = r.u8("execute flags")?;
            let _iterations = r.u32("iteration count")?;
            Command::StmtExecute(Execute {
                stmt,
                flags,
                params: r.rest(),
            })
        }
        COM_STMT_SEND_LONG_DATA => Command::StmtSendLongData {
            stmt: r.u32("statement id")?,
            param: r.u16("parameter number")?,
            data: r.rest(),
        },
        COM_STMT_CLOSE => Command::StmtClose(r.u32("statement id")?),
        COM_STMT_RESET => Command::StmtReset(r.u32("statement id")?),
        COM_STMT_FETCH => Command::StmtFetch {
            stmt: r.u32("statement id")?,
            rows: r.u32("row count")?,
        },
        COM_RESET_CONNECTION => Command::ResetConnection,
        other => Command::Unknown(other),
    })
}

#[cfg(test)]
mod tests {
    use super::super::flags::caps;
    use super::super::prepared::{decode_execute, ParamTypes};
    use super::*;

    #[test]
    fn commands_decode_and_short_ones_are_errors() {
        assert_eq!(
            decode_command(b"\x03SELECT 1", 0),
            Ok(Command::Query(b"SELECT 1"))
        );
        assert_eq!(decode_command(b"\x01", 0), Ok(Command::Quit));
        assert_eq!(
            decode_command(&[0x19, 7, 0, 0, 0], 0),
            Ok(Command::StmtClose(7))
        );
        assert_eq!(
            decode_command(&[0x0c, 9, 0, 0, 0], 0),
            Ok(Command::ProcessKill(9))
        );
        assert!(decode_command(&[0x19, 7, 0], 0).is_err());
        assert!(decode_command(&[0x17, 1, 0, 0, 0, 0, 1, 0], 0).is_err());
        assert!(decode_command(&[0x18, 1, 0, 0, 0, 1], 0).is_err());
        assert_eq!(decode_command(b"", 0), Ok(Command::Unknown(0)));
        assert_eq!(decode_command(b"\x04t\0", 0), Ok(Command::Unknown(4)));
    }

    /// A small deterministic generator (xorshift), so failures replay.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn seeds() -> Vec<Vec<u8>> {
        let mut execute = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
        execute.extend_from_slice(&[0x08, 0, 0xfd, 0, 0x0c, 0, 0x0b, 0, 0x05, 0]);
        execute.extend_from_slice(&5i64.to_le_bytes());
        execute.extend_from_slice(b"\x03abc");
        execute.extend_from_slice(&[7, 0xe8, 7, 1, 2, 3, 4, 5]);
        execute.extend_from_slice(&[8, 1, 1, 0, 0, 0, 2, 3, 4]);
        execute.extend_from_slice(&1.5f64.to_le_bytes());
        let mut change = vec![0x11];
        change.extend_from_slice(b"root\0\x14");
        change.extend_from_slice(&[9; 20]);
        change.extend_from_slice(b"db\0\x2d\0mysql_native_password\0\x05\x01a\x02bc");
        vec![
            b"\x03SELECT 1".to_vec(),
            execute,
            change,
            vec![0x18, 1, 0, 0, 0, 0, 0, b'x'],
            vec![0x1c, 1, 0, 0, 0, 1, 0, 0, 0],
        ]
    }

    /// Random and mutated payloads through every decoder: errors, never a
    /// panic. (The fuzz harness calls the same functions for longer.)
    #[test]
    fn random_and_mutated_payloads_never_panic() {
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let all = caps::SERVER;
        let mut types = ParamTypes::default();
        for round in 0..20_000 {
            let payload: Vec<u8> = if round % 4 == 0 {
                let n = rng.below(64);
                (0..n).map(|_| rng.next() as u8).collect()
            } else {
                let s = seeds();
                let mut p = s[rng.below(s.len())].clone();
                for _ in 0..1 + rng.below(4) {
                    match rng.below(4) {
                        0 if !p.is_empty() => {
                            let i = rng.below(p.len());
                            p[i] = rng.next() as u8;
                        }
                        1 if !p.is_empty() => {
                            let n = rng.below(p.len());
                            p.truncate(n);
                        }
                        2 => {
                            let i = rng.below(p.len() + 1);
                            p.insert(i, rng.next() as u8);
                        }
                        _ if !p.is_empty() => {
                            let i = rng.below(p.len());
                            p[i] = [0, 0xfb, 0xfc, 0xfd, 0xfe, 0xff][rng.below(6)];
                        }
                        _ => {}
                    }
                }
                p
            };
            let caps = if round % 2 == 0 {
                all
            } else {
                rng.next() as u32
            };
            if let Ok(Command::StmtExecute(e)) = decode_command(&payload, caps) {
                let count = rng.below(6) as u16;
                let long = vec![None; usize::from(count)];
                let _ = decode_execute(e.params, count, &mut types, &long);
            }
            let _ = super::super::handshake::decode_handshake_response(&payload);
        }
    }
}
