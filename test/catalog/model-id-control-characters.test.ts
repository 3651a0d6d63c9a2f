/**
 * Model ids are printed in tables (`models list`, `usage`) and logs: an id with a tab, a line
 * break or an escape was loaded and printed raw, breaking `models list`'s table or reaching the
 * terminal. They are refused as key names are (has-control-characters.ts), naming the field.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.ts";
import { type ConfigTestFolder, createConfigTestFolder } from "./config-test-folder.ts";

let folder: ConfigTestFolder;

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  await folder.remove();
});

/** A config with one upstream chat model per id (ids as JSON strings, which YAML reads too). */
function configWith(ids: readonly string[]): string {
  return [
    "models:",
    ...ids.flatMap((id) => [
      `  - id: ${JSON.stringify(id)}`,
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      '    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }',
    ]),
    "",
  ].join("\n");
}

const REFUSED =
  "must not hold control characters (line breaks, tabs, escapes, text-direction marks): model ids are printed in tables and logs; remove them";

describe("model ids with control characters", () => {
  it("are refused, each naming its field", async () => {
    const ids = [
      "ok",
      "tab\there",
      "line\nbreak",
      "esc\u001b[2Jape",
      "del\u007f",
      "c1\u009b",
      "rtl\u202Eevil",
      "cr\rx",
    ];
    await folder.write("tollgate.yaml", configWith(ids));
    expect(await folder.problemsOf()).toEqual([
      `models[1].id: ${REFUSED}`,
      `models[2].id: ${REFUSED}`,
      `models[3].id: ${REFUSED}`,
      `models[4].id: ${REFUSED}`,
      `models[5].id: ${REFUSED}`,
      `models[6].id: ${REFUSED}`,
      `models[7].id: ${REFUSED}`,
    ]);
  });

  it("are not confused with other characters: accents, emoji sequences, slashes and colons load", async () => {
    const ids = ["café", "👩\u200D💻-coder", "org/model:Q4_K_M", "x?y#z"];
    await folder.write("tollgate.yaml", configWith(ids));
    expect((await folder.load()).models.map((model) => model.id)).toEqual(ids);
  });

  it("never reach `models list`: it fails, saying which id, instead of printing a broken table", async () => {
    const file = await folder.write("tollgate.yaml", configWith(["good", "tab\there"]));
    const listed = runCli(["models", "list", "--config", file], {
      unset: ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL"],
    });
    expect(listed.code).toBe(1);
    expect(listed.stdout).toBe("");
    expect(listed.stderr).toContain(`models[1].id: ${REFUSED} (line 5)`);
  });
});
