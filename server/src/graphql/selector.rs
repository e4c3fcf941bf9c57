//! Kubernetes label selectors (`a=b,c!=d,e in (x,y),f notin (z),g,!h`).

use crate::model::Pairs;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also matches objects without the key).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed selector: all requirements must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

impl Selector {
    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: Option<&Pairs>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && k.matches('/').count() <= 1
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a label selector does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unbalanced `)` at position {0}")]
    Unbalanced(usize),
    #[error("missing `)`")]
    Unclosed,
    #[error("empty requirement (two commas in a row?)")]
    Empty,
    #[error("`{0}` is not a valid label key")]
    Key(String),
    #[error("`{0}` is not a valid label value")]
    Value(String),
    #[error("expected a value set like `(a,b)`, found `{0}`")]
    Set(String),
}

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError::Unbalanced(i));
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Unclosed);
    }
    out.push(&s[start..]);
    Ok(out)
}

/// Parse a selector. The empty string selects everything.
pub fn parse(text: &str) -> Result<Selector, SelectorError> {
    let mut reqs = Vec::new();
    if text.trim().is_empty() {
        return Ok(Selector(reqs));
    }
    for term in split_top(text)? {
        let term = term.trim();
        if term.is_empty() {
            return Err(SelectorError::Empty);
        }
        let check_key = |k: &str| -> Result<String, SelectorError> {
            let k = k.trim();
            if valid_key(k) {
                Ok(k.to_string())
            } else {
                Err(SelectorError::Key(k.to_string()))
            }
        };
        let check_value = |v: &str| -> Result<String, SelectorError> {
            let v = v.trim();
            if valid_value(v) {
                Ok(v.to_string())
            } else {
                Err(SelectorError::Value(v.to_string()))
            }
        };
        let set = |rest: &str| -> Result<Vec<String>, SelectorError> {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| SelectorError::Set(rest.to_string()))?;
            inner.split(',').map(check_value).collect()
        };
        if let Some(k) = term.strip_prefix('!') {
            reqs.push(Requirement::DoesNotExist(check_key(k)?));
        } else if let Some((k, v)) = term.split_once("!=") {
            reqs.push(Requirement::NotEquals(check_key(k)?, check_value(v)?));
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            reqs.push(Requirement::Equals(check_key(k)?, check_value(v)?));
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            reqs.push(Requirement::NotIn(check_key(k)?, set(rest)?));
        } else if let Some((k, rest)) = term.split_once(" in ") {
            reqs.push(Requirement::In(check_key(k)?, set(rest)?));
        } else {
            reqs.push(Requirement::Exists(check_key(term)?));
        }
    }
    Ok(Selector(reqs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Pairs {
        pairs.iter().copied().collect()
    }

    #[test]
    fn set_and_equality_requirements() {
        let l = labels(&[("vitistack.io/node-role", "worker"), ("env", "dev")]);
        let ok = [
            "env=dev",
            "env==dev",
            "env!=prod",
            "env in (dev,test)",
            "env notin (prod)",
            "env",
            "!missing",
            "vitistack.io/node-role=worker,env in (dev)",
        ];
        for s in ok {
            assert!(parse(s).expect(s).matches(Some(&l)), "{s}");
        }
        for s in [
            "env=prod",
            "env in (prod)",
            "!env",
            "missing",
            "env notin (dev)",
        ] {
            assert!(!parse(s).expect(s).matches(Some(&l)), "{s}");
        }
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let reason = |s: &str| parse(s).expect_err(s).to_string();
        assert!(reason("env in dev").contains("value set"));
        assert!(reason("a=b,,c").contains("empty requirement"));
        assert!(reason("env in (dev").contains("missing `)`"));
        assert!(reason("bad key=x").contains("not a valid label key"));
        assert_eq!(parse("a)"), Err(SelectorError::Unbalanced(1)));
    }
}
