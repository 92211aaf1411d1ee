//! Verified JWT access tokens, kept so that a client's next request with the same token costs
//! a hash and a lookup instead of a signature verification (ES256 and RS256 verifications cost
//! more than the rest of a primary-key call: bench/OAUTH.md). An entry is keyed by the token's
//! SHA-256, never the token, and trusted until the token's `exp` or [`KEEP_FOR`], whichever is
//! sooner, and while the issuer's key set has lost no key since (its generation, see
//! `keys::Keys::generation`); at most [`MAX_ENTRIES`] are kept (past it, the expired go, then
//! all). Only tokens that verified are kept: a refusal is checked again each time.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::Identity;

/// How long a verified token is trusted without a new verification, at most.
pub const KEEP_FOR: Duration = Duration::from_secs(300);

/// How many verified tokens are kept.
pub const MAX_ENTRIES: usize = 10_000;

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

/// A verified token: who it names, until when it is trusted (Unix seconds), and the key set's
/// generation it verified under.
type Entry = (Arc<Identity>, u64, u64);

/// Verified tokens' identities.
#[derive(Default)]
pub struct Verified(RwLock<HashMap<Key, Entry>>);

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
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_ENTRIES {
            map.retain(|_, (_, u, _)| *u > now);
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(key, (identity, until, generation));
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
        let until = cache.0.read().unwrap()[&c].1;
        assert!(until <= now() + KEEP_FOR.as_secs(), "kept at most KEEP_FOR");
        assert!(cache.get(&key("d"), 0).is_none());
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = Verified::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache.put(key(&i.to_string()), someone(), now() + 60, 0);
        }
        assert!(cache.0.read().unwrap().len() <= MAX_ENTRIES);
    }
}
