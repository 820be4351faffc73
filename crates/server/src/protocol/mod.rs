//! The MySQL client/server protocol, written from MySQL's documentation
//! ("Client/Server Protocol"): framing (`packet`), the connection phase
//! (`handshake`), commands (`command`), result sets and OK/EOF/ERR
//! (`resultset`), prepared statements' parameters (`prepared`).
//!
//! Everything here works on byte slices and buffers: decoders are pure
//! functions over `&[u8]` that return an error, never panic, on any input
//! (a fuzzer calls `decode_command`, `decode_execute` and
//! `decode_handshake_response`). The connection loop that uses them and
//! calls the SQL session is `crate::conn`.

pub mod command;
pub mod flags;
pub mod handshake;
pub mod packet;
pub mod prepared;
pub mod resultset;

pub use command::{decode_command, Command};
pub use flags::{caps, status, COLLATION_BINARY, COLLATION_UTF8MB4};
pub use handshake::{decode_change_user, decode_handshake_response, HandshakeResponse};
pub use packet::ProtocolError;
pub use prepared::decode_execute;
