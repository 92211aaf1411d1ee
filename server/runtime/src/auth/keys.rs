//! The issuer's signing keys: found through its metadata (RFC 8414, else OpenID discovery),
//! fetched from its `jwks_uri`, and fetched again when a token names a key not seen yet (key
//! rotation), at most once per [`REFETCH_EVERY`] whatever the tokens say, so that a flood of
//! made-up key ids costs the issuer nothing; and fetched again once the set is older than
//! [`MAX_AGE`], so that a key the issuer withdraws stops verifying. Each fetch that loses a key,
//! or finds other key material under a key id it had, moves the [`Keys::generation`] on, which
//! retires the tokens verified before it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use tokio::sync::Mutex;

/// The shortest time between two fetches of the key set, by default: a rotated key is picked
/// up within this long of its first token. `MCPSPEC_OAUTH_REFETCH_SECS` sets another (at most
/// 300; the tests use 0).
pub const REFETCH_EVERY: Duration = Duration::from_secs(10);

/// How old the key set may grow before the next token fetches it again (one token at a time;
/// the others use the set they have). `MCPSPEC_OAUTH_KEYS_MAX_AGE_SECS` sets another (the
/// tests use 0: every token).
pub const MAX_AGE: Duration = Duration::from_secs(300);

/// [`MAX_AGE`], or what `MCPSPEC_OAUTH_KEYS_MAX_AGE_SECS` says.
fn max_age() -> Duration {
    std::env::var("MCPSPEC_OAUTH_KEYS_MAX_AGE_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(MAX_AGE, |s| Duration::from_secs(s.min(86_400)))
}

/// [`REFETCH_EVERY`], or what `MCPSPEC_OAUTH_REFETCH_SECS` says.
fn refetch_every() -> Duration {
    std::env::var("MCPSPEC_OAUTH_REFETCH_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(REFETCH_EVERY, |s| Duration::from_secs(s.min(300)))
}

/// Fetching metadata or keys gives up after this long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest metadata document or key set read.
const MAX_DOCUMENT: usize = 256 * 1024;

/// Why the issuer's metadata or keys could not be had; never carries a token.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("cannot fetch {url}: {why}")]
    Fetch { url: String, why: String },
    #[error(
        "the issuer's metadata at {url} names the issuer {found:?}, not {expected:?}; check --oauth-issuer"
    )]
    IssuerMismatch {
        url: String,
        found: String,
        expected: String,
    },
    #[error(
        "the issuer {0} publishes no metadata with a jwks_uri at /.well-known/oauth-authorization-server or /.well-known/openid-configuration"
    )]
    NoMetadata(String),
    #[error(
        "the issuer {0} names no introspection_endpoint in its metadata, so opaque tokens cannot be checked; unset MCPSPEC_OAUTH_CLIENT_ID to accept JWTs only"
    )]
    NoIntrospection(String),
}

/// A verification key and the algorithm it is for.
#[derive(Clone)]
pub struct Key {
    pub key: DecodingKey,
    pub alg: Option<Algorithm>,
    /// The SHA-256 of the key as published (its JWK's JSON), to tell a key replaced under the
    /// same id.
    material: [u8; 32],
}

/// The issuer's keys, fetched again on an unknown key id (bounded). Tokens with known keys
/// read the set under a read lock and never wait for a fetch.
pub struct Keys {
    client: reqwest::Client,
    jwks_uri: String,
    keys: RwLock<Arc<HashMap<String, Key>>>,
    /// Held while fetching, so that one fetch runs at a time.
    fetching: Mutex<()>,
    /// The shortest time between two fetches.
    every: Duration,
    /// How old the set may grow.
    max_age: Duration,
    /// When the set was last fetched (or a fetch was tried), in nanoseconds since `born`:
    /// read without a lock.
    fetched_at: AtomicU64,
    born: Instant,
    /// Moves on each time a fetch loses a key the set had or replaces one under its id.
    generation: AtomicU64,
}

/// An HTTP client for the issuer: no redirects followed to other hosts' keys, a timeout.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client with rustls")
}

/// GET `url` as JSON, refusing a body past [`MAX_DOCUMENT`].
async fn get_json(client: &reqwest::Client, url: &str) -> Result<serde_json::Value, KeysError> {
    let fail = |why: String| KeysError::Fetch {
        url: url.to_string(),
        why,
    };
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("HTTP {}", response.status())));
    }
    let body = body_within(response, MAX_DOCUMENT).await.map_err(fail)?;
    serde_json::from_slice(&body).map_err(|e| fail(format!("not JSON: {e}")))
}

/// The body of `response`, read as it arrives and given up as soon as it passes `limit`
/// bytes (or says it will), so that an issuer's answer never takes more memory than that.
pub(super) async fn body_within(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let too_large = || format!("larger than {limit} bytes");
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The metadata addresses of `issuer`, in the order tried: RFC 8414's (the well-known part
/// goes between the host and the issuer's path), then OpenID Connect discovery's (appended).
fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let (origin, path) = match trimmed.find("://").map(|i| i + 3) {
        Some(start) => match trimmed[start..].find('/') {
            Some(p) => trimmed.split_at(start + p),
            None => (trimmed, ""),
        },
        None => (trimmed, ""),
    };
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ]
}

impl Keys {
    /// Finds `issuer`'s key set through its metadata and fetches it; the metadata too.
    pub async fn discover(issuer: &str) -> Result<(Keys, serde_json::Value), KeysError> {
        let client = client();
        let mut jwks_uri = None;
        let mut metadata = serde_json::Value::Null;
        for url in metadata_urls(issuer) {
            let Ok(meta) = get_json(&client, &url).await else {
                continue;
            };
            let found = meta["issuer"].as_str().unwrap_or_default();
            if found != issuer {
                return Err(KeysError::IssuerMismatch {
                    url,
                    found: found.to_string(),
                    expected: issuer.to_string(),
                });
            }
            if let Some(uri) = meta["jwks_uri"].as_str() {
                jwks_uri = Some(uri.to_string());
                metadata = meta;
                break;
            }
        }
        let jwks_uri = jwks_uri.ok_or_else(|| KeysError::NoMetadata(issuer.to_string()))?;
        let keys = fetch(&client, &jwks_uri).await?;
        let keys = Keys {
            client,
            jwks_uri,
            keys: RwLock::new(Arc::new(keys)),
            fetching: Mutex::new(()),
            every: refetch_every(),
            max_age: max_age(),
            fetched_at: AtomicU64::new(0),
            born: Instant::now(),
            generation: AtomicU64::new(0),
        };
        Ok((keys, metadata))
    }

    /// The HTTP client that talks to the issuer.
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }

    fn known(&self, kid: Option<&str>) -> Option<Key> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
        pick(&keys, kid)
    }

    /// The key `kid` (or the only key, for a token without a key id), fetching the key set
    /// again when it is unknown and the last fetch is older than [`REFETCH_EVERY`].
    pub async fn get(&self, kid: Option<&str>) -> Option<Key> {
        self.refresh().await;
        if let Some(key) = self.known(kid) {
            return Some(key);
        }
        let fetching = self.fetching.lock().await;
        // Another token may have brought the key while this one waited.
        if let Some(key) = self.known(kid) {
            return Some(key);
        }
        if self.age() < self.every {
            return None;
        }
        self.fetch_again(fetching).await;
        self.known(kid)
    }

    /// Fetches the set again when it is older than [`MAX_AGE`]: one token fetches, the others
    /// go on with the set they have. A lock-free check when it is not.
    pub async fn refresh(&self) {
        if !self.stale() {
            return;
        }
        if let Ok(fetching) = self.fetching.try_lock()
            && self.stale()
        {
            self.fetch_again(fetching).await;
        }
    }

    /// Which set of keys verified a token: a token verified under an older generation may
    /// have been signed with a key the issuer has withdrawn since.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// How long ago the set was last fetched (or a fetch was tried).
    fn age(&self) -> Duration {
        let at = Duration::from_nanos(self.fetched_at.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(at)
    }

    /// Whether the set is older than [`MAX_AGE`].
    fn stale(&self) -> bool {
        self.age() >= self.max_age
    }

    /// Fetches the set again (holding `fetching`, so one fetch runs at a time); a set that
    /// lost a key moves the generation on. A failed fetch keeps the set it had.
    async fn fetch_again(&self, _fetching: tokio::sync::MutexGuard<'_, ()>) {
        let now = self.born.elapsed().as_nanos() as u64;
        self.fetched_at.store(now, Ordering::Relaxed);
        match fetch(&self.client, &self.jwks_uri).await {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "fetched the issuer's keys again");
                let mut current = self.keys.write().unwrap_or_else(|e| e.into_inner());
                if retires(&current, &keys) {
                    tracing::info!(
                        "the issuer withdrew or replaced a key; tokens it signed are refused"
                    );
                    self.generation.fetch_add(1, Ordering::AcqRel);
                }
                *current = Arc::new(keys);
            }
            Err(e) => tracing::warn!("the issuer's keys could not be fetched again: {e}"),
        }
    }
}

/// Whether going from the set `before` to `after` retires the tokens verified before: a key
/// id gone, or the same id with other key material.
fn retires(before: &HashMap<String, Key>, after: &HashMap<String, Key>) -> bool {
    before
        .iter()
        .any(|(kid, key)| after.get(kid).is_none_or(|k| k.material != key.material))
}

fn pick(keys: &HashMap<String, Key>, kid: Option<&str>) -> Option<Key> {
    match kid {
        Some(kid) => keys.get(kid).cloned(),
        None if keys.len() == 1 => keys.values().next().cloned(),
        None => None,
    }
}

/// The signing keys of the set at `url` by key id; keys for encryption, without an id or of a
/// kind jsonwebtoken cannot read are left out.
async fn fetch(client: &reqwest::Client, url: &str) -> Result<HashMap<String, Key>, KeysError> {
    let set: JwkSet =
        serde_json::from_value(get_json(client, url).await?).map_err(|e| KeysError::Fetch {
            url: url.to_string(),
            why: format!("not a JWK set: {e}"),
        })?;
    Ok(set.keys.iter().filter_map(signing_key).collect())
}

fn signing_key(jwk: &Jwk) -> Option<(String, Key)> {
    use jsonwebtoken::jwk::PublicKeyUse;
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let kid = jwk.common.key_id.clone()?;
    let alg = jwk
        .common
        .key_algorithm
        .and_then(|a| a.to_string().parse().ok());
    let key = DecodingKey::from_jwk(jwk).ok()?;
    let material = super::cache::key(&serde_json::to_string(jwk).ok()?);
    Some((kid, Key { key, alg, material }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key set of one RSA key under `kid`, with modulus `n`.
    fn set(kid: &str, n: &str) -> HashMap<String, Key> {
        let jwk: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": n, "e": "AQAB"
        }))
        .unwrap();
        signing_key(&jwk).into_iter().collect()
    }

    #[test]
    fn a_key_withdrawn_or_replaced_under_its_id_retires_what_it_verified() {
        let (n1, n2) = (
            "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri",
            "oahUIoWw0K0usKNuOR6H4wkf4oBUXHTxRvgb48E-BVvx",
        );
        let first = set("a", n1);
        assert_eq!(first.len(), 1);
        assert!(!retires(&first, &set("a", n1)), "the same key");
        assert!(
            retires(&first, &set("a", n2)),
            "other material under the same id"
        );
        assert!(retires(&first, &set("b", n1)), "the id withdrawn");
        let mut both = set("a", n1);
        both.extend(set("b", n2));
        assert!(!retires(&first, &both), "a key added");
    }

    #[test]
    fn metadata_urls_put_the_well_known_part_where_each_standard_says() {
        assert_eq!(
            metadata_urls("https://id.example.com"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server",
                "https://id.example.com/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://id.example.com/realms/team/"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server/realms/team",
                "https://id.example.com/realms/team/.well-known/openid-configuration"
            ]
        );
    }
}
