//! Embedding providers: what turns a call's text into the vectors its statements store and
//! search (a tool's `derive: {embed: NAME}`), chosen when the server starts from the spec's
//! `embeddings:` and the environment.
//!
//! - [`Embeddings`] holds one provider per name, each on or off (an `env:` provider whose
//!   variable is unset is off: keyword search only, and `:embeddings.NAME.health` says so).
//! - `model` (feature `embeddings`) is a static model read from a directory: tokenize, look up,
//!   mean-pool, L2-normalise, on the calling thread; loaded in the background at start-up.
//! - `openai` (feature `embeddings`) speaks the OpenAI embeddings API over HTTP, with retries
//!   that honour `Retry-After`, and batches concurrent calls' texts into one request.
//! - `cache` keeps vectors by (provider, model, dimensions, text), bounded by bytes, so that an
//!   update that leaves a text as it was asks no provider.
//!
//! A provider's key is read from its variable when the server starts and goes only into the
//! `Authorization` header: no log line, error or result carries it, nor the base URL's
//! credentials. A spec that declares no provider builds none of this.

pub(crate) mod cache;
pub mod columns;
pub(crate) mod derive;
#[cfg(feature = "embeddings")]
mod model;
#[cfg(feature = "embeddings")]
pub use model::Model as StaticModel;
#[cfg(feature = "embeddings")]
mod openai;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::def::{EmbeddingDef, ProviderDef};

/// A vector: one text's embedding, L2-normalised where the provider's vectors are not.
pub type Vector = Arc<[f32]>;

/// Why a provider could not be set up when the server starts; the server refuses to start.
#[derive(Debug, thiserror::Error)]
#[error("embedding provider `{name}`: {message}")]
pub struct SetupError {
    pub name: &'static str,
    pub message: String,
}

/// Why texts could not be embedded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    /// The provider is off (its variable is unset).
    #[error("{0}")]
    Off(String),
    /// The provider failed, after its retries: said without its key or its URL's credentials.
    #[error("{0}")]
    Failed(String),
    /// The call's deadline passed, or it was cancelled, while waiting for the provider.
    #[error("the call's time ran out while waiting for the embedding provider")]
    Stopped,
}

/// The embedding providers of a server, by name.
pub struct Embeddings {
    slots: Vec<Slot>,
}

struct Slot {
    def: &'static EmbeddingDef,
    state: State,
}

enum State {
    /// Off, and why (`KNOWLEDGE_EMBEDDINGS is not set`).
    Off(String),
    On(Arc<Provider>),
}

/// A provider that is on.
pub struct Provider {
    /// What made its vectors: `static:<directory name>@256`,
    /// `openai:text-embedding-3-small@256`.
    model: String,
    /// `static:DIR` or `openai:BASE_URL` (without credentials), for health and the log.
    described: String,
    source: Source,
    cache: cache::Cache,
    /// The last check: when, how it went, how long it took.
    checked: Mutex<Option<Check>>,
    dimensions: u32,
}

/// How long a failed check stands before readiness asks the provider again.
const RECHECK: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct Check {
    at: Instant,
    result: Result<Duration, String>,
}

enum Source {
    #[cfg(feature = "embeddings")]
    Static(model::Loading),
    #[cfg(feature = "embeddings")]
    OpenAi(Box<openai::Client>),
}

/// Where a provider that is on comes from, as read from the spec and the environment.
#[cfg_attr(not(feature = "embeddings"), allow(dead_code))]
enum Chosen {
    Static(String),
    OpenAi { base_url: String, model: String },
}

impl Embeddings {
    /// The providers of `defs`, each set up as the spec and the environment say: a static
    /// model's files are found and its dimensions read (the model itself loads in the
    /// background), an HTTP provider's client is built. Nothing is asked of a provider yet
    /// (see [`Embeddings::check_all`]).
    pub fn start(defs: &'static [EmbeddingDef]) -> Result<Embeddings, SetupError> {
        Embeddings::start_with(defs, &|name| std::env::var(name).ok())
    }

    /// [`Embeddings::start`] with the environment read through `env`.
    pub fn start_with(
        defs: &'static [EmbeddingDef],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Embeddings, SetupError> {
        let mut slots = Vec::with_capacity(defs.len());
        for def in defs {
            let fail = |message: String| SetupError {
                name: def.name,
                message,
            };
            let state = match chosen(def, env).map_err(fail)? {
                Err(why) => State::Off(why),
                Ok(chosen) => {
                    State::On(Arc::new(Provider::set_up(def, chosen, env).map_err(fail)?))
                }
            };
            slots.push(Slot { def, state });
        }
        Ok(Embeddings { slots })
    }

    /// No providers: a server whose spec declares none.
    pub fn none() -> Embeddings {
        Embeddings { slots: Vec::new() }
    }

    fn slot(&self, name: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| s.def.name == name)
    }

    /// The provider `name` when it is on.
    pub fn provider(&self, name: &str) -> Option<&Arc<Provider>> {
        match &self.slot(name)?.state {
            State::On(p) => Some(p),
            State::Off(_) => None,
        }
    }

    /// Why the provider `name` is off; `None` when it is on (or not declared).
    pub fn off(&self, name: &str) -> Option<&str> {
        match &self.slot(name)?.state {
            State::Off(why) => Some(why),
            State::On(_) => None,
        }
    }

    /// The model the provider `name` makes its vectors with, when it is on.
    pub fn model(&self, name: &str) -> Option<&str> {
        self.provider(name).map(|p| p.model.as_str())
    }

    /// Every provider that is on, with its spec's definition.
    pub fn on(&self) -> impl Iterator<Item = (&'static EmbeddingDef, &Arc<Provider>)> {
        self.slots.iter().filter_map(|s| match &s.state {
            State::On(p) => Some((s.def, p)),
            State::Off(_) => None,
        })
    }

    /// Every provider, and whether it is on (with its model) or off (and why).
    pub fn describe(&self) -> Vec<(&'static str, Result<&str, &str>)> {
        self.slots
            .iter()
            .map(|s| match &s.state {
                State::On(p) => (s.def.name, Ok(p.model.as_str())),
                State::Off(why) => (s.def.name, Err(why.as_str())),
            })
            .collect()
    }

    /// The provider `name` checked now, as `:embeddings.NAME.health` gives it.
    pub fn health(&self, name: &str, deadline: Instant) -> Value {
        let Some(slot) = self.slot(name) else {
            return Value::Null;
        };
        match &slot.state {
            State::Off(why) => json!({
                "provider": name,
                "state": "off",
                "dimensions": slot.def.dimensions,
                "error": why,
            }),
            State::On(p) => p.health(name, deadline),
        }
    }

    /// Asks every provider that is on to embed a short text, in turn, and records how it
    /// went: the check the server makes when it starts (a static model waits for its load).
    /// Each outcome, by provider.
    pub fn check_all(&self, within: Duration) -> Vec<(&'static str, Result<Duration, String>)> {
        let deadline = Instant::now() + within;
        self.on()
            .map(|(def, p)| (def.name, p.check(deadline)))
            .collect()
    }

    /// Whether every provider that is on answers (see [`Provider::ready`]).
    pub fn ready(&self, within: Duration) -> Result<(), &'static str> {
        let deadline = Instant::now() + within;
        match self.on().all(|(_, p)| p.ready(deadline).is_ok()) {
            true => Ok(()),
            false => Err("the embedding provider does not answer"),
        }
    }
}

/// The provider a definition chooses: `Ok(Err(why))` when it is off, an error when its
/// environment says something that cannot be.
fn chosen(
    def: &'static EmbeddingDef,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Result<Chosen, String>, String> {
    match def.provider {
        ProviderDef::Static(dir) => Ok(Ok(Chosen::Static(dir.to_string()))),
        ProviderDef::OpenAi { base_url, model } => Ok(Ok(Chosen::OpenAi {
            base_url: base_url.to_string(),
            model: model.to_string(),
        })),
        ProviderDef::Env(var) => from_env(def, var, env),
    }
}

/// An `env:VAR` provider: VAR holds `static:DIR` or `openai:BASE_URL` (with `VAR_MODEL`), and
/// `VAR_DIMENSIONS`, when set, the dimensions, which must be the spec's.
fn from_env(
    def: &'static EmbeddingDef,
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Result<Chosen, String>, String> {
    let Some(value) = env(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(Err(format!(
            "{var} is not set; set it to static:DIR (a model's directory) or openai:BASE_URL"
        )));
    };
    if let Some(dims) = env(&format!("{var}_DIMENSIONS")) {
        match dims.trim().parse::<u32>() {
            Ok(n) if n == def.dimensions => {}
            Ok(n) => {
                return Err(format!(
                    "{var}_DIMENSIONS is {n}, and the spec's vectors (and the columns that hold them) have {} dimensions; to change them, write a migration that changes every column listed in `stored_in` to {n} dimensions, change `dimensions:` to {n}, migrate, and run the tool that rebuilds the vectors",
                    def.dimensions
                ));
            }
            Err(_) => return Err(format!("{var}_DIMENSIONS is not a number of dimensions")),
        }
    }
    let value = value.trim();
    if let Some(dir) = value.strip_prefix("static:") {
        return Ok(Ok(Chosen::Static(dir.to_string())));
    }
    if let Some(base_url) = value.strip_prefix("openai:") {
        let Some(model) = env(&format!("{var}_MODEL")).filter(|m| !m.trim().is_empty()) else {
            return Err(format!(
                "{var} names an HTTP provider and {var}_MODEL is not set; set it to the model to ask for, e.g. text-embedding-3-small"
            ));
        };
        return Ok(Ok(Chosen::OpenAi {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.trim().to_string(),
        }));
    }
    Err(format!("{var} is neither static:DIR nor openai:BASE_URL"))
}

impl Provider {
    #[cfg(feature = "embeddings")]
    fn set_up(
        def: &'static EmbeddingDef,
        chosen: Chosen,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Provider, String> {
        let (source, model, described) = match chosen {
            Chosen::Static(dir) => {
                let loading = model::Loading::new(&dir, def.dimensions)?;
                let model = format!("static:{}@{}", loading.name(), def.dimensions);
                let described = format!("static:{}", loading.dir().display());
                (Source::Static(loading), model, described)
            }
            Chosen::OpenAi { base_url, model } => {
                let client = openai::Client::new(def, &base_url, &model, env)?;
                let described = format!("openai:{}", client.url_shown());
                let model = format!("openai:{model}@{}", def.dimensions);
                (Source::OpenAi(Box::new(client)), model, described)
            }
        };
        Ok(Provider {
            model,
            described,
            source,
            cache: cache::Cache::new(cache::DEFAULT_BYTES),
            checked: Mutex::new(None),
            dimensions: def.dimensions,
        })
    }

    #[cfg(not(feature = "embeddings"))]
    fn set_up(
        _: &'static EmbeddingDef,
        _: Chosen,
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Provider, String> {
        Err("this server was built without the `embeddings` feature of the mcpspec runtime; build it with that feature".into())
    }

    /// What made this provider's vectors (`:embeddings.NAME.model`).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The vectors of `texts`, in order: from the cache where it has them, the rest from the
    /// provider in one go (an HTTP provider in batches), each checked to have the declared
    /// dimensions. Waits no later than `deadline`, and gives up when `cancelled` says so.
    pub fn embed(
        &self,
        texts: &[&str],
        deadline: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vector>, EmbedError> {
        let mut out: Vec<Option<Vector>> = texts
            .iter()
            .map(|t| self.cache.get(&self.model, t))
            .collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let asked: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let made = self.source(&asked, deadline, cancelled)?;
            for (&i, v) in missing.iter().zip(made) {
                if v.len() != self.dimensions as usize {
                    return Err(EmbedError::Failed(format!(
                        "the provider gave a vector of {} dimensions where {} were declared",
                        v.len(),
                        self.dimensions
                    )));
                }
                self.cache.put(&self.model, texts[i], v.clone());
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The provider's own vectors for `texts`, with a span and the metrics of the call; the
    /// outcome is the provider's health until the next call or check.
    fn source(
        &self,
        texts: &[&str],
        deadline: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vector>, EmbedError> {
        let started = Instant::now();
        let result = self.call(texts, deadline, cancelled);
        let outcome = match &result {
            Ok(_) => Some(Ok(started.elapsed())),
            Err(EmbedError::Failed(why)) => Some(Err(why.clone())),
            Err(_) => None,
        };
        if let Some(outcome) = outcome {
            *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(Check {
                at: Instant::now(),
                result: outcome,
            });
        }
        let error = result.as_ref().err().map(|e| match e {
            EmbedError::Stopped => "stopped",
            _ => "failed",
        });
        crate::telemetry::embedding(self.kind(), texts.len(), started, error);
        #[cfg(feature = "http")]
        crate::metrics::embedding(self.kind(), texts.len(), started.elapsed(), error);
        result
    }

    #[cfg(feature = "embeddings")]
    fn call(
        &self,
        texts: &[&str],
        deadline: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vector>, EmbedError> {
        match &self.source {
            Source::Static(loading) => {
                let model = loading.get(deadline)?;
                Ok(texts.iter().map(|t| model.embed(t)).collect())
            }
            Source::OpenAi(client) => client.embed(texts, deadline, cancelled),
        }
    }

    #[cfg(not(feature = "embeddings"))]
    fn call(
        &self,
        _: &[&str],
        _: Instant,
        _: &dyn Fn() -> bool,
    ) -> Result<Vec<Vector>, EmbedError> {
        match self.source {}
    }

    /// `static` or `openai`: the provider's kind, for spans and metrics.
    pub fn kind(&self) -> &'static str {
        #[cfg(feature = "embeddings")]
        match &self.source {
            Source::Static(_) => "static",
            Source::OpenAi(_) => "openai",
        }
        #[cfg(not(feature = "embeddings"))]
        match self.source {}
    }

    /// Texts an HTTP provider holds for a batch still to be sent: the concurrent calls
    /// waiting for one in flight.
    pub fn queued(&self) -> usize {
        #[cfg(feature = "embeddings")]
        if let Source::OpenAi(client) = &self.source {
            return client.queued();
        }
        0
    }

    /// Embeds a short text past the cache, and records how it went and how long it took.
    pub fn check(&self, deadline: Instant) -> Result<Duration, String> {
        let started = Instant::now();
        let result = self
            .source(&["mcpspec health check"], deadline, &|| false)
            .map_err(|e| e.to_string())
            .and_then(|v| match v.first() {
                Some(v) if v.len() == self.dimensions as usize => Ok(started.elapsed()),
                Some(v) => Err(format!(
                    "the provider gave a vector of {} dimensions where {} were declared",
                    v.len(),
                    self.dimensions
                )),
                None => Err("the provider gave no vector".to_string()),
            });
        *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(Check {
            at: Instant::now(),
            result: result.clone(),
        });
        result
    }

    /// Whether the provider answers: its last call or check succeeded; one that failed more
    /// than `RECHECK` ago, or none yet, is checked again now (by `deadline`).
    pub fn ready(&self, deadline: Instant) -> Result<(), String> {
        let last = self
            .checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match last {
            Some(Check { result: Ok(_), .. }) => Ok(()),
            Some(Check { at, result: Err(e) }) if at.elapsed() < RECHECK => Err(e),
            _ => self.check(deadline).map(|_| ()),
        }
    }

    /// The last check's outcome, if there was one.
    pub fn last_check(&self) -> Option<Result<Duration, String>> {
        let checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        checked.as_ref().map(|c| c.result.clone())
    }

    /// The provider checked now (at most once a second: a recent check is reported as it
    /// went), as `:embeddings.NAME.health` gives it.
    fn health(&self, name: &str, deadline: Instant) -> Value {
        let recent = {
            let checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            checked
                .as_ref()
                .filter(|c| c.at.elapsed() < Duration::from_secs(1))
                .cloned()
        };
        let result = match recent {
            Some(c) => c.result,
            None => self.check(deadline),
        };
        let mut out = json!({
            "provider": name,
            "source": self.described,
            "model": self.model,
            "dimensions": self.dimensions,
            "cached": self.cache.len(),
        });
        match result {
            Ok(took) => {
                out["state"] = json!("ok");
                out["latency_ms"] = json!((took.as_secs_f64() * 1000.0 * 10.0).round() / 10.0);
            }
            Err(e) => {
                out["state"] = json!("failing");
                out["error"] = json!(e);
            }
        }
        out
    }
}
