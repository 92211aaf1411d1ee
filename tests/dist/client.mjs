// Drives the `mcpspec` on the PATH (as installed from npm, PyPI or the OCI image's files) with
// `serve` over stdio, as a host would: initialize, list the tools, call one, refuse bad
// arguments as a tool error, then stop the server with SIGTERM (which the npm launcher passes
// on), after which it exits 0. Usage: node client.mjs SPEC DB.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import assert from "node:assert/strict";

const [spec, db] = process.argv.slice(2);
const server = spawn("mcpspec", ["serve", "--spec", spec, "--db", db], {
  stdio: ["pipe", "pipe", "inherit"],
});
const pending = new Map();
createInterface({ input: server.stdout }).on("line", (line) => {
  const msg = JSON.parse(line);
  pending.get(msg.id)?.(msg);
  pending.delete(msg.id);
});
let next = 1;
function request(method, params) {
  const id = next++;
  server.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
  return new Promise((resolve, reject) => {
    pending.set(id, resolve);
    setTimeout(() => reject(new Error(`no answer to ${method} in 10 s`)), 10_000).unref();
  });
}

const init = await request("initialize", {
  protocolVersion: "2025-11-25",
  capabilities: {},
  clientInfo: { name: "npm-test", version: "1" },
});
assert.equal(init.result.serverInfo.name, "parts", JSON.stringify(init));
server.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");

const list = await request("tools/list", {});
assert.deepEqual(list.result.tools.map((t) => t.name), ["find_part"], JSON.stringify(list));

const found = await request("tools/call", { name: "find_part", arguments: { id: 1 } });
assert.deepEqual(found.result.structuredContent, { id: 1, name: "bolt", stock: 40 }, JSON.stringify(found));

const bad = await request("tools/call", { name: "find_part", arguments: { id: 0 } });
assert.equal(bad.result.isError, true, JSON.stringify(bad));
assert.match(JSON.stringify(bad.result.content), /id/);

const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
server.kill("SIGTERM");
assert.deepEqual(await exited, { code: 0, signal: null }, "the server stopped by SIGTERM");
console.log("ok: initialize, tools/list, tools/call, a refused argument, SIGTERM and exit 0");
