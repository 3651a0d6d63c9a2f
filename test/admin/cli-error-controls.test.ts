/**
 * The CLI's error line shows control characters escaped: it may repeat what the operator typed or
 * a name an API client chose, and an escape sequence printed raw would clear the terminal or
 * retitle its window. Regression: `accounts show` of a name with a C1 control (U+009B, CSI)
 * printed it raw, through the JSON quoting of the name, which leaves C1 controls alone.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.ts";

const _cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-controls-"));

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function runCliInFolder(args: string[]) {
  return runCli(args, {
    cwd: folder,
    env: { TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "t.db")}` },
    unset: ["TOLLGATE_CONFIG", "TOLLGATE_REDIS_URL"],
  });
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

describe("the CLI's error line", () => {
  it("escapes a C1 control in a name it could not find", () => {
    const { code, stderr } = runCliInFolder(["accounts", "show", "uni\u009b2J"]);
    expect(code).toBe(1);
    expect(stderr).toContain("uni\\u009b2J");
    expect(stderr).not.toMatch(RAW_CONTROL);
  });

  it("escapes an escape sequence in an unknown command, keeping its line breaks", () => {
    const { code, stderr } = runCliInFolder(["\u001b]0;pwned\u0007"]);
    expect(code).toBe(1);
    expect(stderr).toContain("unknown command '\\u001b]0;pwned\\u0007'");
    expect(stderr).not.toMatch(RAW_CONTROL);
    expect(stderr.split("\n").length).toBeGreaterThan(3);
  });
});
