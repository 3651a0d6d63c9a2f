/**
 * `tollgate models make-test FILE` names what is wrong with FILE in words. Regression: a folder
 * or an empty FILE printed the file system's raw EISDIR or ENOENT error about a temporary file.
 * Regression: an existing file that is not a GGUF (a .safetensors checkpoint, a script) was
 * replaced without a word, and the 503 of a model whose file was not a GGUF suggested doing so.
 */
import { spawnSync } from "node:child_process";
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.ts";

const _cli = join(import.meta.dirname, "../../src/cli.ts");

let folder: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-make-test-"));
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function makeTest(file: string) {
  return runCli(["models", "make-test", file], { cwd: folder, unset: ["TOLLGATE_CONFIG"] });
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

describe("models make-test with a FILE that exists", () => {
  it("leaves a file that is not a GGUF as it is, and says so", () => {
    const file = join(folder, "victim.safetensors");
    const bytes = Buffer.from('{"__metadata__":{}}\nweights that are the only copy');
    writeFileSync(file, bytes);
    try {
      const result = makeTest(file);
      expect(result.stderr).toBe(
        `tollgate: ${file} exists and is not a GGUF file; make-test would replace it, so it was left as it is. Give a new file name, such as ./models/tiny.gguf, or delete the file first if you do not need it\n`,
      );
      expect(result.code).toBe(1);
      expect(readFileSync(file)).toEqual(bytes);
      expect(readdirSync(folder)).toEqual(["victim.safetensors"]);
    } finally {
      rmSync(file);
    }
  });

  it("leaves a FIFO as it is (size 0, it is no file to replace), and says so", ({ skip }) => {
    const fifo = join(folder, "pipe");
    const made = spawnSync("mkfifo", [fifo], { encoding: "utf8" });
    if (made.status !== 0) {
      const reason = `mkfifo could not make a FIFO (${made.error?.message ?? made.stderr.trim()})`;
      console.warn(`Skipping the FIFO case: ${reason}.`);
      skip(reason);
    }
    try {
      const result = makeTest(fifo);
      expect(result.stderr).toBe(
        `tollgate: ${fifo} is not a regular file; give the file to write, such as ./models/tiny.gguf\n`,
      );
      expect(result.code).toBe(1);
      expect(lstatSync(fifo).isFIFO()).toBe(true);
    } finally {
      rmSync(fifo);
    }
  });

  it("replaces a GGUF (a test model made again) and an empty file", () => {
    const file = join(folder, "again.gguf");
    const empty = join(folder, "empty.gguf");
    writeFileSync(file, "GGUF and whatever follows");
    writeFileSync(empty, "");
    try {
      for (const path of [file, empty]) {
        const result = makeTest(path);
        expect(result.stderr).toBe("");
        expect(result.code).toBe(0);
        expect(result.stdout.startsWith(`wrote ${path} (`)).toBe(true);
        expect(readFileSync(path).length).toBeGreaterThan(1000);
      }
    } finally {
      rmSync(file);
      rmSync(empty);
    }
  });
});
