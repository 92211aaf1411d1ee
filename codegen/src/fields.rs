//! The keys of a spec mapping, read from its raw struct: serde's derive hands every
//! `deserialize_struct` call the struct's field names (after `rename`), so a deserializer that
//! records them and stops is all it takes. The unknown-key pass and its suggestions use these
//! lists, so a key exists in the language exactly when its struct has the field: no list is
//! kept by hand.

use serde::Deserialize;
use serde::de::{self, Visitor};

/// The keys of the mapping `T` deserializes from, in declaration order; empty for a type that
/// is not a struct.
pub(crate) fn of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = Probe(&[]);
    let _ = T::deserialize(&mut probe);
    probe.0
}

/// Records the field names of the first struct asked for.
struct Probe(&'static [&'static str]);

/// The probe stops every deserialisation once it has what it came for.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names recorded")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<M: std::fmt::Display>(_: M) -> Stop {
        Stop
    }
}

impl<'de> de::Deserializer<'de> for &mut Probe {
    type Error = Stop;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        self.0 = fields;
        Err(Stop)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Example {
        plain: u32,
        #[serde(rename = "camelCase")]
        renamed: String,
        #[serde(default)]
        optional: Option<bool>,
    }

    #[test]
    fn a_struct_s_keys_are_its_field_names_as_written_in_yaml() {
        assert_eq!(super::of::<Example>(), ["plain", "camelCase", "optional"]);
        assert!(super::of::<String>().is_empty());
    }
}
