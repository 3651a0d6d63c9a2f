/**
 * `tollgate models make-test FILE` names what is wrong with FILE in words. Regression: a folder
 * or an empty FILE printed the file system's raw EISDIR or ENOENT error about a temporary file.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const cli = join(import.meta.dirname, "../../src/cli.ts");

let folder: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-make-test-"));
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function makeTest(file: string) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.TOLLGATE_CONFIG;
  const result = spawnSync(process.execPath, [cli, "models", "make-test", file], {
    cwd: folder,
    encoding: "utf8",
    env,
    timeout: 30_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("models make-test with a FILE it cannot write", () => {
  it("says that an existing folder is a folder and suggests a file in it", () => {
    const result = makeTest(folder);
    expect(result.stderr).toBe(
      `tollgate: ${folder} is a folder; give the file to write, such as ${join(folder, "tiny.gguf")}\n`,
    );
    expect(result.code).toBe(1);
    expect(readdirSync(folder)).toEqual([]);
  });

  it("says that an empty FILE is not a path", () => {
    const result = makeTest("");
    expect(result.stderr).toBe(
      "tollgate: FILE must be a file path such as ./models/tiny.gguf\nUsage: tollgate models make-test FILE [--seed N] [--size tiny|small]\n",
    );
    expect(result.code).toBe(1);
    expect(readdirSync(folder)).toEqual([]);
  });
});
