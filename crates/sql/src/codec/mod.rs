//! Byte formats of stored data: the memcomparable key encoding (`keycode`),
//! the row format (`row`) and long values stored out of line in a table's
//! toast table (`toast`: chunk records, written and read in a transaction).
//! Decoders treat their input as hostile: truncated or malformed bytes are a
//! `CodecError` or a `SqlError`, never a panic.

pub mod keycode;
pub mod row;
pub(crate) mod toast;

pub use keycode::{decode_key, decode_key_prefix, encode_key, try_encode_key};
pub use row::{
    decode_column, decode_row, decode_row_external, encode_row, encode_row_external, ExternalRef,
    ExternalRefs,
};
