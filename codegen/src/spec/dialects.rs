//! The keys a spec mapping has once per database-server dialect (`postgres:`, `mysql:`, and
//! whatever `sqlscan::DIALECTS` registers next), read while the rest of the mapping is read by
//! its derived `Deserialize`, so that a new engine adds no field to the spec's structs.
//!
//! `#[serde(flatten)]` into a map would do this in one line but buffers the values first, and
//! serde-saphyr keeps a value's position only when the value is read from the YAML itself. So
//! [`Dialected`] reads the mapping's entries, keeps the values under a served dialect's name
//! (each read directly, with its position) and hands every other entry on to the struct's
//! derived visitor, which still refuses a key it does not know.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use sqlscan::Dialect;

use super::Sp;

/// A spec mapping that takes one more key per served dialect (`Dialect::served`).
pub(crate) trait DialectKeys {
    /// What a dialect's key holds.
    type Value: std::fmt::Debug;

    /// What a dialect's key means, for the editor schema and the spec reference.
    #[cfg(feature = "editor-schema")]
    fn describe(dialect: &Dialect) -> String;

    /// The mapping's keys: its struct's fields, then one per served dialect. Built once.
    fn keys() -> &'static [&'static str];
}

/// The keys of a struct with `fields`, then one per served dialect; made once per mapping type
/// (through its [`DialectKeys::keys`]), so leaked once.
pub(crate) fn with_dialects(fields: &[&'static str]) -> &'static [&'static str] {
    let all: Vec<&'static str> = fields
        .iter()
        .copied()
        .chain(Dialect::served().map(|d| d.name))
        .collect();
    Vec::leak(all)
}

/// A mapping's struct `T` and the values it gives under served dialects' keys, in the order
/// of `sqlscan::DIALECTS`. Reads as the `T` it holds.
#[derive(Debug)]
pub(crate) struct Dialected<T: DialectKeys> {
    fields: T,
    by_dialect: Vec<(&'static Dialect, Sp<T::Value>)>,
}

impl<T: DialectKeys> std::ops::Deref for Dialected<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.fields
    }
}

impl<T: DialectKeys> Dialected<T> {
    /// Every value given under a dialect's key, by dialect: the one place the spec's dialect
    /// keys are paired with `sqlscan::DIALECTS`.
    pub(crate) fn by_dialect(&self) -> impl Iterator<Item = (&'static Dialect, &Sp<T::Value>)> {
        self.by_dialect.iter().map(|(d, v)| (*d, v))
    }

    /// The value given under `dialect`'s key, if any.
    pub(crate) fn for_dialect(&self, dialect: &Dialect) -> Option<&Sp<T::Value>> {
        self.by_dialect()
            .find_map(|(d, v)| (d == dialect).then_some(v))
    }
}

impl<'de, T> Deserialize<'de> for Dialected<T>
where
    T: DialectKeys + Deserialize<'de>,
    T::Value: Deserialize<'de>,
{
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct(
            "Dialected",
            T::keys(),
            DialectedVisitor::<T>(std::marker::PhantomData),
        )
    }
}

/// Reads a [`Dialected`] mapping.
struct DialectedVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T> Visitor<'de> for DialectedVisitor<T>
where
    T: DialectKeys + Deserialize<'de>,
    T::Value: Deserialize<'de>,
{
    type Value = Dialected<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Dialected<T>, A::Error> {
        let mut rest = Rest {
            map,
            by_dialect: Vec::new(),
        };
        let fields = T::deserialize(de::value::MapAccessDeserializer::new(&mut rest))?;
        let mut by_dialect = rest.by_dialect;
        by_dialect.sort_by_key(|(d, _)| sqlscan::DIALECTS.iter().position(|x| x == d));
        Ok(Dialected { fields, by_dialect })
    }
}

/// The entries of a mapping other than the dialects' (which it keeps as it meets them).
struct Rest<A, V> {
    map: A,
    by_dialect: Vec<(&'static Dialect, Sp<V>)>,
}

impl<'de, A, V> MapAccess<'de> for &mut Rest<A, V>
where
    A: MapAccess<'de>,
    V: Deserialize<'de>,
{
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<String>()? {
            match Dialect::served().find(|d| d.name == key) {
                Some(dialect) => {
                    let value = self.map.next_value::<Sp<V>>()?;
                    self.by_dialect.push((dialect, value));
                }
                None => return seed.deserialize(key.into_deserializer()).map(Some),
            }
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// The struct's schema with one optional property per served dialect, described by
/// [`DialectKeys::describe`].
#[cfg(feature = "editor-schema")]
impl<T> schemars::JsonSchema for Dialected<T>
where
    T: DialectKeys + schemars::JsonSchema,
    T::Value: schemars::JsonSchema,
{
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        for dialect in Dialect::served() {
            let mut value = generator.subschema_for::<Option<T::Value>>();
            value.insert("description".into(), T::describe(dialect).into());
            let properties = schema
                .ensure_object()
                .entry("properties")
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let Some(p) = properties.as_object_mut() {
                p.insert(dialect.name.into(), value.to_value());
            }
        }
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Example {
        query: Sp<String>,
    }

    impl DialectKeys for Example {
        type Value = String;

        #[cfg(feature = "editor-schema")]
        fn describe(dialect: &Dialect) -> String {
            format!("{} text", dialect.title)
        }

        fn keys() -> &'static [&'static str] {
            static KEYS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
            KEYS.get_or_init(|| with_dialects(crate::fields::of::<Example>()))
        }
    }

    #[test]
    fn dialect_keys_keep_their_positions_and_other_keys_reach_the_struct() {
        let yaml = "mysql: SELECT 2\nquery: SELECT 1\npostgres: |\n  SELECT 3\n";
        let e: Dialected<Example> = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(e.query.value, "SELECT 1");
        let got: Vec<_> = e
            .by_dialect()
            .map(|(d, v)| (d.name, v.value.trim(), v.referenced.line()))
            .collect();
        // In the order of `sqlscan::DIALECTS`, each where its text starts (a block scalar's on
        // the line after its key), as serde-saphyr places a value it reads itself.
        assert_eq!(got, [("postgres", "SELECT 3", 4), ("mysql", "SELECT 2", 1)]);
        assert_eq!(
            e.for_dialect(&sqlscan::MYSQL).map(|v| v.value.as_str()),
            Some("SELECT 2")
        );
        assert_eq!(e.for_dialect(&sqlscan::SQLITE), None);
    }

    #[test]
    fn an_unknown_key_is_still_refused_and_the_keys_name_every_dialect() {
        let err = serde_saphyr::from_str::<Dialected<Example>>("query: x\nquery_pg: y\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `query_pg`"), "{err}");
        // The struct's fields, then a key per served dialect; the embedded default's text is
        // `query`, so it has no key of its own.
        let keys = crate::fields::of::<Dialected<Example>>();
        let want: Vec<&str> = std::iter::once("query")
            .chain(Dialect::served().map(|d| d.name))
            .collect();
        assert_eq!(keys, want);
        assert!(keys.contains(&"postgres") && keys.contains(&"mysql") && !keys.contains(&"sqlite"));
    }
}
