import { existsSync } from "node:fs";
import { mkdir, readFile, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { acquireDownloadLock } from "../../src/models/download/acquire-download-lock.ts";
import { createModelFileName } from "../../src/models/download/create-model-file-name.ts";
import { downloadModel } from "../../src/models/download/download-model.ts";
import type { HuggingFaceEndpoint } from "../../src/models/download/hugging-face-endpoint.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { type ModelUri, parseModelUri } from "../../src/models/download/parse-model-uri.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import {
  createListing,
  createModelBytes,
  type ModelFileServer,
  startModelFileServer,
} from "./model-file-server.ts";

const root = makeTemporaryDirectory();
let hub: ModelFileServer;
let cdn: ModelFileServer;
let model: { bytes: Buffer; sha256: string };
let folderSequence = 0;

beforeAll(async () => {
  [hub, cdn, model] = await Promise.all([
    startModelFileServer(),
    startModelFileServer(),
    createModelBytes(6),
  ]);
  // A repository laid out as on Hugging Face: the listing, and a resolve URL that redirects to a CDN.
  hub.listings.set(
    "acme/tiny-GGUF",
    createListing("acme/tiny-GGUF", [
      { path: "README.md" },
      { path: "tiny-q4_k_m.gguf", bytes: model.bytes, sha256: model.sha256 },
      { path: "tiny-q8_0.gguf", bytes: model.bytes, sha256: "e".repeat(64) },
    ]),
  );
  cdn.files.set("/blobs/tiny", { bytes: model.bytes });
  for (const file of ["tiny-q4_k_m.gguf", "tiny-q8_0.gguf"]) {
    hub.files.set(`/acme/tiny-GGUF/resolve/main/${file}`, {
      bytes: model.bytes,
      redirectTo: `${cdn.baseUrl}/blobs/tiny`,
      linkedEtag: model.sha256,
    });
  }
});

afterAll(async () => {
  await Promise.all([hub?.close(), cdn?.close()]);
});

function newModelsFolder(): string {
  folderSequence += 1;
  return join(root, `models-${folderSequence}`);
}

function uri(text: string): ModelUri {
  const parsed = parseModelUri(text);
  if (parsed === undefined) throw new Error(`not a URI: ${text}`);
  return parsed;
}

function endpoint(token?: string): HuggingFaceEndpoint {
  return { baseUrl: hub.baseUrl, token };
}

describe("downloadModel: hf: URIs", () => {
  it("resolves the quantisation through the repository listing and downloads the file, verified", async () => {
    const modelsFolder = newModelsFolder();
    const notices: string[] = [];
    const result = await downloadModel({
      uri: uri("hf:acme/tiny-GGUF:Q4_K_M"),
      modelsFolder,
      huggingFace: endpoint("hf_secret"),
      onNotice: (message) => notices.push(message),
    });
    expect(result).toEqual({
      path: join(modelsFolder, createModelFileName(uri("hf:acme/tiny-GGUF:Q4_K_M"))),
      bytes: model.bytes.length,
      sha256: model.sha256,
      alreadyPresent: false,
    });
    expect((await readFile(result.path)).equals(model.bytes)).toBe(true);
    expect(notices[0]).toBe(
      `Downloading tiny-q4_k_m.gguf (${(model.bytes.length / 1e6).toFixed(1)} MB) from hf:acme/tiny-GGUF:Q4_K_M to ${result.path}`,
    );
    // The token goes to the hub only, never to the CDN it redirects to.
    const hubPaths = hub.requests.filter((request) => request.authorization === "Bearer hf_secret");
    expect(hubPaths.map((request) => request.path)).toEqual([
      "/api/models/acme/tiny-GGUF",
      "/acme/tiny-GGUF/resolve/main/tiny-q4_k_m.gguf",
    ]);
    expect(cdn.requests.every((request) => request.authorization === undefined)).toBe(true);
  });

  it("uses a file already in the models folder without asking the network", async () => {
    const modelsFolder = newModelsFolder();
    const first = await downloadModel({
      uri: uri("hf:acme/tiny-GGUF:q4_k_m"),
      modelsFolder,
      huggingFace: endpoint(),
    });
    const before = hub.requests.length;
    const second = await downloadModel({
      uri: uri("hf:acme/tiny-GGUF:Q4_K_M"),
      modelsFolder,
      huggingFace: { baseUrl: "http://127.0.0.1:9", token: undefined },
    });
    expect(second).toEqual({ path: first.path, bytes: first.bytes, sha256: undefined, alreadyPresent: true });
    expect(hub.requests.length).toBe(before);
  });

  it("downloads again a file in the models folder that an earlier download saved cut short", async () => {
    const modelsFolder = newModelsFolder();
    const path = join(modelsFolder, createModelFileName(uri("hf:acme/tiny-GGUF:Q4_K_M")));
    await mkdir(modelsFolder, { recursive: true });
    await writeFile(path, model.bytes.subarray(0, 3_000_000));
    const notices: string[] = [];
    const result = await downloadModel({
      uri: uri("hf:acme/tiny-GGUF:Q4_K_M"),
      modelsFolder,
      huggingFace: endpoint(),
      onNotice: (message) => notices.push(message),
    });
    expect(result.alreadyPresent).toBe(false);
    expect((await readFile(path)).equals(model.bytes)).toBe(true);
    expect(notices[0]).toMatch(
      /is not a whole GGUF model file \(its tensor data ends at byte \d+ \(tensor [^)]+\), but the file has 3000000 bytes\); downloading it again\.$/,
    );
  });

  it("rejects a file whose checksum differs from the listing's, leaving nothing behind", async () => {
    const modelsFolder = newModelsFolder();
    const error = await downloadModel({
      uri: uri("hf:acme/tiny-GGUF:Q8_0"),
      modelsFolder,
      huggingFace: endpoint(),
    }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ModelDownloadError);
    expect((error as ModelDownloadError).failure).toBe("checksum");
    const path = join(modelsFolder, createModelFileName(uri("hf:acme/tiny-GGUF:Q8_0")));
    expect(existsSync(path)).toBe(false);
    expect(existsSync(`${path}.partial`)).toBe(false);
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it("says when a repository or a quantisation does not exist", async () => {
    const modelsFolder = newModelsFolder();
    await expect(
      downloadModel({ uri: uri("hf:acme/nothing-GGUF:Q4_K_M"), modelsFolder, huggingFace: endpoint() }),
    ).rejects.toThrow(
      `The Hugging Face repository acme/nothing-GGUF was not found at ${hub.baseUrl} (check the URI; a private or gated repository needs HF_TOKEN).`,
    );
    // Regression: with HF_TOKEN set (and refused, or its account without access) it said to set HF_TOKEN.
    await expect(
      downloadModel({
        uri: uri("hf:acme/nothing-GGUF:Q4_K_M"),
        modelsFolder,
        huggingFace: endpoint("hf_refused"),
      }),
    ).rejects.toThrow(
      "(check the URI; HF_TOKEN is set: check that it is valid and that its account may read the repository).",
    );
    await expect(
      downloadModel({ uri: uri("hf:acme/tiny-GGUF:Q2_K"), modelsFolder, huggingFace: endpoint() }),
    ).rejects.toThrow(
      /no file for the quantisation Q2_K\. Its GGUF files are: tiny-q4_k_m\.gguf, tiny-q8_0\.gguf/,
    );
    expect(existsSync(modelsFolder)).toBe(false);
  });

  it("retries a repository listing answered with 503 or 429 (one blip kept the model unavailable)", async () => {
    const modelsFolder = newModelsFolder();
    const repository = "acme/flaky-GGUF";
    hub.listings.set(
      repository,
      createListing(repository, [{ path: "tiny-q4_k_m.gguf", bytes: model.bytes, sha256: model.sha256 }]),
    );
    hub.listingFailures.set(repository, [503, 429]);
    hub.files.set(`/${repository}/resolve/main/tiny-q4_k_m.gguf`, {
      bytes: model.bytes,
      redirectTo: `${cdn.baseUrl}/blobs/tiny`,
      linkedEtag: model.sha256,
    });
    const notices: string[] = [];
    const result = await downloadModel({
      uri: uri(`hf:${repository}:Q4_K_M`),
      modelsFolder,
      huggingFace: endpoint(),
      transfer: { retryDelayMilliseconds: 1 },
      onNotice: (message) => notices.push(message),
    });
    expect((await readFile(result.path)).equals(model.bytes)).toBe(true);
    expect(hub.requests.filter((request) => request.path === `/api/models/${repository}`)).toHaveLength(3);
    expect(notices.filter((message) => /HTTP (503|429).*Retrying in/.test(message))).toHaveLength(2);
  });

  it("fails at once when the hub cannot be reached, without creating the models folder", async () => {
    const modelsFolder = newModelsFolder();
    const closed = await startModelFileServer();
    await closed.close();
    const error = await downloadModel({
      uri: uri("hf:acme/tiny-GGUF:Q4_K_M"),
      modelsFolder,
      huggingFace: { baseUrl: closed.baseUrl, token: undefined },
    }).catch((caught: unknown) => caught);
    expect((error as ModelDownloadError).failure).toBe("unreachable");
    expect(existsSync(modelsFolder)).toBe(false);
  });
});

describe("downloadModel: sharing", () => {
  it("shares one download between concurrent callers in the process, all hearing its progress", async () => {
    cdn.files.set("/shared.gguf", { bytes: model.bytes });
    const modelsFolder = newModelsFolder();
    const progress = [0, 0, 0];
    const results = await Promise.all(
      progress.map((_, index) =>
        downloadModel({
          uri: uri(`${cdn.baseUrl}/shared.gguf`),
          modelsFolder,
          huggingFace: endpoint(),
          onProgress: (update) => {
            progress[index] = update.receivedBytes;
          },
        }),
      ),
    );
    expect(cdn.requests.filter((request) => request.path === "/shared.gguf")).toHaveLength(1);
    expect(new Set(results.map((result) => result.path)).size).toBe(1);
    expect(progress).toEqual([model.bytes.length, model.bytes.length, model.bytes.length]);
  });

  it("keeps downloading for the other callers when one of them gives up", async () => {
    let open: () => void = () => {};
    cdn.files.set("/abandoned.gguf", {
      bytes: model.bytes,
      gate: new Promise<void>((resolve) => {
        open = resolve;
      }),
    });
    const modelsFolder = newModelsFolder();
    const impatient = new AbortController();
    const options = { uri: uri(`${cdn.baseUrl}/abandoned.gguf`), modelsFolder, huggingFace: endpoint() };
    const first = downloadModel({ ...options, signal: impatient.signal });
    const second = downloadModel(options);
    await vi.waitFor(() =>
      expect(cdn.requests.some((request) => request.path === "/abandoned.gguf")).toBe(true),
    );
    impatient.abort(new Error("gave up"));
    await expect(first).rejects.toThrow("gave up");
    open();
    expect((await second).bytes).toBe(model.bytes.length);
    expect(cdn.requests.filter((request) => request.path === "/abandoned.gguf")).toHaveLength(1);
  });

  it("waits for another process that holds the lock, then uses its file", async () => {
    cdn.files.set("/locked.gguf", { bytes: model.bytes });
    const modelsFolder = newModelsFolder();
    const modelUri = uri(`${cdn.baseUrl}/locked.gguf`);
    const path = join(modelsFolder, createModelFileName(modelUri));
    await mkdir(modelsFolder, { recursive: true });
    const lock = await acquireDownloadLock({ path: `${path}.lock` });
    const notices: string[] = [];
    const waiting = downloadModel({
      uri: modelUri,
      modelsFolder,
      huggingFace: endpoint(),
      onNotice: (message) => {
        notices.push(message);
        // The "other process" finishes its download and lets go.
        if (/waiting/.test(message)) void writeFile(path, model.bytes).then(() => lock.release());
      },
    });
    const result = await waiting;
    expect(result.alreadyPresent).toBe(true);
    expect(notices).toEqual(["Another process is downloading this model; waiting for it to finish."]);
    expect(cdn.requests.filter((request) => request.path === "/locked.gguf")).toHaveLength(0);
  });
});

describe("downloadModel: a lock taken over", () => {
  it("stops without saving the file, and leaves the lock to the process that took it over", async () => {
    let open: () => void = () => {};
    cdn.files.set("/taken-over.gguf", {
      bytes: model.bytes,
      gate: new Promise<void>((resolve) => {
        open = resolve;
      }),
    });
    const modelsFolder = newModelsFolder();
    const modelUri = uri(`${cdn.baseUrl}/taken-over.gguf`);
    const path = join(modelsFolder, createModelFileName(modelUri));
    const download = downloadModel({ uri: modelUri, modelsFolder, huggingFace: endpoint() });
    await vi.waitFor(() =>
      expect(cdn.requests.some((request) => request.path === "/taken-over.gguf")).toBe(true),
    );
    // A waiter on another machine judged the lock abandoned (this process was paused) and took it.
    const other = "elsewhere 4242 - other\n";
    await writeFile(`${path}.lock`, other);
    open();

    const error = await download.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ModelDownloadError);
    expect((error as ModelDownloadError).message).toBe(
      `Another process took over the download to ${path} while this one did not refresh its lock file (${path}.lock); this one stopped without saving the file.`,
    );
    expect(existsSync(path)).toBe(false);
    expect(existsSync(`${path}.partial`)).toBe(true);
    expect(await readFile(`${path}.lock`, "utf8")).toBe(other);
  });
});

describe("acquireDownloadLock", () => {
  it("takes over a lock that nobody refreshes", async () => {
    const path = join(root, "stale.lock");
    await writeFile(path, "crashed 1\n");
    const past = new Date(Date.now() - 60_000);
    await utimes(path, past, past);
    const waits: number[] = [];
    const lock = await acquireDownloadLock({ path, onWait: () => waits.push(1) });
    expect(waits).toEqual([]);
    expect(await readFile(path, "utf8")).toMatch(new RegExp(`^\\S+ ${process.pid} `));
    await lock.release();
    expect(existsSync(path)).toBe(false);
  });
});
