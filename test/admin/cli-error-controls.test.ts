/**
 * The CLI's error line shows control characters escaped: it may repeat what the operator typed or
 * a name an API client chose, and an escape sequence printed raw would clear the terminal or
 * retitle its window. Regression: `accounts show` of a name with a C1 control (U+009B, CSI)
 * printed it raw, through the JSON quoting of the name, which leaves C1 controls alone.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-controls-"));

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function runCli(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "t.db")}` };
  delete env.TOLLGATE_CONFIG;
  delete env.TOLLGATE_REDIS_URL;
  const result = spawnSync(process.execPath, [cli, ...args], {
    cwd: folder,
    encoding: "utf8",
    env,
    timeout: 30_000,
  });
  return { code: result.status, stderr: result.stderr };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

describe("the CLI's error line", () => {
  it("escapes a C1 control in a name it could not find", () => {
    const { code, stderr } = runCli(["accounts", "show", "uni\u009b2J"]);
    expect(code).toBe(1);
    expect(stderr).toContain("uni\\u009b2J");
    expect(stderr).not.toMatch(RAW_CONTROL);
  });

  it("escapes an escape sequence in an unknown command, keeping its line breaks", () => {
    const { code, stderr } = runCli(["\u001b]0;pwned\u0007"]);
    expect(code).toBe(1);
    expect(stderr).toContain("unknown command '\\u001b]0;pwned\\u0007'");
    expect(stderr).not.toMatch(RAW_CONTROL);
    expect(stderr.split("\n").length).toBeGreaterThan(3);
  });
});
