//! Keyset pages (#61): knowledge's `kb_list` (on every engine, over stdio and HTTP in both
//! protocol eras) and studio's `query_learnings` give `next_cursor` while rows remain; read
//! page by page, they give every row of the whole list once, in its order, whatever ties the
//! sort has (entries of one instant, of one millisecond that PostgreSQL tells apart by
//! microseconds) and whatever is written between two pages. A cursor is sealed: altered, or
//! given to another tool, it is refused naming the field.

use serde_json::{Value, json};

use crate::common::{
    Engine, Session, Transport, sample_db, sample_db_on, sql_on, start_on, start_over,
};
use crate::on_every_engine_and_transport;

on_every_engine_and_transport!(pages_of_kb_list_give_every_entry_once_in_order);

/// 25 entries beside the sample's four: ten of one instant (their ids break the tie), five a
/// microsecond apart within one millisecond (PostgreSQL keeps them apart; the formatted
/// `created_at` shows one value; MariaDB's `DATETIME(3)` ties them), ten a second apart.
fn more_entries(engine: Engine) -> String {
    let at = |second: u32, micros: u32| match engine {
        Engine::Mariadb => format!("2026-02-01 10:00:{second:02}.{:03}", micros / 1000),
        _ => format!("2026-02-01T10:00:{second:02}.{micros:06}Z"),
    };
    let mut rows = Vec::new();
    for i in 0..10 {
        rows.push((format!("tie-{i:02}"), at(0, 0)));
    }
    for i in 0..5 {
        rows.push((format!("micro-{i}"), at(1, 123_000 + i)));
    }
    for i in 0..10 {
        rows.push((format!("second-{i:02}"), at(2 + i, 0)));
    }
    let values: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(n, (id, at))| {
            let role = ["pm", "dev", "qa", "all"][n % 4];
            format!("('{id}', 'entry {id}', '{role}', NULL, '{at}', '{at}')")
        })
        .collect();
    format!(
        "INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at) VALUES {}",
        values.join(", ")
    )
}

fn ids(out: &Value, key: &str) -> Vec<String> {
    out[key]
        .as_array()
        .expect("rows")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_string())
        .collect()
}

/// Every row of `tool` with `args`, read in pages of `size` rows: the rows' ids and the
/// number of pages.
fn read_in_pages(
    s: &mut Session,
    tool: &str,
    key: &str,
    args: Value,
    size: u32,
) -> (Vec<String>, usize) {
    let (mut all, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let mut a = args.clone();
        a["limit"] = json!(size);
        if let Some(c) = &cursor {
            a["cursor"] = json!(c);
        }
        let out = s.ok(tool, a);
        let page = ids(&out, key);
        assert!(page.len() <= size as usize, "{out}");
        all.extend(page);
        pages += 1;
        assert!(pages <= 100, "the pages do not end");
        match out.get("next_cursor") {
            Some(c) => {
                assert_eq!(
                    out[key].as_array().map(Vec::len),
                    Some(size as usize),
                    "a page with a next is full"
                );
                cursor = Some(c.as_str().expect("a string").to_string());
            }
            None => return (all, pages),
        }
    }
}

fn pages_of_kb_list_give_every_entry_once_in_order(engine: Engine, transport: Transport) {
    let db = sample_db_on(engine, "knowledge");
    sql_on(engine, &db.path, &more_entries(engine));
    let mut s = start_over(transport, db, "knowledge", &[]);

    // The whole list in one call: 29 entries, newest first and then by id, no next page.
    let whole = s.ok("kb_list", json!({"limit": 100}));
    assert!(whole.get("next_cursor").is_none(), "{whole}");
    let all = ids(&whole, "entries");
    let mut newest: Vec<String> = (0..10).rev().map(|i| format!("second-{i:02}")).collect();
    let micro = (0..5).map(|i| format!("micro-{i}"));
    match engine {
        // DATETIME(3) keeps milliseconds: the five tie, and the ids order them.
        Engine::Mariadb => newest.extend(micro),
        _ => newest.extend(micro.rev()),
    }
    newest.extend((0..10).map(|i| format!("tie-{i:02}")));
    assert_eq!(all[..25], newest[..]);
    assert_eq!(all.len(), 29);

    // In pages of 1, 4 and 7, and in pages of 28 and 29 (a last page of one row, and a whole
    // list that fits one page exactly): every entry once, in order.
    for (size, pages) in [(1, 29), (4, 8), (7, 5), (28, 2), (29, 1)] {
        let (paged, n) = read_in_pages(&mut s, "kb_list", "entries", json!({}), size);
        assert_eq!(paged, all, "pages of {size}");
        assert_eq!(n, pages, "pages of {size}");
    }
    // With a filter, the cursor goes on within it.
    let devs = ids(
        &s.ok("kb_list", json!({"role": "dev", "limit": 100})),
        "entries",
    );
    assert!(devs.len() > 5, "{devs:?}");
    let (paged, _) = read_in_pages(&mut s, "kb_list", "entries", json!({"role": "dev"}), 2);
    assert_eq!(paged, devs);

    // An entry written between two pages shifts nothing: the second page goes on after the
    // first page's last entry.
    let first = s.ok("kb_list", json!({"limit": 4}));
    s.ok(
        "kb_add",
        json!({"content": "written between two pages", "role": "dev"}),
    );
    let second = s.ok(
        "kb_list",
        json!({"limit": 4, "cursor": first["next_cursor"]}),
    );
    assert_eq!(ids(&second, "entries"), all[4..8]);

    // A cursor altered or made up is refused naming the field, as is an empty one (knowledge
    // calls INVALID_ARGUMENTS VALIDATION_ERROR).
    let cursor = first["next_cursor"].as_str().expect("a cursor");
    let mut altered = cursor.to_string();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    for bad in [altered.as_str(), "eyJub3QiOiJhIGN1cnNvciJ9", ""] {
        let e = s.tool_error("kb_list", json!({"cursor": bad}));
        assert_eq!(e["code"], "VALIDATION_ERROR", "{e}");
        assert_eq!(e["field"], "cursor", "{e}");
    }
    s.finish();
}

/// studio's `query_learnings` pages over every path its search takes (the newest learnings,
/// the trigram index, the tag index, every learning) and gives what a plain query of the same
/// conditions gives, in the same order; a cursor of another tool is refused.
#[test]
fn pages_of_query_learnings_give_every_learning_once_in_order() {
    let db = sample_db("studio");
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    // 600 learnings of three instants (their ids break the ties), half of them about
    // "pagination" and tagged, so that pages run on past the 300 newest the search reads first.
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600)
         INSERT INTO learnings (id, title, problem, solution, tags, created_at, updated_at)
         SELECT printf('P-%04d', i), 'learning ' || i,
                CASE WHEN i % 2 = 0 THEN 'about pagination' ELSE 'about other things' END,
                'a solution', CASE WHEN i % 2 = 0 THEN '[\"paging\"]' ELSE '[]' END,
                '2026-03-0' || (1 + i % 3) || 'T10:00:00Z', '2026-03-01T10:00:00Z'
         FROM n;",
    )
    .unwrap();
    let expected = |condition: &str| -> Vec<String> {
        let sql =
            format!("SELECT id FROM learnings WHERE {condition} ORDER BY created_at DESC, id DESC");
        let mut st = conn.prepare(&sql).unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let text = |t: &str| {
        format!(
            "instr(lower(title), '{t}') > 0 OR instr(lower(problem), '{t}') > 0 OR instr(lower(solution), '{t}') > 0"
        )
    };
    let cases = [
        (json!({}), expected("1")),
        (
            json!({"search": "Pagination"}),
            expected(&text("pagination")),
        ),
        (json!({"search": "pa"}), expected(&text("pa"))),
        (
            json!({"tags": ["paging"]}),
            expected(
                "EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(tags) THEN tags ELSE '[]' END) WHERE value = 'paging')",
            ),
        ),
    ];
    let mut s = start_on(db, "studio", &[]);
    for (args, want) in cases {
        assert!(want.len() >= 300, "{args}: {}", want.len());
        for size in [50, 7] {
            let (paged, _) =
                read_in_pages(&mut s, "query_learnings", "learnings", args.clone(), size);
            assert_eq!(paged, want, "{args} in pages of {size}");
        }
    }
    s.finish();
}

/// A cursor one replica gave reads on at another that shares its key
/// (`MCPSPEC_REQUEST_STATE_KEY`), and one of another server's tool does not open there.
#[test]
fn a_cursor_reads_on_at_a_replica_and_not_at_another_tool() {
    let serve = |server: &str, db: crate::common::Db| {
        crate::common::start_command(
            std::process::Command::new(crate::common::exe_for(server))
                .args(["serve", server, "--db"])
                .arg(&db.path)
                .env(crate::common::SHARED_KEY.0, crate::common::SHARED_KEY.1)
                .env("MCPSPEC_LOG", "warn")
                .stderr(std::process::Stdio::null()),
            db,
        )
    };
    let db = sample_db("knowledge");
    let replica_db = sample_db("knowledge");
    std::fs::copy(&db.path, &replica_db.path).unwrap();
    let mut one = serve("knowledge", db);
    let mut two = serve("knowledge", replica_db);
    let first = one.ok("kb_list", json!({"limit": 2}));
    let rest = one.ok(
        "kb_list",
        json!({"limit": 2, "cursor": first["next_cursor"]}),
    );
    let at_replica = two.ok(
        "kb_list",
        json!({"limit": 2, "cursor": first["next_cursor"]}),
    );
    assert_eq!(ids(&at_replica, "entries"), ids(&rest, "entries"));
    assert_eq!(at_replica["entries"].as_array().map(Vec::len), Some(2));

    let mut studio = serve("studio", sample_db("studio"));
    let learnings = studio.ok("query_learnings", json!({"limit": 1}));
    let e = one.tool_error("kb_list", json!({"cursor": learnings["next_cursor"]}));
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("VALIDATION_ERROR"), Some("cursor"))
    );
    let e = studio.tool_error("query_learnings", json!({"cursor": first["next_cursor"]}));
    assert_eq!(e["field"], "cursor", "{e}");
    for s in [one, two, studio] {
        s.finish();
    }
}
