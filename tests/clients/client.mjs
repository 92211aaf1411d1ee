#!/usr/bin/env node
// Drives an mcpspec server with the official MCP TypeScript client (npm
// @modelcontextprotocol/client 2.x), as a user would.
//
// Usage: node client.mjs --era legacy|2026-07-28 --suite conformance|pm (--url URL | -- CMD [ARGS...])
//
// Connects in the given protocol era (`legacy` is the 2025-11-25 initialize handshake; otherwise
// the version is pinned), runs the suite's checks through the client's public API and prints
// one line per check: `ok NAME` or `FAIL NAME: why`. Exit status 0 when every check passed, 1
// otherwise, 2 on a usage error. The checks are the same as client.py's.
import {
  Client,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const failed = [];
function check(name, ok, why = '') {
  console.log(ok ? `ok ${name}` : `FAIL ${name}: ${typeof why === 'string' ? why : JSON.stringify(why)}`);
  if (!ok) failed.push(name);
}

const text = (result) => result.content?.[0]?.text ?? '';

function parse(argv) {
  const sep = argv.indexOf('--');
  const own = sep < 0 ? argv : argv.slice(0, sep);
  const cmd = sep < 0 ? [] : argv.slice(sep + 1);
  const opt = (name) => {
    const i = own.indexOf(name);
    return i >= 0 ? own[i + 1] : undefined;
  };
  const ns = { era: opt('--era'), suite: opt('--suite'), url: opt('--url'), cmd };
  const usable =
    ['legacy', '2026-07-28'].includes(ns.era) &&
    ['conformance', 'pm'].includes(ns.suite) &&
    Boolean(ns.url) !== (cmd.length > 0);
  if (!usable) {
    console.error('usage: node client.mjs --era legacy|2026-07-28 --suite conformance|pm (--url URL | -- CMD [ARGS...])');
    process.exit(2);
  }
  return ns;
}

// The person behind the client: answers forms by their fields, accepts or declines.
const person = { action: 'accept', asked: [] };
const logs = [];
// Called on each log message, so that a check can wait for the ones it expects.
const onLog = [];

// Resolves once `n` log messages have come, or after `ms`. Over Streamable HTTP rmcp sends a
// 2025-11-25 session's log messages on the standalone GET stream, not on the stream of the
// call that logged them, so they may come after the call's own answer.
function logsArrive(n, ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    const check = () => {
      if (logs.length >= n) {
        clearTimeout(timer);
        resolve();
      }
    };
    onLog.push(check);
    check();
  });
}

function connect(ns) {
  const client = new Client(
    { name: 'mcpspec-e2e', version: '1.0.0' },
    {
      capabilities: { elicitation: { form: {} }, sampling: {} },
      versionNegotiation: { mode: ns.era === 'legacy' ? 'legacy' : { pin: ns.era } },
    },
  );
  client.setRequestHandler('elicitation/create', async (request) => {
    person.asked.push(request.params.message);
    if (person.action !== 'accept') return { action: person.action };
    const fields = { name: 'Ada', context: 'from the TypeScript client' };
    const props = Object.keys(request.params.requestedSchema?.properties ?? {});
    return { action: 'accept', content: Object.fromEntries(props.map((k) => [k, fields[k] ?? 'yes'])) };
  });
  client.setRequestHandler('sampling/createMessage', async () => ({
    role: 'assistant',
    content: { type: 'text', text: 'Paris' },
    model: 'e2e',
  }));
  client.setNotificationHandler('notifications/message', (n) => {
    logs.push(n.params.data);
    for (const check of onLog) check();
  });
  const transport = ns.url
    ? new StreamableHTTPClientTransport(new URL(ns.url))
    : new StdioClientTransport({ command: ns.cmd[0], args: ns.cmd.slice(1), stderr: 'inherit' });
  return { client, transport };
}

async function conformance(client, era) {
  const names = new Set((await client.listTools()).tools.map((t) => t.name));
  const wanted = ['test_simple_text', 'test_input_required_result_elicitation', 'json_schema_2020_12_tool'];
  check('tools/list', wanted.every((n) => names.has(n)), wanted.filter((n) => !names.has(n)));
  let r = await client.callTool({ name: 'test_simple_text', arguments: {} });
  check('tools/call content', text(r) === 'This is a simple text response for testing.', text(r));
  r = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
  check("a handler's question", text(r) === 'Hello, Ada!', text(r));
  r = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'Capital of France?' } });
  check('sampling', text(r) === 'LLM response: Paris', text(r));
  let p = await client.getPrompt({ name: 'test_input_required_result_prompt' });
  let said = p.messages[0].content.text;
  check("a prompt's question", said === 'Use this context: from the TypeScript client', said);
  person.action = 'decline';
  p = await client.getPrompt({ name: 'test_input_required_result_prompt' });
  person.action = 'accept';
  said = p.messages[0].content.text;
  check("a prompt's question declined", said === 'No context was given.', said);
  p = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } });
  said = p.messages[0].content.text;
  check('prompt arguments', said === "Prompt with arguments: arg1='a', arg2='b'", said);
  const read = await client.readResource({ uri: 'test://static-text' });
  check('resources/read', read.contents[0].text.toLowerCase().includes('static'), read.contents[0].text);
  r = await client.callTool({ name: 'json_schema_2020_12_tool', arguments: { name: 'x' } });
  check('invalid arguments are a tool error', r.isError === true && text(r).includes('email'), text(r));
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
    check('an unknown tool is a protocol error', false, 'no error');
  } catch (e) {
    check('an unknown tool is a protocol error', e instanceof ProtocolError && e.code === -32602, String(e));
  }
  const meta = era === 'legacy' ? undefined : { [LOG_LEVEL_META_KEY]: 'info' };
  if (era === 'legacy') await client.setLoggingLevel('info');
  await client.callTool({ name: 'test_logging_tool', arguments: {}, _meta: meta });
  const want = ['logging started', 'logging going on', 'logging done'];
  await logsArrive(want.length, 5000);
  check('logging', JSON.stringify(logs) === JSON.stringify(want), logs);
}

async function pm(client) {
  let r = await client.callTool({ name: 'db.create', arguments: { database: 'scratch' } });
  check('db.create', !r.isError, text(r));
  person.action = 'decline';
  r = await client.callTool({ name: 'db.drop', arguments: { database: 'scratch', confirm: true } });
  check('a declined confirmation changes nothing', r.isError === true && text(r).includes('declined'), text(r));
  const listed = text(await client.callTool({ name: 'db.list', arguments: {} }));
  check('the database is still there', listed.includes('scratch'), listed);
  person.action = 'accept';
  r = await client.callTool({ name: 'db.drop', arguments: { database: 'scratch', confirm: true } });
  check('an accepted confirmation goes on', !r.isError, text(r));
  check('the person was asked each time', person.asked.length === 2, person.asked);
}

const ns = parse(process.argv.slice(2));
const { client, transport } = connect(ns);
try {
  await client.connect(transport);
  const want = ns.era === 'legacy' ? '2025-11-25' : ns.era;
  const got = client.getNegotiatedProtocolVersion();
  check('protocol version', got === want, String(got));
  await (ns.suite === 'pm' ? pm(client) : conformance(client, ns.era));
} catch (e) {
  check('the run', false, e?.stack ?? String(e));
} finally {
  await client.close().catch(() => {});
}
process.exit(failed.length ? 1 : 0);
