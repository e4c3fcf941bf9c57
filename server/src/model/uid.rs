//! `metadata.uid`, kept compactly: a UUID as API servers write it (lowercase, hyphenated) as its
//! 16 bytes, where its text took 36 bytes and an allocation in every object; any other text as it
//! is. It reads and writes the same JSON string either way.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::text::{Str, deserialize_text};

/// An object's `metadata.uid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uid {
    /// A UUID whose text is its lowercase hyphenated form.
    Uuid(uuid::Uuid),
    /// Any other text (a test server's, a manifest's).
    Text(Str),
}

impl Uid {
    /// A new random UUID (what the embedded store gives an object that has none).
    pub fn random() -> Uid {
        Uid::Uuid(uuid::Uuid::new_v4())
    }

    /// The uid of this text: its 16 bytes when the text is a UUID written as they are written
    /// back, else the text.
    pub fn new(text: &str) -> Uid {
        if text.len() == uuid::fmt::Hyphenated::LENGTH
            && let Ok(u) = uuid::Uuid::try_parse(text)
            && u.hyphenated().encode_lower(&mut [0; 36]) == text
        {
            return Uid::Uuid(u);
        }
        Uid::Text(text.into())
    }

    /// The text.
    pub fn text(&self) -> UidText<'_> {
        match self {
            Uid::Uuid(u) => {
                let mut buf = [0; 36];
                u.hyphenated().encode_lower(&mut buf);
                UidText::Formatted(buf)
            }
            Uid::Text(t) => UidText::Kept(t),
        }
    }
}

/// A uid's text: borrowed where it is kept as text, written out where it is kept as a UUID.
#[derive(Debug)]
pub enum UidText<'a> {
    /// Kept as text (or absent: empty).
    Kept(&'a str),
    /// A UUID's lowercase hyphenated form.
    Formatted([u8; 36]),
}

impl Deref for UidText<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            UidText::Kept(t) => t,
            // Always ASCII: written by `encode_lower`.
            UidText::Formatted(buf) => std::str::from_utf8(buf).unwrap_or_default(),
        }
    }
}

impl fmt::Display for UidText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl PartialEq for UidText<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<str> for UidText<'_> {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for UidText<'_> {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

impl PartialEq<String> for UidText<'_> {
    fn eq(&self, other: &String) -> bool {
        **self == **other
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl From<&str> for Uid {
    fn from(text: &str) -> Uid {
        Uid::new(text)
    }
}

impl From<String> for Uid {
    fn from(text: String) -> Uid {
        Uid::new(&text)
    }
}

impl Serialize for Uid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

impl<'de> Deserialize<'de> for Uid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_text(d, |text| Uid::new(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_reads_and_writes_its_text_whether_kept_as_a_uuid_or_not() {
        let cases = [
            ("0f8fad5b-d9cb-469f-a165-70867728950e", true),
            // Written back otherwise than as read: kept as text.
            ("0F8FAD5B-D9CB-469F-A165-70867728950E", false),
            ("0f8fad5bd9cb469fa16570867728950e", false),
            ("{0f8fad5b-d9cb-469f-a165-70867728950e}", false),
            ("uid-1", false),
            ("", false),
        ];
        for (text, as_uuid) in cases {
            let uid: Uid = serde_json::from_str(&serde_json::to_string(text).expect("json"))
                .expect("a JSON string");
            assert_eq!(matches!(uid, Uid::Uuid(_)), as_uuid, "{text}");
            assert_eq!(&*uid.text(), text);
            assert_eq!(uid.text(), text);
            assert_eq!(uid.to_string(), text);
            assert_eq!(serde_json::to_value(&uid).expect("json"), text);
            assert_eq!(Uid::from(text), uid);
        }
        assert!(
            serde_json::from_str::<Uid>("1").is_err(),
            "a number is not a uid"
        );
        let random = Uid::random();
        assert_eq!(Uid::new(&random.text()), random);
        assert_eq!(std::mem::size_of::<Option<Uid>>(), 24);
    }
}
