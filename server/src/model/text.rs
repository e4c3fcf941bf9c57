//! `Str`: the generated model's string, an immutable boxed `str`.
//!
//! A `String` takes 24 bytes inline (pointer, length, capacity) and an `Option<String>` the same;
//! a boxed `str` takes 16, and `Option<Str>` too. The generated structs hold dozens of optional
//! strings, most of them absent (a Machine's spec and status, with their parts, declare 62), and
//! the store holds every object for as long as it exists: the optional strings alone took a
//! Machine from 2,678 to 2,294 bytes (`cargo bench --bench fleet_memory`, BENCHMARKS.md). A type of our own rather than `Box<str>` itself so
//! that it compares with `&str` and `String` and reads as `as_str()`, like the `String` it
//! replaced, in the code that reads the model.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string of the generated model (see the module's documentation).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Str(Box<str>);

impl Str {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Str {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str(s.into())
    }
}

impl From<String> for Str {
    fn from(s: String) -> Self {
        Str(s.into_boxed_str())
    }
}

impl From<Str> for String {
    fn from(s: Str) -> Self {
        s.0.into_string()
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Str {
    fn eq(&self, other: &String) -> bool {
        *self.0 == *other.as_str()
    }
}

impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        *self == *other.0
    }
}

impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        **self == *other.0
    }
}

impl PartialEq<Str> for String {
    fn eq(&self, other: &Str) -> bool {
        *self.as_str() == *other.0
    }
}

impl Serialize for Str {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<str>::deserialize(d).map(Str)
    }
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
    }
}
