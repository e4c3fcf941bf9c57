//! A checkpoint's JSON split into each object's timeline id, JSON text and what it says of
//! itself, without reading the objects into values: a past moment types most of them straight
//! from their text (`rebuild.rs`).

use std::borrow::Cow;

/// A checkpoint's JSON (`[[id, object], ...]`, as `encode_checkpoint` wrote it) split into each
/// object's timeline id, JSON text and what it says of itself (its [`Head`], read in the same
/// pass that finds where it ends: reading it again when typing was a third pass over the text).
/// (serde_json's `RawValue` finds the ends with its `raw_value` feature; switching that on
/// rebuilds every crate above serde_json for twenty lines.)
pub fn split(json: &[u8]) -> Result<Vec<(i64, &str, Head<'_>)>, String> {
    let text = std::str::from_utf8(json).map_err(|e| e.to_string())?;
    let bytes = text.as_bytes();
    let mut at = 0;
    let expect = |at: &mut usize, c: u8| -> Result<(), String> {
        while bytes.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
        match bytes.get(*at) == Some(&c) {
            true => {
                *at += 1;
                Ok(())
            }
            false => Err(format!("expected {:?} at byte {at}", c as char)),
        }
    };
    let mut out = Vec::new();
    expect(&mut at, b'[')?;
    if expect(&mut at, b']').is_ok() {
        return Ok(out);
    }
    loop {
        expect(&mut at, b'[')?;
        // The id, then the object: each ends where serde_json says the value it read ended.
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<i64>();
        let id = values.next().ok_or("no id")?.map_err(|e| e.to_string())?;
        at += values.byte_offset();
        expect(&mut at, b',')?;
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Head>();
        let head = values
            .next()
            .ok_or("no object")?
            .map_err(|e| e.to_string())?;
        let end = at + values.byte_offset();
        out.push((id, text[at..end].trim_start(), head));
        at = end;
        expect(&mut at, b']')?;
        if expect(&mut at, b',').is_err() {
            expect(&mut at, b']')?;
            return Ok(out);
        }
    }
}

/// What an object's JSON says of itself before it is typed.
#[derive(serde::Deserialize)]
pub struct Head<'a> {
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "apiVersion")]
    pub api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub datacenter: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::timeline::encode_checkpoint;
    use serde_json::{Value, json};

    #[test]
    fn a_checkpoint_splits_into_its_objects_whatever_its_spacing() {
        let json = br#" [ [1 , {"a": [1, "]"]} ] ,[22,{}]] "#;
        fn texts(json: &[u8]) -> Vec<(i64, &str)> {
            let parts = split(json).expect("split");
            parts.into_iter().map(|(id, text, _)| (id, text)).collect()
        }
        assert_eq!(texts(json), vec![(1, r#"{"a": [1, "]"]}"#), (22, "{}")]);
        assert_eq!(texts(b"[]"), vec![]);
        let with_head = br#"[[3,{"spec":{"kind":"x"},"kind":"Machine","datacenter":"oslo"}]]"#;
        let (_, _, head) = &split(with_head).expect("split")[0];
        assert_eq!(head.kind.as_deref(), Some("Machine"), "not the spec's kind");
        assert_eq!(head.datacenter.as_deref(), Some("oslo"));
        assert_eq!(head.api_version, None);
        // What `encode_checkpoint` wrote comes back object by object.
        let cp = vec![(1, json!({"a": 1})), (7, json!({"b": [2]}))];
        let json = super::super::inflate(&encode_checkpoint(&cp)).expect("inflated");
        let back: Vec<(i64, Value)> = split(&json)
            .expect("split")
            .into_iter()
            .map(|(id, text, _)| (id, serde_json::from_str(text).expect("an object")))
            .collect();
        assert_eq!(back, cp);
        for bad in [
            &b"[[1,{}]"[..],
            b"[[x,{}]]",
            b"[[1 {}]]",
            b"{}",
            b"[[1,{]]",
            b"[[1,5]]",
        ] {
            assert!(split(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
