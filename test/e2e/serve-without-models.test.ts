/**
 * A config file that names no models (its models commented out, `models:` left empty) serves the
 * built-in catalogue, whose 0.5 GB model is downloaded at start. Regression: nothing said so, and
 * an operator who commented out their models got a public model and a download instead.
 */
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { killServeProcesses, startServeProcess } from "../support/serve-process.ts";

const folder = mkdtempSync(join(tmpdir(), "tollgate-serve-without-models-"));

afterAll(() => {
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

/** What a server started on `config` logged as warnings by the time it listened, and a moment after. */
async function warningsOf(config: string): Promise<string[]> {
  const file = join(folder, "tollgate.yaml");
  writeFileSync(file, config);
  // The built-in model's download goes nowhere.
  const served = await startServeProcess(file, {
    cwd: folder,
    env: { TOLLGATE_HF_ENDPOINT: "http://127.0.0.1:9", TOLLGATE_MODELS_DIR: join(folder, "models") },
  });
  await sleep(300);
  served.child.kill("SIGTERM");
  await once(served.child, "exit");
  return served
    .output()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .filter((line) => line.level === 40)
    .map((line) => line.msg);
}

const NO_MODELS =
  "the config file names no models: serving the built-in catalogue (its model is downloaded at start); write models: [] to serve none";

describe("a config file that names no models", () => {
  it("is said at start to serve the built-in catalogue", async () => {
    const head = "server: { host: 127.0.0.1, port: 0 }\ndatabase: sqlite:./tollgate.db\n";
    expect(await warningsOf(`${head}# models:\n#   - id: mine\n`)).toContain(NO_MODELS);
    expect(await warningsOf(`${head}models:\n`)).toContain(NO_MODELS);
    // `models: []` is no models at all, as written: nothing to say.
    expect(await warningsOf(`${head}models: []\n`)).not.toContain(NO_MODELS);
  });
});
