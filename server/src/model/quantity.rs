//! Kubernetes quantities (`4Gi`, `500m`, `1.5e3`) parsed once, and the int-or-string wrapper.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::text::Str;

/// A value the CRD declares as `x-kubernetes-int-or-string`.
#[derive(Clone, Debug, PartialEq)]
pub enum IntOrString {
    /// The manifest held a number.
    Int(i64),
    /// The manifest held a string.
    String(Str),
}

impl Default for IntOrString {
    fn default() -> Self {
        IntOrString::Int(0)
    }
}

impl fmt::Display for IntOrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrString::Int(i) => write!(f, "{i}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

impl Serialize for IntOrString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrString::Int(i) => s.serialize_i64(*i),
            IntOrString::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrString {
    /// A number or a string, read as the parser meets it (serde's `untagged` enum buffered every
    /// value first: a copy of each quantity's text per object typed).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = IntOrString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(i))
            }
            fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<IntOrString, E> {
                Ok(match i64::try_from(u) {
                    Ok(i) => IntOrString::Int(i),
                    Err(_) => IntOrString::String((u as f64).to_string().into()),
                })
            }
            fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<IntOrString, E> {
                Ok(IntOrString::String(f.to_string().into()))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(s.into()))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<IntOrString, E> {
                Ok(IntOrString::String(s.into()))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A resource quantity: the text as written, and its value in base units (bytes, cores).
#[derive(Clone, Debug)]
pub struct Quantity {
    raw: IntOrString,
    /// NaN when the text is unreadable (an `Option<f64>` took 8 bytes more in every quantity).
    value: f64,
}

/// `0` written as a number, with no value (as a derived default with an `Option` had it).
impl Default for Quantity {
    fn default() -> Self {
        Quantity {
            raw: IntOrString::default(),
            value: f64::NAN,
        }
    }
}

/// Equal when written the same (the value follows from the text).
impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.raw == other.raw
    }
}

/// Why a quantity string could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "`{0}` is not a Kubernetes quantity (expected a number with an optional suffix such as Ki, Mi, Gi, m, k, M, G or an exponent)"
)]
pub struct QuantityError(pub String);

impl Quantity {
    /// Parse a quantity such as `16Gi`, `500m` or `1.5e3`.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let value = parse_quantity(text)?;
        Ok(Quantity {
            raw: IntOrString::String(text.into()),
            value,
        })
    }

    /// The value in base units (bytes for memory, cores for CPU); `None` when the text was unreadable.
    pub fn value(&self) -> Option<f64> {
        (!self.value.is_nan()).then_some(self.value)
    }

    /// The value in bytes rounded to a whole number, for memory quantities.
    pub fn bytes(&self) -> Option<i64> {
        self.value().map(|v| v.round() as i64)
    }

    /// The quantity as written in the manifest.
    pub fn raw(&self) -> String {
        self.raw.to_string()
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.fmt(f)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = IntOrString::deserialize(d)?;
        // Tolerant: an unreadable quantity keeps its text and has no value (validation reports it).
        let value = match &raw {
            IntOrString::Int(i) => *i as f64,
            IntOrString::String(s) => parse_quantity(s).unwrap_or(f64::NAN),
        };
        Ok(Quantity { raw, value })
    }
}

/// Parse the Kubernetes quantity grammar: `<signed number><binary suffix | decimal suffix | exponent>`.
pub fn parse_quantity(text: &str) -> Result<f64, QuantityError> {
    let err = || QuantityError(text.to_string());
    let s = text.trim();
    if s.is_empty() {
        return Err(err());
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let digits = num.trim_start_matches(['+', '-']);
    if digits.is_empty()
        || digits == "."
        || num.len() - digits.len() > 1
        || digits.contains(['+', '-'])
    {
        return Err(err());
    }
    if digits.matches('.').count() > 1 {
        return Err(err());
    }
    let base: f64 = num.parse().map_err(|_| err())?;
    let multiplier = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().map_err(|_| err())?;
            10f64.powi(e)
        }
        _ => return Err(err()),
    };
    Ok(base * multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantity_is_its_text_and_a_value_when_the_text_reads_as_one() {
        let q: Quantity = serde_json::from_str("\"16Gi\"").expect("a quantity");
        assert_eq!(
            (q.value(), q.bytes(), q.raw()),
            (Some(17_179_869_184.0), Some(17_179_869_184), "16Gi".into())
        );
        let bad: Quantity = serde_json::from_str("\"lots\"").expect("kept, unread");
        assert_eq!(
            (bad.value(), bad.bytes(), bad.raw()),
            (None, None, "lots".into())
        );
        assert_eq!(bad, bad.clone(), "an unreadable quantity equals itself");
        assert_eq!(serde_json::to_string(&bad).expect("json"), "\"lots\"");
        let n: Quantity = serde_json::from_str("3").expect("a number");
        assert_eq!(
            (n.value(), serde_json::to_string(&n).expect("json")),
            (Some(3.0), "3".into())
        );
        assert_eq!(Quantity::default().value(), None);
        assert_eq!(std::mem::size_of::<Quantity>(), 24);
    }

    #[test]
    fn binary_decimal_and_exponent_suffixes() {
        assert_eq!(parse_quantity("16Gi"), Ok(17_179_869_184.0));
        assert_eq!(parse_quantity("1.5Gi"), Ok(1_610_612_736.0));
        assert_eq!(parse_quantity("1G"), Ok(1e9));
        assert_eq!(parse_quantity("500m"), Ok(0.5));
        assert_eq!(parse_quantity("2k"), Ok(2000.0));
        assert_eq!(parse_quantity("1e3"), Ok(1000.0));
        assert_eq!(parse_quantity("4294967296"), Ok(4_294_967_296.0));
        assert_eq!(parse_quantity("1Ti"), Ok(1_099_511_627_776.0));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "Gi", "1.2.3Gi", "12GB", "--1", "1 Gi", "abc"] {
            assert!(parse_quantity(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn integer_and_string_forms_round_trip() {
        let q: Quantity = serde_json::from_str("8589934592").expect("int quantity");
        assert_eq!(q.bytes(), Some(8_589_934_592));
        assert_eq!(serde_json::to_string(&q).expect("ser"), "8589934592");
        let q: Quantity = serde_json::from_str("\"6Gi\"").expect("string quantity");
        assert_eq!(q.bytes(), Some(6 * 1024 * 1024 * 1024));
        assert_eq!(serde_json::to_string(&q).expect("ser"), "\"6Gi\"");
        // A fraction and a number past i64 keep their text; from a parsed value as from text.
        let q: Quantity = serde_json::from_value(serde_json::json!(1.5)).expect("a fraction");
        assert_eq!((q.raw().as_str(), q.value()), ("1.5", Some(1.5)));
        let q: Quantity = serde_json::from_str("18446744073709551615").expect("past i64");
        assert_eq!(q.raw(), "18446744073709552000");
        for bad in ["true", "null", "[1]", "{}"] {
            let e = serde_json::from_str::<Quantity>(bad)
                .expect_err(bad)
                .to_string();
            assert!(e.contains("an integer or a string"), "{bad}: {e}");
        }
    }
}
