//! A static embedding model: a directory with `model.safetensors` (one token-embedding matrix,
//! F32 or F16, vocabulary by dimensions) and `tokenizer.json` (a Hugging Face tokenizer), the
//! layout of model2vec and of WordLlama's files. A text's vector is the mean of its tokens'
//! rows (special tokens not added), L2-normalised: what `WordLlama.embed` and model2vec's
//! `encode` compute, up to that normalisation. No network, no GPU.
//!
//! The tokenizer is Hugging Face's own crate (`tokenizers`), so that a model's tokenizer works
//! as it does in Python. For the shape WordLlama's and other SentencePiece-style BPE
//! tokenizers have (`▁` for spaces, no pre-tokenizer, a vocabulary in which no token has a `▁`
//! after another character) a text is cut before each word's `▁` and each piece is tokenized
//! alone, from a cache of pieces: the same tokens, since no token spans a cut, without
//! merging a 10,000-character text as one word. Any other tokenizer encodes texts whole.
//!
//! The files are checked when the server starts (they exist, the matrix has the declared
//! dimensions); they are read and parsed on a thread of their own once the model is first
//! wanted (the start-up check, run once the session is up, or a call), so that the server
//! answers `initialize` as fast as without a model and the first call that embeds waits for
//! the rest of the load.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use tokenizers::{Model as _, ModelWrapper, Tokenizer};
use zerocopy::IntoBytes as _;

use super::{EmbedError, Vector};

/// The weights' file in a model's directory.
pub const WEIGHTS: &str = "model.safetensors";
/// The tokenizer's file in a model's directory.
pub const TOKENIZER: &str = "tokenizer.json";

/// How many pieces the piece cache keeps before it starts again: some 100,000 words, a few MB.
const PIECES: usize = 100_000;

/// The outcome of a model's load, once it is known, and the signal that it is.
type Loaded = (Mutex<Option<Result<Arc<Model>, String>>>, Condvar);

/// A model to load on first use, being loaded, or loaded.
pub struct Loading {
    dir: PathBuf,
    name: String,
    vocabulary: usize,
    dims: usize,
    state: Arc<Loaded>,
    begun: std::sync::Once,
}

/// A loaded model.
pub struct Model {
    tokenizer: Tokenizer,
    /// The token-embedding matrix, row by row.
    rows: Vec<f32>,
    vocabulary: usize,
    dims: usize,
    /// Present when texts may be cut into pieces (see the module comment).
    pieces: Option<Pieces>,
}

/// The tokens of pieces already seen, by the piece as written (hashbrown's map: its hash
/// is several times cheaper than the standard library's on short keys).
struct Pieces {
    seen: RwLock<hashbrown::HashMap<Box<str>, Box<[u32]>>>,
    /// Texts holding one of these (the tokenizer's added tokens) are encoded whole.
    added: Vec<String>,
}

impl Loading {
    /// The model in `dir` (`~/` is the home directory), checked: the files must be there, and
    /// the matrix must have `dims` columns. It is read on first use (see [`Loading::begin`]).
    pub fn new(dir: &str, dims: u32) -> Result<Loading, String> {
        let dir = expand(dir);
        let shown = dir.display().to_string();
        for file in [WEIGHTS, TOKENIZER] {
            if !dir.join(file).is_file() {
                return Err(format!(
                    "the static model's directory {shown} has no {file}; it needs {WEIGHTS} (the token embeddings) and {TOKENIZER} (the tokenizer)"
                ));
            }
        }
        let (vocabulary, columns) = shape(&dir.join(WEIGHTS))?;
        if columns != dims as usize {
            return Err(format!(
                "the static model in {shown} makes vectors of {columns} dimensions, and the spec declares {dims}"
            ));
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "model".into());
        Ok(Loading {
            dir,
            name,
            vocabulary,
            dims: columns,
            state: Arc::new((Mutex::new(None), Condvar::new())),
            begun: std::sync::Once::new(),
        })
    }

    /// Starts reading the model on a thread of its own, once: when it is first wanted (a call
    /// that embeds, the start-up check once the session is up), so that a server's start and
    /// its `initialize` answer never share the machine with the load.
    pub fn begin(&self) {
        self.begun.call_once(|| {
            let (dir, vocabulary, dims) = (self.dir.clone(), self.vocabulary, self.dims);
            let state = self.state.clone();
            let spawned = std::thread::Builder::new()
                .name("mcpspec-model".into())
                .spawn(move || {
                    let started = Instant::now();
                    let loaded = Model::load(&dir, vocabulary, dims).map(Arc::new);
                    match &loaded {
                        Ok(m) => tracing::info!(
                            dir = %dir.display(),
                            took_ms = started.elapsed().as_millis() as u64,
                            pieces = m.pieces.is_some(),
                            "static embedding model loaded"
                        ),
                        Err(e) => tracing::error!(dir = %dir.display(), "the static embedding model did not load: {e}"),
                    }
                    let (done, ready) = &*state;
                    *done.lock().unwrap_or_else(|p| p.into_inner()) = Some(loaded);
                    ready.notify_all();
                });
            if let Err(e) = spawned {
                let (done, ready) = &*self.state;
                *done.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Err(format!("cannot start the thread that loads the model: {e}")));
                ready.notify_all();
            }
        });
    }

    /// The model's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model's name: its directory's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model once it is loaded, waiting for it no later than `deadline` (and starting
    /// its load if nothing did yet).
    pub fn get(&self, deadline: Instant) -> Result<Arc<Model>, EmbedError> {
        self.begin();
        let (done, ready) = &*self.state;
        let mut state = done.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(loaded) = &*state {
                return loaded.clone().map_err(EmbedError::Failed);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(EmbedError::Stopped);
            }
            state = ready
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// `dir` with a leading `~/` as the home directory.
fn expand(dir: &str) -> PathBuf {
    match (dir.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(dir),
    }
}

/// The rows and columns of the one matrix in a safetensors file, from its header alone.
fn shape(path: &Path) -> Result<(usize, usize), String> {
    use std::io::Read as _;
    let unreadable = |e: &dyn std::fmt::Display| format!("cannot read {}: {e}", path.display());
    let mut f = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|e| unreadable(&e))?;
    let len = u64::from_le_bytes(len);
    if len > 100 << 20 {
        return Err(unreadable(&"its header is not a safetensors header"));
    }
    let mut header = vec![0u8; len as usize];
    f.read_exact(&mut header).map_err(|e| unreadable(&e))?;
    let header: serde_json::Value = serde_json::from_slice(&header).map_err(|e| unreadable(&e))?;
    let matrices: Vec<(usize, usize)> = header
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "__metadata__")
        .filter_map(|(_, t)| {
            let shape = t.get("shape")?.as_array()?;
            match shape.as_slice() {
                [r, c] => Some((r.as_u64()? as usize, c.as_u64()? as usize)),
                _ => None,
            }
        })
        .collect();
    match matrices.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!(
            "{} holds {} matrices; a static model has one, the token embeddings",
            path.display(),
            matrices.len()
        )),
    }
}

impl Model {
    /// The static model in `dir`, read now on this thread (a server reads it in the background
    /// instead): for benchmarks and tools that embed outside a server.
    pub fn open(dir: &Path) -> Result<Model, String> {
        let (vocabulary, dims) = shape(&dir.join(WEIGHTS))?;
        Model::load(dir, vocabulary, dims)
    }

    /// Reads and parses the model's files.
    fn load(dir: &Path, vocabulary: usize, dims: usize) -> Result<Model, String> {
        let tokenizer_path = dir.join(TOKENIZER);
        let weights_path = dir.join(WEIGHTS);
        let (tokenizer, rows) = std::thread::scope(|s| {
            let tokenizer = s.spawn(|| {
                Tokenizer::from_file(&tokenizer_path)
                    .map_err(|e| format!("cannot read {}: {e}", tokenizer_path.display()))
            });
            let rows = rows(&weights_path);
            let tokenizer = tokenizer
                .join()
                .unwrap_or_else(|_| Err("the tokenizer's load panicked".into()));
            (tokenizer, rows)
        });
        let tokenizer = tokenizer?;
        let rows = rows?;
        if rows.len() != vocabulary * dims {
            return Err(format!(
                "{} is not a {vocabulary} by {dims} matrix",
                weights_path.display()
            ));
        }
        let pieces = Pieces::of(&tokenizer);
        Ok(Model {
            tokenizer,
            rows,
            vocabulary,
            dims,
            pieces,
        })
    }

    /// The vector of `text`: the mean of its tokens' rows, L2-normalised (zeros for a text
    /// of no tokens).
    pub fn embed(&self, text: &str) -> Vector {
        let mut sum = vec![0f32; self.dims];
        let mut count = 0usize;
        let mut add = |id: u32| {
            let id = (id as usize).min(self.vocabulary - 1);
            let row = &self.rows[id * self.dims..(id + 1) * self.dims];
            for (s, r) in sum.iter_mut().zip(row) {
                *s += r;
            }
            count += 1;
        };
        match &self.pieces {
            Some(p) if !p.added.iter().any(|a| text.contains(a.as_str())) => {
                p.each_id(&self.tokenizer, text, &mut add);
            }
            _ => {
                if let Ok(enc) = self.tokenizer.encode(text, false) {
                    enc.get_ids().iter().for_each(|&id| add(id));
                }
            }
        }
        if count > 0 {
            let n = count as f32;
            sum.iter_mut().for_each(|s| *s /= n);
        }
        let norm = sum.iter().map(|s| s * s).sum::<f32>().sqrt();
        if norm > 0.0 {
            sum.iter_mut().for_each(|s| *s /= norm);
        }
        sum.into()
    }
}

/// The matrix of a safetensors file as f32, row by row.
fn rows(path: &Path) -> Result<Vec<f32>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let tensors = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (_, view) = tensors
        .iter()
        .find(|(_, v)| v.shape().len() == 2)
        .ok_or_else(|| format!("{} holds no matrix", path.display()))?;
    let data = view.data();
    // Copied whole into place (the file's bytes may not be aligned for floats), then widened
    // by half's own loop: no per-value loop of this crate's, which the debug build the tests
    // run would not optimise.
    match view.dtype() {
        safetensors::Dtype::F32 => {
            let n = data.len() / 4;
            let mut out = vec![0f32; n];
            out.as_mut_bytes().copy_from_slice(&data[..n * 4]);
            if cfg!(target_endian = "big") {
                out.iter_mut()
                    .for_each(|x| *x = f32::from_bits(x.to_bits().swap_bytes()));
            }
            Ok(out)
        }
        safetensors::Dtype::F16 => {
            let n = data.len() / 2;
            let mut halves = vec![half::f16::ZERO; n];
            halves.as_mut_bytes().copy_from_slice(&data[..n * 2]);
            if cfg!(target_endian = "big") {
                halves
                    .iter_mut()
                    .for_each(|h| *h = half::f16::from_bits(h.to_bits().swap_bytes()));
            }
            let mut out = vec![0f32; halves.len()];
            half::slice::HalfFloatSliceExt::convert_to_f32_slice(&halves[..], &mut out);
            Ok(out)
        }
        other => Err(format!(
            "{} holds {other:?} weights; a static model's are F32 or F16",
            path.display()
        )),
    }
}

/// The normaliser of the tokenizers that may be cut into pieces: a `▁` before the text, and
/// each space a `▁` (SentencePiece's metaspace, as Llama's and WordLlama's tokenizers write it).
fn metaspace_normalizer() -> serde_json::Value {
    serde_json::json!({
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "\u{2581}"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"},
        ]
    })
}

impl Pieces {
    /// The piece path for `tokenizer`, when its texts may be cut (see the module comment).
    fn of(tokenizer: &Tokenizer) -> Option<Pieces> {
        let ModelWrapper::BPE(bpe) = tokenizer.get_model() else {
            return None;
        };
        let normalizer = serde_json::to_value(tokenizer.get_normalizer()?).ok()?;
        if normalizer != metaspace_normalizer() || tokenizer.get_pre_tokenizer().is_some() {
            return None;
        }
        // No token has a `▁` after another character, so none spans a cut before a `▁`.
        let spans = bpe.get_vocab().keys().any(|t| {
            let mut prev = None;
            t.chars().any(|c| {
                let found = c == '\u{2581}' && prev.is_some_and(|p| p != '\u{2581}');
                prev = Some(c);
                found
            })
        });
        if spans {
            return None;
        }
        let added = tokenizer
            .get_added_tokens_decoder()
            .into_values()
            .map(|t| t.content)
            .filter(|c| !c.is_empty())
            .collect();
        Some(Pieces {
            seen: RwLock::new(hashbrown::HashMap::new()),
            added,
        })
    }

    /// Hands `each` the ids of `text`'s tokens, piece by piece. A piece is looked up by its
    /// text as written (spaces, not `▁`; the first with the space its `▁` stands for): no
    /// copy of the text is made unless a piece is new.
    fn each_id(&self, tokenizer: &Tokenizer, text: &str, each: &mut dyn FnMut(u32)) {
        if text.is_empty() {
            return;
        }
        let first = format!(" {}", cut(text).next().unwrap_or_default());
        let key = |i: usize, piece: &'_ str| -> String {
            if i == 0 {
                first.clone()
            } else {
                piece.to_string()
            }
        };
        let mut from = None;
        {
            let seen = self.seen.read().unwrap_or_else(|p| p.into_inner());
            for (i, piece) in cut(text).enumerate() {
                let found = if i == 0 {
                    seen.get(first.as_str())
                } else {
                    seen.get(piece)
                };
                match found {
                    Some(ids) => ids.iter().for_each(|&id| each(id)),
                    None => {
                        // Tokenized below, in order: the ids so far are the ones before it.
                        from = Some(i);
                        break;
                    }
                }
            }
        }
        let Some(from) = from else {
            return;
        };
        let ModelWrapper::BPE(bpe) = tokenizer.get_model() else {
            return;
        };
        let mut made: Vec<(Box<str>, Box<[u32]>)> = Vec::new();
        {
            let seen = self.seen.read().unwrap_or_else(|p| p.into_inner());
            for (i, piece) in cut(text).enumerate().skip(from) {
                let key = key(i, piece);
                if let Some(ids) = seen.get(key.as_str()) {
                    ids.iter().for_each(|&id| each(id));
                    continue;
                }
                let normalized = key.replace(' ', "\u{2581}");
                let ids: Box<[u32]> = bpe
                    .tokenize(&normalized)
                    .map(|tokens| tokens.iter().map(|t| t.id).collect())
                    .unwrap_or_default();
                ids.iter().for_each(|&id| each(id));
                made.push((key.into_boxed_str(), ids));
            }
        }
        let mut seen = self.seen.write().unwrap_or_else(|p| p.into_inner());
        if seen.len() + made.len() > PIECES {
            seen.clear();
        }
        seen.extend(made);
    }
}

/// `text` cut before each space that follows another character: the pieces its normal form
/// (a `▁` before it, each space a `▁`) is cut into before each `▁` that follows another
/// character. Spaces are one byte in UTF-8 and no other character's bytes are one.
fn cut(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let mut start = 0;
    let mut i = 1;
    std::iter::from_fn(move || {
        if start >= b.len() {
            return None;
        }
        while i < b.len() {
            let at = i;
            i += 1;
            if b[at] == b' ' && b[at - 1] != b' ' {
                let piece = &text[start..at];
                start = at;
                return Some(piece);
            }
        }
        let piece = &text[start..];
        start = b.len();
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cut_before_each_word() {
        let got: Vec<&str> = cut("hello  big world!").collect();
        assert_eq!(got, ["hello", "  big", " world!"]);
        assert_eq!(cut(" ").collect::<Vec<_>>(), [" "]);
        assert_eq!(cut("  lead").collect::<Vec<_>>(), ["  lead"]);
        assert_eq!(cut("é 日本\tx").collect::<Vec<_>>(), ["é", " 日本\tx"]);
        assert_eq!(cut("a").collect::<Vec<_>>(), ["a"]);
    }
}
