import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const SHIM = new URL("../../bin/tollgate.js", import.meta.url).pathname;

/** The machine's own Node, where it is older than Tollgate needs (machines here ship Node 20). */
const OLD_NODE = "/usr/bin/node";
const oldNodeVersion = existsSync(OLD_NODE)
  ? (await run(OLD_NODE, ["--version"]).catch(() => ({ stdout: "" }))).stdout.trim()
  : "";
const isOld = /^v(\d+)\.(\d+)\./.exec(oldNodeVersion);
const hasOldNode =
  isOld !== null && (Number(isOld[1]) < 22 || (Number(isOld[1]) === 22 && Number(isOld[2]) < 18));
if (!hasOldNode)
  console.log(`old-node.test.ts: no Node older than 22.18 at ${OLD_NODE}; that test is skipped`);

describe("the tollgate command (bin/tollgate.js)", () => {
  it("runs the CLI on this Node", async () => {
    const { stdout } = await run(process.execPath, [SHIM, "--help"]);
    expect(stdout).toMatch(/^Usage: tollgate <command>/);
  });

  it("says that type stripping is off where it is, not a stack trace (as on Node 23.0 to 23.5)", async () => {
    const failed = await run(process.execPath, ["--no-experimental-strip-types", SHIM, "--help"]).then(
      () => undefined,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stdout).toBe("");
    expect(failed?.stderr).toBe(
      `tollgate: needs Node.js's type stripping, which is off in this Node ${process.version} (Node 23.0 to 23.5, or --no-experimental-strip-types in the command or NODE_OPTIONS). Use Node 24 LTS without that option.\n`,
    );
  });

  it.skipIf(!hasOldNode)(
    "says which Node it needs on an older one, not a stack trace (regression: ERR_UNKNOWN_FILE_EXTENSION)",
    async () => {
      const failed = await run(OLD_NODE, [SHIM, "serve"]).then(
        () => undefined,
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      expect(failed?.code).toBe(1);
      expect(failed?.stdout).toBe("");
      expect(failed?.stderr).toBe(
        `tollgate: needs Node.js 22.18 or later (it runs its TypeScript directly); this is Node ${oldNodeVersion}. Install Node 24 LTS and run it again.\n`,
      );
    },
  );
});
