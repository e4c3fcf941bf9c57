//! The timeline: every object as it was at every kept moment, so that the whole graph can be
//! rebuilt as it was then. The writer (`writer.rs`) keeps a row per change (the whole object when
//! it appears, else a JSON merge patch against its previous version) and, now and then, the whole
//! graph as a checkpoint; the reader (`read.rs`) rebuilds a moment from the newest checkpoint at or
//! before it and the versions after that, or carries an earlier built moment forward by the
//! versions since (`rebuild.rs`). What is kept is what the store holds (credentials were
//! blanked when the objects were built), never more; the application inventory's applications
//! are kept beside the objects (`applications.rs`), so a moment has its applications too.

pub mod applications;
mod ident;
pub mod read;
mod rebuild;
mod rows;
mod split;
pub mod writer;
pub mod written;

use std::io::Write;

use serde_json::Value;

/// A version's body: the whole object.
const FULL: u8 = b'F';
/// A version's body: a merge patch against the previous version.
const PATCH: u8 = b'P';
/// The same two, deflated.
const FULL_DEFLATED: u8 = b'f';
const PATCH_DEFLATED: u8 = b'p';

/// Bytes counted per stored row besides its body (ids, time, the row's own bookkeeping), for the
/// size bound.
pub const ROW_OVERHEAD: u64 = 24;

/// Bodies shorter than this are kept as they are: deflate gains nothing on them.
const DEFLATE_FROM: usize = 96;

/// One version of an object as stored.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// The whole object.
    Full(Value),
    /// A JSON merge patch (RFC 7386) against the previous version.
    Patch(Value),
}

/// Raw deflate of `bytes`.
pub fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(
        Vec::with_capacity(bytes.len() / 4 + 16),
        flate2::Compression::new(6),
    );
    // Writing into a Vec cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

/// The bytes `deflate` made (one body: [`Inflater`] reads many).
pub fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    Inflater::default().inflate(bytes)
}

/// Inflates one body after another with one decompressor. Its state is about 40 KiB, zeroed
/// when made: made afresh for each of a moment's thousands of versions, it cost more than the
/// inflating (`cargo bench --bench timeline_query`).
pub struct Inflater(flate2::Decompress);

impl Default for Inflater {
    fn default() -> Self {
        Inflater(flate2::Decompress::new(false))
    }
}

impl Inflater {
    /// The bytes `deflate` made.
    pub fn inflate(&mut self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        self.0.reset(false);
        let mut out = Vec::with_capacity(bytes.len() * 4 + 64);
        loop {
            let (read, written) = (self.0.total_in(), self.0.total_out());
            let input = bytes.get(read as usize..).unwrap_or_default();
            let status = self
                .0
                .decompress_vec(input, &mut out, flate2::FlushDecompress::None)
                .map_err(|e| e.to_string())?;
            if status == flate2::Status::StreamEnd {
                return Ok(out);
            }
            if out.len() == out.capacity() {
                out.reserve(out.capacity());
            } else if (self.0.total_in(), self.0.total_out()) == (read, written) {
                return Err("a deflated body ends early".into());
            }
        }
    }
}

impl Body {
    /// The stored bytes: a tag, then the JSON (deflated when that is smaller).
    pub fn encode(&self) -> Vec<u8> {
        let (tag, packed, value) = match self {
            Body::Full(v) => (FULL, FULL_DEFLATED, v),
            Body::Patch(v) => (PATCH, PATCH_DEFLATED, v),
        };
        let json = serde_json::to_vec(value).unwrap_or_default();
        if json.len() >= DEFLATE_FROM {
            let small = deflate(&json);
            if small.len() < json.len() {
                let mut out = Vec::with_capacity(small.len() + 1);
                out.push(packed);
                out.extend_from_slice(&small);
                return out;
            }
        }
        let mut out = Vec::with_capacity(json.len() + 1);
        out.push(tag);
        out.extend_from_slice(&json);
        out
    }

    /// Read stored bytes back.
    pub fn decode(bytes: &[u8]) -> Result<Body, String> {
        Self::decode_with(bytes, &mut Inflater::default())
    }

    /// [`Body::decode`] with `inflater` (one for many bodies).
    pub fn decode_with(bytes: &[u8], inflater: &mut Inflater) -> Result<Body, String> {
        let Some((&tag, rest)) = bytes.split_first() else {
            return Err("an empty version".into());
        };
        let json = match tag {
            FULL | PATCH => std::borrow::Cow::Borrowed(rest),
            FULL_DEFLATED | PATCH_DEFLATED => std::borrow::Cow::Owned(inflater.inflate(rest)?),
            other => return Err(format!("a version tagged {other}")),
        };
        let value: Value = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
        Ok(match tag {
            FULL | FULL_DEFLATED => Body::Full(value),
            _ => Body::Patch(value),
        })
    }
}

/// An object's JSON as the timeline keeps it: with its datacenter (when it has one) as a
/// top-level `datacenter`, which no kind's object has.
pub fn stored_value(r: &crate::model::Resource) -> Value {
    let mut v = r.to_value();
    if !r.datacenter().is_single()
        && let Value::Object(m) = &mut v
    {
        m.insert(
            "datacenter".into(),
            Value::String(r.datacenter().key().into()),
        );
    }
    v
}

/// The rows of one checkpoint: every object as (its timeline id, its JSON).
pub fn encode_checkpoint(objects: &[(i64, Value)]) -> Vec<u8> {
    encode_checkpoint_from(
        objects
            .iter()
            .map(|(id, v)| (*id, std::borrow::Cow::Borrowed(v))),
    )
}

/// [`encode_checkpoint`] of objects made one at a time: the same bytes, written into the
/// compressor object by object, so that a checkpoint of a million objects holds one object's
/// JSON at a time and its compressed bytes, not every object's tree and text at once (those took
/// 5 GiB at 400,000 objects, `cargo bench --bench kube_sync`).
pub fn encode_checkpoint_from<'a>(
    objects: impl IntoIterator<Item = (i64, std::borrow::Cow<'a, Value>)>,
) -> Vec<u8> {
    let e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
    // Writes of a few bytes each (separators, ids) reach the compressor in 64 KiB blocks.
    let mut out = std::io::BufWriter::with_capacity(64 << 10, e);
    // Writing into a Vec cannot fail: the results are ignored.
    let _ = out.write_all(b"[");
    for (i, (id, v)) in objects.into_iter().enumerate() {
        let _ = out.write_all(if i == 0 { b"[" } else { b",[" });
        let _ = write!(out, "{id},");
        let _ = serde_json::to_writer(&mut out, &*v);
        let _ = out.write_all(b"]");
    }
    let _ = out.write_all(b"]");
    out.into_inner()
        .ok()
        .and_then(|e| e.finish().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_come_back_as_they_went_in_small_or_deflated() {
        let small = Body::Patch(json!({"status": {"phase": "Running"}}));
        let encoded = small.encode();
        assert_eq!(encoded[0], PATCH, "a small body is kept as it is");
        assert_eq!(Body::decode(&encoded), Ok(small));
        let big = Body::Full(json!({"spec": {"text": "abc ".repeat(100)}}));
        let encoded = big.encode();
        assert_eq!(encoded[0], FULL_DEFLATED);
        assert!(encoded.len() < 100, "{}", encoded.len());
        assert_eq!(Body::decode(&encoded), Ok(big));
        assert!(Body::decode(b"").is_err() && Body::decode(b"Xjunk").is_err());
    }

    #[test]
    fn a_checkpoint_written_object_by_object_is_the_json_of_them_all() {
        for objects in [
            vec![],
            vec![(1, json!({"a": 1}))],
            (0..3000)
                .map(|i| {
                    (
                        i * 7 - 5,
                        json!({"name": format!("m-{i}"), "l": [i, "x\"]"]}),
                    )
                })
                .collect(),
        ] {
            let whole = serde_json::to_vec(&objects).expect("json");
            let encoded = encode_checkpoint(&objects);
            assert_eq!(inflate(&encoded).expect("inflated"), whole);
            assert!(objects.len() < 100 || encoded.len() * 4 < whole.len());
        }
    }

    #[test]
    fn one_inflater_reads_many_bodies_and_refuses_a_cut_one() {
        let mut inflater = Inflater::default();
        let bodies: Vec<Body> = (0..50)
            .map(|i| Body::Full(json!({"spec": {"text": format!("{i} ").repeat(60 + 40 * i)}})))
            .collect();
        for b in &bodies {
            let encoded = b.encode();
            assert_eq!(encoded[0], FULL_DEFLATED);
            assert_eq!(Body::decode_with(&encoded, &mut inflater).as_ref(), Ok(b));
            let cut = &encoded[..encoded.len() / 2];
            assert!(Body::decode_with(cut, &mut inflater).is_err());
        }
    }
}
