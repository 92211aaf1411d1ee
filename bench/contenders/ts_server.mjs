// Project Studio's benchmarked tools written with the official TypeScript MCP SDK.
//
// Written as the SDK's docs teach: an McpServer, registerTool with zod input and output
// schemas, better-sqlite3 prepared statements, and the stdio transport. The SQL is
// spec/studio.yaml's. The database path is the first argument or BENCH_DB.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import Database from "better-sqlite3";
import { z } from "zod";

const db = new Database(process.argv[2] ?? process.env.BENCH_DB, { fileMustExist: true });
db.pragma("journal_mode = WAL");

const getLearning = db.prepare(`
  SELECT l.id, l.title, l.problem, l.solution, l.tags, l.project_id, p.name AS project_name,
         l.cycle_id, c.name AS cycle_name, l.session_id, l.created_at, l.updated_at
  FROM learnings l
  LEFT JOIN projects p ON l.project_id = p.id
  LEFT JOIN cycles c ON l.cycle_id = c.id
  WHERE l.id = :id`);

const queryLearnings = db.prepare(`
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
  LIMIT :limit`);

const captureLearning = db.prepare(`
  INSERT INTO learnings (id, title, problem, solution, tags, project_id, cycle_id, session_id, created_at, updated_at)
  SELECT printf('L-%03d', last + 1), :title, :problem, :solution, json(:tags), :project_id, :cycle_id, :session_id,
         strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), strftime('%Y-%m-%dT%H:%M:%SZ', 'now')
  FROM id_counters
  WHERE prefix = 'L-'
    AND (:project_id IS NULL OR EXISTS (SELECT 1 FROM projects WHERE id = :project_id))
    AND (:cycle_id IS NULL OR EXISTS (SELECT 1 FROM cycles WHERE id = :cycle_id))
  RETURNING id, title, tags, project_id, created_at`);

const learningShape = {
  id: z.string(),
  title: z.string(),
  problem: z.string(),
  solution: z.string(),
  tags: z.array(z.string()),
  project_id: z.string().nullable(),
  project_name: z.string().nullable(),
  created_at: z.string(),
};

const withTags = (row) => ({ ...row, tags: JSON.parse(row.tags) });
const result = (data) => ({
  content: [{ type: "text", text: JSON.stringify(data) }],
  structuredContent: data,
});
const failure = (message) => ({ content: [{ type: "text", text: message }], isError: true });

const server = new McpServer({ name: "studio", version: "0.1.0" });

server.registerTool(
  "get_learning",
  {
    title: "Get a learning",
    description: "Get the full details of a specific learning by ID, with its project and cycle names.",
    inputSchema: { id: z.string().min(1).max(64).describe('The learning ID (e.g. "L-023").') },
    outputSchema: {
      ...learningShape,
      cycle_id: z.string().nullable(),
      cycle_name: z.string().nullable(),
      session_id: z.string().nullable(),
      updated_at: z.string(),
    },
  },
  async ({ id }) => {
    const row = getLearning.get({ id });
    return row ? result(withTags(row)) : failure(`No learning found with id "${id}".`);
  },
);

server.registerTool(
  "query_learnings",
  {
    title: "Query learnings",
    description: "Search learnings by tags (ANY), project and free text, newest first.",
    inputSchema: {
      tags: z.array(z.string().min(1).max(64)).max(20).optional(),
      project_id: z.string().min(1).optional(),
      search: z.string().min(1).max(200).optional(),
      limit: z.number().int().min(1).max(50).default(10),
    },
    outputSchema: { learnings: z.array(z.object(learningShape)) },
  },
  async ({ tags, project_id, search, limit }) => {
    const rows = queryLearnings.all({
      tags: tags === undefined ? null : JSON.stringify(tags),
      project_id: project_id ?? null,
      search: search ?? null,
      limit,
    });
    return result({ learnings: rows.map(withTags) });
  },
);

server.registerTool(
  "capture_learning",
  {
    title: "Capture a learning",
    description: "Record a learning (problem and solution) and return its new id.",
    inputSchema: {
      title: z.string().min(3).max(200),
      problem: z.string().min(3).max(4000),
      solution: z.string().min(3).max(8000),
      tags: z.array(z.string().max(40)).min(1).max(10),
      project_id: z.string().min(1).optional(),
      cycle_id: z.string().min(1).optional(),
      session_id: z.string().min(1).max(200).optional(),
    },
    outputSchema: {
      id: z.string(),
      title: z.string(),
      tags: z.array(z.string()),
      project_id: z.string().nullable(),
      created_at: z.string(),
    },
  },
  async ({ title, problem, solution, tags, project_id, cycle_id, session_id }) => {
    const row = captureLearning.get({
      title,
      problem,
      solution,
      tags: JSON.stringify(tags),
      project_id: project_id ?? null,
      cycle_id: cycle_id ?? null,
      session_id: session_id ?? null,
    });
    return row ? result(withTags(row)) : failure("Learning not saved: the project or cycle does not exist.");
  },
);

await server.connect(new StdioServerTransport());
