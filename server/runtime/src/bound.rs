//! Results that cannot flood a client's context, for the tools whose rows the engine does not
//! read one by one (Rust handlers): a structured result over its cap keeps the rows of its
//! longest top-level list that fit, whole and in order, and says so beside them (`truncated`,
//! and a `message` with how many were kept and what to do). A leaf: sizes and JSON only.

use serde_json::{Map, Value, json};

use crate::rows::approx_json_size;

/// Room kept for the `truncated` flag and the message.
const NOTICE_ROOM: usize = 400;

/// Cuts the rows of `result`'s longest top-level list until the result fits in `budget`
/// bytes as JSON, and says so in it; the rows kept, or `None` when it has no list whose rows
/// can make it fit (or needs no cut).
pub(crate) fn cut_rows(result: &mut Value, budget: usize) -> Option<usize> {
    let size = approx_json_size(result);
    let o = result.as_object_mut()?;
    if size <= budget {
        return None;
    }
    let (field, list_size) = o
        .iter()
        .filter(|(_, v)| v.as_array().is_some_and(|a| !a.is_empty()))
        .map(|(k, v)| (k.clone(), approx_json_size(v)))
        .max_by_key(|(_, s)| *s)?;
    let room = budget.checked_sub(size - list_size + NOTICE_ROOM)?;
    let rows = o.get_mut(&field)?.as_array_mut()?;
    let total = rows.len();
    let mut used = 2;
    let kept = rows
        .iter()
        .take_while(|r| {
            used += approx_json_size(r) + 1;
            used <= room
        })
        .count();
    rows.truncate(kept);
    notice(o, &field, kept, total);
    Some(kept)
}

fn notice(o: &mut Map<String, Value>, field: &str, kept: usize, total: usize) {
    o.insert("truncated".into(), json!(true));
    o.insert(
        "message".into(),
        json!(format!(
            "Only the first {kept} of {total} {field} fit in the result; ask for fewer or narrower."
        )),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_list_keeps_the_rows_that_fit_whole_and_in_order() {
        let rows: Vec<Value> = (0..100)
            .map(|i| json!({"name": format!("row {i:03}"), "pad": "x".repeat(90)}))
            .collect();
        let mut result = json!({"rows": rows, "tags": ["a", "b"], "total": 100});
        let kept = cut_rows(&mut result, 4000).expect("cut");
        assert!(kept > 10 && kept < 100, "{kept}");
        assert!(serde_json::to_string(&result).unwrap().len() <= 4000);
        let names: Vec<&str> = result["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), kept);
        assert_eq!(names[kept - 1], format!("row {:03}", kept - 1));
        assert_eq!(result["tags"], json!(["a", "b"]));
        assert_eq!(result["truncated"], true);
        assert_eq!(
            result["message"],
            format!(
                "Only the first {kept} of 100 rows fit in the result; ask for fewer or narrower."
            )
        );
    }

    #[test]
    fn a_result_that_fits_or_has_no_list_is_left_as_it_is() {
        let mut small = json!({"rows": [1, 2, 3]});
        assert_eq!(cut_rows(&mut small, 1000), None);
        assert_eq!(small, json!({"rows": [1, 2, 3]}));
        let mut text = json!({"content": "x".repeat(5000)});
        assert_eq!(cut_rows(&mut text, 1000), None);
        assert!(text.get("truncated").is_none());
    }
}
