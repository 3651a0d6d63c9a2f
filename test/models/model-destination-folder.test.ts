/**
 * Regression: a server that could not reach the hub said "put the file at
 * /…/models/hf_….gguf", but the models folder is made only once the hub has answered, so the
 * operator's copy into it failed. The advice now says to create the folder when it is missing.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/models/download/ensure-model-file.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { startModelFileServer } from "./model-file-server.ts";

const folder = makeTemporaryDirectory();

describe("the advice to bring a model file from elsewhere", () => {
  it("names the models folder to create when the hub could not be reached", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    const modelsFolder = join(folder, "never-made", "models");
    const error = await ensureModelFile({
      model: "hf:org/repo:Q4_K_M",
      signal: new AbortController().signal,
      env: { TOLLGATE_MODELS_DIR: modelsFolder, TOLLGATE_HF_ENDPOINT: closed.baseUrl },
    }).catch((caught: unknown) => caught);
    expect(existsSync(modelsFolder)).toBe(false);
    const message = error instanceof Error ? error.message : String(error);
    const place = /put the file at (\S+) \(create its folder (\S+) first\); or serve a local GGUF file/.exec(
      message,
    );
    expect(place, message).not.toBeNull();
    expect(dirname(place?.[1] ?? "")).toBe(modelsFolder);
    expect(place?.[2]).toBe(modelsFolder);
  });
});
