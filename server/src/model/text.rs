//! `Str`: the generated model's string, immutable, 16 bytes, and kept inline when it is short.
//!
//! A `String` takes 24 bytes inline (pointer, length, capacity) and an `Option<String>` the same;
//! a boxed `str` takes 16, and `Option<Str>` too. The generated structs hold dozens of optional
//! strings, most of them absent (a Machine's spec and status, with their parts, declare 62), and
//! the store holds every object for as long as it exists: the optional strings alone took a
//! Machine from 2,678 to 2,294 bytes (`cargo bench --bench fleet_memory`, BENCHMARKS.md).
//!
//! Most strings that are present are short (a phase, an IP address, a quantity, a label's value,
//! a namespace): `byteyarn`'s `Yarn` keeps up to 15 bytes in its own 16 and only longer ones on
//! the heap, so a short string costs no allocation (each was one of the ~39 a synced object made,
//! and the allocator's partly used pages between them about 40 % of the server's memory;
//! BENCHMARKS.md). A crate rather than our own: a 16-byte string with an inline form and a niche
//! for `Option` needs unsafe code, which this workspace forbids.
//!
//! A type of our own around it so that it compares with `&str` and `String` and reads as
//! `as_str()`, like the `String` it replaced, in the code that reads the model.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use byteyarn::Yarn;
use serde::de::Visitor;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string of the generated model (see the module's documentation).
#[derive(Clone, Default)]
pub struct Str(Yarn);

impl Str {
    /// The text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Str {}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str {
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Str {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Deref for Str {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str(Yarn::copy(s))
    }
}

impl From<String> for Str {
    fn from(s: String) -> Self {
        Str(Yarn::from_string(s))
    }
}

impl From<Str> for String {
    fn from(s: Str) -> Self {
        s.0.into_string()
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Str {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        **self == *other.as_str()
    }
}

impl PartialEq<Str> for String {
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Serialize for Str {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Str {
    /// From the text as the parser holds it: a short one is copied inline, allocating nothing.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_text(d, |text| match text {
            Cow::Borrowed(s) => Str::from(s),
            Cow::Owned(s) => Str::from(s),
        })
    }
}

/// A JSON string made into a `T` by `make` from the text as the parser holds it: borrowed where it
/// can be, owned where the parser already made a `String` (serde's own `String` and `Cow<str>`
/// copy every value first). The model's strings, the pairs' interned keys and uids read this way.
pub(super) fn deserialize_text<'de, D, T>(
    d: D,
    make: impl for<'a> FnOnce(Cow<'a, str>) -> T,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct TextVisitor<F>(F);
    impl<T, F: for<'a> FnOnce(Cow<'a, str>) -> T> Visitor<'_> for TextVisitor<F> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            Ok((self.0)(Cow::Borrowed(v)))
        }

        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<T, E> {
            Ok((self.0)(Cow::Owned(v)))
        }
    }
    d.deserialize_str(TextVisitor(make))
}

/// A list of the model's strings as owned strings, for an answer.
pub fn to_strings(values: &[Str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::Str;

    #[test]
    fn reads_writes_and_compares_as_a_string() {
        let s: Str = serde_json::from_str("\"10.0.0.1\"").expect("a JSON string");
        assert_eq!(s, "10.0.0.1");
        assert_eq!("10.0.0.1", s);
        assert_eq!(s, String::from("10.0.0.1"));
        assert_eq!(s.as_str().len(), 8);
        assert_eq!(serde_json::to_string(&s).expect("json"), "\"10.0.0.1\"");
        assert!(
            serde_json::from_str::<Str>("1").is_err(),
            "a number is not a string"
        );
        assert_eq!(std::mem::size_of::<Option<Str>>(), 16);
        assert_eq!(String::from(s.clone()), "10.0.0.1");
        assert_eq!(format!("{s} {s:?}"), "10.0.0.1 \"10.0.0.1\"");
        // Inline up to 15 bytes, on the heap past them: the same text either way.
        for text in [
            "",
            "fifteen-bytes-x",
            "sixteen-bytes-xx",
            "ünïcödé ßtrïng ønë",
            "0123456789",
        ] {
            let s: Str = serde_json::from_str(&serde_json::to_string(text).expect("json"))
                .expect("a JSON string");
            assert_eq!(s, text);
            assert_eq!(s.clone(), Str::from(text.to_string()));
            assert_eq!(String::from(s), text);
        }
        let (short, long) = (Str::from("a"), Str::from("b-long-enough-for-the-heap"));
        assert!(short < long, "ordered as their text");
    }
}
