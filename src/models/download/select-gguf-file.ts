import { ModelDownloadError } from "./model-download-error.ts";
import type { HuggingFaceFileSelector } from "./parse-model-uri.ts";

/** One file of a repository listing. */
export interface RepositoryFile {
  /** Path inside the repository, such as `qwen2.5-0.5b-instruct-q4_k_m.gguf`. */
  path: string;
  /** Bytes, where the listing gives them. */
  size: number | undefined;
  /** Lowercase hex SHA-256 of the content, where the listing gives it (Git LFS files). */
  sha256: string | undefined;
}

const splitPartPattern = /-\d{5}-of-\d{5}\.gguf$/i;
const maxListed = 12;

/**
 * Picks the GGUF file a selector names from a repository listing. A quantisation matches a file
 * whose name holds it as a whole word, case-insensitively (`Q4_K` does not match `q4_k_m`).
 * Projector files (`mmproj`) never match; models split into parts are refused with a clear error.
 */
export function selectGgufFile(options: {
  repository: string;
  files: readonly RepositoryFile[];
  selector: HuggingFaceFileSelector;
}): RepositoryFile {
  const { repository, files, selector } = options;
  const ggufFiles = files.filter(
    (file) => /\.gguf$/i.test(file.path) && !/mmproj/i.test(basename(file.path)),
  );
  switch (selector.type) {
    case "path": {
      const found =
        files.find((file) => file.path === selector.path) ??
        files.find((file) => file.path.toLowerCase() === selector.path.toLowerCase());
      if (found !== undefined) return found;
      throw new ModelDownloadError(
        "no-matching-file",
        `The Hugging Face repository ${repository} has no file '${selector.path}'. ${listFiles(ggufFiles)}`,
      );
    }
    case "quant": {
      const pattern = new RegExp(`(?:^|[-._/])${escapeRegExp(selector.quant.toLowerCase())}(?:[-.]|$)`);
      const matching = ggufFiles.filter((file) =>
        pattern.test(file.path.toLowerCase().replace(/\.gguf$/, "")),
      );
      return pickOne({
        repository,
        candidates: matching,
        all: ggufFiles,
        wanted: `quantisation ${selector.quant}`,
      });
    }
    case "only-gguf":
      return pickOne({ repository, candidates: ggufFiles, all: ggufFiles, wanted: "GGUF model" });
    default: {
      const unexpected: never = selector;
      throw new Error(`unexpected file selector ${JSON.stringify(unexpected)}`);
    }
  }
}

function pickOne(options: {
  repository: string;
  candidates: RepositoryFile[];
  all: RepositoryFile[];
  wanted: string;
}): RepositoryFile {
  const { repository, candidates, all, wanted } = options;
  const whole = candidates.filter((file) => !splitPartPattern.test(file.path));
  const [only] = whole;
  if (whole.length === 1 && only !== undefined) return only;
  if (whole.length > 1) {
    throw new ModelDownloadError(
      "no-matching-file",
      `The Hugging Face repository ${repository} has several files for the ${wanted}: ${names(whole)}. Name one in the URI, as hf:${repository}/FILE.`,
    );
  }
  if (candidates.length > 0) {
    throw new ModelDownloadError(
      "no-matching-file",
      `The ${wanted} of the Hugging Face repository ${repository} is split into parts (${names(candidates)}), which Tollgate cannot download yet. Merge the parts with llama.cpp's llama-gguf-split and set engine.model to the merged file, or pick a smaller quantisation.`,
    );
  }
  throw new ModelDownloadError(
    "no-matching-file",
    `The Hugging Face repository ${repository} has no file for the ${wanted}. ${listFiles(all)}`,
  );
}

function listFiles(files: readonly RepositoryFile[]): string {
  if (files.length === 0) return "It holds no GGUF model file.";
  return `Its GGUF files are: ${names(files)}.`;
}

function names(files: readonly RepositoryFile[]): string {
  const shown = files.slice(0, maxListed).map((file) => file.path);
  const more = files.length - shown.length;
  return more > 0 ? `${shown.join(", ")} and ${more} more` : shown.join(", ");
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
