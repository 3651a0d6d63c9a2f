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
// A recent enough Node can still have type stripping off: Node 23.0 to 23.5 (it came on by
// default in 23.6), or --no-experimental-strip-types in the command or NODE_OPTIONS.
if (!process.features.typescript) {
  process.stderr.write(
    `tollgate: needs Node.js's type stripping, which is off in this Node ${process.version} (Node 23.0 to 23.5, or --no-experimental-strip-types in the command or NODE_OPTIONS). Use Node 24 LTS without that option.\n`,
  );
  process.exit(1);
}
// `serve` reloads on SIGHUP once its handler is in (serve-command.ts); until then a SIGHUP would end
// the process (its default action), and loading the code takes a second or more: one that comes
// meanwhile is noted here and done once the server has started.
if (commandOf(process.argv.slice(2)) === "serve") {
  const early = { signalled: false, listener: () => (early.signalled = true) };
  /** @type {Record<symbol, unknown>} */ (globalThis)[Symbol.for("tollgate.early-sighup")] = early;
  process.on("SIGHUP", early.listener);
}
await import("../src/cli.ts");

/**
 * The command word, as src/cli.ts finds it: the first argument that is not `--config` or its file.
 * @param {string[]} argv
 * @returns {string | undefined}
 */
function commandOf(argv) {
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index] ?? "";
    if (argument === "--config") index++;
    else if (!argument.startsWith("--config=")) return argument;
  }
  return undefined;
}
