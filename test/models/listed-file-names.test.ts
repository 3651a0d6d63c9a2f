/**
 * A repository listing whose file name has `..` (or `.`, or empty) segments (found by a download
 * review): the download, with the token, went to another path of the hub than the repository's
 * resolve/main/. Such names are refused, as in a written hf: URI.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downloadModel } from "../../src/models/download/download-model.ts";
import { parseModelUri } from "../../src/models/download/parse-model-uri.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import {
  createListing,
  createModelBytes,
  type ModelFileServer,
  startModelFileServer,
} from "./model-file-server.ts";
import { expectDownloadError, QUICK_DOWNLOAD } from "./served-model-files.ts";

const root = makeTemporaryDirectory();
let hub: ModelFileServer;
let model: { bytes: Buffer; sha256: string };

beforeAll(async () => {
  [hub, model] = await Promise.all([startModelFileServer(), createModelBytes(16)]);
});

afterAll(async () => {
  await hub?.close();
});

describe("downloadModel with a listing that names files outside the repository", () => {
  it.each([["../../../elsewhere/m-Q4_K_M.gguf"], ["./m-Q4_K_M.gguf"], ["sub//m-Q4_K_M.gguf"]])(
    "refuses %s, and sends the token nowhere else",
    async (name) => {
      hub.files.set("/elsewhere/m-Q4_K_M.gguf", { bytes: model.bytes });
      hub.listings.set("acme/odd", createListing("acme/odd", [{ path: name, ...model }]));
      hub.requests.length = 0;
      const uri = parseModelUri("hf:acme/odd:Q4_K_M");
      if (uri === undefined) throw new Error("not a URI");
      const error = await expectDownloadError(
        downloadModel({
          uri,
          modelsFolder: join(root, "models"),
          huggingFace: { baseUrl: hub.baseUrl, token: "hf_secret" },
          transfer: QUICK_DOWNLOAD,
        }),
      );
      expect(error.failure).toBe("no-matching-file");
      expect(hub.requests.map((request) => request.path)).toEqual(["/api/models/acme/odd"]);
    },
  );
});
