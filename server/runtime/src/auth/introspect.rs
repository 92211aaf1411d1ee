//! Opaque access tokens, checked by asking the issuer (RFC 7662 token introspection) when the
//! server has client credentials of its own to ask with (`MCPSPEC_OAUTH_CLIENT_ID` and
//! `MCPSPEC_OAUTH_CLIENT_SECRET`). The issuer's `introspection_endpoint` comes from its
//! metadata. An active token must be for this audience (and from this issuer, when the answer
//! says); it becomes an [`Identity`] like a JWT's (a client-credentials token, which names no
//! user, names its client). Answers are cached by the token's SHA-256, never the token: an
//! active one until it expires or for [`CACHE_FOR`], whichever is sooner, an inactive one for
//! [`CACHE_FOR`] too, so that a flood of made-up tokens reaches the issuer once each; at most
//! [`CACHE_ENTRIES`] answers are kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::Identity;
use super::verify::TokenError;

/// How long an introspection answer is trusted at most.
pub const CACHE_FOR: Duration = Duration::from_secs(60);

/// How many answers are kept; past it, the expired ones go, then the whole cache.
pub const CACHE_ENTRIES: usize = 10_000;

/// The server's own credentials at the issuer.
#[derive(Clone)]
pub struct ClientCredentials {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// An introspection answer as judged here, and until when it is trusted.
type Answer = (Result<Identity, TokenError>, Instant);

/// Asks the issuer about opaque tokens, with a bounded cache by the token's SHA-256.
pub struct Introspector {
    endpoint: String,
    credentials: ClientCredentials,
    client: reqwest::Client,
    cache: Mutex<HashMap<[u8; 32], Answer>>,
}

impl Introspector {
    pub fn new(endpoint: String, credentials: ClientCredentials, client: reqwest::Client) -> Self {
        Introspector {
            endpoint,
            credentials,
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The identity an opaque `token` names, for `issuer` and `audience`.
    pub async fn identity(
        &self,
        token: &str,
        issuer: &str,
        audience: &str,
    ) -> Result<Identity, TokenError> {
        let key = super::cache::key(token);
        if let Some(answer) = self.cached(&key) {
            return answer;
        }
        let answer = self.ask(token).await?;
        let (result, until) = judge(&answer, issuer, audience);
        self.keep(key, result.clone(), until);
        result
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Result<Identity, TokenError>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (answer, until) = cache.get(key)?;
        (Instant::now() < *until).then(|| answer.clone())
    }

    fn keep(&self, key: [u8; 32], answer: Result<Identity, TokenError>, until: Instant) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_ENTRIES {
            let now = Instant::now();
            cache.retain(|_, (_, u)| *u > now);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (answer, until));
    }

    /// The issuer's answer about `token`; a failure to ask refuses the token (and is logged,
    /// without it).
    async fn ask(&self, token: &str) -> Result<Map<String, Value>, TokenError> {
        let form = [("token", token), ("token_type_hint", "access_token")];
        let response = self
            .client
            .post(&self.endpoint)
            .basic_auth(&self.credentials.id, Some(&self.credentials.secret))
            .form(&form)
            .send()
            .await
            .map_err(|e| unavailable(&e.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(&format!("HTTP {}", response.status())));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| unavailable(&e.to_string()))?;
        serde_json::from_slice(&body).map_err(|_| unavailable("not a JSON object"))
    }
}

fn unavailable(why: &str) -> TokenError {
    tracing::warn!("token introspection failed: {why}");
    TokenError::Unverifiable
}

/// What an introspection answer means here, and until when to trust it.
fn judge(answer: &Map<String, Value>, issuer: &str, audience: &str) -> Answer {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let until = Instant::now() + CACHE_FOR;
    if answer.get("active") != Some(&Value::Bool(true)) {
        return (Err(TokenError::Inactive), until);
    }
    if answer
        .get("iss")
        .and_then(Value::as_str)
        .is_some_and(|i| i != issuer)
    {
        return (Err(TokenError::Issuer), until);
    }
    let for_us = match answer.get("aud") {
        Some(Value::String(a)) => a == audience,
        Some(Value::Array(all)) => all.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return (Err(TokenError::Audience), until);
    }
    let exp = answer.get("exp").and_then(Value::as_u64);
    if exp.is_some_and(|e| e <= now) {
        return (Err(TokenError::Expired), until);
    }
    let until = exp.map_or(until, |e| {
        until.min(Instant::now() + Duration::from_secs(e - now))
    });
    let mut claims = answer.clone();
    // A token a client got for itself names no user: its subject is the client.
    if !claims.contains_key("sub")
        && let Some(client) = claims.get("client_id").cloned()
    {
        claims.insert("sub".into(), client);
    }
    (super::verify::identity(claims), until)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(v: Value) -> Result<Identity, TokenError> {
        judge(v.as_object().unwrap(), "https://id", "https://me/mcp").0
    }

    #[test]
    fn an_answer_is_trusted_only_when_active_for_us_from_our_issuer() {
        let active = json!({"active": true, "iss": "https://id", "aud": "https://me/mcp",
            "sub": "alice", "scope": "a b", "exp": u64::MAX / 2});
        assert_eq!(of(active.clone()).unwrap().sub, "alice");
        let with = |k: &str, v: Value| {
            let mut a = active.clone();
            a[k] = v;
            a
        };
        assert_eq!(
            of(with("active", json!(false))).unwrap_err(),
            TokenError::Inactive
        );
        assert_eq!(
            of(with("iss", json!("https://evil"))).unwrap_err(),
            TokenError::Issuer
        );
        assert_eq!(
            of(with("aud", json!("https://other/mcp"))).unwrap_err(),
            TokenError::Audience
        );
        assert!(of(with("aud", json!(["x", "https://me/mcp"]))).is_ok());
        assert_eq!(of(with("exp", json!(1))).unwrap_err(), TokenError::Expired);
        let client = json!({"active": true, "aud": "https://me/mcp", "client_id": "robot"});
        assert_eq!(of(client).unwrap().sub, "robot");
    }
}
