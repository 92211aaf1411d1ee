"""Project Studio's benchmarked tools written with the official Python MCP SDK (mcp 2.x).

Written as the SDK's docs teach: an MCPServer, one decorated function per tool with typed
parameters, the standard library's sqlite3, and mcp.run() on stdio. The SQL is
spec/studio.yaml's. The database path is the first argument or BENCH_DB.
"""

import json
import os
import sqlite3
import sys
from typing import Annotated, Any

from pydantic import Field

from mcp.server import MCPServer

DB_PATH = sys.argv[1] if len(sys.argv) > 1 else os.environ["BENCH_DB"]
db = sqlite3.connect(DB_PATH, check_same_thread=False)
db.row_factory = sqlite3.Row

mcp = MCPServer("studio")

GET_LEARNING = """
SELECT l.id, l.title, l.problem, l.solution, l.tags, l.project_id, p.name AS project_name,
       l.cycle_id, c.name AS cycle_name, l.session_id, l.created_at, l.updated_at
FROM learnings l
LEFT JOIN projects p ON l.project_id = p.id
LEFT JOIN cycles c ON l.cycle_id = c.id
WHERE l.id = :id
"""

QUERY_LEARNINGS = """
WITH recent AS (
      SELECT rowid AS r FROM learnings ORDER BY created_at DESC, id DESC LIMIT 300),
    recent_hits AS (
      SELECT l.rowid AS r FROM recent JOIN learnings l ON l.rowid = recent.r
      WHERE (:project_id IS NULL OR l.project_id = :project_id)
        AND (:tags IS NULL OR json_array_length(:tags) = 0 OR EXISTS (
              SELECT 1 FROM json_each(CASE WHEN json_valid(l.tags) THEN l.tags ELSE '[]' END) t
              WHERE t.value IN (SELECT value FROM json_each(:tags))))
        AND (:search IS NULL
             OR instr(lower(l.title), lower(:search)) > 0
             OR instr(lower(l.problem), lower(:search)) > 0
             OR instr(lower(l.solution), lower(:search)) > 0)),
    enough AS (
      SELECT count(*) >= :limit AS yes FROM (SELECT 1 FROM recent_hits LIMIT :limit)),
    probe AS (
      SELECT l.created_at AS c FROM learnings_fts f JOIN learnings l ON l.rowid = f.rowid
      WHERE length(:search) >= 3
        AND f.learnings_fts MATCH '"' || replace(:search, '"', '""') || '"'
        AND (:project_id IS NULL OR l.project_id = :project_id)
        AND (:tags IS NULL OR json_array_length(:tags) = 0 OR EXISTS (
              SELECT 1 FROM json_each(CASE WHEN json_valid(l.tags) THEN l.tags ELSE '[]' END) t
              WHERE t.value IN (SELECT value FROM json_each(:tags))))
        AND (instr(lower(l.title), lower(:search)) > 0
             OR instr(lower(l.problem), lower(:search)) > 0
             OR instr(lower(l.solution), lower(:search)) > 0)
      ORDER BY f.rowid DESC LIMIT (SELECT CASE WHEN yes THEN 0 ELSE :limit END FROM enough)),
    since AS (
      SELECT oldest FROM (
        SELECT CASE WHEN count(*) >= :limit THEN min(c) END AS oldest FROM probe)
      WHERE oldest IS NOT NULL
        AND (SELECT count(*) FROM (
              SELECT 1 FROM learnings WHERE created_at >= oldest LIMIT 20000)) < 20000),
    windowed AS (
      SELECT l.rowid AS r FROM since CROSS JOIN learnings l
      WHERE l.created_at >= since.oldest
        AND (:project_id IS NULL OR l.project_id = :project_id)
        AND (:tags IS NULL OR json_array_length(:tags) = 0 OR EXISTS (
              SELECT 1 FROM json_each(CASE WHEN json_valid(l.tags) THEN l.tags ELSE '[]' END) t
              WHERE t.value IN (SELECT value FROM json_each(:tags))))
        AND (instr(lower(l.title), lower(:search)) > 0
             OR instr(lower(l.problem), lower(:search)) > 0
             OR instr(lower(l.solution), lower(:search)) > 0)
      ORDER BY l.created_at DESC, l.id DESC LIMIT :limit),
    tagged AS (
      SELECT l.rowid AS r
      FROM enough CROSS JOIN learning_tags t JOIN learnings l ON l.id = t.learning_id
      WHERE NOT enough.yes AND t.tag IN (SELECT value FROM json_each(:tags))),
    older AS (
      SELECT f.rowid AS r FROM enough CROSS JOIN learnings_fts f
      WHERE NOT enough.yes AND length(:search) >= 3 AND NOT EXISTS (SELECT 1 FROM since)
        AND f.learnings_fts MATCH '"' || replace(:search, '"', '""') || '"'
        AND (:tags IS NULL OR json_array_length(:tags) = 0 OR f.rowid IN (SELECT r FROM tagged))
      UNION ALL
      SELECT r FROM tagged WHERE :search IS NULL OR length(:search) < 3
      UNION ALL
      SELECT l.rowid FROM enough CROSS JOIN learnings l
      WHERE NOT enough.yes AND (:search IS NULL OR length(:search) < 3)
        AND (:tags IS NULL OR json_array_length(:tags) = 0)),
    older_hits AS (
      SELECT l.rowid AS r FROM learnings l
      WHERE l.rowid IN (SELECT r FROM older) AND l.rowid NOT IN (SELECT r FROM recent)
        AND (:project_id IS NULL OR l.project_id = :project_id)
        AND (:tags IS NULL OR json_array_length(:tags) = 0 OR EXISTS (
              SELECT 1 FROM json_each(CASE WHEN json_valid(l.tags) THEN l.tags ELSE '[]' END) t
              WHERE t.value IN (SELECT value FROM json_each(:tags))))
        AND (:search IS NULL
             OR instr(lower(l.title), lower(:search)) > 0
             OR instr(lower(l.problem), lower(:search)) > 0
             OR instr(lower(l.solution), lower(:search)) > 0))
SELECT l.id, l.title, l.problem, l.solution, l.tags, l.project_id,
       p.name AS project_name, l.created_at
FROM learnings l
LEFT JOIN projects p ON l.project_id = p.id
WHERE l.rowid IN (SELECT r FROM recent_hits UNION ALL SELECT r FROM older_hits UNION ALL SELECT r FROM windowed)
ORDER BY l.created_at DESC, l.id DESC
LIMIT :limit
"""

CAPTURE_LEARNING = """
INSERT INTO learnings (id, title, problem, solution, tags, project_id, cycle_id, session_id, created_at, updated_at)
SELECT printf('L-%03d', last + 1), :title, :problem, :solution, json(:tags), :project_id, :cycle_id, :session_id,
       strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), strftime('%Y-%m-%dT%H:%M:%SZ', 'now')
FROM id_counters
WHERE prefix = 'L-'
  AND (:project_id IS NULL OR EXISTS (SELECT 1 FROM projects WHERE id = :project_id))
  AND (:cycle_id IS NULL OR EXISTS (SELECT 1 FROM cycles WHERE id = :cycle_id))
RETURNING id, title, tags, project_id, created_at
"""


def learning(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    d["tags"] = json.loads(d["tags"])
    return d


@mcp.tool()
def get_learning(id: Annotated[str, Field(min_length=1, max_length=64)]) -> dict[str, Any]:
    """Get the full details of a specific learning by ID, with its project and cycle names."""
    row = db.execute(GET_LEARNING, {"id": id}).fetchone()
    if row is None:
        raise ValueError(f'No learning found with id "{id}". Use query_learnings to find ids.')
    return learning(row)


@mcp.tool()
def query_learnings(
    tags: list[str] | None = None,
    project_id: str | None = None,
    search: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
) -> dict[str, Any]:
    """Search learnings by tags (ANY), project and free text, newest first."""
    rows = db.execute(
        QUERY_LEARNINGS,
        {
            "tags": json.dumps(tags) if tags is not None else None,
            "project_id": project_id,
            "search": search,
            "limit": limit,
        },
    ).fetchall()
    return {"learnings": [learning(r) for r in rows]}


@mcp.tool()
def capture_learning(
    title: Annotated[str, Field(min_length=3, max_length=200)],
    problem: Annotated[str, Field(min_length=3, max_length=4000)],
    solution: Annotated[str, Field(min_length=3, max_length=8000)],
    tags: Annotated[list[str], Field(min_length=1, max_length=10)],
    project_id: str | None = None,
    cycle_id: str | None = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """Record a learning (problem and solution) and return its new id."""
    with db:
        row = db.execute(
            CAPTURE_LEARNING,
            {
                "title": title,
                "problem": problem,
                "solution": solution,
                "tags": json.dumps(tags),
                "project_id": project_id,
                "cycle_id": cycle_id,
                "session_id": session_id,
            },
        ).fetchone()
    if row is None:
        raise ValueError("Learning not saved: the project or cycle does not exist.")
    return learning(row)


if __name__ == "__main__":
    mcp.run()
