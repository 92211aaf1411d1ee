//! Unified diffs of generated text, for the findings `codegen check` prints.
//!
//! A plain longest-common-subsequence over lines, which is fast enough for the few thousand
//! lines of a generated file and keeps the crate free of a diff dependency.

/// A unified diff from `old` to `new` with three lines of context, or an empty string when
/// they are equal. `old_name` and `new_name` head the diff.
pub fn unified(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = script(&a, &b);
    const CONTEXT: usize = 3;
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Indexes into `ops` of changed lines, grouped into hunks that share context.
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !matches!(op, Op::Same(..)))
        .map(|(i, _)| i)
        .collect();
    let mut i = 0;
    while i < changed.len() {
        let start = changed[i].saturating_sub(CONTEXT);
        let mut end = changed[i];
        while i + 1 < changed.len() && changed[i + 1] <= end + 2 * CONTEXT + 1 {
            i += 1;
            end = changed[i];
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let hunk = &ops[start..end];
        let (a0, b0) = positions(&ops[..start]);
        let a_len = hunk.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let b_len = hunk.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        out.push_str(&format!(
            "@@ -{},{a_len} +{},{b_len} @@\n",
            a0 + usize::from(a_len > 0),
            b0 + usize::from(b_len > 0)
        ));
        for op in hunk {
            match op {
                Op::Same(l) => out.push_str(&format!(" {l}\n")),
                Op::Del(l) => out.push_str(&format!("-{l}\n")),
                Op::Add(l) => out.push_str(&format!("+{l}\n")),
            }
        }
        i += 1;
    }
    out
}

enum Op<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// How many lines of each side precede the given operations.
fn positions(ops: &[Op<'_>]) -> (usize, usize) {
    let a = ops.iter().filter(|o| !matches!(o, Op::Add(_))).count();
    let b = ops.iter().filter(|o| !matches!(o, Op::Del(_))).count();
    (a, b)
}

fn script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    // Common prefix and suffix are cut first, so a small edit to a large file stays cheap.
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let (n, m) = (am.len(), bm.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if am[i] == bm[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<Op<'a>> = a[..pre].iter().map(|l| Op::Same(l)).collect();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && am[i] == bm[j] {
            ops.push(Op::Same(am[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Deletions first, as diff(1) shows them.
            ops.push(Op::Del(am[i]));
            i += 1;
        } else {
            ops.push(Op::Add(bm[j]));
            j += 1;
        }
    }
    ops.extend(a[a.len() - suf..].iter().map(|l| Op::Same(l)));
    ops
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn shows_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let want = "--- old\n+++ new\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n";
        assert_eq!(unified("old", "new", old, new), want);
        assert_eq!(unified("old", "new", old, old), "");
    }

    #[test]
    fn separate_hunks_for_distant_changes() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_string(),
                19 => "nineteen\n".to_string(),
                _ => format!("{i}\n"),
            })
            .collect();
        let diff = unified("a", "b", &old, &new);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("-19\n+nineteen\n"));
        assert!(diff.contains("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n"), "{diff}");
    }
}
