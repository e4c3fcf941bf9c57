//! Optional numbers and times in the room of the value alone: the generated model's optional
//! integers and date-times, most of them absent in any one object.
//!
//! `Option<i64>` takes 16 bytes and `Option<Timestamp>` 24, half of it the flag; a Machine holds ten
//! optional integers and three optional times inline, and a million objects hold tens of millions
//! of them. Here the flag is a value the field cannot hold: [`OptInt`] is 8 bytes (`i64::MIN`
//! means absent, and is refused when read), [`OptTime`] 16 (a nanosecond no time has). Written by
//! hand: `Option` of a type with a niche would need `unsafe` or a 63-bit integer.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The model's date-time (`vocab::Time`, named here so that the two files do not depend on each other).
type Time = jiff::Timestamp;

/// An optional integer in 8 bytes (`i64::MIN` stands for none; JSON holding it is refused).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptInt(i64);

impl OptInt {
    /// Absent.
    pub const NONE: OptInt = OptInt(i64::MIN);

    /// The value, if present.
    pub fn get(self) -> Option<i64> {
        (self.0 != i64::MIN).then_some(self.0)
    }

    /// True when absent (for `skip_serializing_if`).
    pub fn is_none(&self) -> bool {
        self.0 == i64::MIN
    }
}

impl Default for OptInt {
    fn default() -> Self {
        OptInt::NONE
    }
}

impl From<i64> for OptInt {
    /// `v` present; `i64::MIN` (which no field of the model holds) becomes `i64::MIN + 1`.
    fn from(v: i64) -> Self {
        OptInt(v.max(i64::MIN + 1))
    }
}

impl From<Option<i64>> for OptInt {
    fn from(v: Option<i64>) -> Self {
        v.map_or(OptInt::NONE, OptInt::from)
    }
}

impl fmt::Debug for OptInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for OptInt {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for OptInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Option::<i64>::deserialize(d)? {
            Some(i64::MIN) => Err(serde::de::Error::custom(
                "integer -9223372036854775808 is out of range (the least this server keeps is -9223372036854775807)",
            )),
            v => Ok(OptInt::from(v)),
        }
    }
}

/// An optional time in 16 bytes (its seconds and nanoseconds; none is a nanosecond of `i32::MIN`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptTime {
    second: i64,
    nanosecond: i32,
}

impl OptTime {
    /// Absent.
    pub const NONE: OptTime = OptTime {
        second: 0,
        nanosecond: i32::MIN,
    };

    /// The time, if present.
    pub fn get(self) -> Option<Time> {
        if self.is_none() {
            return None;
        }
        Time::new(self.second, self.nanosecond).ok()
    }

    /// True when absent (for `skip_serializing_if`).
    pub fn is_none(&self) -> bool {
        self.nanosecond == i32::MIN
    }
}

impl Default for OptTime {
    fn default() -> Self {
        OptTime::NONE
    }
}

impl From<Time> for OptTime {
    fn from(t: Time) -> Self {
        OptTime {
            second: t.as_second(),
            nanosecond: t.subsec_nanosecond(),
        }
    }
}

impl From<Option<Time>> for OptTime {
    fn from(t: Option<Time>) -> Self {
        t.map_or(OptTime::NONE, OptTime::from)
    }
}

impl fmt::Debug for OptTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for OptTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for OptTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(OptTime::from(Option::<Time>::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn they_take_the_room_of_the_value_alone() {
        assert_eq!(std::mem::size_of::<OptInt>(), 8);
        assert_eq!(std::mem::size_of::<OptTime>(), 16);
    }

    #[test]
    fn an_integer_reads_and_writes_as_an_optional_one_and_the_least_is_refused_by_name() {
        for v in [0i64, -1, 1, i64::MAX, i64::MIN + 1, 8_589_934_592] {
            let o: OptInt = serde_json::from_value(json!(v)).expect("an integer");
            assert_eq!(o.get(), Some(v));
            assert_eq!(serde_json::to_value(o).expect("written"), json!(v));
        }
        let none: OptInt = serde_json::from_value(json!(null)).expect("null");
        assert!(none.is_none() && none.get().is_none() && none == OptInt::default());
        let err = serde_json::from_str::<OptInt>("-9223372036854775808")
            .expect_err("i64::MIN is the flag");
        assert!(err.to_string().contains("out of range"), "{err}");
        assert!(serde_json::from_value::<OptInt>(json!("3")).is_err());
        assert!(serde_json::from_value::<OptInt>(json!(1.5)).is_err());
    }

    #[test]
    fn a_time_reads_and_writes_as_an_optional_one_with_its_nanoseconds() {
        for text in [
            "2026-12-02T15:04:05Z",
            "1969-12-31T23:59:59.5Z",
            "1970-01-01T00:00:00Z",
            "2026-12-02T15:04:05.123456789Z",
            "0001-01-01T00:00:00Z",
            "9999-12-30T21:59:59.999999999Z",
        ] {
            let t: OptTime = serde_json::from_value(json!(text)).expect("a time");
            let direct: Time = text.parse().expect("jiff reads it");
            assert_eq!(t.get(), Some(direct), "{text}");
            assert_eq!(
                serde_json::to_value(t).expect("written"),
                serde_json::to_value(direct).expect("written")
            );
        }
        let none: OptTime = serde_json::from_value(json!(null)).expect("null");
        assert!(none.is_none() && none == OptTime::default());
        assert!(serde_json::from_value::<OptTime>(json!("yesterday")).is_err());
    }
}
