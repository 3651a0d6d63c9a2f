/**
 * A file replaced during its download behind a redirect that tells its SHA-256 (`X-Linked-ETag`,
 * as Hugging Face's resolve URLs do): the new version was checked against the old version's
 * checksum, called corrupt and deleted. The checksum is now taken again from the answer that
 * sends the new version.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downloadFile } from "../../src/models/download/download-file.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import {
  createModelBytes,
  type ModelFileServer,
  type ServedFile,
  startModelFileServer,
} from "./model-file-server.ts";
import { QUICK_DOWNLOAD } from "./served-model-files.ts";

const folder = makeTemporaryDirectory();
let hub: ModelFileServer;
let cdn: ModelFileServer;
let oldModel: { bytes: Buffer; sha256: string };
let newModel: { bytes: Buffer; sha256: string };

beforeAll(async () => {
  [hub, cdn, oldModel, newModel] = await Promise.all([
    startModelFileServer(),
    startModelFileServer(),
    createModelBytes(17),
    createModelBytes(18),
  ]);
});

afterAll(async () => {
  await Promise.all([hub?.close(), cdn?.close()]);
});

describe("downloadFile of a file replaced behind a redirect with X-Linked-ETag", () => {
  it("checks the new version against the checksum the redirect now tells", async () => {
    // The old version until the first answer from the CDN has broken off, the new one after.
    const replaced = () => cdn.requests.length > 0;
    const current = () => (replaced() ? newModel : oldModel);
    const redirect: ServedFile = {
      get bytes() {
        return current().bytes;
      },
      get linkedEtag() {
        return current().sha256;
      },
      redirectTo: `${cdn.baseUrl}/blobs/model`,
    };
    hub.files.set("/acme/repo/resolve/main/model.gguf", redirect);
    cdn.files.set("/blobs/model", {
      get bytes() {
        return cdn.requests.length > 1 ? newModel.bytes : oldModel.bytes;
      },
      get etag() {
        return cdn.requests.length > 1 ? "new" : "old";
      },
      breakAfterBytes: 2_000_000,
      breakCount: 1,
    });
    const notices: string[] = [];
    const saved = await downloadFile({
      ...QUICK_DOWNLOAD,
      url: `${hub.baseUrl}/acme/repo/resolve/main/model.gguf`,
      destination: join(folder, "model.gguf"),
      onNotice: (message) => notices.push(message),
    });
    expect(saved.sha256).toBe(newModel.sha256);
    expect((await readFile(saved.path)).equals(newModel.bytes)).toBe(true);
    expect(notices).toContainEqual(
      expect.stringMatching(/changed since the partial download began; starting over\.$/),
    );
  });
});
