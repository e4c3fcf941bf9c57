//! A name search's text, and how a name or namespace is found to hold it (case folded).

use crate::store::held::Letters;

/// A name search's text, lowercased, with its searcher made once for the whole list.
#[derive(Clone)]
pub struct Folded {
    lower: String,
    finder: memchr::memmem::Finder<'static>,
    /// Its pairs of letters ([`Letters::wanted`]).
    letters: u64,
}

impl Folded {
    /// `text`, lowercased, ready to be searched for.
    pub fn new(text: &str) -> Self {
        let lower = text.to_lowercase();
        let finder = memchr::memmem::Finder::new(lower.as_bytes()).into_owned();
        let letters = Letters::wanted(&lower);
        Folded {
            lower,
            finder,
            letters,
        }
    }

    /// False when a namespace and name whose pairs of letters are `letters` cannot hold it
    /// (neither one, nor `namespace/name`): known without reading them.
    pub fn may_be_in(&self, letters: Letters) -> bool {
        letters.may_hold(self.letters)
    }

    /// True when `text`, lowercased, contains it. A text of lowercase ASCII (a Kubernetes name
    /// or namespace always is) is searched as it is.
    pub fn found_in(&self, text: &str) -> bool {
        if text
            .bytes()
            .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
        {
            return self.finder.find(text.as_bytes()).is_some();
        }
        contains_folded(text, &self.lower)
    }

    /// True when the text holds `c`.
    pub fn contains(&self, c: char) -> bool {
        self.lower.contains(c)
    }
}

/// True when `text`, lowercased, contains `lower` (already lowercase). An ASCII text (every
/// Kubernetes name) is compared in place; any other is lowercased first.
pub fn contains_folded(text: &str, lower: &str) -> bool {
    if !text.is_ascii() {
        return text.to_lowercase().contains(lower);
    }
    let (text, lower) = (text.as_bytes(), lower.as_bytes());
    lower.is_empty()
        || text
            .windows(lower.len())
            .any(|w| w.eq_ignore_ascii_case(lower))
}
