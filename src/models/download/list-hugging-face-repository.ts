import type { Response } from "undici";
import { convertFetchError } from "./convert-fetch-error.ts";
import { createHttpStatusError } from "./create-http-status-error.ts";
import { downloadFetch } from "./download-fetch.ts";
import type { HuggingFaceEndpoint } from "./hugging-face-endpoint.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import type { RepositoryFile } from "./select-gguf-file.ts";

const listingTimeoutMilliseconds = 30_000;

/**
 * The files of a Hugging Face model repository, from `GET /api/models/ORG/REPO?blobs=true`: its
 * `siblings` give each file's path (`rfilename`), and for Git LFS files the size and SHA-256
 * (`lfs.size`, `lfs.sha256`). A path with an empty, `.` or `..` segment is left out.
 */
export async function listHuggingFaceRepository(options: {
  endpoint: HuggingFaceEndpoint;
  organization: string;
  repository: string;
  signal?: AbortSignal | undefined;
}): Promise<RepositoryFile[]> {
  const { endpoint, organization, repository } = options;
  const name = `${organization}/${repository}`;
  const url = new URL(
    `${endpoint.baseUrl}/api/models/${encodeURIComponent(organization)}/${encodeURIComponent(repository)}?blobs=true`,
  );
  const timeout = AbortSignal.timeout(listingTimeoutMilliseconds);
  const signal = options.signal === undefined ? timeout : AbortSignal.any([options.signal, timeout]);
  let response: Response;
  let body: unknown;
  try {
    response = await downloadFetch(url, {
      headers: {
        accept: "application/json",
        ...(endpoint.token === undefined ? {} : { authorization: `Bearer ${endpoint.token}` }),
      },
      signal,
    });
    if (response.status === 401 || response.status === 404) {
      await response.body?.cancel().catch(() => {});
      throw new ModelDownloadError(
        "not-found",
        `The Hugging Face repository ${name} was not found at ${endpoint.baseUrl} (check the URI; ${endpoint.token === undefined ? "a private or gated repository needs HF_TOKEN" : "HF_TOKEN is set: check that it is valid and that its account may read the repository"}).`,
      );
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      throw createHttpStatusError(response, url);
    }
    body = await response.json();
  } catch (error) {
    if (error instanceof ModelDownloadError) throw error;
    if (options.signal?.aborted) throw options.signal.reason;
    if (timeout.aborted) {
      throw new ModelDownloadError(
        "unreachable",
        `${url.host} did not list the repository ${name} within ${listingTimeoutMilliseconds / 1000} s.`,
      );
    }
    if (error instanceof SyntaxError) {
      throw new ModelDownloadError("invalid-response", `${url.host} sent an unreadable listing of ${name}.`);
    }
    throw convertFetchError(error, { url, signal: undefined, phase: "request" });
  }
  const files = readSiblings(body);
  if (files === undefined) {
    throw new ModelDownloadError(
      "invalid-response",
      `${url.host} sent a listing of ${name} without its files (no "siblings").`,
    );
  }
  return files;
}

function readSiblings(body: unknown): RepositoryFile[] | undefined {
  if (!isRecord(body) || !Array.isArray(body.siblings)) return undefined;
  const files: RepositoryFile[] = [];
  for (const sibling of body.siblings) {
    if (!isRecord(sibling) || typeof sibling.rfilename !== "string") continue;
    // Refused as in a written hf: URI (parse-model-uri.ts): `..` in a listed name made the
    // download, with the token, leave the repository's resolve/main/ path.
    if (sibling.rfilename.split("/").some((part) => part === "" || part === "." || part === "..")) continue;
    const lfs = isRecord(sibling.lfs) ? sibling.lfs : undefined;
    const sha256 =
      typeof lfs?.sha256 === "string" && /^[0-9a-f]{64}$/i.test(lfs.sha256) ? lfs.sha256 : undefined;
    const size = readSize(lfs?.size) ?? readSize(sibling.size);
    files.push({ path: sibling.rfilename, size, sha256: sha256?.toLowerCase() });
  }
  return files;
}

function readSize(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
