/**
 * The README's way to try Tollgate with no download, run as written on a fresh folder: its
 * `models make-test` line, its `tollgate.yaml`, then `serve`; the curl line that the first start
 * prints, and the README's own curl body, must both get an answer.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const cli = join(root, "src/cli.ts");
const readme = readFileSync(join(root, "README.md"), "utf8");

let folder: string;
let server: ChildProcess | undefined;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-quick-start-"));
});

afterAll(() => {
  server?.kill("SIGKILL");
  rmSync(folder, { recursive: true, force: true });
});

/** The README's shell block that follows `heading` (a phrase of the paragraph before it). */
function shellBlockAfter(heading: string): string {
  const start = readme.indexOf(heading);
  expect(start, `README mentions "${heading}"`).toBeGreaterThanOrEqual(0);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(start));
  expect(block, `a sh block follows "${heading}"`).not.toBeNull();
  return block?.[1] ?? "";
}

/** Runs `node src/cli.ts ...` from a README line in the test folder. */
function runCliLine(line: string) {
  const args = line.replace(/^node src\/cli\.ts /, "").split(/\s+/);
  return spawnSync(process.execPath, [cli, ...args], { cwd: folder, encoding: "utf8" });
}

/** Starts `tollgate serve` in the folder (`cwd`); resolves with its output once it listens. */
async function serve(args: readonly string[] = [], cwd = folder): Promise<string> {
  const child = spawn(process.execPath, [cli, "serve", "--port", "0", ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  server = child;
  let output = "";
  child.stdout?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  for (let waited = 0; waited < 20_000; waited += 50) {
    if (/Tollgate listening on \S+/.test(output)) return output;
    if (child.exitCode !== null) throw new Error(`serve exited: ${output}`);
    await sleep(50);
  }
  throw new Error(`serve did not start: ${output}`);
}

describe("the README's quick start", () => {
  it("makes a test model, serves it, and answers the printed curl line and the README's", async () => {
    const block = shellBlockAfter("To try Tollgate with no download at all");
    const makeTest = block.split("\n").find((line) => line.startsWith("node src/cli.ts models make-test"));
    expect(makeTest).toBeDefined();
    const made = runCliLine(makeTest ?? "");
    expect(made.status, made.stderr).toBe(0);

    const yaml = /<<'YAML'\n([\s\S]*?)\nYAML/.exec(block)?.[1];
    expect(yaml).toBeDefined();
    writeFileSync(join(folder, "tollgate.yaml"), `${yaml}\n`);

    const output = await serve();
    // Signals go to the server's own process (not npm's): the banner names it.
    const pid = server?.pid;
    expect(output).toMatch(
      new RegExp(
        `Tollgate listening on http://127\\.0\\.0\\.1:\\d+/v1 \\(pid ${pid}; reload: kill -HUP ${pid}\\)`,
      ),
    );
    const printed =
      /curl (\S+) -H "Authorization: Bearer (\S+)" -H "Content-Type: application\/json" -d '(.+)'/.exec(
        output,
      );
    expect(printed, output).not.toBeNull();
    const [, url = "", key = "", printedBody = ""] = printed ?? [];

    const readmeBody = /-d '(\{"model": "tiny".*\})'/.exec(readme)?.[1];
    expect(readmeBody).toBeDefined();
    for (const body of [printedBody, readmeBody ?? ""]) {
      const response = await fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        // As written, but short: a random-weight model rarely stops by itself.
        body: JSON.stringify({ ...(JSON.parse(body) as object), max_tokens: 4 }),
      });
      const answer = (await response.json()) as { model?: string; choices?: unknown[] };
      expect(response.status, JSON.stringify(answer)).toBe(200);
      expect(answer.model).toBe("tiny");
      expect(answer.choices).toHaveLength(1);
    }
  }, 60_000);

  it("prints a curl line that reaches a server listening on every address (0.0.0.0)", async () => {
    server?.kill("SIGKILL");
    const fresh = mkdtempSync(join(tmpdir(), "tollgate-quick-start-any-"));
    try {
      writeFileSync(join(fresh, "tollgate.yaml"), "models: []\n");
      const output = await serve(["--host", "0.0.0.0"], fresh);
      expect(output).toMatch(/Tollgate listening on http:\/\/0\.0\.0\.0:\d+\/v1/);
      const url = /curl (\S+) -H/.exec(output)?.[1] ?? "";
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions$/);
      // Reached as printed (a 401: no key sent).
      expect((await fetch(url, { method: "POST" })).status).toBe(401);
    } finally {
      server?.kill("SIGKILL");
      rmSync(fresh, { recursive: true, force: true });
    }
  }, 60_000);
});
