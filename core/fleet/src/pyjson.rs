//! JSON as Python's `json.dumps` writes it with its defaults (`", "` and `": "` separators,
//! non-ASCII escaped as `\uXXXX`), which Flower uses for the bodies of RecordDict, ArrayRecord
//! and Array objects: the bytes must match for the ids to match. serde_json writes the
//! values; this module only supplies the formatter.

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter, Serializer};
use std::io::{self, Write};

struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, s: &str) -> io::Result<()> {
        for c in s.chars() {
            if c.is_ascii() {
                w.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(w, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, w: &mut W, e: CharEscape) -> io::Result<()> {
        // Python writes control characters other than \b \f \n \r \t as \u00XX too.
        match e {
            CharEscape::AsciiControl(byte) => write!(w, "\\u{byte:04x}"),
            other => serde_json::ser::CompactFormatter.write_char_escape(w, other),
        }
    }
}

/// `json.dumps(value)` bytes.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut serializer = Serializer::with_formatter(&mut out, PythonFormatter);
    // Serializing strings, integers and maps into a Vec cannot fail.
    if value.serialize(&mut serializer).is_err() {
        out.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_python_json_dumps() {
        // Python: json.dumps({"a": [1, 2], "é\n": "x"}) == '{"a": [1, 2], "\\u00e9\\n": "x"}'
        let value = serde_json::json!({"a": [1, 2], "é\n": "x", "𝄞": []});
        let text = String::from_utf8(super::to_vec(&value)).unwrap_or_default();
        assert_eq!(text, r#"{"a": [1, 2], "\u00e9\n": "x", "\ud834\udd1e": []}"#);
    }
}
