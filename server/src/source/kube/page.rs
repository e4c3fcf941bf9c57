//! A list page's JSON text decoded item by item into store objects.
//!
//! `Api::list` decodes a whole page into `DynamicObject`s (its metadata typed, the rest a
//! `serde_json::Value`, through serde's buffering of flattened fields), and each of those was
//! turned into a `Value` again before it was typed: three copies of 500 objects made and freed
//! for every page, among the objects the store keeps. Here each item is read as one `Value`,
//! typed and dropped before the next is read, so a page costs its text and one item at a time.

use std::fmt;

use serde::Deserializer as _;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// What a list page says beside its items (its `metadata`).
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
pub(super) struct PageMeta {
    /// The token of the next page (none or empty: this was the last).
    #[serde(rename = "continue")]
    pub continue_: Option<String>,
    /// The list's resourceVersion (the last page's is the one to watch from).
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<String>,
}

/// Read a list page (`{"metadata": {...}, "items": [...]}`), handing each item to `each` as it
/// is read; the page's metadata once the whole text is read. Malformed JSON fails the page.
pub(super) fn read_page(
    text: &str,
    each: &mut dyn FnMut(Value),
) -> Result<PageMeta, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let meta = de.deserialize_map(Page { each })?;
    de.end()?;
    Ok(meta)
}

struct Page<'f> {
    each: &'f mut dyn FnMut(Value),
}

impl<'de> Visitor<'de> for Page<'_> {
    type Value = PageMeta;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list: an object with metadata and items")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PageMeta, A::Error> {
        let mut meta = PageMeta::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => meta = map.next_value::<Option<PageMeta>>()?.unwrap_or_default(),
                "items" => map.next_value_seed(Items { each: self.each })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

/// The items array (or `null`, as some API servers send for an empty list).
struct Items<'f> {
    each: &'f mut dyn FnMut(Value),
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list's items: an array of objects")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            (self.each)(item);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<(PageMeta, Vec<Value>), serde_json::Error> {
        let mut items = Vec::new();
        let meta = read_page(text, &mut |v| items.push(v))?;
        Ok((meta, items))
    }

    #[test]
    fn items_come_one_by_one_with_the_pages_metadata_in_any_order() {
        let text = r#"{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}],
            "kind":"MachineList","apiVersion":"vitistack.io/v1alpha1",
            "metadata":{"resourceVersion":"42","continue":"next","remainingItemCount":3}}"#;
        let (meta, items) = read(text).expect("page");
        assert_eq!(meta.resource_version.as_deref(), Some("42"));
        assert_eq!(meta.continue_.as_deref(), Some("next"));
        let names: Vec<_> = items
            .iter()
            .map(|v| v["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn an_empty_list_may_have_null_items_or_none() {
        for text in [
            r#"{"metadata":{"resourceVersion":"7"},"items":null}"#,
            r#"{"metadata":{"resourceVersion":"7"}}"#,
            r#"{"metadata":{"resourceVersion":"7"},"items":[]}"#,
        ] {
            let (meta, items) = read(text).expect(text);
            assert_eq!(meta.resource_version.as_deref(), Some("7"), "{text}");
            assert!(meta.continue_.is_none());
            assert!(items.is_empty(), "{text}");
        }
    }

    #[test]
    fn malformed_text_fails_the_page() {
        for text in [
            r#"{"metadata":{"resourceVersion":"7"},"items":[{"a":1},"#,
            r#"{"metadata":{"resourceVersion":"7"},"items":{"a":1}}"#,
            r#"[{"metadata":{}}]"#,
            r#"{"metadata":{}} trailing"#,
        ] {
            assert!(read(text).is_err(), "{text}");
        }
    }
}
