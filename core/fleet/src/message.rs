//! A Flower `Message` and its tree of objects, both ways.
//!
//! - Message: body = the protobuf `Message` with `metadata.message_id = ""` and no content,
//!   one child (its RecordDict) unless it is an error reply. Its id is the message id.
//! - RecordDict / ArrayRecord: body = JSON `{name: child id}` in insertion order.
//! - Array: body = JSON `{dtype, shape, stype, arraychunk_ids}`; `arraychunk_ids` index the
//!   (unique) children and may repeat; the chunks joined are the `.npy` bytes.
//! - ArrayChunk: body = raw bytes, at most [`CHUNK_SIZE`]. ConfigRecord / MetricRecord: protobuf.
//! - Objects are listed children first (post-order), each id once, as Flower lists them.

use crate::array::Array;
use crate::error::{malformed, Error};
use crate::object::Object;
use crate::proto;
use crate::pyjson;
use prost::Message as _;
use serde::ser::{SerializeMap, Serializer};
use std::collections::HashMap;

/// Flower's array chunk size (`FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE`, 5 MiB).
pub const CHUNK_SIZE: usize = 5 * 1024 * 1024;

/// One entry of a RecordDict.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Arrays(Vec<(String, Array)>),
    Metrics(proto::MetricRecord),
    Config(proto::ConfigRecord),
}

/// A message: metadata, and either content (a RecordDict, in order) or an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub metadata: proto::Metadata,
    pub content: Option<Vec<(String, Record)>>,
    pub error: Option<proto::Error>,
}

/// A message turned into objects: its id, the objects (children first, each once) and the
/// tree that push-messages and pull-messages carry.
#[derive(Debug, Clone)]
pub struct Deflated {
    pub id: String,
    pub objects: Vec<(String, Vec<u8>)>,
    pub tree: proto::ObjectTree,
}

struct Ordered<'a, V>(&'a [(String, V)]);

impl<V: serde::Serialize> serde::Serialize for Ordered<'_, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ArrayHead {
    dtype: String,
    shape: Vec<usize>,
    stype: String,
    arraychunk_ids: Vec<usize>,
}

/// Collects objects children first, each id once, and builds the object tree.
struct Builder {
    objects: Vec<(String, Vec<u8>)>,
    seen: HashMap<String, proto::ObjectTree>,
}

impl Builder {
    fn add(&mut self, object: Object) -> String {
        let bytes = object.to_bytes();
        let id = crate::object::object_id(&bytes);
        if !self.seen.contains_key(&id) {
            let children = object
                .children
                .iter()
                .filter_map(|c| self.seen.get(c).cloned())
                .collect();
            self.seen.insert(
                id.clone(),
                proto::ObjectTree {
                    object_id: id.clone(),
                    children,
                },
            );
            self.objects.push((id.clone(), bytes));
        }
        id
    }

    fn array(&mut self, array: &Array, chunk_size: usize) -> String {
        let mut unique: Vec<String> = Vec::new();
        let mut indices = Vec::new();
        for chunk in array.data.chunks(chunk_size.max(1)) {
            let id = self.add(Object::new("ArrayChunk", Vec::new(), chunk.to_vec()));
            let index = unique.iter().position(|u| *u == id).unwrap_or_else(|| {
                unique.push(id);
                unique.len() - 1
            });
            indices.push(index);
        }
        let head = ArrayHead {
            dtype: array.dtype.clone(),
            shape: array.shape.clone(),
            stype: array.stype.clone(),
            arraychunk_ids: indices,
        };
        self.add(Object::new("Array", unique, pyjson::to_vec(&head)))
    }

    fn refs(&mut self, class: &str, refs: Vec<(String, String)>) -> String {
        let mut children: Vec<String> = Vec::new();
        for (_, id) in &refs {
            if !children.contains(id) {
                children.push(id.clone());
            }
        }
        self.add(Object::new(class, children, pyjson::to_vec(&Ordered(&refs))))
    }
}

impl Message {
    /// The message's objects with Flower's 5 MiB chunks.
    pub fn deflate(&self) -> Deflated {
        self.deflate_with_chunks(CHUNK_SIZE)
    }

    /// The message's objects, arrays cut into chunks of `chunk_size` bytes.
    pub fn deflate_with_chunks(&self, chunk_size: usize) -> Deflated {
        let mut b = Builder {
            objects: Vec::new(),
            seen: HashMap::new(),
        };
        let mut children = Vec::new();
        if let Some(content) = &self.content {
            let mut records = Vec::new();
            for (name, record) in content {
                let id = match record {
                    Record::Arrays(arrays) => {
                        let refs = arrays
                            .iter()
                            .map(|(n, a)| (n.clone(), b.array(a, chunk_size)))
                            .collect();
                        b.refs("ArrayRecord", refs)
                    }
                    Record::Metrics(m) => b.add(Object::new("MetricRecord", vec![], m.encode_to_vec())),
                    Record::Config(c) => b.add(Object::new("ConfigRecord", vec![], c.encode_to_vec())),
                };
                records.push((name.clone(), id));
            }
            children.push(b.refs("RecordDict", records));
        }
        let mut metadata = self.metadata.clone();
        metadata.message_id.clear();
        let body = proto::Message {
            metadata: Some(metadata),
            content: None,
            error: self.error.clone(),
        };
        let id = b.add(Object::new("Message", children, body.encode_to_vec()));
        let tree = b.seen.remove(&id).unwrap_or_default();
        Deflated {
            id,
            objects: b.objects,
            tree,
        }
    }

    /// Rebuilds a message from its objects (each already checked against its id by
    /// [`Object::parse`]), starting at the message's id.
    pub fn inflate(id: &str, objects: &HashMap<String, Object>) -> Result<Message, Error> {
        let root = get(objects, id)?;
        root.expect_class(id, "Message")?;
        let body = proto::Message::decode(&root.body[..]).map_err(|e| malformed(id, e.to_string()))?;
        let mut metadata = body.metadata.ok_or_else(|| malformed(id, "no metadata"))?;
        metadata.message_id = id.to_string();
        let content = match root.children.as_slice() {
            [] => None,
            [dict] => Some(inflate_dict(dict, objects)?),
            _ => return Err(malformed(id, "more than one RecordDict")),
        };
        Ok(Message {
            metadata,
            content,
            error: body.error,
        })
    }

    /// The record named `name`, if any.
    pub fn record(&self, name: &str) -> Option<&Record> {
        self.content
            .as_ref()?
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r)
    }
}

fn get<'a>(objects: &'a HashMap<String, Object>, id: &str) -> Result<&'a Object, Error> {
    objects
        .get(id)
        .ok_or_else(|| Error::MissingObject(id.to_string()))
}

fn refs(id: &str, object: &Object) -> Result<Vec<(String, String)>, Error> {
    let refs: OrderedRefs = serde_json::from_slice(&object.body).map_err(|e| malformed(id, e.to_string()))?;
    if let Some((name, _)) = refs.0.iter().find(|(_, child)| !object.children.contains(child)) {
        return Err(malformed(
            id,
            format!("{name:?} refers to an object that is not a child"),
        ));
    }
    Ok(refs.0)
}

fn inflate_dict(id: &str, objects: &HashMap<String, Object>) -> Result<Vec<(String, Record)>, Error> {
    let dict = get(objects, id)?;
    dict.expect_class(id, "RecordDict")?;
    let mut records = Vec::new();
    for (name, child_id) in refs(id, dict)? {
        let child = get(objects, &child_id)?;
        let record = match child.class.as_str() {
            "ArrayRecord" => {
                let mut arrays = Vec::new();
                for (array_name, array_id) in refs(&child_id, child)? {
                    arrays.push((array_name, inflate_array(&array_id, objects)?));
                }
                Record::Arrays(arrays)
            }
            "MetricRecord" => Record::Metrics(
                proto::MetricRecord::decode(&child.body[..])
                    .map_err(|e| malformed(&child_id, e.to_string()))?,
            ),
            "ConfigRecord" => Record::Config(
                proto::ConfigRecord::decode(&child.body[..])
                    .map_err(|e| malformed(&child_id, e.to_string()))?,
            ),
            other => return Err(malformed(&child_id, format!("a {other} is not a record"))),
        };
        records.push((name, record));
    }
    Ok(records)
}

fn inflate_array(id: &str, objects: &HashMap<String, Object>) -> Result<Array, Error> {
    let object = get(objects, id)?;
    object.expect_class(id, "Array")?;
    let head: ArrayHead = serde_json::from_slice(&object.body).map_err(|e| malformed(id, e.to_string()))?;
    let mut data = Vec::new();
    for &index in &head.arraychunk_ids {
        let chunk_id = object
            .children
            .get(index)
            .ok_or_else(|| malformed(id, format!("chunk index {index} of {}", object.children.len())))?;
        let chunk = get(objects, chunk_id)?;
        chunk.expect_class(chunk_id, "ArrayChunk")?;
        data.extend_from_slice(&chunk.body);
    }
    Ok(Array {
        dtype: head.dtype,
        shape: head.shape,
        stype: head.stype,
        data,
    })
}

/// A JSON object of strings, read in order (serde_json's `Value` sorts its keys).
struct OrderedRefs(Vec<(String, String)>);

impl<'de> serde::Deserialize<'de> for OrderedRefs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OrderedRefs;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object of object ids")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OrderedRefs, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, String>()? {
                    out.push(entry);
                }
                Ok(OrderedRefs(out))
            }
        }
        d.deserialize_map(Visitor)
    }
}
