import { existsSync } from "node:fs";
import { readFile, stat, writeFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { downloadFile } from "../../src/models/download/download-file.ts";
import { freeSpaceMarginBytes } from "../../src/models/download/ensure-free-space.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { QUICK_DOWNLOAD, serveModelFiles } from "./served-model-files.ts";

const served = serveModelFiles({ seed: 8, prefix: "model" });
const { folder } = served;
/** A fresh file, each with an ETag of its own. */
const prepare = () => served.prepare((sequence) => ({ etag: `v${sequence}` }));

describe("downloadFile: free space", () => {
  it("regression: refuses a file that would leave the disk with less than the margin free, before writing a byte (it filled the disk to 100%)", async () => {
    const { url, name, destination } = prepare();
    const asked: string[] = [];
    const free = served.model.bytes.length + freeSpaceMarginBytes - 1;
    const error = await downloadFile({
      ...QUICK_DOWNLOAD,
      url,
      destination,
      freeBytes: async (path) => {
        asked.push(path);
        return free;
      },
    }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ModelDownloadError);
    const failure = error as ModelDownloadError;
    expect(failure.failure).toBe("not-writable");
    expect(failure.retryable).toBe(false);
    const size = `${(served.model.bytes.length / 1e6).toFixed(1)} MB`;
    const needed = `${((served.model.bytes.length + freeSpaceMarginBytes) / 1e6).toFixed(1)} MB`;
    expect(failure.message).toBe(
      `The models folder ${folder} has ${(free / 1e6).toFixed(1)} MB free, but the download of ${url} needs ${needed} there (the ${size} still to save, and 64.0 MB left free for other files); nothing was written. Make room there, or set TOLLGATE_MODELS_DIR to a folder on a disk with room.`,
    );
    expect(asked).toEqual([folder]);
    expect(existsSync(`${destination}.partial`)).toBe(false);
    expect(existsSync(destination)).toBe(false);
    // Not retried: only the operator can make room.
    expect(served.server.requests.filter((request) => request.path === name)).toHaveLength(1);
  });

  it("counts a partial file's bytes as already there when resuming", async () => {
    const { url, name, destination, sequence } = prepare();
    const kept = 2_000_000;
    await writeFile(`${destination}.partial`, served.model.bytes.subarray(0, kept));
    await writeFile(`${destination}.partial.validator`, `"v${sequence}"\n${served.model.bytes.length}\n`);
    const freeBytes = async () => served.model.bytes.length - kept + freeSpaceMarginBytes;
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, freeBytes });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
    expect(
      served.server.requests.filter((request) => request.path === name).map((request) => request.range),
    ).toEqual([`bytes=${kept}-`]);
  });

  it("keeps the partial file of an earlier run when the rest does not fit", async () => {
    const { url, destination } = prepare();
    const kept = 2_000_000;
    await writeFile(`${destination}.partial`, served.model.bytes.subarray(0, kept));
    const freeBytes = async () => served.model.bytes.length - kept + freeSpaceMarginBytes - 1;
    const error = await downloadFile({ ...QUICK_DOWNLOAD, url, destination, freeBytes }).catch(
      (caught: unknown) => caught,
    );
    expect((error as ModelDownloadError).failure).toBe("not-writable");
    expect((await stat(`${destination}.partial`)).size).toBe(kept);
  });

  it("downloads when the free space cannot be told", async () => {
    const { url, destination } = prepare();
    await downloadFile({ ...QUICK_DOWNLOAD, url, destination, freeBytes: async () => undefined });
    expect((await readFile(destination)).equals(served.model.bytes)).toBe(true);
  });
});
