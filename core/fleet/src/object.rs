//! Content-addressed objects (Flower's `InflatableObject`).
//!
//! - An object's bytes are `"<Class> <child ids, comma-separated> <body length>\0<body>"`.
//! - Its id is the SHA-256 hex of those bytes; a pulled object is checked against its id.
//! - Child ids are listed once each, in the order the body first refers to them.

use crate::error::{malformed, Error};
use sha2::{Digest, Sha256};

/// One object: its class name (`Message`, `RecordDict`, `ArrayRecord`, `Array`,
/// `ArrayChunk`, `ConfigRecord`, `MetricRecord`), its children's ids and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub class: String,
    pub children: Vec<String>,
    pub body: Vec<u8>,
}

/// The SHA-256 hex of an object's bytes: its id.
pub fn object_id(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
    }
    hex
}

/// Whether `id` looks like an object id (64 lowercase hex digits).
pub fn is_object_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Object {
    pub fn new(class: &str, children: Vec<String>, body: Vec<u8>) -> Object {
        Object {
            class: class.to_string(),
            children,
            body,
        }
    }

    /// The object's bytes, as they travel and as they are hashed.
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = format!("{} {} {}", self.class, self.children.join(","), self.body.len());
        let mut bytes = Vec::with_capacity(head.len() + 1 + self.body.len());
        bytes.extend_from_slice(head.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// The id of [`Object::to_bytes`].
    pub fn id(&self) -> String {
        object_id(&self.to_bytes())
    }

    /// Parses an object's bytes, checking them against the id they were fetched by.
    pub fn parse(id: &str, bytes: &[u8]) -> Result<Object, Error> {
        let actual = object_id(bytes);
        if actual != id {
            return Err(Error::IdMismatch {
                expected: id.to_string(),
                actual,
            });
        }
        let split = bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| malformed(id, "no NUL between head and body"))?;
        let head = std::str::from_utf8(&bytes[..split]).map_err(|_| malformed(id, "head is not UTF-8"))?;
        let body = &bytes[split + 1..];
        let mut parts = head.split(' ');
        let (Some(class), Some(children), Some(len), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed(
                id,
                format!("head {head:?} is not \"class children length\""),
            ));
        };
        if len.parse::<usize>().ok() != Some(body.len()) {
            return Err(malformed(
                id,
                format!("head says {len} body bytes, found {}", body.len()),
            ));
        }
        let children: Vec<String> = if children.is_empty() {
            Vec::new()
        } else {
            children.split(',').map(str::to_string).collect()
        };
        if let Some(bad) = children.iter().find(|c| !is_object_id(c)) {
            return Err(malformed(id, format!("child id {bad:?} is not a SHA-256 hex")));
        }
        Ok(Object {
            class: class.to_string(),
            children,
            body: body.to_vec(),
        })
    }

    /// Fails unless the object is of `class`.
    pub fn expect_class(&self, id: &str, class: &str) -> Result<(), Error> {
        if self.class == class {
            Ok(())
        } else {
            Err(malformed(id, format!("is a {}, expected a {class}", self.class)))
        }
    }
}
