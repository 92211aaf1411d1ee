//! The vectors a provider made, kept by (provider, model, dimensions, text): the key is the
//! SHA-256 of the model (whose name carries the provider and the dimensions) and the text, so
//! that no text is kept, only its digest. Bounded by bytes in two generations: a lookup that
//! finds a vector in the older one moves it to the newer, and when the newer is full the older
//! is dropped whole, so that what is used stays and what is not goes, without a list to keep
//! in order on every lookup.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Vector;

/// What a provider's cache holds at most: 64 MiB, some 60,000 vectors of 256 dimensions.
#[cfg_attr(not(feature = "embeddings"), allow(dead_code))]
pub const DEFAULT_BYTES: usize = 64 << 20;

/// A cache of vectors by model and text.
pub struct Cache {
    inner: Mutex<Generations>,
    /// What one generation holds at most, in bytes.
    limit: usize,
}

#[derive(Default)]
struct Generations {
    newer: HashMap<[u8; 32], Vector>,
    newer_bytes: usize,
    older: HashMap<[u8; 32], Vector>,
}

/// What a kept vector costs: its floats, its key and the map's own share.
fn cost(v: &Vector) -> usize {
    v.len() * 4 + 32 + 48
}

fn key(model: &str, text: &str) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update((model.len() as u64).to_le_bytes());
    h.update(model.as_bytes());
    h.update(text.as_bytes());
    h.finalize().into()
}

impl Cache {
    /// A cache of at most `bytes` (both generations together).
    #[cfg_attr(not(feature = "embeddings"), allow(dead_code))]
    pub fn new(bytes: usize) -> Cache {
        Cache {
            inner: Mutex::new(Generations::default()),
            limit: (bytes / 2).max(1),
        }
    }

    /// The vector `model` made of `text`, if it is kept.
    pub fn get(&self, model: &str, text: &str) -> Option<Vector> {
        let k = key(model, text);
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = g.newer.get(&k) {
            return Some(v.clone());
        }
        let v = g.older.remove(&k)?;
        g.insert(k, v.clone(), self.limit);
        Some(v)
    }

    /// Keeps the vector `model` made of `text`.
    pub fn put(&self, model: &str, text: &str, v: Vector) {
        let k = key(model, text);
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.insert(k, v, self.limit);
    }

    /// How many vectors are kept.
    pub fn len(&self) -> usize {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.newer.len() + g.older.len()
    }
}

impl Generations {
    fn insert(&mut self, k: [u8; 32], v: Vector, limit: usize) {
        let c = cost(&v);
        if self.newer_bytes + c > limit {
            self.older = std::mem::take(&mut self.newer);
            self.newer_bytes = 0;
        }
        if self.newer.insert(k, v).is_none() {
            self.newer_bytes += c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32) -> Vector {
        vec![x; 4].into()
    }

    #[test]
    fn a_text_is_kept_per_model() {
        let c = Cache::new(1 << 20);
        c.put("a@4", "hello", v(1.0));
        assert_eq!(c.get("a@4", "hello").as_deref(), Some(&[1.0; 4][..]));
        assert!(c.get("b@4", "hello").is_none());
        assert!(c.get("a@4", "hello ").is_none());
        // A model's name and a text's start are told apart.
        c.put("a", "@4hello", v(2.0));
        assert_eq!(c.get("a@4", "hello").as_deref(), Some(&[1.0; 4][..]));
    }

    #[test]
    fn what_is_used_stays_and_the_rest_goes_within_the_bound() {
        // Room for four vectors per generation.
        let c = Cache::new(2 * 4 * cost(&v(0.0)));
        for i in 0..4 {
            c.put("m", &i.to_string(), v(i as f32));
        }
        // The fifth starts a generation; the first four are the older one.
        c.put("m", "4", v(4.0));
        assert!(c.get("m", "0").is_some(), "moved to the newer generation");
        for i in 5..8 {
            c.put("m", &i.to_string(), v(i as f32));
        }
        // The newer generation (4, 0, 5, 6) was full: 7 started another and the older one,
        // with 1, 2 and 3, went.
        assert!(c.get("m", "0").is_some());
        assert!(c.get("m", "1").is_none());
        assert!(c.len() <= 8);
    }
}
