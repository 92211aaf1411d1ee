#!/usr/bin/env node
// The `mcpspec` command of the npm package: runs the mcpspec binary that this platform's
// package (@mcpspec/<platform>-<arch>, an optional dependency that npm installs only where it
// fits) carries, with the same arguments, standard streams and exit status. The streams are
// handed to the binary, not copied, so an MCP session over stdio costs nothing here; SIGINT,
// SIGTERM and SIGHUP are passed on, so a host stopping the server lets its calls in flight
// finish. Written by `cargo xtask dist npm`; no dependencies.
"use strict";

const { spawn } = require("node:child_process");

const platform = `${process.platform}-${process.arch}`;
const pkg = `@mcpspec/${platform}`;
const exe = process.platform === "win32" ? "mcpspec.exe" : "mcpspec";

let bin;
try {
  bin = require.resolve(`${pkg}/bin/${exe}`);
} catch {
  console.error(
    `error: the npm package mcpspec has no binary for ${platform} here (${pkg} is not installed)\n` +
      "help: reinstall without --no-optional (or --omit=optional); mcpspec is built for linux-x64, " +
      "linux-arm64, darwin-x64, darwin-arm64 and win32-x64; elsewhere, `cargo install mcpspec-cli`",
  );
  process.exit(1);
}

const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => {
  console.error(`error: running ${bin}: ${e.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, as the binary did.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
