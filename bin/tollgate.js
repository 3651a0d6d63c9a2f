#!/usr/bin/env node
// Plain JavaScript, so that any Node runs it: an older Node fails on src/cli.ts's type annotations
// with a stack trace (ERR_UNKNOWN_FILE_EXTENSION) that does not say what is wrong.
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `tollgate: needs Node.js 22.18 or later (it runs its TypeScript directly); this is Node ${process.version}. Install Node 24 LTS and run it again.\n`,
  );
  process.exit(1);
}
await import("../src/cli.ts");
