import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../src/admin/cli-error.ts";
import type { CatalogModel, Config } from "../../src/catalog/catalog.ts";
import { createModelFileName } from "../../src/models/download/create-model-file-name.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { parseModelUri } from "../../src/models/download/parse-model-uri.ts";
import { adviseRetry, runModelsPullCommand } from "../../src/models/pull-command.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { createTestConfig } from "../support/test-server.ts";
import {
  createListing,
  createModelBytes,
  type ModelFileServer,
  startModelFileServer,
} from "./model-file-server.ts";

const root = makeTemporaryDirectory();
let server: ModelFileServer;
let model: { bytes: Buffer; sha256: string };
let sequence = 0;

beforeAll(async () => {
  [server, model] = await Promise.all([startModelFileServer(), createModelBytes(7)]);
  server.listings.set(
    "acme/tiny-GGUF",
    createListing("acme/tiny-GGUF", [{ path: "tiny-Q4_K_M.gguf", bytes: model.bytes, sha256: model.sha256 }]),
  );
  server.files.set("/acme/tiny-GGUF/resolve/main/tiny-Q4_K_M.gguf", {
    bytes: model.bytes,
    etag: model.sha256,
  });
  server.files.set("/files/plain.gguf", { bytes: model.bytes });
});

afterAll(async () => {
  await server?.close();
});

function llamaModel(id: string, source: string): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: undefined,
    created: 0,
    engine: { type: "llama", model: source, parallel: 1, maxQueue: 1, threads: 1, gpu: false },
  };
}

function createConfig(models: CatalogModel[]): Config {
  return createTestConfig({
    database: "sqlite::memory:",
    models,
    server: { host: "127.0.0.1", port: 0, bodyLimitBytes: 1_000_000 },
  });
}

/** Runs the command as on a pipe (no terminal), with its own models folder. */
async function pull(config: Config, argv: string[]) {
  sequence += 1;
  const modelsFolder = join(root, `models-${sequence}`);
  const lines: string[] = [];
  const run = runModelsPullCommand(
    config,
    argv,
    { write: (line) => lines.push(line) },
    {
      env: { TOLLGATE_MODELS_DIR: modelsFolder, TOLLGATE_HF_ENDPOINT: `${server.baseUrl}/` },
      terminal: { isTTY: false, write: () => true },
    },
  );
  return { run, lines, modelsFolder };
}

describe("tollgate models pull", () => {
  it("pulls a catalogue model's hf: URI with progress lines and says where it saved it", async () => {
    const uri = "hf:acme/tiny-GGUF:Q4_K_M";
    const config = createConfig([llamaModel("tiny", uri)]);
    const { run, lines, modelsFolder } = await pull(config, ["tiny"]);
    await run;
    const parsed = parseModelUri(uri);
    if (parsed === undefined) throw new Error("bad URI");
    const path = join(modelsFolder, createModelFileName(parsed));
    expect((await readFile(path)).equals(model.bytes)).toBe(true);
    const size = `${(model.bytes.length / 1e6).toFixed(1)} MB`;
    expect(lines[0]).toBe(`Downloading tiny-Q4_K_M.gguf (${size}) from ${uri} to ${path}`);
    expect(lines[1]).toBe(`${uri}: 0% (0 B of ${size})`);
    expect(lines).toContain(`${uri}: 100% (${size} of ${size})`);
    expect(lines.slice(-2)).toEqual([
      "Verifying the SHA-256 checksum.",
      `Saved ${path} (${size}, SHA-256 verified)`,
    ]);
  });

  it("pulls a URL given directly and tells how to serve it", async () => {
    const url = `${server.baseUrl}/files/plain.gguf`;
    const { run, lines } = await pull(createConfig([]), [url]);
    await run;
    expect(lines.at(-2)).toMatch(/^Saved .*plain-[0-9a-f]{8}\.gguf \([\d.]+ MB\)$/);
    expect(lines.at(-1)).toBe(`To serve it, set engine.model: "${url}" on a model in tollgate.yaml.`);
  });

  it("never repeats the user, password or query of a URL given directly, and tells how to serve it", async () => {
    const url = new URL(`${server.baseUrl}/files/plain.gguf?sig=s3cr3tSIG`);
    url.username = "ops";
    url.password = "hunter2";
    const { run, lines } = await pull(createConfig([]), [url.href]);
    await run;
    expect(lines.join("\n")).not.toMatch(/s3cr3tSIG|hunter2/);
    expect(lines.at(-1)).toBe(
      `To serve it, set engine.model on a model in tollgate.yaml to the URL you gave (${server.baseUrl}/files/plain.gguf?…), its secret parts written as \${VARIABLE}s that the server's environment holds.`,
    );
  });

  it("reports a file that is already there", async () => {
    const url = `${server.baseUrl}/files/plain.gguf`;
    const first = await pull(createConfig([]), [url]);
    await first.run;
    const second = runModelsPullCommand(
      createConfig([]),
      [url],
      { write: () => {} },
      {
        env: { TOLLGATE_MODELS_DIR: first.modelsFolder, TOLLGATE_HF_ENDPOINT: server.baseUrl },
        terminal: { isTTY: false, write: () => true },
      },
    );
    await expect(second).resolves.toBeUndefined();
  });

  it("fails with a clear error for a file that does not exist (404)", async () => {
    const url = `${server.baseUrl}/files/missing.gguf`;
    const { run, modelsFolder } = await pull(createConfig([]), [url]);
    const error = await run.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toBe(
      `Cannot download ${url}: ${url} does not exist (HTTP 404 Not Found); check the model URI.`,
    );
    // No lock, partial or final file is left behind.
    expect(existsSync(modelsFolder) ? await readdir(modelsFolder) : []).toEqual([]);
  });

  it("says the models folder is no folder when a file is in the way, without a raw system error", async () => {
    const url = `${server.baseUrl}/files/plain.gguf`;
    const file = join(root, "a-file");
    await writeFile(file, "not a folder");
    const modelsFolder = join(file, "models");
    const run = runModelsPullCommand(
      createConfig([]),
      [url],
      { write: () => {} },
      {
        env: { TOLLGATE_MODELS_DIR: modelsFolder, TOLLGATE_HF_ENDPOINT: server.baseUrl },
        terminal: { isTTY: false, write: () => true },
      },
    );
    const error = await run.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toBe(
      `Cannot download ${url}: The models folder ${modelsFolder} is not a folder: a file is in its place, or in the place of a folder above it (ENOTDIR: not a directory, mkdir '${modelsFolder}'); set TOLLGATE_MODELS_DIR to a folder (it names the folder models are kept in, not a model file), or move that file away.`,
    );
  });

  it("refuses unknown ids with a suggestion and bad arguments", async () => {
    const config = createConfig([llamaModel("qwen-small", "hf:acme/tiny-GGUF:Q4_K_M")]);
    await expect((await pull(config, ["qwen-smal"])).run).rejects.toThrow(
      "'qwen-smal' is neither a catalogue model id nor a model URI. Did you mean 'qwen-small'?",
    );
    await expect((await pull(config, [])).run).rejects.toThrow(/^usage: tollgate models pull ID\|URI/);
    await expect((await pull(config, ["s3://bucket/model.gguf"])).run).rejects.toThrow(
      /is not a model URI Tollgate can download/,
    );
  });

  it("has nothing to do, and does not fail, for an upstream model or one no engine serves", async () => {
    // Pulling every model of a config must not stop at an upstream one.
    const upstream: CatalogModel = {
      ...llamaModel("gpt", "x"),
      engine: { type: "openai", endpoints: [], model: "gpt", fallbacks: [] },
    };
    const embedding: CatalogModel = { ...llamaModel("embed", "x"), kind: "embedding", engine: undefined };
    const config = createConfig([upstream, embedding]);
    const gpt = await pull(config, ["gpt"]);
    await gpt.run;
    expect(gpt.lines).toEqual([
      "The model 'gpt' is served by an upstream server; there is nothing to download.",
    ]);
    const embed = await pull(config, ["embed"]);
    await embed.run;
    expect(embed.lines).toEqual([
      "The model 'embed' is not served by an engine here; there is nothing to download.",
    ]);
  });

  it("has nothing to do for a model that uses a local file", async () => {
    const path = join(root, "local.gguf");
    await writeFile(path, model.bytes);
    const { run, lines } = await pull(createConfig([llamaModel("local", path)]), ["local"]);
    await run;
    expect(lines).toEqual([`The model 'local' uses the local file ${path}; there is nothing to download.`]);
  });

  it("sends a user and password in the URL as Basic authorization, and never shows them or the query", async () => {
    const url = new URL(`${server.baseUrl}/files/plain.gguf?sig=TOPSECRET`);
    url.username = "alice";
    url.password = "hunter2";
    const { run, lines } = await pull(createConfig([]), [url.href]);
    await run;
    const seen = server.requests.filter((request) => request.path === "/files/plain.gguf").at(-1);
    expect(seen?.authorization).toBe(`Basic ${Buffer.from("alice:hunter2").toString("base64")}`);
    expect(lines.at(-2)).toMatch(/^Saved .*plain-[0-9a-f]{8}\.gguf \([\d.]+ MB\)$/);
    expect(lines.slice(0, -1).join("\n")).not.toMatch(/alice|hunter2|TOPSECRET/);
  });

  it("names no user, password or query when the host cannot be reached", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    const url = closed.baseUrl.replace("http://", "http://alice:hunter2@");
    const { run, modelsFolder } = await pull(createConfig([]), [`${url}/files/s.gguf?sig=TOPSECRET`]);
    const error = await run.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    const message = (error as CliError).message;
    expect(message).toContain(`Cannot download ${closed.baseUrl}/files/s.gguf?…: Cannot reach`);
    // Where to put a file brought from elsewhere, as the server's 503 says.
    const uri = parseModelUri(`${url}/files/s.gguf?sig=TOPSECRET`);
    if (uri === undefined) throw new Error("the URL is a model URI");
    expect(message).toContain(
      `Or download it on a machine with network access and put the file at ${join(modelsFolder, createModelFileName(uri))}.`,
    );
    expect(message).not.toMatch(/alice|hunter2|TOPSECRET/);
    // Nor does any error in its cause chain, which a logger would print too.
    const chain: string[] = [];
    for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) chain.push(cause.message);
    expect(chain.join("\n")).not.toMatch(/hunter2|TOPSECRET/);
  });

  it("offers a resume only when part of the file was kept, and a retry only when one may help", () => {
    const failure = (kind: "server-error" | "not-found", keptBytes: number | undefined) => {
      const error = new ModelDownloadError(kind, "It failed.");
      error.keptBytes = keptBytes;
      return error;
    };
    expect(adviseRetry(failure("server-error", 2_000_000))).toBe(
      " Run the command again to resume the download (2.0 MB kept).",
    );
    expect(adviseRetry(failure("server-error", 0))).toBe(" Run the command again to retry.");
    expect(adviseRetry(failure("server-error", undefined))).toBe(" Run the command again to retry.");
    expect(adviseRetry(failure("not-found", 2_000_000))).toBe("");
  });

  it("refuses a download that is not a GGUF file (a login page) and keeps nothing", async () => {
    server.files.set("/files/login.gguf", {
      bytes: Buffer.from("<!DOCTYPE html><html><body>Please sign in</body></html>"),
      contentType: "text/html; charset=utf-8",
    });
    const url = `${server.baseUrl}/files/login.gguf?token=TOPSECRET`;
    const first = await pull(createConfig([]), [url]);
    const error = await first.run.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    const message = (error as CliError).message;
    expect(message).toContain(
      `${server.baseUrl}/files/login.gguf?… sent 55 bytes (text/html; charset=utf-8)`,
    );
    expect(message).toContain("not a GGUF model file");
    expect(message).not.toContain("TOPSECRET");
    expect(existsSync(first.modelsFolder) ? await readdir(first.modelsFolder) : []).toEqual([]);

    // Once the server sends the model, the next pull downloads it.
    server.files.set("/files/login.gguf", { bytes: model.bytes });
    const second = runModelsPullCommand(
      createConfig([]),
      [url],
      { write: () => {} },
      {
        env: { TOLLGATE_MODELS_DIR: first.modelsFolder, TOLLGATE_HF_ENDPOINT: server.baseUrl },
        terminal: { isTTY: false, write: () => true },
      },
    );
    await second;
    const [saved] = await readdir(first.modelsFolder);
    expect((await readFile(join(first.modelsFolder, saved ?? ""))).equals(model.bytes)).toBe(true);
  });

  it("downloads again a file in the models folder that is not a GGUF file", async () => {
    const url = `${server.baseUrl}/files/plain.gguf`;
    const parsed = parseModelUri(url);
    if (parsed === undefined) throw new Error("bad URI");
    sequence += 1;
    const modelsFolder = join(root, `models-${sequence}`);
    await mkdir(modelsFolder, { recursive: true });
    const path = join(modelsFolder, createModelFileName(parsed));
    await writeFile(path, "<html>an error page saved by an earlier version</html>");
    const lines: string[] = [];
    await runModelsPullCommand(
      createConfig([]),
      [url],
      { write: (line) => lines.push(line) },
      {
        env: { TOLLGATE_MODELS_DIR: modelsFolder, TOLLGATE_HF_ENDPOINT: server.baseUrl },
        terminal: { isTTY: false, write: () => true },
      },
    );
    expect(lines).toContain(`${path} is not a GGUF model file; downloading it again.`);
    expect(lines.join("\n")).not.toContain("Already downloaded");
    expect((await readFile(path)).equals(model.bytes)).toBe(true);
  });
});
