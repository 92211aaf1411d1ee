//! Asking the person to confirm a destructive call, in both protocol eras.
//!
//! Protocol 2025-11-25: the server sends `elicitation/create` and waits, at most the confirm
//! timeout (`MCPSPEC_CONFIRM_TIMEOUT_SECS`, 300 s by default), for the answer. The stdio
//! transport gives that request an id the client cannot guess, so an answer sent before the
//! question was asked matches nothing.
//!
//! Protocol 2026-07-28: the server answers `input_required` with a `requestState` that only it
//! can have issued: sealed with HMAC-SHA256 under a key made at start-up (rmcp's
//! [`RequestStateCodec`]), bound to the tool and its exact arguments, expiring with the confirm
//! timeout, and good for one retry. A retry is confirmed only by an answer that comes with a
//! state that asked for it; a confirmation without one is a question not yet asked, and a
//! forged, tampered, expired, replayed or foreign state is refused as invalid params. A
//! handler's own questions may be answered without a state (SEP-2322 lets a client answer
//! what it knows the tool asks), but never with an answer to a question the state did not ask.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};

/// The key of the confirmation in a 2026-07-28 `input_required` round trip.
const CONFIRM_INPUT: &str = "confirm";

/// How asking the person to confirm a destructive call went.
pub enum Confirmation {
    /// Go on: the person accepted, or the client cannot ask (the argument rule stands alone).
    Go,
    /// Stop with nothing changed: `declined`, `cancelled`, or `did not answer`.
    Stop(&'static str),
    /// Nobody answered within the confirm timeout; nothing changed.
    TimedOut(Duration),
    /// Protocol 2026-07-28: answer with this `input_required` result; the client asks the
    /// person and retries the call with the answer and the state.
    Ask(Box<InputRequiredResult>),
}

/// Where a team of replicas records the states they redeemed: given a state's nonce and its
/// life, `Ok(true)` when no replica used it before. The shared database's
/// [`Database::redeem_state`](crate::backend::Database::redeem_state).
pub type Ledger = std::sync::Arc<dyn Fn(&str, Duration) -> Result<bool, String> + Send + Sync>;

/// The confirmation policy of one server process: the wait bound and the state seal.
pub struct Confirmer {
    timeout: Duration,
    codec: RequestStateCodec,
    /// States already used, by nonce, until they expire: each confirms one retry only.
    used: Mutex<HashMap<String, Instant>>,
    /// The team's record of used states, when replicas share a database; then `used` is not
    /// consulted.
    ledger: Option<Ledger>,
}

impl Confirmer {
    /// A confirmer with a fresh random key; `timeout` bounds both the wait for an answer and
    /// the life of an issued state.
    pub fn new(timeout: Duration) -> Confirmer {
        Confirmer::with_key(timeout, random_bytes::<32>().to_vec(), None)
    }

    /// A confirmer that seals with `key` (32 bytes or more): replicas given the same key
    /// accept each other's states. With a `ledger` a state is redeemed once in the whole
    /// team; without one each process remembers only the states it redeemed, so a state can
    /// be used once per replica within its life.
    pub fn with_key(timeout: Duration, key: Vec<u8>, ledger: Option<Ledger>) -> Confirmer {
        Confirmer {
            timeout,
            codec: RequestStateCodec::new_unchecked(key),
            used: Mutex::new(HashMap::new()),
            ledger,
        }
    }

    /// Asks the person to confirm a call: with `elicitation/create` to a client of protocol
    /// 2025-11-25 that declared the capability in `initialize`, or, for a call of protocol
    /// 2026-07-28 (`round`) whose `_meta` declares it, with an `input_required` result whose
    /// answer comes back in the retried call.
    pub async fn confirm(
        &self,
        context: &RequestContext<RoleServer>,
        round: Option<&Round>,
        question: String,
    ) -> Confirmation {
        let Some(round) = round else {
            return self.confirm_in_session(context, question).await;
        };
        let declared = context
            .meta
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if !declared {
            // Clients without elicitation keep the argument rule alone.
            return Confirmation::Go;
        }
        match round.answers.get(CONFIRM_INPUT) {
            None => {
                let request = InputRequest::Elicitation(ElicitRequest::new(form(question)));
                let requests = [(CONFIRM_INPUT.to_string(), request)].into_iter().collect();
                Confirmation::Ask(Box::new(self.issue(round, requests)))
            }
            Some(answer) => {
                match serde_json::from_value::<ElicitationAction>(answer["action"].clone()) {
                    Ok(a) => action(&a).map_or(Confirmation::Go, Confirmation::Stop),
                    Err(_) => Confirmation::Stop("did not answer"),
                }
            }
        }
    }

    /// Protocol 2025-11-25: `elicitation/create` to a client that declared the capability.
    async fn confirm_in_session(
        &self,
        context: &RequestContext<RoleServer>,
        question: String,
    ) -> Confirmation {
        if context.peer.supported_elicitation_modes().is_empty() {
            // Clients without elicitation keep the argument rule alone.
            return Confirmation::Go;
        }
        // The person may take their time, up to the timeout; a `notifications/cancelled`
        // for the call ends the wait, with nothing changed.
        let answer = tokio::select! {
            a = tokio::time::timeout(self.timeout, context.peer.create_elicitation(form(question))) => a,
            () = context.ct.cancelled() => return Confirmation::Stop("cancelled"),
        };
        match answer {
            Err(_) => Confirmation::TimedOut(self.timeout),
            Ok(Ok(r)) => action(&r.action).map_or(Confirmation::Go, Confirmation::Stop),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the confirmation request failed");
                Confirmation::Stop("did not answer")
            }
        }
    }

    /// The answers a call of protocol 2026-07-28 comes with: those sealed in the state this
    /// server issued plus the client's `inputResponses` to the questions that state asked; or,
    /// without a state, the client's responses to a handler's questions (not the confirmation,
    /// which counts only with the state that asked it). Other responses are ignored. Why not,
    /// when the state is not one this server issued for this call, or was used before.
    pub fn round(&self, call: &Call<'_>) -> Result<Round, String> {
        let bound = call.binding();
        let responses = call.responses.into_iter().flatten();
        let Some(state) = call.request_state else {
            let answers = responses
                .filter(|(key, _)| key.as_str() != CONFIRM_INPUT)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return Ok(Round { bound, answers });
        };
        let (mut answers, asked) = self.redeem(state, &bound)?;
        for (key, answer) in responses.filter(|(key, _)| asked.contains(key.as_str())) {
            answers.insert(key.clone(), answer.clone());
        }
        Ok(Round { bound, answers })
    }

    /// The `input_required` result that asks `requests`, with a fresh sealed state that
    /// carries the round's answers so far.
    pub fn issue(
        &self,
        round: &Round,
        requests: BTreeMap<String, InputRequest>,
    ) -> InputRequiredResult {
        let asked: Vec<&String> = requests.keys().collect();
        let sealed = json!({"n": hex(&random_bytes::<16>()), "a": round.answers, "q": asked});
        let state = self.codec.seal_with(
            sealed.to_string().as_bytes(),
            &SealOptions::new()
                .associated_data(&round.bound)
                .ttl(self.timeout),
        );
        InputRequiredResult::new(Some(requests), Some(state))
    }

    /// Opens a state for this call, marks it used and returns the answers it carries and the
    /// keys of the questions it asked; why not, when it cannot be.
    fn redeem(
        &self,
        state: &str,
        bound: &[u8],
    ) -> Result<(Map<String, Value>, BTreeSet<String>), String> {
        let sealed = self
            .codec
            .open_with(state, bound)
            .map_err(|e| e.to_string())?;
        let sealed: Value = serde_json::from_slice(&sealed)
            .map_err(|_| "request state is malformed".to_string())?;
        let (Some(nonce), Some(answers), Some(asked)) = (
            sealed["n"].as_str(),
            sealed["a"].as_object(),
            sealed["q"].as_array(),
        ) else {
            return Err("request state is malformed".into());
        };
        let asked = asked
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        if let Some(ledger) = &self.ledger {
            // The database's synchronous driver must not run on an async runtime's thread.
            let recorded = std::thread::scope(|s| {
                s.spawn(|| ledger(nonce, self.timeout))
                    .join()
                    .unwrap_or_else(|_| Err("the record of used states failed".into()))
            });
            return match recorded {
                Ok(true) => Ok((answers.clone(), asked)),
                Ok(false) => Err("request state was already used".into()),
                Err(e) => {
                    tracing::warn!(error = %e, "the team's record of used request states did not answer");
                    Err("request state could not be checked; retry the call".into())
                }
            };
        }
        let now = Instant::now();
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        used.retain(|_, expires| *expires > now);
        if used.insert(nonce.to_string(), now + self.timeout).is_some() {
            return Err("request state was already used".into());
        }
        Ok((answers.clone(), asked))
    }
}

/// One round of a call of protocol 2026-07-28: what its states are bound to, and the answers
/// the client gave so far (the confirmation under `confirm`, a handler's under its keys).
pub struct Round {
    bound: Vec<u8>,
    pub answers: Map<String, Value>,
}

/// The request a round is for, as the client sent it: a tool's call or a prompt's get.
pub struct Call<'a> {
    /// `tools/call` or `prompts/get`.
    pub method: &'a str,
    /// The tool's or the prompt's name.
    pub name: &'a str,
    pub arguments: Option<&'a Value>,
    pub request_state: Option<&'a str>,
    pub responses: Option<&'a InputResponses>,
}

impl Call<'_> {
    /// What a state is bound to: the method, the name and the arguments in canonical form
    /// (object keys sorted), so that it answers this request and no other.
    fn binding(&self) -> Vec<u8> {
        let args = self.arguments.map(canonical).unwrap_or_default();
        format!("{}\0{}\0{args}", self.method, self.name).into_bytes()
    }
}

/// JSON text with every object's keys in sorted order.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&o[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(canonical).collect();
            format!("[{}]", parts.join(","))
        }
        other => other.to_string(),
    }
}

fn form(question: String) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question,
        requested_schema: ElicitationSchema::builder().build_unchecked(),
    }
}

fn action(a: &ElicitationAction) -> Option<&'static str> {
    match a {
        ElicitationAction::Accept => None,
        ElicitationAction::Decline => Some("declined"),
        _ => Some("cancelled"),
    }
}

/// Bytes from the operating system's random source.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // The OS source does not fail on supported systems; a zero key would still be per-build
    // secret-free, so refuse to go on rather than use it.
    getrandom::fill(&mut b).expect("the operating system's random source is available");
    b
}

/// Lowercase hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A [`Ledger`] in directory `dir`, for replicas that share no database but a directory (a
/// server without one, such as pm, or a volume every replica mounts): a used state's nonce is
/// a file created there only if it does not exist yet (`O_CREAT | O_EXCL`, atomic on a local
/// file system and on NFS), holding when the state expires; expired files are removed now and
/// then. The directory is made (owner only) when missing.
pub fn directory_ledger(dir: std::path::PathBuf) -> std::io::Result<Ledger> {
    std::fs::create_dir_all(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(std::sync::Arc::new(move |nonce: &str, ttl: Duration| {
        redeem_in(&dir, nonce, ttl)
    }))
}

/// Seconds since the epoch.
fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// [`directory_ledger`]'s work for one nonce.
fn redeem_in(dir: &std::path::Path, nonce: &str, ttl: Duration) -> Result<bool, String> {
    // The nonce comes from a sealed state, so it is ours; still, only a plain name is a file.
    if nonce.is_empty() || nonce.len() > 64 || !nonce.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("a request state's nonce is not a plain name".into());
    }
    let now = epoch_secs();
    if now.is_multiple_of(16) {
        sweep(dir, now);
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(nonce));
    match created {
        Ok(mut f) => {
            use std::io::Write;
            let expires = now.saturating_add(ttl.as_secs());
            f.write_all(expires.to_string().as_bytes())
                .map_err(|e| e.to_string())?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Removes the files of states that expired before `now`.
fn sweep(dir: &std::path::Path, now: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let expired = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .is_some_and(|expires| expires < now);
        if expired {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_state_confirms_only_its_own_call_once() {
        let c = Confirmer::new(Duration::from_secs(60));
        let args = json!({"database": "x", "confirm": true});
        let call = Call {
            method: "tools/call",
            name: "db.drop",
            arguments: Some(&args),
            request_state: None,
            responses: None,
        };
        let bound = call.binding();
        let mut first = c.round(&call).expect("no state, no answers");
        assert!(first.answers.is_empty());
        first
            .answers
            .insert("earlier".into(), json!({"action": "accept"}));
        let ask = InputRequest::Elicitation(ElicitRequest::new(form("drop it?".into())));
        let result = c.issue(&first, [("confirm".to_string(), ask)].into());
        let state = result.request_state.clone().expect("a state");
        let other = json!({"database": "y", "confirm": true});
        let elsewhere = Call {
            arguments: Some(&other),
            ..call
        };
        assert!(c.redeem(&state, &elsewhere.binding()).is_err());
        // Nor for a prompt of the same name with the same arguments.
        let as_prompt = Call {
            method: "prompts/get",
            ..call
        };
        assert!(c.redeem(&state, &as_prompt.binding()).is_err());
        let mut forged = state.clone();
        forged.push('x');
        assert!(c.redeem(&forged, &bound).is_err());
        // The answers sealed into the state come back with the client's responses to what
        // it asked; a response to a question it did not ask is ignored.
        let responses = [
            ("confirm".to_string(), json!({"action": "decline"})),
            ("unasked".to_string(), json!({"action": "accept"})),
        ]
        .into();
        let retry = Call {
            request_state: Some(&state),
            responses: Some(&responses),
            ..call
        };
        let round = c.round(&retry).expect("its own state");
        assert_eq!(round.answers["earlier"]["action"], "accept");
        assert_eq!(round.answers["confirm"]["action"], "decline");
        assert!(!round.answers.contains_key("unasked"));
        assert!(c.round(&retry).is_err(), "a state is good once");
        // Another process (another key) does not accept it.
        assert!(
            Confirmer::new(Duration::from_secs(60))
                .redeem(&state, &bound)
                .is_err()
        );
    }

    #[test]
    fn without_a_state_only_a_handler_s_questions_are_answered() {
        let c = Confirmer::new(Duration::from_secs(60));
        let responses = [
            ("confirm".to_string(), json!({"action": "accept"})),
            ("user_name".to_string(), json!({"action": "accept"})),
        ]
        .into();
        let call = Call {
            method: "tools/call",
            name: "db.drop",
            arguments: None,
            request_state: None,
            responses: Some(&responses),
        };
        let round = c.round(&call).expect("no state to check");
        assert!(round.answers.contains_key("user_name"));
        assert!(
            !round.answers.contains_key("confirm"),
            "a confirmation needs its state"
        );
    }

    #[test]
    fn a_directory_ledger_redeems_a_nonce_once_across_processes_sharing_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("states");
        let one = directory_ledger(path.clone()).expect("ledger");
        let two = directory_ledger(path.clone()).expect("ledger");
        let ttl = Duration::from_secs(60);
        assert_eq!(one("ab12", ttl), Ok(true));
        assert_eq!(two("ab12", ttl), Ok(false), "used by the other");
        assert_eq!(one("ab12", ttl), Ok(false));
        assert_eq!(two("cd34", ttl), Ok(true));
        for hostile in ["../x", "a/b", "", ".", "a b"] {
            assert!(one(hostile, ttl).is_err(), "{hostile}");
        }
        assert_eq!(std::fs::read_dir(&path).unwrap().count(), 2);
        // An expired state's file goes at a sweep.
        std::fs::write(path.join("ef56"), "1").unwrap();
        sweep(&path, epoch_secs());
        assert!(!path.join("ef56").exists());
        assert!(path.join("ab12").exists());
    }

    #[test]
    fn canonical_json_sorts_keys() {
        assert_eq!(
            canonical(&json!({"b": 1, "a": [{"d": 1, "c": "x"}]})),
            r#"{"a":[{"c":"x","d":1}],"b":1}"#
        );
    }
}
