//! The protocol's numbers that several modules share: capability flags,
//! status flags, collations.

/// Capability flags (the ones millrace reads or offers).
pub mod caps {
    pub const LONG_PASSWORD: u32 = 0x1;
    pub const FOUND_ROWS: u32 = 0x2;
    pub const LONG_FLAG: u32 = 0x4;
    pub const CONNECT_WITH_DB: u32 = 0x8;
    pub const NO_SCHEMA: u32 = 0x10;
    pub const IGNORE_SPACE: u32 = 0x100;
    pub const PROTOCOL_41: u32 = 0x200;
    pub const INTERACTIVE: u32 = 0x400;
    pub const SSL: u32 = 0x800;
    pub const TRANSACTIONS: u32 = 0x2000;
    pub const SECURE_CONNECTION: u32 = 0x8000;
    pub const MULTI_STATEMENTS: u32 = 0x1_0000;
    pub const MULTI_RESULTS: u32 = 0x2_0000;
    pub const PS_MULTI_RESULTS: u32 = 0x4_0000;
    pub const PLUGIN_AUTH: u32 = 0x8_0000;
    pub const CONNECT_ATTRS: u32 = 0x10_0000;
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 0x20_0000;
    pub const DEPRECATE_EOF: u32 = 0x100_0000;

    /// What the server offers; a connection uses the intersection with what
    /// the client asks for. Not offered: SSL (not yet), multi-statements,
    /// session tracking, query attributes, LOCAL INFILE.
    pub const SERVER: u32 = LONG_PASSWORD
        | FOUND_ROWS
        | LONG_FLAG
        | CONNECT_WITH_DB
        | NO_SCHEMA
        | IGNORE_SPACE
        | PROTOCOL_41
        | INTERACTIVE
        | TRANSACTIONS
        | SECURE_CONNECTION
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | PLUGIN_AUTH
        | CONNECT_ATTRS
        | PLUGIN_AUTH_LENENC_CLIENT_DATA
        | DEPRECATE_EOF;
}

/// Server status flags of OK and EOF packets.
pub mod status {
    pub const IN_TRANS: u16 = 0x0001;
    pub const AUTOCOMMIT: u16 = 0x0002;
}

/// The collation numbers millrace sends: utf8mb4_general_ci for the
/// handshake and text columns, binary for numbers and blobs.
pub const COLLATION_UTF8MB4: u8 = 45;
pub const COLLATION_BINARY: u8 = 63;
