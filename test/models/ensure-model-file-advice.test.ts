import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/models/download/ensure-model-file.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { startModelFileServer } from "./model-file-server.ts";

const folder = makeTemporaryDirectory();

async function failureOf(model: string, modelsFolder: string): Promise<ModelDownloadError> {
  const error = await ensureModelFile({
    model,
    signal: new AbortController().signal,
    env: { TOLLGATE_MODELS_DIR: modelsFolder },
  }).catch((caught: unknown) => caught);
  expect(error).toBeInstanceOf(ModelDownloadError);
  return error as ModelDownloadError;
}

describe("ensureModelFile: the advice fits the failure", () => {
  it("regression: a host that cannot be reached gets network advice and the reload (SIGHUP) that retries", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    const source = `${closed.baseUrl}/models/tiny.gguf`;
    const failure = await failureOf(source, join(folder, "models"));
    expect(failure.failure).toBe("unreachable");
    expect(failure.message).toMatch(
      /\. To fix it, let this machine reach the network \(or wait for the server to answer again\), then reload the server \(SIGHUP\) or restart it; or run `tollgate models pull .*` on a machine with network access and put the file at .*\.gguf; or serve a local GGUF file instead: name it in engine\.model in tollgate\.yaml \(README, Start: `tollgate models make-test FILE` writes a tiny one to try the service with\)\.$/,
    );
  });

  it("regression: a models folder that cannot take the file gets disk advice, not network advice", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    // A file where the folder should be: the folder cannot be created.
    const blocker = join(folder, "a-file");
    await writeFile(blocker, "");
    const modelsFolder = join(blocker, "models");
    const failure = await failureOf(`${closed.baseUrl}/models/tiny.gguf`, modelsFolder);
    expect(failure.failure).toBe("not-writable");
    // Regression: it said "cannot take the file", and to make room there.
    expect(failure.message).toMatch(
      /^Its file could not be saved: The models folder .* is not a folder: a file is in its place, or in the place of a folder above it \(ENOTDIR.*\); set TOLLGATE_MODELS_DIR to a folder \(it names the folder models are kept in, not a model file\), or move that file away\./,
    );
    expect(failure.message).toMatch(
      new RegExp(
        ` To fix it, mend ${modelsFolder.replace(/[./]/g, "\\$&")} as the reason says \\(make room there, make it writable, or make it a folder\\), then reload the server \\(SIGHUP\\) or restart it; or restart it with TOLLGATE_MODELS_DIR set to a folder on a disk with room, or serve a local GGUF file instead \\(engine\\.model in tollgate\\.yaml\\)\\.$`,
      ),
    );
    expect(failure.message).not.toMatch(/network/);
  });

  // Regression: the command it gave had the query shown as "?…", which pulled another URL into
  // another file, without the token.
  it("does not give a URL shown without its query as a command to run", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    const failure = await failureOf(`${closed.baseUrl}/models/tiny.gguf?token=Secret123`, join(folder, "q"));
    expect(failure.failure).toBe("unreachable");
    expect(failure.message).not.toContain("Secret123");
    expect(failure.message).toContain(
      "; or run `tollgate models pull URL`, with engine.model's URL whole (its query and credentials are not repeated here), on a machine with network access and put the file at ",
    );
  });
});
