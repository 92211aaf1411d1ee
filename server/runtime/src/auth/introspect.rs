//! Opaque access tokens, checked by asking the issuer (RFC 7662 token introspection) when the
//! server has client credentials of its own to ask with (`MCPSPEC_OAUTH_CLIENT_ID` and
//! `MCPSPEC_OAUTH_CLIENT_SECRET`). The issuer's `introspection_endpoint` comes from its
//! metadata. An active token must be for this audience (and from this issuer, when the answer
//! says); it becomes an [`Identity`] like a JWT's (a client-credentials token, which names no
//! user, names its client). Answers are cached by the token's SHA-256, never the token: an
//! active one until it expires or for [`CACHE_FOR`], whichever is sooner, an inactive one for
//! [`CACHE_FOR`] too, so that a flood of made-up tokens reaches the issuer once each; the cache
//! is bounded by entries and bytes as the verified tokens' is ([`super::cache::Bounded`]). An
//! answer is read up to [`MAX_ANSWER`] bytes, and its times must be what RFC 7662 says they are
//! (integers of seconds): an answer that says otherwise refuses the token.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::cache::Bounded;
use super::token::{LEEWAY, TokenError};
use super::{Identity, Kept};

/// How long an introspection answer is trusted at most.
pub const CACHE_FOR: Duration = Duration::from_secs(60);

/// The largest introspection answer read; a longer one refuses the token.
pub const MAX_ANSWER: usize = 64 * 1024;

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
    cache: Mutex<Bounded<Answer>>,
    kept: Arc<Kept>,
}

impl Introspector {
    pub fn new(
        endpoint: String,
        credentials: ClientCredentials,
        client: reqwest::Client,
        kept: Arc<Kept>,
    ) -> Self {
        Introspector {
            endpoint,
            credentials,
            client,
            cache: Mutex::new(Bounded::default()),
            kept,
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
        let (result, until) = judge(answer, issuer, audience, &self.kept);
        self.keep(key, result.clone(), until);
        result
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Result<Identity, TokenError>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (answer, until) = cache.get(key)?;
        (Instant::now() < *until).then(|| answer.clone())
    }

    fn keep(&self, key: [u8; 32], answer: Result<Identity, TokenError>, until: Instant) {
        let bytes = answer.as_ref().map_or(0, Identity::bytes);
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(key, (answer, until), bytes, |(_, u)| *u <= now);
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
        let body = super::keys::body_within(response, MAX_ANSWER)
            .await
            .map_err(|e| unavailable(&e))?;
        serde_json::from_slice(&body).map_err(|_| unavailable("not a JSON object"))
    }
}

fn unavailable(why: &str) -> TokenError {
    tracing::warn!("token introspection failed: {why}");
    TokenError::Unverifiable
}

/// A time of an introspection answer (`exp`, `nbf`, `iat`): absent, or an integer of seconds
/// since the epoch (RFC 7662, section 2.2); anything else is refused.
fn time(answer: &Map<String, Value>, name: &'static str) -> Result<Option<u64>, TokenError> {
    match answer.get(name) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(TokenError::ClaimType(name)),
    }
}

/// What an introspection answer means here, and until when to trust it: [`CACHE_FOR`], or
/// less when the token expires sooner.
fn judge(answer: Map<String, Value>, issuer: &str, audience: &str, kept: &Kept) -> Answer {
    let cache_until = Instant::now() + CACHE_FOR;
    match judged(answer, issuer, audience, kept) {
        Err(e) => (Err(e), cache_until),
        Ok((identity, exp)) => {
            let until = match exp.map(|e| e.saturating_sub(now())) {
                // A time further off than CACHE_FOR (as far as u64 goes) is the cache's bound.
                Some(left) if left < CACHE_FOR.as_secs() => {
                    Instant::now() + Duration::from_secs(left)
                }
                _ => cache_until,
            };
            (Ok(identity), until)
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The identity an active answer names, and its `exp`; why the token is refused otherwise.
fn judged(
    answer: Map<String, Value>,
    issuer: &str,
    audience: &str,
    kept: &Kept,
) -> Result<(Identity, Option<u64>), TokenError> {
    if answer.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenError::Inactive);
    }
    super::token::registered_types(&answer)?;
    if answer
        .get("iss")
        .and_then(Value::as_str)
        .is_some_and(|i| i != issuer)
    {
        return Err(TokenError::Issuer);
    }
    let for_us = match answer.get("aud") {
        Some(Value::String(a)) => a == audience,
        Some(Value::Array(all)) => all.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return Err(TokenError::Audience);
    }
    let (exp, nbf) = (time(&answer, "exp")?, time(&answer, "nbf")?);
    time(&answer, "iat")?;
    let now = now();
    if exp.is_some_and(|e| e <= now.saturating_sub(LEEWAY.as_secs())) {
        return Err(TokenError::Expired);
    }
    if nbf.is_some_and(|n| n > now.saturating_add(LEEWAY.as_secs())) {
        return Err(TokenError::NotYetValid);
    }
    let mut claims = answer;
    // A token a client got for itself names no user: its subject is the client.
    if !claims.contains_key("sub")
        && let Some(client) = claims.get("client_id").cloned()
    {
        claims.insert("sub".into(), client);
    }
    Ok((kept.identity(claims)?, exp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(v: Value) -> Result<Identity, TokenError> {
        let answer = v.as_object().unwrap().clone();
        judge(
            answer,
            "https://id",
            "https://me/mcp",
            &Kept::everything(&[]),
        )
        .0
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

    /// Times are integers of seconds: the largest one is trusted for CACHE_FOR without
    /// overflowing, and one of another type (an expired time as a float or a string, a time
    /// past u64) refuses the token; a token not valid yet is refused.
    #[test]
    fn an_answer_s_times_are_checked_as_rfc_7662_gives_them() {
        let active = json!({"active": true, "aud": "https://me/mcp", "sub": "a"});
        let with = |k: &str, v: Value| {
            let mut a = active.clone();
            a[k] = v;
            a
        };
        let (ok, until) = judge(
            with("exp", json!(u64::MAX)).as_object().unwrap().clone(),
            "https://id",
            "https://me/mcp",
            &Kept::everything(&[]),
        );
        assert!(ok.is_ok());
        assert!(until <= Instant::now() + CACHE_FOR);
        for (name, bad) in [
            ("exp", json!(1.5)),
            ("exp", json!("1")),
            ("exp", json!(-1)),
            ("exp", json!(1e30)),
            ("nbf", json!("0")),
            ("iat", json!(null)),
        ] {
            assert_eq!(
                of(with(name, bad.clone())).unwrap_err(),
                TokenError::ClaimType(name),
                "{name}: {bad}"
            );
        }
        assert_eq!(
            of(with("nbf", json!(now() + 3600))).unwrap_err(),
            TokenError::NotYetValid
        );
        assert!(of(with("nbf", json!(now()))).is_ok());
    }
}
