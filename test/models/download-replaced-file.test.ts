/**
 * An `hf:` file replaced on the hub during its download (found by a download review): the change
 * was seen ("changed since the partial download began; starting over") and the new version
 * downloaded whole, then checked against the SHA-256 of the listing read before the change,
 * called corrupt and deleted, not retried. The listing is now read again first.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downloadModel } from "../../src/models/download/download-model.ts";
import { parseModelUri } from "../../src/models/download/parse-model-uri.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import {
  createListing,
  createModelBytes,
  type ModelFileServer,
  type ServedFile,
  startModelFileServer,
} from "./model-file-server.ts";
import { QUICK_DOWNLOAD } from "./served-model-files.ts";

const root = makeTemporaryDirectory();
let hub: ModelFileServer;
let oldModel: { bytes: Buffer; sha256: string };
let newModel: { bytes: Buffer; sha256: string };

beforeAll(async () => {
  [hub, oldModel, newModel] = await Promise.all([
    startModelFileServer(),
    createModelBytes(12),
    createModelBytes(13),
  ]);
});

afterAll(async () => {
  await hub?.close();
});

describe("downloadModel of an hf: file replaced during the download", () => {
  it("checks the new version against the repository's new listing, and saves it", async () => {
    const path = "/acme/changing-GGUF/resolve/main/changing-q4_k_m.gguf";
    const fileRequests = () => hub.requests.filter((request) => request.path === path).length;
    // The old version until the first request for the file has broken off, the new one after.
    const replaced = () => fileRequests() > 1;
    const served: ServedFile = {
      get bytes() {
        return replaced() ? newModel.bytes : oldModel.bytes;
      },
      get etag() {
        return replaced() ? "new" : "old";
      },
      breakAfterBytes: 2_000_000,
      breakCount: 1,
    };
    hub.files.set(path, served);
    const listing = (model: { bytes: Buffer; sha256: string }) =>
      createListing("acme/changing-GGUF", [{ path: "changing-q4_k_m.gguf", ...model }]);
    hub.listings.set("acme/changing-GGUF", {
      toJSON: () => (fileRequests() === 0 ? listing(oldModel) : listing(newModel)),
    });
    const uri = parseModelUri("hf:acme/changing-GGUF:Q4_K_M");
    if (uri === undefined) throw new Error("not a URI");
    const notices: string[] = [];
    const result = await downloadModel({
      uri,
      modelsFolder: join(root, "models"),
      huggingFace: { baseUrl: hub.baseUrl, token: undefined },
      transfer: QUICK_DOWNLOAD,
      onNotice: (message) => notices.push(message),
    });
    expect(result.sha256).toBe(newModel.sha256);
    expect((await readFile(result.path)).equals(newModel.bytes)).toBe(true);
    expect(notices).toContainEqual(
      expect.stringMatching(/changed since the partial download began; starting over\.$/),
    );
    expect(hub.requests.map((request) => request.path)).toEqual([
      "/api/models/acme/changing-GGUF",
      path,
      path,
      "/api/models/acme/changing-GGUF",
    ]);
  });
});
