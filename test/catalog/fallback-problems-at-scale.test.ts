/**
 * Every fallback that names no model of the catalogue is a problem, and each one's message used
 * to name the whole catalogue: a 3000-model config with a typo in every fallback made a message
 * (and a reload's log line) of megabytes, and measured every id against every typo in full,
 * holding the event loop for seconds. A message names at most 10 ids, the suggestion first when
 * there is one; the ids are prepared once for all the fallbacks.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ConfigTestFolder, createConfigTestFolder } from "./config-test-folder.ts";

let folder: ConfigTestFolder;

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  await folder.remove();
});

const idOf = (index: number) => `model-number-${String(index).padStart(4, "0")}`;

/** `count` upstream chat models, model i falling back to `fallbackOf(i)`. */
function catalogue(count: number, fallbackOf: (index: number) => string): string {
  const lines = ["models:"];
  for (let index = 0; index < count; index++) {
    lines.push(
      `  - id: ${idOf(index)}`,
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      `    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m, fallbacks: [ ${JSON.stringify(fallbackOf(index))} ] }`,
    );
  }
  return `${lines.join("\n")}\n`;
}

describe("fallbacks that name no model", () => {
  it("name the first 10 ids and count the rest", async () => {
    await folder.write(
      "tollgate.yaml",
      catalogue(25, (index) => (index === 3 ? "zz-unknown" : idOf(index + 1))),
    );
    const problems = await folder.problemsOf();
    expect(problems).toEqual([
      `models[3].engine.fallbacks[0]: "zz-unknown" is not a model in this catalogue; name one of: ${Array.from({ length: 10 }, (_, index) => idOf(index)).join(", ")} and 15 more`,
      // The last model falls back to one past the end: the first id one edit away is suggested.
      `models[24].engine.fallbacks[0]: "model-number-0025" is not a model in this catalogue; did you mean "model-number-0005"?`,
    ]);
  });

  it("name every id of a catalogue of 10 or fewer", async () => {
    await folder.write(
      "tollgate.yaml",
      catalogue(10, (index) => (index === 0 ? "zz-unknown" : idOf(0))),
    );
    expect(await folder.problemsOf()).toEqual([
      `models[0].engine.fallbacks[0]: "zz-unknown" is not a model in this catalogue; name one of: ${Array.from({ length: 10 }, (_, index) => idOf(index)).join(", ")}`,
    ]);
  });

  it("in a 3000-model catalogue, keep each message short and each suggestion the closest id", async () => {
    // A typo of a late id in every fallback: each one is measured against every id.
    await folder.write(
      "tollgate.yaml",
      catalogue(3000, (index) =>
        index % 2 === 0 ? `model-numbr-${String(2999 - index).padStart(4, "0")}` : `zz-${index}`,
      ),
    );
    const problems = await folder.problemsOf();
    expect(problems).toHaveLength(3000);
    expect(problems[0]).toBe(
      'models[0].engine.fallbacks[0]: "model-numbr-2999" is not a model in this catalogue; did you mean "model-number-2999"?',
    );
    expect(problems[1]).toMatch(
      /"zz-1" is not a model in this catalogue; name one of: model-number-0000, .*, model-number-0009 and 2990 more$/,
    );
    expect(Math.max(...problems.map((problem) => problem.length))).toBeLessThan(400);
  });
});
