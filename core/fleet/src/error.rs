//! The crate's error: what was wrong, named (an object id, an array name, an HTTP status).

use std::fmt;

/// Everything that can go wrong decoding, checking or exchanging Fleet API data.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An object's bytes are not `"<Class> <children> <len>\0<body>"`, or its body does not
    /// parse as that class.
    Malformed { object: String, why: String },
    /// An object's bytes do not hash to the id it was fetched by.
    IdMismatch { expected: String, actual: String },
    /// An object refers to a child that was not supplied.
    MissingObject(String),
    /// An array's dtype, shape or data is not one the client can use.
    BadArray { name: String, why: String },
    /// A record the message needs is missing or has the wrong type or value.
    BadContent(String),
    /// A key could not be read, parsed or made.
    Key(String),
    /// The SuperLink answered with an HTTP status other than 200 (with its body's text).
    Status {
        rpc: &'static str,
        status: u16,
        body: String,
    },
    /// The SuperLink could not be reached (after retries, or in a call that does not retry).
    Transport { rpc: &'static str, why: String },
    /// The run has finished (get-run answers 403 with code 2007).
    RunFinished,
    /// A local file could not be read or written.
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Malformed { object, why } => write!(f, "malformed object {object}: {why}"),
            Error::IdMismatch { expected, actual } => {
                write!(f, "object {expected} hashes to {actual}")
            }
            Error::MissingObject(id) => write!(f, "object {id} is missing"),
            Error::BadArray { name, why } => write!(f, "array {name}: {why}"),
            Error::BadContent(why) => write!(f, "message content: {why}"),
            Error::Key(why) => write!(f, "node key: {why}"),
            Error::Status { rpc, status, body } => {
                write!(f, "{rpc}: HTTP {status}: {}", body.trim())
            }
            Error::Transport { rpc, why } => write!(f, "{rpc}: {why}"),
            Error::RunFinished => write!(f, "the run has finished"),
            Error::Io(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for Error {}

pub(crate) fn malformed(object: &str, why: impl Into<String>) -> Error {
    Error::Malformed {
        object: object.to_string(),
        why: why.into(),
    }
}
