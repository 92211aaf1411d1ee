//! Verified JWT access tokens, kept so that a client's next request with the same token costs
//! a hash and a lookup instead of a signature verification (ES256 and RS256 verifications cost
//! more than the rest of a primary-key call: bench/OAUTH.md). An entry is keyed by the token's
//! SHA-256, never the token, and trusted until the token's `exp` or [`KEEP_FOR`], whichever is
//! sooner, and while the issuer's key set has lost or replaced no key since (its generation,
//! see `keys::Keys::generation`). Only tokens that verified are kept: a refusal is checked
//! again each time. What an entry holds is the identity the server uses (see
//! [`super::Kept`]), and the cache is bounded by entries and by bytes ([`Bounded`]), which the
//! introspection cache shares.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::Identity;

/// How long a verified token is trusted without a new verification, at most.
pub const KEEP_FOR: Duration = Duration::from_secs(300);

/// How many verified tokens (or introspection answers) are kept.
pub const MAX_ENTRIES: usize = 10_000;

/// How many bytes the identities of a cache may hold.
pub const MAX_BYTES: usize = 32 * 1024 * 1024;

/// What a cache entry costs besides its identity: the key, the map's slot, the times.
const ENTRY_BYTES: usize = 96;

/// A token's key in the cache.
pub type Key = [u8; 32];

/// The key of `token`.
pub fn key(token: &str) -> Key {
    Sha256::digest(token.as_bytes()).into()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// A map of tokens' keys to what was found of them, bounded by [`MAX_ENTRIES`] and
/// [`MAX_BYTES`]: past either, the expired entries go, then all of them.
pub struct Bounded<V> {
    map: HashMap<Key, (V, usize)>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<V> Default for Bounded<V> {
    fn default() -> Self {
        Bounded::new(MAX_ENTRIES, MAX_BYTES)
    }
}

impl<V> Bounded<V> {
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    pub fn get(&self, key: &Key) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    /// Keeps `value`, which holds `bytes`; makes room first, forgetting what `expired` says
    /// has expired, then everything. A value larger than the whole bound is not kept.
    pub fn insert(&mut self, key: Key, value: V, bytes: usize, expired: impl Fn(&V) -> bool) {
        let bytes = bytes + ENTRY_BYTES;
        if bytes > self.max_bytes {
            return;
        }
        if let Some((_, old)) = self.map.remove(&key) {
            self.bytes -= old;
        }
        if self.map.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
            self.map.retain(|_, (v, _)| !expired(v));
            self.bytes = self.map.values().map(|(_, b)| b).sum();
            if self.map.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
                self.map.clear();
                self.bytes = 0;
            }
        }
        self.map.insert(key, (value, bytes));
        self.bytes += bytes;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// A verified token: who it names, until when it is trusted (Unix seconds), and the key set's
/// generation it verified under.
type Entry = (Arc<Identity>, u64, u64);

/// Verified tokens' identities.
#[derive(Default)]
pub struct Verified(RwLock<Bounded<Entry>>);

impl Verified {
    /// The identity of a token verified before, under the key set's `generation`, and still
    /// trusted.
    pub fn get(&self, key: &Key, generation: u64) -> Option<Arc<Identity>> {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        let (identity, until, verified_under) = map.get(key)?;
        (now() < *until && *verified_under == generation).then(|| identity.clone())
    }

    /// Keeps a verified token's identity until its `exp` (or [`KEEP_FOR`] from now), for the
    /// key set's `generation`.
    pub fn put(&self, key: Key, identity: Arc<Identity>, exp: u64, generation: u64) {
        let now = now();
        let until = exp.min(now + KEEP_FOR.as_secs());
        if until <= now {
            return;
        }
        let bytes = identity.bytes();
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.insert(key, (identity, until, generation), bytes, |(_, u, _)| {
            *u <= now
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn someone() -> Arc<Identity> {
        Arc::new(Identity {
            sub: "alice".into(),
            scopes: vec![],
            claims: serde_json::Map::new(),
            all_claims: None,
        })
    }

    #[test]
    fn a_token_is_trusted_until_it_expires_and_never_past_keep_for() {
        let cache = Verified::default();
        let (a, b, c) = (key("a"), key("b"), key("c"));
        cache.put(a, someone(), now() + 60, 0);
        cache.put(b, someone(), now() - 1, 0);
        cache.put(c, someone(), u64::MAX, 0);
        assert!(cache.get(&a, 0).is_some());
        assert!(
            cache.get(&a, 1).is_none(),
            "a token of an older key set is verified again"
        );
        assert!(cache.get(&b, 0).is_none(), "an expired token is not kept");
        let until = cache.0.read().unwrap().get(&c).unwrap().1;
        assert!(until <= now() + KEEP_FOR.as_secs(), "kept at most KEEP_FOR");
        assert!(cache.get(&key("d"), 0).is_none());
    }

    #[test]
    fn the_cache_is_bounded_by_entries() {
        let cache = Verified::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache.put(key(&i.to_string()), someone(), now() + 60, 0);
        }
        assert!(cache.0.read().unwrap().len() <= MAX_ENTRIES);
    }

    /// Identities with large claim sets fill the byte bound long before the entry bound.
    #[test]
    fn the_cache_is_bounded_by_bytes() {
        let mut cache = Bounded::<usize>::new(1000, 10 * (1000 + ENTRY_BYTES));
        for i in 0..25 {
            cache.insert(key(&i.to_string()), i, 1000, |_| false);
            assert!(cache.bytes <= 10 * (1000 + ENTRY_BYTES));
            assert!(cache.len() <= 10);
        }
        assert!(cache.get(&key("24")).is_some(), "the newest is kept");
        cache.insert(key("huge"), 0, 100_000, |_| false);
        assert!(cache.get(&key("huge")).is_none(), "larger than the bound");
        // Replacing an entry counts it once.
        cache.insert(key("24"), 24, 1000, |_| false);
        cache.insert(key("24"), 24, 1000, |_| false);
        assert_eq!(
            cache.bytes,
            cache.map.values().map(|(_, b)| b).sum::<usize>()
        );
    }
}
