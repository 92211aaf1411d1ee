//! Values leaked once. The runtime keeps `&'static` tables, so the definitions a spec lowers
//! to are leaked, and `mcpspec dev` lowers the spec again at every save. Each text and each
//! slice is kept by its contents and handed out again when the same contents come back, so a
//! version served before leaks nothing and a new version only what differs from every earlier
//! one.

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Mutex, PoisonError};

/// `s` leaked once: the same text again is the same `&'static str`.
pub(crate) fn text(s: &str) -> &'static str {
    static TEXTS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut texts = TEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(t) = texts.get(s) {
        return t;
    }
    let t: &'static str = Box::leak(s.to_owned().into_boxed_str());
    texts.insert(t);
    t
}

/// [`text`] of a text that may be absent.
pub(crate) fn opt(s: Option<&str>) -> Option<&'static str> {
    s.map(text)
}

/// `items` leaked once: a slice of the same type and contents (as their `Debug` form, which
/// for these plain tables holds every field) is the same `&'static [T]`.
pub(crate) fn slice<T: Debug + Send + Sync + 'static>(items: Vec<T>) -> &'static [T] {
    use sha2::Digest as _;
    type Slices = HashMap<(TypeId, [u8; 32]), Box<dyn Any + Send + Sync>>;
    static SLICES: Mutex<Option<Slices>> = Mutex::new(None);
    if items.is_empty() {
        return &[];
    }
    let digest: [u8; 32] = sha2::Sha256::digest(format!("{items:?}").as_bytes()).into();
    let mut slices = SLICES.lock().unwrap_or_else(PoisonError::into_inner);
    let kept = slices
        .get_or_insert_with(HashMap::new)
        .entry((TypeId::of::<T>(), digest))
        .or_insert_with(|| Box::new(&*Box::leak(items.into_boxed_slice())));
    kept.downcast_ref::<&'static [T]>()
        .copied()
        .unwrap_or_default()
}

/// Each of `items` made by `f`, as a [`slice`].
pub(crate) fn list<T, U: Debug + Send + Sync + 'static>(
    items: &[T],
    f: impl FnMut(&T) -> U,
) -> &'static [U] {
    slice(items.iter().map(f).collect())
}

/// Texts, as a [`slice`] of [`text`]s.
pub(crate) fn texts(items: &[String]) -> &'static [&'static str] {
    list(items, |s| text(s))
}

/// Pairs of texts, as a [`slice`].
pub(crate) fn pairs(items: &[(String, String)]) -> &'static [(&'static str, &'static str)] {
    list(items, |(a, b)| (text(a), text(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_contents_are_the_same_leak() {
        let a = texts(&["x".into(), "y".into()]);
        let b = slice(vec![text("x"), text("y")]);
        assert!(std::ptr::eq(a, b));
        assert!(std::ptr::eq(text("x"), a[0]));
        // Other contents, or the same Debug form in another type, are another slice.
        assert!(!std::ptr::eq(a, texts(&["y".into(), "x".into()])));
        let owned: &'static [String] = slice(vec!["x".to_string(), "y".to_string()]);
        assert_eq!(owned, ["x", "y"]);
        assert!(slice::<u8>(Vec::new()).is_empty());
    }
}
